#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The trace stores (SQLite and a PostgreSQL started here on loopback): one suite, independent oracles, nothing lost under kill -9.
"""Usage: store_test.py --tool PATH --work DIR

Runs the same suite against `sqlite:FILE` and against a PostgreSQL server this script starts
itself (Debian's postgresql-15: initdb + pg_ctl in a temporary directory, loopback only, a
free port, run as `nobody` when we are root) and stops at the end, also on failure.
Independent answers:
  - the rows as the sqlite3 CLI / psql read them (counts, every frame's values, threads,
    replays, symbol bundles) against what the tool put (expected.json);
  - Python's gzip for the stored captured data (= the raw bytes the tool wrote) and sha256sum
    (coreutils) for its address;
  - Python's json for every JSONL event, against the seed's field list and the values put;
  - a schema at version N-1 created here with the seed's SQL is migrated on open, and a
    newer schema is refused naming both versions;
  - nothing lost: 4 concurrent writers, then 50 kill -9 of a writer at random points: every
    trace a writer recorded in its side file (after put returned) is complete (frames
    counted by the CLI = what the writer put, and readable), and no trace in the database
    is half-written (its frame count = the count the writer encoded in its dsse_ref).
A missing tool fails the test with its name.
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
TOOLS = ["sqlite3", "psql", "sha256sum", PG_BIN + "/initdb", PG_BIN + "/pg_ctl"]
SEED_SQL = """
CREATE TABLE traces(trace_id UUID PRIMARY KEY, platform TEXT, captured_at TIMESTAMP, build_id TEXT,
  symbol_bundle_sha256 TEXT, dsse_ref TEXT);
CREATE TABLE frames(trace_id UUID REFERENCES traces, frame_index INT, ip BIGINT, module_path TEXT,
  module_build_id TEXT, resolved_symbol TEXT, symbol_offset BIGINT, resolver TEXT,
  PRIMARY KEY(trace_id, frame_index));
CREATE TABLE symbol_bundles(sha256 TEXT PRIMARY KEY, os TEXT, bundle_blob BYTEA, index_json JSONB,
  signer TEXT, rekor_tile_ref TEXT);
CREATE TABLE replays(replay_id UUID PRIMARY KEY, trace_id UUID REFERENCES traces, seed BIGINT,
  started_at TIMESTAMP, finished_at TIMESTAMP, replay_success_ratio FLOAT, verify_time_ms INT,
  verifier_version TEXT, notes JSONB);
"""
SEED_CAPTURE_FIELDS = ["event", "trace_id", "platform", "build_id", "frames", "symbol_bundle_ref", "dsse_ref"]
SEED_FRAME_FIELDS = ["ip", "module", "module_build_id"]
SEED_REPLAY_FIELDS = ["event", "replay_id", "trace_id", "seed", "replay_success_ratio", "symbol_coverage_pct",
                      "verify_time_ms"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def run(cmd, env=None, check_rc=True, timeout=120):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check_rc and p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-2000:]))
    return p


def signed(u):
    u = int(u)
    return u - (1 << 64) if u >= (1 << 63) else u


# ---- the two databases as the independent CLIs see them

class SqliteDb:
    name = "sqlite"

    def __init__(self, path):
        self.path = path
        self.url = "sqlite:" + path

    def query(self, sql):
        out = run(["sqlite3", "-json", self.path, sql]).stdout.strip()
        return json.loads(out) if out else []

    def script(self, sql):
        run(["sqlite3", self.path], check_rc=True) if False else subprocess.run(
            ["sqlite3", self.path], input=sql, text=True, check=True, capture_output=True)

    def hex(self, col):
        return "lower(hex(%s))" % col

    def columns(self, table):
        return [r["name"] for r in self.query("PRAGMA table_info(%s)" % table)]


class PgDb:
    name = "postgresql"

    def __init__(self, server, dbname):
        self.url = "postgresql://postgres@127.0.0.1:%d/%s" % (server.port, dbname)
        run(["psql", server.admin_url, "-v", "ON_ERROR_STOP=1", "-qc", "CREATE DATABASE %s" % dbname])

    def query(self, sql):
        out = run(["psql", self.url, "-v", "ON_ERROR_STOP=1", "-XAtqc",
                   "SELECT coalesce(json_agg(q), '[]') FROM (%s) q" % sql]).stdout
        return json.loads(out)

    def script(self, sql):
        subprocess.run(["psql", self.url, "-v", "ON_ERROR_STOP=1", "-Xq"], input=sql, text=True, check=True,
                       capture_output=True)

    def hex(self, col):
        return "encode(%s, 'hex')" % col

    def columns(self, table):
        return [r["column_name"] for r in self.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = '%s'" % table)]


class PgServer:
    """A throw-away PostgreSQL cluster on 127.0.0.1:<free port>, sockets in its own directory."""

    def __init__(self, work):
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
        run(self.as_user + [PG_BIN + "/initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync",
                            "-E", "UTF8", "--locale=C"])
        # fsync off: the nothing-lost test kills clients, never the server
        run(self.as_user + [PG_BIN + "/pg_ctl", "-D", self.data, "-w", "-t", "60", "-l",
                            os.path.join(self.dir, "log"), "-o",
                            "-h 127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=40" % (self.port, self.dir),
                            "start"])

    def stop(self):
        subprocess.run(self.as_user + [PG_BIN + "/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- the suite

def suite_roundtrip(tool, db, work):
    out = os.path.join(work, db.name + "-rt")
    os.makedirs(out, exist_ok=True)
    p = run([tool, "roundtrip", db.url, out, "30", "12345"], check_rc=False)
    if not check(p.returncode == 0, "%s: roundtrip (get_trace field by field, list, replays, bundles): %s"
                 % (db.name, p.stderr.strip())):
        return
    exp = json.load(open(os.path.join(out, "expected.json")))
    traces = exp["traces"]
    # counts as the CLI sees them
    n_frames = sum(len(t["frames"]) for t in traces)
    check(db.query("SELECT count(*) AS n FROM traces")[0]["n"] == len(traces), "%s: traces row count" % db.name)
    check(db.query("SELECT count(*) AS n FROM frames")[0]["n"] == n_frames,
          "%s: frames row count %d" % (db.name, n_frames))
    # every trace and every frame, value by value
    rows = {r["trace_id"]: r for r in db.query(
        "SELECT CAST(trace_id AS TEXT) AS trace_id, platform, arch, build_id, symbol_bundle_sha256, dsse_ref,"
        " data_sha256 FROM traces")}
    frames = {}
    for r in db.query("SELECT CAST(trace_id AS TEXT) AS trace_id, frame_index, thread_index, ip, module_path,"
                      " module_build_id, module_offset, resolved_symbol, symbol_offset, file, line, column_no,"
                      " CAST(inline_chain AS TEXT) AS inline_chain, resolver, source, bundle_sha256, unwind_method"
                      " FROM frames ORDER BY trace_id, frame_index"):
        frames.setdefault(r["trace_id"], []).append(r)
    threads = {}
    for r in db.query("SELECT CAST(trace_id AS TEXT) AS trace_id, thread_index, tid, name FROM threads"
                      " ORDER BY trace_id, thread_index"):
        threads.setdefault(r["trace_id"], []).append(r)
    bad = 0
    for t in traces:
        r = rows.get(t["id"])
        if not check(r is not None, "%s: trace %s row present" % (db.name, t["id"])):
            continue
        for k, col in [("platform", "platform"), ("arch", "arch"), ("build_id", "build_id"),
                       ("symbol_bundle_sha256", "symbol_bundle_sha256"), ("dsse_ref", "dsse_ref"),
                       ("data_sha256", "data_sha256")]:
            bad += not check(r[col] == t[k], "%s: trace %s column %s: %r != %r" % (db.name, t["id"], col, r[col], t[k]))
        got = frames.get(t["id"], [])
        check(len(got) == len(t["frames"]), "%s: trace %s frame count" % (db.name, t["id"]))
        for i, (g, f) in enumerate(zip(got, t["frames"])):
            want = {"frame_index": i, "thread_index": f["thread_index"], "ip": signed(f["ip"]),
                    "module_path": f["module_path"], "module_build_id": f["module_build_id"],
                    "module_offset": signed(f["module_offset"]), "resolved_symbol": f["symbol"],
                    "symbol_offset": signed(f["symbol_offset"]), "file": f["file"], "line": f["line"],
                    "column_no": f["column"], "resolver": f["resolver"], "source": f["source"],
                    "bundle_sha256": f["bundle_sha256"], "unwind_method": f["unwind_method"]}
            for k, v in want.items():
                if g[k] != v and bad < 20:
                    bad += 1
                    check(False, "%s: trace %s frame %d column %s: %r != %r" % (db.name, t["id"], i, k, g[k], v))
            if json.loads(g["inline_chain"]) != f["inline_chain"] and bad < 20:
                bad += 1
                check(False, "%s: trace %s frame %d inline_chain" % (db.name, t["id"], i))
        th = threads.get(t["id"], [])
        check([(x["thread_index"], x["tid"], x["name"]) for x in th] ==
              [(i, signed(x["tid"]), x["name"]) for i, x in enumerate(t["threads"])],
              "%s: trace %s threads" % (db.name, t["id"]))
    # captured data: gzip -> the raw bytes, sha256sum of the gzip bytes -> the address
    data = {r["sha256"]: r for r in db.query("SELECT sha256, raw_size, %s AS gz FROM trace_data" % db.hex("gzip"))}
    distinct = set(t["data_sha256"] for t in traces)
    check(len(distinct) == len(traces) - 1 and len(data) == len(distinct),
          "%s: identical captured data stored once (%d rows for %d distinct)" % (db.name, len(data), len(distinct)))
    for t in traces:
        d = data.get(t["data_sha256"])
        if not check(d is not None, "%s: trace_data row for %s" % (db.name, t["id"])):
            continue
        gz = bytes.fromhex(d["gz"])
        raw = open(os.path.join(out, t["id"] + ".raw"), "rb").read()
        check(gzip.decompress(gz) == raw, "%s: stored data of %s gunzips to the raw snapshot" % (db.name, t["id"]))
        check(d["raw_size"] == len(raw), "%s: raw_size of %s" % (db.name, t["id"]))
        gzpath = os.path.join(out, "data.gz")
        open(gzpath, "wb").write(gz)
        check(run(["sha256sum", gzpath]).stdout.split()[0] == t["data_sha256"],
              "%s: sha256sum of the stored gzip of %s = its address" % (db.name, t["id"]))
        check(gz[:2] == b"\x1f\x8b" and gz[4:8] == b"\0\0\0\0", "%s: gzip member with mtime 0" % db.name)
    # replays
    reps = {r["replay_id"]: r for r in db.query(
        "SELECT CAST(replay_id AS TEXT) AS replay_id, CAST(trace_id AS TEXT) AS trace_id, seed,"
        " replay_success_ratio, symbol_coverage_pct, verify_time_ms, verifier_version FROM replays")}
    check(len(reps) == len(exp["replays"]), "%s: replays row count" % db.name)
    for r in exp["replays"]:
        g = reps.get(r["replay_id"], {})
        for k in ["trace_id", "seed", "replay_success_ratio", "symbol_coverage_pct", "verify_time_ms",
                  "verifier_version"]:
            check(g.get(k) == r[k], "%s: replay %s column %s: %r != %r" % (db.name, r["replay_id"], k, g.get(k), r[k]))
    # symbol bundle: content-addressed
    b = db.query("SELECT sha256, os, %s AS blob, CAST(index_json AS TEXT) AS idx FROM symbol_bundles" % db.hex("bundle_blob"))
    check(len(b) == 1 and b[0]["sha256"] == exp["bundle_sha256"], "%s: one symbol bundle row" % db.name)
    if b:
        check(hashlib.sha256(bytes.fromhex(b[0]["blob"])).hexdigest() == b[0]["sha256"],
              "%s: symbol bundle blob hashes to its key" % db.name)
        check(json.loads(b[0]["idx"]) == {"ranges": []}, "%s: symbol bundle index_json" % db.name)
    # events: Python's json against the seed's field lists and the values put
    lines = open(os.path.join(out, "events.jsonl")).read().splitlines()
    caps = [json.loads(x) for x in lines if json.loads(x)["event"] == "trace.capture"]
    repl = [json.loads(x) for x in lines if json.loads(x)["event"] == "replay.result"]
    check(len(caps) == len(traces) and len(repl) == len(exp["replays"]), "%s: event line counts" % db.name)
    for ev, t in zip(caps, traces):
        check(list(ev.keys())[:len(SEED_CAPTURE_FIELDS)] == SEED_CAPTURE_FIELDS,
              "trace.capture starts with the seed's fields in order: %s" % list(ev.keys()))
        check(ev["trace_id"] == t["id"] and ev["platform"] == t["platform"] and ev["build_id"] == t["build_id"],
              "trace.capture ids")
        check(ev["symbol_bundle_ref"] == ("sha256:" + t["symbol_bundle_sha256"] if t["symbol_bundle_sha256"] else None),
              "trace.capture symbol_bundle_ref")
        check(ev["dsse_ref"] == (t["dsse_ref"] or None), "trace.capture dsse_ref")
        check(len(ev["frames"]) == len(t["frames"]), "trace.capture frame count")
        for ef, f in zip(ev["frames"], t["frames"]):
            if not all(k in ef for k in SEED_FRAME_FIELDS) or not ef["ip"].startswith("0x") or \
                    int(ef["ip"], 16) != int(f["ip"]) or ef["module"] != f["module_path"] or \
                    ef["module_build_id"] != f["module_build_id"]:
                check(False, "trace.capture frame %r != %r" % (ef, f))
                break
    for ev, r in zip(repl, exp["replays"]):
        check(list(ev.keys()) == SEED_REPLAY_FIELDS, "replay.result has exactly the seed's fields: %s" % list(ev.keys()))
        check(isinstance(ev["seed"], int) and isinstance(ev["verify_time_ms"], int) and
              isinstance(ev["replay_success_ratio"], (int, float)), "replay.result types")
        for k in SEED_REPLAY_FIELDS[1:]:
            check(ev[k] == r[k], "replay.result %s: %r != %r" % (k, ev[k], r[k]))
    return out


def suite_parser(tool, out, work):
    """Our strict parser must refuse what Python's json shows is malformed or off the field list."""
    lines = open(os.path.join(out, "events.jsonl")).read().splitlines()
    cap = json.loads(next(x for x in lines if '"trace.capture"' in x))
    rep = json.loads(next(x for x in lines if '"replay.result"' in x))
    cases = []
    for k in SEED_CAPTURE_FIELDS[1:]:
        c = dict(cap)
        del c[k]
        cases.append(("capture without " + k, json.dumps(c), k))
    for k in SEED_REPLAY_FIELDS[1:]:
        c = dict(rep)
        del c[k]
        cases.append(("replay without " + k, json.dumps(c), k))
    cases.append(("unknown field", json.dumps(dict(rep, colour="red")), "colour"))
    cases.append(("seed as string", json.dumps(dict(rep, seed="42")), "seed"))
    cases.append(("ratio above 1", json.dumps(dict(rep, replay_success_ratio=1.5)), "replay_success_ratio"))
    cases.append(("bad uuid", json.dumps(dict(rep, trace_id="not-a-uuid")), "trace_id"))
    cases.append(("ip not hex", json.dumps(dict(cap, frames=[dict(cap["frames"][0], ip="1234")])), "ip"))
    cases.append(("bundle ref not sha256", json.dumps(dict(cap, symbol_bundle_ref="md5:00")), "symbol_bundle_ref"))
    cases.append(("unknown event", json.dumps(dict(rep, event="trace.delete")), "trace.delete"))
    cases.append(("not json", '{"event": "replay.result",', "JSON"))
    cases.append(("deep nesting", "[" * 100000 + "]" * 100000, "nesting"))
    for name, line, needle in cases:
        path = os.path.join(work, "bad.jsonl")
        open(path, "w").write(line + "\n")
        p = run([tool, "parse", path], check_rc=False)
        check(p.returncode == 1 and needle.lower() in p.stderr.lower(),
              "parser refuses %s naming %r (rc %d: %s)" % (name, needle, p.returncode, p.stderr.strip()[:200]))
    good = os.path.join(work, "good.jsonl")
    open(good, "w").write(json.dumps(cap) + "\n" + json.dumps(rep) + "\n")
    check(run([tool, "parse", good], check_rc=False).returncode == 0, "parser accepts Python's re-encoding")


def suite_migrations(tool, db_v1, db_seed_only, db_newer):
    """A version-1 database (the seed's SQL, created here) is migrated on open; newer is refused."""
    tid = "6f1c1f4e-8d7b-4c1e-9a51-0123456789ab"
    rows = ("INSERT INTO traces VALUES('%s', 'linux', '2026-01-02 03:04:05', 'abcd', NULL, 'dsse:x');"
            "INSERT INTO frames VALUES('%s', 0, 4096, '/bin/a', 'abcd', 'main', 16, 'symtab');"
            "INSERT INTO frames VALUES('%s', 1, -1, '/lib/b.so', 'ef01', 'g', 0, 'dwarf');") % (tid, tid, tid)
    db_v1.script(SEED_SQL + "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);"
                 "INSERT INTO schema_version VALUES(1, 'then');" + rows)
    db_seed_only.script(SEED_SQL + rows)
    for db in (db_v1, db_seed_only):
        p = run([tool, "open", db.url], check_rc=False)
        check(p.returncode == 0 and p.stdout.strip() == "2", "%s: open migrates to version 2 (%s)" % (db.name, p.stderr.strip()))
        check(sorted(r["version"] for r in db.query("SELECT version FROM schema_version")) == [1, 2],
              "%s: schema_version rows 1 and 2 (CLI)" % db.name)
        cols = db.columns("frames")
        check(all(c in cols for c in ["thread_index", "module_offset", "file", "line", "column_no", "inline_chain",
                                      "source", "bundle_sha256", "unwind_method"]), "%s: frames columns after migration: %s" % (db.name, cols))
        check("arch" in db.columns("traces") and "symbol_coverage_pct" in db.columns("replays"),
              "%s: traces.arch and replays.symbol_coverage_pct added" % db.name)
        p = run([tool, "get", db.url, tid], check_rc=False)
        ok = p.returncode == 0
        if check(ok, "%s: the version-1 trace reads after migration: %s" % (db.name, p.stderr.strip())):
            ev = json.loads(p.stdout)
            check([(f["ip"], f["module"], f.get("symbol"), f.get("resolver")) for f in ev["frames"]] ==
                  [("0x1000", "/bin/a", "main", "symtab"), ("0xffffffffffffffff", "/lib/b.so", "g", "dwarf")]
                  and ev["platform"] == "linux" and ev["dsse_ref"] == "dsse:x",
                  "%s: the version-1 rows as written by SQL: %s" % (db.name, ev))
        p = run([tool, "open", db.url], check_rc=False)
        check(p.returncode == 0 and p.stdout.strip() == "2", "%s: reopening is a no-op" % db.name)
    db_newer.script("CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);"
                    "INSERT INTO schema_version VALUES(99, 'future');")
    p = run([tool, "open", db_newer.url], check_rc=False)
    check(p.returncode == 1 and "99" in p.stderr and "newer" in p.stderr and " 2" in p.stderr,
          "%s: a schema version 99 database is refused naming both versions: %s" % (db_newer.name, p.stderr.strip()))


def read_side(paths):
    out = []
    for p in paths:
        if os.path.exists(p):
            for line in open(p):
                parts = line.split()
                if check(len(parts) == 3 and line.endswith("\n"), "side file line complete: %r" % line):
                    out.append((parts[0], int(parts[1])))
    return out


def check_nothing_lost(tool, db, sides, what):
    recorded = read_side(sides)
    counts = {r["trace_id"]: r for r in db.query(
        "SELECT CAST(t.trace_id AS TEXT) AS trace_id, t.dsse_ref,"
        " (SELECT count(*) FROM frames f WHERE f.trace_id = t.trace_id) AS n FROM traces t")}
    lost = [i for i, n in recorded if i not in counts]
    short = [i for i, n in recorded if i in counts and counts[i]["n"] != n]
    half = [r["trace_id"] for r in counts.values() if r["dsse_ref"] != "dsse:frames-%d" % r["n"]]
    check(not lost, "%s %s: %d recorded traces missing: %s" % (db.name, what, len(lost), lost[:3]))
    check(not short, "%s %s: %d recorded traces with other frame counts" % (db.name, what, len(short)))
    check(not half, "%s %s: %d half-written traces in the database" % (db.name, what, len(half)))
    check(len(recorded) > 0, "%s %s: writers recorded traces" % (db.name, what))
    p = run([tool, "check", db.url] + sides, check_rc=False, timeout=300)
    check(p.returncode == 0, "%s %s: every recorded trace readable and complete through get_trace: %s"
          % (db.name, what, p.stderr.strip()))
    return len(recorded), len(counts)


def suite_concurrent(tool, db, work):
    sides = [os.path.join(work, "%s-conc-%d.txt" % (db.name, i)) for i in range(4)]
    t0 = time.monotonic()
    procs = [subprocess.Popen([tool, "write", db.url, sides[i], str(100 + i), "25"], stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    for i, p in enumerate(procs):
        err = p.communicate(timeout=300)[1]
        check(p.returncode == 0, "%s: concurrent writer %d: %s" % (db.name, i, err.strip()))
    dt = time.monotonic() - t0
    rec, total = check_nothing_lost(tool, db, sides, "4 concurrent writers")
    check(rec == 100 and total == 100, "%s: 4 writers x 25 traces = 100 traces (%d recorded, %d stored)"
          % (db.name, rec, total))
    print("%s: 4 concurrent writers, 100 traces in %.2f s = %.0f traces/s" % (db.name, dt, 100 / dt), flush=True)


def suite_kill(tool, db, work, kills=50):
    sides = []
    procs = [None] * 4
    rng = random.Random(20261125)
    gen = [0]

    def start(i):
        gen[0] += 1
        side = os.path.join(work, "%s-kill-%d-%d.txt" % (db.name, i, gen[0]))
        sides.append(side)
        procs[i] = subprocess.Popen([tool, "write", db.url, side, str(1000 + gen[0]), "0"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for i in range(4):
            start(i)
        for k in range(kills):
            time.sleep(rng.uniform(0.02, 0.25))
            i = rng.randrange(4)
            if procs[i].poll() is not None:
                check(False, "%s: writer exited on its own: %s" % (db.name, procs[i].stderr.read().strip()))
            procs[i].send_signal(signal.SIGKILL)
            procs[i].wait()
            start(i)
    finally:
        for p in procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
    rec, total = check_nothing_lost(tool, db, sides, "after %d kill -9" % kills)
    print("%s: %d kill -9, %d traces recorded by writers, %d in the store (checked above)"
          % (db.name, kills, rec, total), flush=True)


def suite_urls(tool, work):
    for url, needle in [("mysql://localhost/x", "mysql://localhost/x"), ("sqlite:", "sqlite:"),
                        ("sqlite://tmp/x.db", "sqlite://tmp/x.db"), ("", "empty"),
                        ("postgresql://127.0.0.1:1/none", "127.0.0.1:1")]:
        p = run([tool, "open", url], check_rc=False)
        check(p.returncode == 1 and needle in p.stderr, "store URL %r refused naming it: %s" % (url, p.stderr.strip()))
    env = dict(os.environ, STACKPROV_STORE="sqlite:" + os.path.join(work, "env", "s.db"))
    p = run([tool, "open", "-"], env=env, check_rc=False)
    check(p.returncode == 0 and os.path.exists(os.path.join(work, "env", "s.db")), "STACKPROV_STORE=sqlite:PATH is used")
    env = dict(os.environ, XDG_DATA_HOME=os.path.join(work, "xdg"))
    env.pop("STACKPROV_STORE", None)
    p = run([tool, "open", "-"], env=env, check_rc=False)
    check(p.returncode == 0 and os.path.exists(os.path.join(work, "xdg", "stackprov", "traces.db")),
          "default store $XDG_DATA_HOME/stackprov/traces.db")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--kills", type=int, default=50)
    a = ap.parse_args()
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        print("FAIL: missing tools: %s (scripts/install-deps.sh: sqlite3, postgresql)" % ", ".join(missing))
        return 1
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = os.path.abspath(a.work)
    t0 = time.monotonic()
    suite_urls(a.tool, work)
    server = None
    try:
        server = PgServer(work)
        print("postgresql started on 127.0.0.1:%d in %.1f s" % (server.port, time.monotonic() - t0), flush=True)
        backends = [
            (lambda n: SqliteDb(os.path.join(work, n + ".db"))),
            (lambda n: PgDb(server, n)),
        ]
        for make in backends:
            db = make("rt")
            out = suite_roundtrip(a.tool, db, work)
            if out and db.name == "sqlite":
                suite_parser(a.tool, out, work)
            suite_migrations(a.tool, make("v1"), make("seedonly"), make("newer"))
            suite_concurrent(a.tool, make("conc"), work)
            suite_kill(a.tool, make("kill"), work, a.kills)
            print("%s suite done at %.1f s" % (db.name, time.monotonic() - t0), flush=True)
    except Exception as e:  # a crashed suite is a failed test, with its reason
        check(False, "suite aborted: %r" % e)
    finally:
        if server:
            server.stop()
    print("total %.1f s" % (time.monotonic() - t0))
    if failures:
        print("%d FAILURES" % len(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
