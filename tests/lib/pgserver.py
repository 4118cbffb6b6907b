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

initdb costs ~2 s of CPU, and four tests start a server: when `work` is inside a CMake build
directory (a parent holds CMakeCache.txt), the first server's freshly initdb'd data directory is
copied to BUILD/pgserver-templates/KEY before it starts, and later servers copy that instead of
running initdb. KEY covers the initdb and postgres binaries (path, size, mtime), initdb's
arguments and the user running it, so another PostgreSQL gets its own template. The copy is
published by an atomic rename: concurrent first servers each run initdb, one copy wins.
"""
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile

PG_BIN = "/usr/lib/postgresql/15/bin"
# What PgServer and its users need; a missing one must fail the test naming it.
# psql is the binary itself: /usr/bin/psql is Debian's Perl wrapper, which costs ~70 ms of CPU a call.
PSQL = PG_BIN + "/psql"
PG_TOOLS = [PSQL, PG_BIN + "/initdb", PG_BIN + "/pg_ctl"]
INITDB_ARGS = ["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def build_dir(path):
    """The CMake build directory holding `path` (the nearest parent with a CMakeCache.txt), or None."""
    p = os.path.abspath(path)
    while True:
        if os.path.isfile(os.path.join(p, "CMakeCache.txt")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def template_dir(work):
    """Where the initdb'd data directory for servers under `work` is kept, or None (no build directory)."""
    build = build_dir(work)
    if build is None:
        return None
    key = hashlib.sha256()
    for tool in (PG_BIN + "/initdb", PG_BIN + "/postgres"):
        try:
            st = os.stat(os.path.realpath(tool))
        except OSError:
            return None  # initdb then fails naming what is missing
        key.update(("%s %d %d\n" % (os.path.realpath(tool), st.st_size, st.st_mtime_ns)).encode())
    key.update((" ".join(INITDB_ARGS) + " euid %d" % os.geteuid()).encode())
    return os.path.join(build, "pgserver-templates", key.hexdigest()[:20])


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
        template = template_dir(work)
        if template and os.path.isfile(os.path.join(template, "PG_VERSION")):
            _run(["cp", "-a", template, self.data])  # keeps the owner (nobody) and mode 0700 the server demands
        else:
            _run(self.as_user + [PG_BIN + "/initdb", "-D", self.data] + INITDB_ARGS)
            if template:
                self._publish(template)
        # fsync off: the tests kill clients, never the server
        _run(self.as_user + [PG_BIN + "/pg_ctl", "-D", self.data, "-w", "-t", "60", "-l",
                             os.path.join(self.dir, "log"), "-o",
                             "-h 127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=%d"
                             % (self.port, self.sockets, max_connections),
                             "start"])

    def _publish(self, template):
        """Copy the fresh data directory (before the server first starts) to `template`, atomically."""
        parent = os.path.dirname(template)
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=parent)
        try:
            _run(["cp", "-a", self.data, os.path.join(staging, "data")])
            os.rename(os.path.join(staging, "data"), template)
        except (OSError, RuntimeError):
            pass  # another server published it first (or the copy failed: the next server runs initdb)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def url(self, dbname):
        return "postgresql://postgres@127.0.0.1:%d/%s" % (self.port, dbname)

    def create_database(self, dbname, template=None):
        """CREATE DATABASE (optionally as a copy of `template`); returns its URL."""
        sql = "CREATE DATABASE %s" % dbname + (" TEMPLATE %s" % template if template else "")
        _run([PSQL, self.admin_url, "-X", "-v", "ON_ERROR_STOP=1", "-qc", sql])
        return self.url(dbname)

    def create_databases(self, dbnames):
        """CREATE DATABASE for each name, over one connection; returns {name: URL}."""
        _run([PSQL, self.admin_url, "-X", "-v", "ON_ERROR_STOP=1", "-q"]
             + [x for n in dbnames for x in ("-c", "CREATE DATABASE %s" % n)])
        return {n: self.url(n) for n in dbnames}

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
