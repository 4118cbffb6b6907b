#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PostgreSQL harness from a clone at a long path (issue 36): PgServer with its work directory
at a path of >= 120 characters starts, serves a database over TCP and over its Unix socket, and
stops leaving nothing behind. Before, the socket lived in the work directory and PostgreSQL
refused its path (over sun_path's 107 bytes), failing the trace tests of such a clone.

usage: pgserver_test.py WORK"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pgserver import PgServer, PG_TOOLS, PSQL  # noqa: E402


def main():
    for tool in PG_TOOLS:
        if shutil.which(tool) is None and not os.path.exists(tool):
            print("FAIL: %s not found (make deps)" % tool)
            return 1
    base = os.path.abspath(sys.argv[1])
    shutil.rmtree(base, ignore_errors=True)
    work = os.path.join(base, "a-clone-at-a-long-path", "x" * 60, "build", "tests", "trace_store")
    os.makedirs(work)
    p = work
    while p != "/":  # searchable by nobody, who runs the server
        os.chmod(p, os.stat(p).st_mode | 0o055)
        p = os.path.dirname(p)
    bad = []
    if len(work) < 120:
        bad.append("the work directory is %d characters, not >= 120" % len(work))
    server = PgServer(work)
    try:
        url = server.create_database("longpath")
        r = subprocess.run([PSQL, url, "-X", "-tAc", "SELECT 40 + 2"], capture_output=True, text=True, timeout=60)
        if r.stdout.strip() != "42":
            bad.append("psql over TCP: %r %r" % (r.stdout, r.stderr))
        r = subprocess.run([PSQL, "-h", server.sockets, "-p", str(server.port), "-U", "postgres", "-X", "-tAc",
                            "SELECT current_database()", "longpath"], capture_output=True, text=True, timeout=60)
        if r.stdout.strip() != "longpath":
            bad.append("psql over the Unix socket in %s: %r %r" % (server.sockets, r.stdout, r.stderr))
    finally:
        server.stop()
    if os.path.exists(server.sockets) or os.path.exists(server.dir):
        bad.append("left behind: %s or %s" % (server.sockets, server.dir))
    for b in bad:
        print("FAIL " + b)
    print("pgserver at a %d-character path: %s" % (len(work), "FAIL" if bad else "ok"))
    shutil.rmtree(base, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
