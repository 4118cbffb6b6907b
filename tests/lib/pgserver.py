# SPDX-License-Identifier: Apache-2.0
# A throw-away PostgreSQL server for the integration tests: initdb + pg_ctl on loopback, a free port, as nobody when root.
"""Shared by tests/integration/trace_store and tests/integration/trace_pipeline.

    sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
    from pgserver import PgServer, PG_TOOLS

    server = PgServer(work)          # started; raises RuntimeError naming the failed command
    try:
        url = server.create_database("mydb")   # postgresql://postgres@127.0.0.1:PORT/mydb
    finally:
        server.stop()                # also on failure; removes its directory

Debian's postgresql-15 binaries (initdb, pg_ctl) in a temporary directory under `work`:
trust authentication, listening on 127.0.0.1 only at a free port, Unix sockets in a short
directory of its own under /tmp (never /var/run/postgresql; a socket path must fit the 107 bytes
of sun_path, which a clone at a long path would exceed), fsync off (the tests kill clients, never
the server).
initdb refuses to run as root: then the cluster belongs to `nobody` (runuser), and `work`
must be reachable by it (its parents searchable; `work` itself is made mode 0755).
"""
import os
import shutil
import socket
import subprocess
import tempfile

PG_BIN = "/usr/lib/postgresql/15/bin"
# What PgServer and its users need; a missing one must fail the test naming it.
PG_TOOLS = ["psql", PG_BIN + "/initdb", PG_BIN + "/pg_ctl"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _run(cmd, timeout=120):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-2000:]))
    return p


class PgServer:
    """A throw-away PostgreSQL cluster on 127.0.0.1:<free port>, sockets in its own directory."""

    def __init__(self, work, max_connections=40):
        self.dir = tempfile.mkdtemp(prefix="pg-", dir=work)
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.admin_url = "postgresql://postgres@127.0.0.1:%d/postgres" % self.port
        self.as_user = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as nobody
            os.chmod(work, 0o755)
            os.chmod(self.dir, 0o755)
            shutil.chown(self.dir, "nobody", "nogroup")
            self.as_user = ["runuser", "-u", "nobody", "--"]
        # The socket: "/tmp/pgs-XXXXXXXX/.s.PGSQL.<port>", whatever the length of `work`.
        self.sockets = tempfile.mkdtemp(prefix="pgs-", dir="/tmp")
        if self.as_user:
            shutil.chown(self.sockets, "nobody", "nogroup")
        _run(self.as_user + [PG_BIN + "/initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync",
                             "-E", "UTF8", "--locale=C"])
        # fsync off: the tests kill clients, never the server
        _run(self.as_user + [PG_BIN + "/pg_ctl", "-D", self.data, "-w", "-t", "60", "-l",
                             os.path.join(self.dir, "log"), "-o",
                             "-h 127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=%d"
                             % (self.port, self.sockets, max_connections),
                             "start"])

    def url(self, dbname):
        return "postgresql://postgres@127.0.0.1:%d/%s" % (self.port, dbname)

    def create_database(self, dbname, template=None):
        """CREATE DATABASE (optionally as a copy of `template`); returns its URL."""
        sql = "CREATE DATABASE %s" % dbname + (" TEMPLATE %s" % template if template else "")
        _run(["psql", self.admin_url, "-X", "-v", "ON_ERROR_STOP=1", "-qc", sql])
        return self.url(dbname)

    def log_tail(self, n=4000):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        subprocess.run(self.as_user + [PG_BIN + "/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.sockets, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
