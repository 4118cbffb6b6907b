# SPDX-License-Identifier: Apache-2.0
# One long-lived sqlite3 or psql process per database for the tests' row queries, instead of one process per query.
"""Shared by tests/integration/trace_store and tests/integration/trace_pipeline.

    sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
    from sqlsession import SqliteSession, PsqlSession, close_all

    s = SqliteSession("/path/to/traces.db")          # or PsqlSession("postgresql://..."); env=... optional
    rows = s.rows("SELECT a, b FROM t")              # [{"a": ..., "b": ...}, ...]
    s.close()                                        # close_all() closes every open one

Why: the tests read their stores' rows with the stores' own CLIs (the independent answer), often
a hundred times per run. Starting psql costs ~35 ms of CPU, PostgreSQL ~50 ms more for the
backend of each connection, sqlite3 ~13 ms; one process per database reading statements on its
standard input answers the same queries with the same CLI, each statement in its own implicit
transaction (autocommit), so every query still sees what was committed before it was sent.

Each statement is followed by a marker the CLI itself prints (psql `\\echo`, sqlite3 `.print`)
once the statement's output is written; errors (stderr, merged) stop the CLI (psql
ON_ERROR_STOP=1, sqlite3 -bail): a failed query raises RuntimeError with the CLI's message and the
next query starts a new process. The process is started at the first query, so a database is
never opened (or a SQLite file created) before the test reads it.

PostgreSQL refuses `CREATE DATABASE ... TEMPLATE x` while anyone is connected to x: close the
session of x first.
"""
import json
import subprocess
import uuid

from pgserver import PSQL

_open = []


class _Session:
    """A CLI reading statements on stdin; subclasses name the command line and the marker command."""

    def __init__(self, label, env):
        self.label = label
        self.env = env
        self.proc = None

    def _argv(self):
        raise NotImplementedError

    def _marker_command(self, marker):
        raise NotImplementedError

    def _start(self):
        self.proc = subprocess.Popen(self._argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, encoding="utf-8", bufsize=1,
                                     env=self.env)
        _open.append(self)

    def output(self, sql):
        """The CLI's output for one statement (without the marker)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        marker = "-- end of statement %s --" % uuid.uuid4().hex
        try:
            self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n" + self._marker_command(marker) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        lines = []
        for line in self.proc.stdout:
            if line.rstrip("\n") == marker:
                return "".join(lines)
            lines.append(line)
        # EOF before the marker: the CLI stopped on an error (or died)
        self.close()
        raise RuntimeError("%s exited on %s: %s" % (self.label, sql[:300], "".join(lines)[-2000:]))

    def close(self):
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None
        if self in _open:
            _open.remove(self)


class SqliteSession(_Session):
    """sqlite3 -json -bail PATH: rows() is what `sqlite3 -json PATH SQL` prints, parsed.
    `env`: the process's environment (None: ours)."""

    def __init__(self, path, env=None):
        super().__init__("sqlite3 " + path, env)
        self.path = path

    def _argv(self):
        return ["sqlite3", "-json", "-bail", self.path]

    def _marker_command(self, marker):
        return ".print '%s'" % marker

    def rows(self, sql):
        out = self.output(sql).strip()
        try:
            return json.loads(out) if out else []
        except ValueError:
            raise RuntimeError("%s on %s: not JSON: %s" % (self.label, sql[:300], out[-2000:]))


class PsqlSession(_Session):
    """psql URL -XAtq -v ON_ERROR_STOP=1: rows() wraps the query in json_agg, as
    `psql URL -XAtqc "SELECT coalesce(json_agg(q), '[]') FROM (SQL) q"` prints it."""

    def __init__(self, url, env=None):
        super().__init__("psql " + url, env)
        self.url = url

    def _argv(self):
        return [PSQL, self.url, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"]

    def _marker_command(self, marker):
        return "\\echo '%s'" % marker

    def rows(self, sql):
        out = self.output("SELECT coalesce(json_agg(q), '[]') FROM (%s) q" % sql).strip()
        try:
            return json.loads(out)
        except ValueError:
            raise RuntimeError("%s on %s: not JSON: %s" % (self.label, sql[:300], out[-2000:]))


def close_all():
    for s in list(_open):
        s.close()
