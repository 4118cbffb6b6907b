#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile SQLite trace stores against the CLI (doc/hardening.md "Findings"): each store is built here
with Python's sqlite3 (the migrations are this tree's own, from lib/trace/sqlite_store.cpp), and the
CLI must refuse it with one line naming the fault, or replay it without crashing:

1. schema_version holding only -50: refused naming the version (it indexed the migrations array
   out of bounds and ran the bytes there as SQL);
2. 'frames' a view instead of a table: refused naming it (a view can generate rows of any size);
3. captured data whose second thread holds fewer modules than the first: replay ends with an exit
   status, not a signal (it read past the shorter list).
"""
import argparse, gzip, hashlib, os, re, sqlite3, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TRACE = "00000000-0000-4000-8000-000000000001"


def migrations():
    src = open(os.path.join(ROOT, "lib", "trace", "sqlite_store.cpp")).read()
    m = re.findall(r'R"SQL\((.*?)\)SQL"', src, re.S)
    if not m:
        sys.exit("hostile_store: no migrations found in lib/trace/sqlite_store.cpp")
    return m


def snapshot(tid, modules):
    """A SPROVSNP snapshot (memory/snapshot.cpp's layout): x86_64, no registers, no memory."""
    b = b"SPROVSNP" + struct.pack("<IBBH", 1, 1, 0, 0) + struct.pack("<QQ", 100, tid) + struct.pack("<I", 0)
    b += struct.pack("<Q", 0) + b"\0" * 8 * 40
    b += struct.pack("<I", 0)
    b += struct.pack("<I", len(modules))
    for start, end, path in modules:
        b += struct.pack("<QQQQ", start, end, 0, start) + struct.pack("<I", len(path)) + path
        b += bytes([4, 0xaa, 0xbb, 0xcc, len(path)])
    return b


def store(path, version_rows=None, frames_view=False, threads=None):
    for f in (path, path + "-wal", path + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for i, m in enumerate(migrations(), 1):
        c.executescript(m)
        c.execute("INSERT INTO schema_version VALUES(?, 'x')", (i,))
    if version_rows is not None:
        c.execute("DELETE FROM schema_version")
        for v in version_rows:
            c.execute("INSERT INTO schema_version VALUES(?, 'x')", (v,))
    if frames_view:
        c.execute("DROP TABLE frames")
        c.execute("CREATE VIEW frames AS SELECT zeroblob(1000000) AS trace_id")
    if threads is not None:
        cap = b"SPROVTRD" + struct.pack("<II", 1, len(threads))
        for tid, mods in threads:
            s = snapshot(tid, mods)
            cap += struct.pack("<QI", tid, 0) + struct.pack("<Q", len(s)) + s
        gz = gzip.compress(cap)
        h = hashlib.sha256(gz).hexdigest()
        c.execute("INSERT INTO trace_data VALUES(?,?,?)", (h, len(cap), gz))
        c.execute("INSERT INTO traces(trace_id, platform, captured_at, build_id, symbol_bundle_sha256, dsse_ref, arch,"
                  " data_sha256) VALUES(?,?,?,?,?,?,?,?)",
                  (TRACE, "linux", "2024-01-01T00:00:00.000000Z", "", "", "", "x86_64", h))
    c.commit()
    c.close()


def run(cli, *args):
    p = subprocess.run([cli] + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr.strip().splitlines()[-1:] or [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    fails = []

    db = os.path.join(a.work, "negative.db")
    store(db, version_rows=[-50])
    rc, _, last = run(a.stackprov, "trace-resolve", "--trace", TRACE, "--store", "sqlite:" + db, "--offline")
    print("negative schema version:", rc, last[0])
    if rc != 1 or "schema_version -50 is not a schema version" not in last[0]:
        fails.append("negative schema_version: exit %d, %r" % (rc, last[0]))

    db = os.path.join(a.work, "view.db")
    store(db, frames_view=True)
    rc, _, last = run(a.stackprov, "trace-resolve", "--trace", TRACE, "--store", "sqlite:" + db, "--offline")
    print("frames as a view:", rc, last[0])
    if rc != 1 or "'frames' is a view, not a table" not in last[0]:
        fails.append("frames view: exit %d, %r" % (rc, last[0]))

    db = os.path.join(a.work, "uneven.db")
    store(db, threads=[(100, [(0x400000, 0x401000, b"/a"), (0x500000, 0x501000, b"/b"), (0x600000, 0x601000, b"/c")]),
                       (101, [])])
    rc, _, last = run(a.stackprov, "trace-replay", "--trace", TRACE, "--store", "sqlite:" + db, "--seeds", "2")
    print("uneven module lists:", rc, last[0])
    if rc < 0 or rc not in (1, 3):
        fails.append("uneven module lists: exit %d (a signal is negative), %r" % (rc, last[0]))

    for f in fails:
        print("FAIL:", f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
