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
  - databases at version 1 (the seed's SQL) and at version 2 (the seed's SQL plus the
    documented version-2 tables, with rows) created here are migrated to version 3 on open
    and their rows read back; a newer schema is refused naming both versions;
  - schema 3, values chosen here, rows read back by the CLIs: a symbol bundle's signature
    columns (DSSE envelope, tlog proof, checkpoint), a second put of a bundle signing it (blob,
    os and index kept), size and NUL bounds; replace_frames (the trace's rows equal the new
    frames exactly, the old ones gone, other traces untouched, refusals change nothing, a
    reader during 150 replacements sees one resolution or the other whole); list_replays in
    Python's (started_at, replay_id) order; list_symbol_bundles in Python's sha256 order;
    error codes from include/stackprov/errors.h;
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
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from pgserver import PG_TOOLS, PSQL, PgServer  # noqa: E402  (tests/lib: the PostgreSQL the script starts)
from sqlsession import PsqlSession, SqliteSession, close_all  # noqa: E402  (one CLI process per database)

TOOLS = ["sqlite3", "sha256sum"] + PG_TOOLS
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
# The version-2 schema (doc/traces.md "Schema and migrations", migration 2), in the seed's
# PostgreSQL types (SQLite takes the same text).
V2_SQL = """
CREATE TABLE trace_data(sha256 TEXT PRIMARY KEY, raw_size BIGINT NOT NULL, gzip BYTEA NOT NULL);
ALTER TABLE traces ADD COLUMN arch TEXT;
ALTER TABLE traces ADD COLUMN data_sha256 TEXT REFERENCES trace_data(sha256);
CREATE TABLE threads(trace_id UUID NOT NULL REFERENCES traces, thread_index INT NOT NULL, tid BIGINT NOT NULL,
  name TEXT NOT NULL, PRIMARY KEY(trace_id, thread_index));
ALTER TABLE frames ADD COLUMN thread_index INT NOT NULL DEFAULT 0;
ALTER TABLE frames ADD COLUMN module_offset BIGINT;
ALTER TABLE frames ADD COLUMN file TEXT;
ALTER TABLE frames ADD COLUMN line BIGINT;
ALTER TABLE frames ADD COLUMN column_no BIGINT;
ALTER TABLE frames ADD COLUMN inline_chain JSONB;
ALTER TABLE frames ADD COLUMN source TEXT;
ALTER TABLE frames ADD COLUMN bundle_sha256 TEXT;
ALTER TABLE frames ADD COLUMN unwind_method TEXT;
ALTER TABLE replays ADD COLUMN symbol_coverage_pct FLOAT;
CREATE INDEX traces_by_time ON traces(captured_at, trace_id);
"""
SCHEMA_VERSION = 5
MIB = 1 << 20
ODD_TEXT = ["", "it's", 'a"b', "back\\slash", "tab\there", "ünïcødé_∂", "ns::f<int>(char const*)", "line\nbreak",
            "%s %d", "' OR 1=1 --"]
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


def error_codes():
    """SPROV_ERR_* -> value, from the public header (the contract), not from our messages."""
    h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "include", "stackprov", "errors.h")
    codes = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"X\((SPROV_ERR_\w+), (-\d+),", open(h).read()))
    if "SPROV_ERR_NOT_FOUND" not in codes:
        raise RuntimeError("no error codes in " + h)
    return codes


def code_of(stderr):
    m = re.search(r"\(code (-?\d+)\)", stderr)
    return int(m.group(1)) if m else None


def rtext(rng, prefix):
    return prefix + rng.choice(ODD_TEXT) + str(rng.randrange(100000))


def rhex(rng, nbytes):
    return "%0*x" % (nbytes * 2, rng.getrandbits(nbytes * 8))


def gen_threads(rng, n_threads, n_frames):
    """Threads as store_tool reads them: u64 as decimal strings, frames nested per thread, with
    the extremes (u64 max, 2^63, 0), empty strings, quoting and UTF-8."""
    threads = [{"tid": str((1 << 64) - 1 if i == 0 else rng.randrange(1, 1 << 22)), "name": rtext(rng, "thr-"),
                "frames": []} for i in range(n_threads)]
    for i in range(n_frames):
        ip = [(1 << 64) - 1, 1 << 63, 0][i] if i < 3 else rng.getrandbits(64)
        f = {"ip": str(ip),
             "module_path": "" if i % 7 == 2 else "/usr/lib/" + rtext(rng, "m") + ".so",
             "module_build_id": "" if i % 7 == 2 else rhex(rng, 20),
             "module_offset": str(rng.getrandbits(rng.randrange(1, 65))),
             "symbol": "" if i % 5 == 4 else rtext(rng, "fn_"),
             "symbol_offset": str(rng.randrange(4096)),
             "file": rtext(rng, "/src/"),
             "line": rng.randrange(1 << 32), "column": rng.randrange(300),
             "inline_chain": [{"function": rtext(rng, "inl_"), "file": rtext(rng, "/inc/"),
                               "line": rng.randrange(100000), "column": rng.randrange(80)}
                              for _ in range(rng.randrange(4))],
             "resolver": rng.choice(["bundle", "dwarf", "symtab", "debuginfod", ""]),
             "source": rtext(rng, "src:"),
             "bundle_sha256": rhex(rng, 32) if rng.random() < 0.5 else "",
             "unwind_method": rng.choice(["cfi", "fp", "scan", "signal", "cfi_bundle"]),
             "module_id_kind": "" if i % 7 == 2 else rng.choice(["", "", "macho-uuid", "pdb-guid-age"])}
        threads[rng.randrange(n_threads)]["frames"].append(f)
    return threads


def flat_frames(threads):
    """The frames of nested threads in store order, with their thread_index (trace_json's form)."""
    return [dict(f, thread_index=ti) for ti, th in enumerate(threads) for f in th["frames"]]


def write_json(work, name, value):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(json.dumps(value))  # json.dump's text, from the C encoder (dump runs Python's, ~3x slower)
    return path


# ---- the two databases as the independent CLIs see them

class SqliteDb:
    name = "sqlite"

    def __init__(self, path):
        self.path = path
        self.url = "sqlite:" + path
        self.cli = SqliteSession(path)

    def query(self, sql):
        return self.cli.rows(sql)

    def script(self, sql):
        run(["sqlite3", self.path], check_rc=True) if False else subprocess.run(
            ["sqlite3", self.path], input=sql, text=True, check=True, capture_output=True)

    def hex(self, col):
        return "lower(hex(%s))" % col

    def columns(self, table):
        return [r["name"] for r in self.query("PRAGMA table_info(%s)" % table)]

    def blob(self, data):
        return "x'%s'" % data.hex()

    def time(self, col):
        return col

    def index_first_columns(self, table):
        return [r["name"] for r in self.query(
            "SELECT ii.name FROM pragma_index_list('%s') il, pragma_index_info(il.name) ii WHERE ii.seqno = 0" % table)]


class PgDb:
    name = "postgresql"

    def __init__(self, url):
        self.url = url  # created by PgServer.create_databases
        self.cli = PsqlSession(url)

    def query(self, sql):
        return self.cli.rows(sql)

    def script(self, sql):
        subprocess.run([PSQL, self.url, "-v", "ON_ERROR_STOP=1", "-Xq"], input=sql, text=True, check=True,
                       capture_output=True)

    def hex(self, col):
        return "encode(%s, 'hex')" % col

    def columns(self, table):
        return [r["column_name"] for r in self.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = '%s'" % table)]

    def blob(self, data):
        return "'\\x%s'::bytea" % data.hex()

    def time(self, col):
        return "to_char(%s, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')" % col

    def index_first_columns(self, table):
        return [r["attname"] for r in self.query(
            "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_attribute a"
            " ON a.attrelid = c.oid AND a.attnum = i.indkey[0] WHERE c.relname = '%s'" % table)]


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
                      " CAST(inline_chain AS TEXT) AS inline_chain, resolver, source, bundle_sha256, unwind_method,"
                      " COALESCE(module_id_kind, '') AS module_id_kind FROM frames ORDER BY trace_id, frame_index"):
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
                    "bundle_sha256": f["bundle_sha256"], "unwind_method": f["unwind_method"],
                    "module_id_kind": f.get("module_id_kind", "")}
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
    gzpaths = {}  # trace id -> its stored gzip, written out for one sha256sum of them all
    for t in traces:
        d = data.get(t["data_sha256"])
        if not check(d is not None, "%s: trace_data row for %s" % (db.name, t["id"])):
            continue
        gz = bytes.fromhex(d["gz"])
        raw = open(os.path.join(out, t["id"] + ".raw"), "rb").read()
        check(gzip.decompress(gz) == raw, "%s: stored data of %s gunzips to the raw snapshot" % (db.name, t["id"]))
        check(d["raw_size"] == len(raw), "%s: raw_size of %s" % (db.name, t["id"]))
        gzpaths[t["id"]] = os.path.join(out, "data-%s.gz" % t["id"])
        open(gzpaths[t["id"]], "wb").write(gz)
        check(gz[:2] == b"\x1f\x8b" and gz[4:8] == b"\0\0\0\0", "%s: gzip member with mtime 0" % db.name)
    sums = {}  # sha256sum's "HEX  PATH" lines
    if gzpaths:
        for line in run(["sha256sum"] + list(gzpaths.values())).stdout.splitlines():
            digest, path = line.split(None, 1)
            sums[path.lstrip("*")] = digest
    for t in traces:
        if t["id"] in gzpaths:
            check(sums.get(gzpaths[t["id"]]) == t["data_sha256"],
                  "%s: sha256sum of the stored gzip of %s = its address" % (db.name, t["id"]))
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


# ---- schema 3: rows of one trace, bundles, replace_frames, list_replays

def frame_rows(db, tid):
    return db.query("SELECT frame_index, thread_index, ip, module_path, module_build_id, module_offset,"
                    " resolved_symbol, symbol_offset, file, line, column_no, CAST(inline_chain AS TEXT) AS inline_chain,"
                    " resolver, source, bundle_sha256, unwind_method FROM frames"
                    " WHERE CAST(trace_id AS TEXT) = '%s' ORDER BY frame_index" % tid)


def thread_rows(db, tid):
    return [(r["thread_index"], r["tid"], r["name"]) for r in db.query(
        "SELECT thread_index, tid, name FROM threads WHERE CAST(trace_id AS TEXT) = '%s' ORDER BY thread_index" % tid)]


def check_trace_rows(db, tid, threads, what):
    """The trace's frames and threads rows, as the CLI reads them, are exactly `threads` (nested)."""
    want = flat_frames(threads)
    got = frame_rows(db, tid)
    ok = check(len(got) == len(want), "%s: %s: %d frame rows, want %d" % (db.name, what, len(got), len(want)))
    bad = 0
    for i, (g, f) in enumerate(zip(got, want)):
        w = {"frame_index": i, "thread_index": f["thread_index"], "ip": signed(f["ip"]),
             "module_path": f["module_path"], "module_build_id": f["module_build_id"],
             "module_offset": signed(f["module_offset"]), "resolved_symbol": f["symbol"],
             "symbol_offset": signed(f["symbol_offset"]), "file": f["file"], "line": f["line"],
             "column_no": f["column"], "resolver": f["resolver"], "source": f["source"],
             "bundle_sha256": f["bundle_sha256"], "unwind_method": f["unwind_method"]}
        for k, v in w.items():
            if g[k] != v and bad < 10:
                bad += 1
                ok = check(False, "%s: %s: frame %d column %s: %r != %r" % (db.name, what, i, k, g[k], v))
        if json.loads(g["inline_chain"]) != f["inline_chain"] and bad < 10:
            bad += 1
            ok = check(False, "%s: %s: frame %d inline_chain" % (db.name, what, i))
    ok &= check(thread_rows(db, tid) == [(i, signed(t["tid"]), t["name"]) for i, t in enumerate(threads)],
                "%s: %s: thread rows" % (db.name, what))
    return ok


def dumped(tool, db, tid):
    p = run([tool, "dump", db.url, tid], check_rc=False)
    if not check(p.returncode == 0, "%s: get_trace %s: %s" % (db.name, tid, p.stderr.strip())):
        return None
    return json.loads(p.stdout)


def bundle_row(db, sha):
    rows = db.query("SELECT sha256, os, %s AS blob, CAST(index_json AS TEXT) AS index_json, signer, rekor_tile_ref,"
                    " dsse_envelope, tlog_proof, checkpoint FROM symbol_bundles WHERE sha256 = '%s'"
                    % (db.hex("bundle_blob"), sha))
    return rows[0] if len(rows) == 1 else None


def put_bundle(tool, db, work, row):
    return run([tool, "put-bundle", db.url, write_json(work, db.name + "-bundle.json", row)], check_rc=False)


def get_bundle(tool, db, sha):
    p = run([tool, "get-bundle", db.url, sha], check_rc=False)
    if not check(p.returncode == 0, "%s: get_symbol_bundle %s: %s" % (db.name, sha, p.stderr.strip())):
        return None
    return json.loads(p.stdout)


def same_json_text(a, b):
    """JSON columns: PostgreSQL's JSONB re-spaces the text; empty/NULL is no document."""
    return (json.loads(a) if a else None) == (json.loads(b) if b else None)


def check_bundle(tool, db, sha, blob, want, what):
    """The row as the CLI reads it and get_symbol_bundle's answer, against `want` (text values;
    empty signature texts are NULL in the row)."""
    r = bundle_row(db, sha)
    if not check(r is not None, "%s: %s: one symbol_bundles row for %s" % (db.name, what, sha)):
        return
    check(bytes.fromhex(r["blob"]) == blob and hashlib.sha256(bytes.fromhex(r["blob"])).hexdigest() == sha,
          "%s: %s: the stored blob is the bytes put and hashes to its key" % (db.name, what))
    check(r["os"] == want["os"], "%s: %s: os %r != %r" % (db.name, what, r["os"], want["os"]))
    check(same_json_text(r["index_json"], want["index_json"]), "%s: %s: index_json %r" % (db.name, what, r["index_json"]))
    for k in ["signer", "rekor_tile_ref"]:
        check(r[k] == want[k], "%s: %s: column %s: %r != %r" % (db.name, what, k, r[k], want[k]))
    for k in ["dsse_envelope", "tlog_proof", "checkpoint"]:
        check(r[k] == (want[k] or None), "%s: %s: column %s: %r != %r" % (db.name, what, k, (r[k] or "")[:80],
                                                                             (want[k] or "")[:80]))
    g = get_bundle(tool, db, sha)
    if g:
        check(g["sha256"] == sha and g["blob_hex"] == blob.hex(), "%s: %s: get_symbol_bundle bytes" % (db.name, what))
        check(same_json_text(g["index_json"], want["index_json"]), "%s: %s: get_symbol_bundle index_json" % (db.name, what))
        for k in ["os", "signer", "rekor_tile_ref", "dsse_envelope", "tlog_proof", "checkpoint"]:
            check(g[k] == want[k], "%s: %s: get_symbol_bundle %s: %r != %r" % (db.name, what, k, g[k][:80], want[k][:80]))


def suite_bundles(tool, db, work, codes):
    rng = random.Random(3001)
    blob = rng.randbytes(70000)
    sha = hashlib.sha256(blob).hexdigest()
    first = {"sha256": sha, "os": "linux", "blob_hex": blob.hex(), "index_json": '{"modules":[{"build_id":"ab12"}]}',
             "signer": "", "rekor_tile_ref": "", "dsse_envelope": "", "tlog_proof": "", "checkpoint": ""}
    p = put_bundle(tool, db, work, first)
    check(p.returncode == 0, "%s: put_symbol_bundle unsigned: %s" % (db.name, p.stderr.strip()))
    check_bundle(tool, db, sha, blob, first, "unsigned bundle")
    # signed after it was stored: the signature columns are set, blob/os/index_json kept
    dsse = json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": "eyJhIjoiYiJ9",
                       "signatures": [{"keyid": "ed25519:9f'\"", "sig": "c2lnbmF0dXJl"}]})
    proof = "tlog-proof@v1\nlog.example/stackprov\nindex 7\nsize 12\n" + "\n".join(rhex(rng, 32) for _ in range(4)) + "\n"
    cp = "log.example/stackprov\n12\n" + rhex(rng, 32) + "\n\n\u2014 log.example/stackprov AbCd+/=\n"
    signed_row = dict(first, os="macos", index_json='{"other":1}', signer="key-ed25519:9f",
                      rekor_tile_ref="tile:5/1234", dsse_envelope=dsse, tlog_proof=proof, checkpoint=cp)
    p = put_bundle(tool, db, work, signed_row)
    check(p.returncode == 0, "%s: put_symbol_bundle signing a stored bundle: %s" % (db.name, p.stderr.strip()))
    want = dict(first, signer="key-ed25519:9f", rekor_tile_ref="tile:5/1234", dsse_envelope=dsse, tlog_proof=proof,
                checkpoint=cp)
    check_bundle(tool, db, sha, blob, want, "bundle signed by a second put")
    # a third put with only a new checkpoint: that column changes, the non-empty ones stay
    cp2 = cp.replace("\n12\n", "\n13\n")
    p = put_bundle(tool, db, work, dict(first, checkpoint=cp2))
    check(p.returncode == 0, "%s: put_symbol_bundle with a new checkpoint: %s" % (db.name, p.stderr.strip()))
    want["checkpoint"] = cp2
    check_bundle(tool, db, sha, blob, want, "bundle after a checkpoint-only put")
    # bounds: 1 MiB of text is accepted, one byte more is refused naming the column and the size
    p = put_bundle(tool, db, work, dict(first, dsse_envelope="x" * (MIB + 1)))
    check(p.returncode == 1 and "dsse_envelope" in p.stderr and str(MIB + 1) in p.stderr and
          code_of(p.stderr) == codes["SPROV_ERR_LIMIT"],
          "%s: a DSSE envelope of 1 MiB + 1 is refused naming it: %s" % (db.name, p.stderr.strip()[:300]))
    p = put_bundle(tool, db, work, dict(first, tlog_proof="a\0b"))
    check(p.returncode == 1 and "tlog_proof" in p.stderr and code_of(p.stderr) == codes["SPROV_ERR_INVALID_ARG"],
          "%s: a tlog proof with a NUL byte is refused naming it: %s" % (db.name, p.stderr.strip()[:300]))
    check_bundle(tool, db, sha, blob, want, "bundle after refused puts")
    blob2 = rng.randbytes(3000)
    sha2 = hashlib.sha256(blob2).hexdigest()
    big = {"sha256": sha2, "os": "windows", "blob_hex": blob2.hex(), "index_json": "", "signer": "",
           "rekor_tile_ref": "", "dsse_envelope": "", "tlog_proof": "p" * MIB, "checkpoint": ""}
    p = put_bundle(tool, db, work, big)
    check(p.returncode == 0, "%s: a tlog proof of exactly 1 MiB is accepted: %s" % (db.name, p.stderr.strip()[:300]))
    n = db.query("SELECT length(tlog_proof) AS n FROM symbol_bundles WHERE sha256 = '%s'" % sha2)
    check(n == [{"n": MIB}], "%s: the 1 MiB tlog proof is stored whole: %r" % (db.name, n))
    g = get_bundle(tool, db, sha2)
    check(g is not None and g["tlog_proof"] == "p" * MIB and g["index_json"] == "",
          "%s: the 1 MiB tlog proof reads back" % db.name)
    # a blob that does not hash to the name: refused, nothing stored under that name
    sha3 = hashlib.sha256(blob2 + b"x").hexdigest()
    p = put_bundle(tool, db, work, dict(big, sha256=sha3, tlog_proof=""))
    check(p.returncode == 1 and sha3 in p.stderr and code_of(p.stderr) == codes["SPROV_ERR_DIGEST_MISMATCH"],
          "%s: a bundle whose bytes do not hash to its name is refused naming it: %s" % (db.name, p.stderr.strip()[:300]))
    check(bundle_row(db, sha3) is None, "%s: no row for the refused bundle" % db.name)
    # list_symbol_bundles: every row, ordered by sha256 (Python's sort of what the CLI sees)
    rows = db.query("SELECT sha256, CAST(index_json AS TEXT) AS idx FROM symbol_bundles")
    want_list = sorted(rows, key=lambda r: r["sha256"])
    p = run([tool, "list-bundles", db.url], check_rc=False)
    if check(p.returncode == 0, "%s: list_symbol_bundles: %s" % (db.name, p.stderr.strip())):
        got = json.loads(p.stdout)
        check([g["sha256"] for g in got] == [r["sha256"] for r in want_list] and len(got) >= 3,
              "%s: list_symbol_bundles: every bundle once, by sha256: %s" % (db.name, [g["sha256"][:8] for g in got]))
        check(all(same_json_text(g["index_json"], r["idx"]) for g, r in zip(got, want_list)),
              "%s: list_symbol_bundles index_json" % db.name)


def suite_replace(tool, db, work, exp, codes):
    rng = random.Random(3002)
    traces = exp["traces"]
    t = traces[7]
    tid = t["id"]
    total = db.query("SELECT count(*) AS n FROM frames")[0]["n"]
    others = dict((x["id"], len(x["frames"])) for x in traces if x["id"] != tid)
    new_threads = gen_threads(rng, len(t["threads"]) + 2, len(t["frames"]) + 37)
    new_bundle = rhex(rng, 32)
    doc = {"symbol_bundle_sha256": new_bundle, "threads": new_threads}
    p = run([tool, "replace", db.url, tid, write_json(work, db.name + "-replace.json", doc)], check_rc=False)
    if not check(p.returncode == 0, "%s: replace_frames: %s" % (db.name, p.stderr.strip())):
        return
    check_trace_rows(db, tid, new_threads, "after replace_frames (the old rows gone)")
    n = len(flat_frames(new_threads))
    check(db.query("SELECT count(*) AS n FROM frames")[0]["n"] == total - len(t["frames"]) + n,
          "%s: replace_frames: frames of the other traces untouched (total count)" % db.name)
    counts = dict((r["trace_id"], r["n"]) for r in db.query(
        "SELECT CAST(trace_id AS TEXT) AS trace_id, count(*) AS n FROM frames GROUP BY trace_id"))
    check(all(counts.get(i, 0) == c for i, c in others.items()), "%s: replace_frames: other traces' frame counts" % db.name)
    row = db.query("SELECT symbol_bundle_sha256, data_sha256, dsse_ref, platform, arch, build_id FROM traces"
                   " WHERE CAST(trace_id AS TEXT) = '%s'" % tid)
    check(row == [{"symbol_bundle_sha256": new_bundle, "data_sha256": t["data_sha256"], "dsse_ref": t["dsse_ref"],
                   "platform": t["platform"], "arch": t["arch"], "build_id": t["build_id"]}],
          "%s: replace_frames sets symbol_bundle_sha256 and keeps the trace's other columns: %r" % (db.name, row))
    d = dumped(tool, db, tid)
    if d:
        check(d["frames"] == flat_frames(new_threads) and
              d["threads"] == [{"tid": x["tid"], "name": x["name"]} for x in new_threads] and
              d["symbol_bundle_sha256"] == new_bundle and d["data_sha256"] == t["data_sha256"] and
              d["captured_at"] == t["captured_at"], "%s: get_trace after replace_frames = the new frames" % db.name)
    # refusals change nothing
    bad_frame = json.loads(json.dumps(new_threads))
    bad_frame[-1]["frames"].append(dict(flat_frames(new_threads)[0], bundle_sha256="XYZ"))
    bad_frame[-1]["frames"][-1].pop("thread_index")
    absent = str(uuid.uuid4())
    many = [{"tid": "1", "name": "", "frames": []}] * 65537
    for what, target, d, needles, code in [
            ("a frame with bundle_sha256 XYZ", tid, {"symbol_bundle_sha256": "", "threads": bad_frame},
             ["frames.bundle_sha256", "XYZ"], "SPROV_ERR_INVALID_ARG"),
            ("symbol bundle ABCD", tid, {"symbol_bundle_sha256": "ABCD", "threads": new_threads}, ["ABCD"],
             "SPROV_ERR_INVALID_ARG"),
            ("65537 threads", tid, {"symbol_bundle_sha256": "", "threads": many}, ["threads", "65537"],
             "SPROV_ERR_INVALID_ARG"),
            ("an absent trace", absent, {"symbol_bundle_sha256": "", "threads": new_threads}, [absent],
             "SPROV_ERR_NOT_FOUND"),
            ("a trace id that is not a UUID", "not-a-trace", {"symbol_bundle_sha256": "", "threads": new_threads},
             ["not-a-trace"], "SPROV_ERR_INVALID_ARG")]:
        p = run([tool, "replace", db.url, target, write_json(work, db.name + "-replace-bad.json", d)], check_rc=False)
        check(p.returncode == 1 and all(x in p.stderr for x in needles) and code_of(p.stderr) == codes[code],
              "%s: replace_frames of %s refused (%s) naming %s: %s" % (db.name, what, code, needles, p.stderr.strip()[:300]))
    check_trace_rows(db, tid, new_threads, "after refused replace_frames (unchanged)")
    check(db.query("SELECT count(*) AS n FROM frames WHERE CAST(trace_id AS TEXT) = '%s'" % absent)[0]["n"] == 0 and
          db.query("SELECT count(*) AS n FROM traces WHERE CAST(trace_id AS TEXT) = '%s'" % absent)[0]["n"] == 0,
          "%s: replace_frames of an absent trace wrote nothing" % db.name)
    check(db.query("SELECT count(*) AS n FROM frames")[0]["n"] == total - len(t["frames"]) + n,
          "%s: refused replace_frames: total frame count unchanged" % db.name)
    # no threads and no bundle: the trace keeps its row, with no frames and an empty bundle
    p = run([tool, "replace", db.url, tid, write_json(work, db.name + "-replace.json",
                                                      {"symbol_bundle_sha256": "", "threads": []})], check_rc=False)
    check(p.returncode == 0, "%s: replace_frames with no threads: %s" % (db.name, p.stderr.strip()))
    check_trace_rows(db, tid, [], "after replace_frames with no threads")
    check(db.query("SELECT symbol_bundle_sha256 AS b FROM traces WHERE CAST(trace_id AS TEXT) = '%s'" % tid)
          in ([{"b": ""}], [{"b": None}]), "%s: replace_frames with an empty bundle clears it" % db.name)
    d = dumped(tool, db, tid)
    check(d is not None and d["threads"] == [] and d["frames"] == [] and d["symbol_bundle_sha256"] == "",
          "%s: get_trace of a trace with no frames" % db.name)
    # and a resolution again, one thread fewer than before
    again = gen_threads(rng, len(t["threads"]) + 1, len(t["frames"]) + 5)
    p = run([tool, "replace", db.url, tid, write_json(work, db.name + "-replace.json",
                                                      {"symbol_bundle_sha256": new_bundle, "threads": again})],
            check_rc=False)
    check(p.returncode == 0, "%s: replace_frames after an empty one: %s" % (db.name, p.stderr.strip()))
    check_trace_rows(db, tid, again, "after a second replace_frames")
    # readers during replacements: each get_trace is one resolution or the other, whole
    fid = traces[20]["id"]
    p = run([tool, "flip", db.url, fid, "77", "1"], check_rc=False)
    if not check(p.returncode == 0, "%s: replace_frames (flip 1): %s" % (db.name, p.stderr.strip())):
        return
    flip = subprocess.Popen([tool, "flip", db.url, fid, "77", "150"], stderr=subprocess.PIPE, text=True)
    watch = subprocess.Popen([tool, "watch", db.url, fid, "77", "300"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    werr = watch.communicate(timeout=300)
    ferr = flip.communicate(timeout=300)[1]
    check(flip.returncode == 0, "%s: 150 replace_frames while reading: %s" % (db.name, ferr.strip()))
    check(watch.returncode == 0, "%s: 300 get_trace during replace_frames, each one resolution whole: %s"
          % (db.name, werr[1].strip()))
    print("%s: %s" % (db.name, werr[0].strip()), flush=True)


def suite_replays(tool, db, work, exp, codes):
    rng = random.Random(3003)
    with_replays = set(r["trace_id"] for r in exp["replays"])
    free = [t["id"] for t in exp["traces"] if t["id"] not in with_replays]
    tid, other = free[0], free[1]
    # times out of insertion order: a tie broken by replay_id, microsecond steps, a year boundary
    times = ["2026-05-01T10:00:00.000002Z", "2026-05-01T10:00:00.000001Z", "2025-12-31T23:59:59.999999Z",
             "2026-05-01T09:59:59.999999Z", "2026-05-01T10:00:00.000002Z", "2027-01-01T00:00:00.000000Z",
             "2026-05-01T10:00:00.000002Z"]
    mine = []
    for i, st in enumerate(times):
        mine.append({"replay_id": str(uuid.uuid4()), "trace_id": tid,
                     "seed": [-(1 << 63), (1 << 63) - 1, 0][i] if i < 3 else rng.randrange(-1000, 1000),
                     "started_at": st, "finished_at": "2027-06-0%dT00:00:0%d.%06dZ" % (i + 1, i, rng.randrange(10 ** 6)),
                     "replay_success_ratio": [0.0, 1.0][i] if i < 2 else rng.random(),
                     "symbol_coverage_pct": [100.0, 0.0][i] if i < 2 else rng.uniform(0, 100),
                     "verify_time_ms": rng.randrange(0, (1 << 31) - 1), "verifier_version": rtext(rng, "stackprov "),
                     "notes_json": json.dumps({"seeds": [i, i + 1], "why": "ünï\"cødé"}) if i % 2 else ""})
    theirs = [dict(mine[0], replay_id=str(uuid.uuid4()), trace_id=other, started_at="2020-01-01T00:00:00.000000Z")]
    p = run([tool, "put-replays", db.url, write_json(work, db.name + "-replays.json", theirs + mine)], check_rc=False)
    if not check(p.returncode == 0, "%s: put_replay x %d: %s" % (db.name, len(mine) + 1, p.stderr.strip())):
        return
    # the rows as the CLI reads them
    rows = dict((r["replay_id"], r) for r in db.query(
        "SELECT CAST(replay_id AS TEXT) AS replay_id, seed, %s AS started_at, %s AS finished_at, replay_success_ratio,"
        " symbol_coverage_pct, verify_time_ms, verifier_version, CAST(notes AS TEXT) AS notes FROM replays"
        " WHERE CAST(trace_id AS TEXT) = '%s'" % (db.time("started_at"), db.time("finished_at"), tid)))
    check(sorted(rows) == sorted(r["replay_id"] for r in mine), "%s: replays rows of the trace" % db.name)
    for r in mine:
        g = rows.get(r["replay_id"], {})
        for k in ["seed", "started_at", "finished_at", "replay_success_ratio", "symbol_coverage_pct", "verify_time_ms",
                  "verifier_version"]:
            check(g.get(k) == r[k], "%s: replay %s column %s: %r != %r" % (db.name, r["replay_id"], k, g.get(k), r[k]))
        check(same_json_text(g.get("notes"), r["notes_json"]), "%s: replay %s notes" % (db.name, r["replay_id"]))
    # list_replays: Python's order of (started_at, replay_id): canonical times sort as text
    want = sorted(mine, key=lambda r: (r["started_at"], r["replay_id"]))
    p = run([tool, "list-replays", db.url, tid], check_rc=False)
    if check(p.returncode == 0, "%s: list_replays: %s" % (db.name, p.stderr.strip())):
        got = json.loads(p.stdout)
        check([g["replay_id"] for g in got] == [w["replay_id"] for w in want],
              "%s: list_replays ordered by started_at, then replay_id: %s" % (db.name, [g["started_at"] for g in got]))
        for g, w in zip(got, want):
            same = all(g[k] == w[k] for k in w if k != "notes_json") and same_json_text(g["notes_json"], w["notes_json"])
            check(same, "%s: list_replays values of %s: %r != %r" % (db.name, w["replay_id"], g, w))
    p = run([tool, "list-replays", db.url, other], check_rc=False)
    check(p.returncode == 0 and [g["replay_id"] for g in json.loads(p.stdout or "[]")] == [theirs[0]["replay_id"]],
          "%s: list_replays of another trace: only its own: %s" % (db.name, p.stderr.strip()))
    p = run([tool, "list-replays", db.url, str(uuid.uuid4())], check_rc=False)
    check(p.returncode == 0 and json.loads(p.stdout or "null") == [], "%s: list_replays of an unknown trace: []" % db.name)
    p = run([tool, "list-replays", db.url, "nope'--"], check_rc=False)
    check(p.returncode == 1 and "nope'--" in p.stderr and code_of(p.stderr) == codes["SPROV_ERR_INVALID_ARG"],
          "%s: list_replays of a non-UUID refused naming it: %s" % (db.name, p.stderr.strip()))


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


def check_v3_schema(db):
    check(sorted(r["version"] for r in db.query("SELECT version FROM schema_version")) == list(range(1, SCHEMA_VERSION + 1)),
          "%s: schema_version rows 1..%d (CLI)" % (db.name, SCHEMA_VERSION))
    cols = db.columns("symbol_bundles")
    check(all(c in cols for c in ["dsse_envelope", "tlog_proof", "checkpoint"]),
          "%s: symbol_bundles columns after migration 3: %s" % (db.name, cols))
    check("module_id_kind" in db.columns("frames"),
          "%s: frames.module_id_kind after migration 4: %s" % (db.name, db.columns("frames")))
    check("trace_id" in db.index_first_columns("replays"),
          "%s: an index on replays led by trace_id: %s" % (db.name, db.index_first_columns("replays")))


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
        check(p.returncode == 0 and p.stdout.strip() == str(SCHEMA_VERSION),
              "%s: open migrates version 1 to version %d (%s)" % (db.name, SCHEMA_VERSION, p.stderr.strip()))
        check_v3_schema(db)
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
        check(p.returncode == 0 and p.stdout.strip() == str(SCHEMA_VERSION), "%s: reopening is a no-op" % db.name)
        check(len(db.query("SELECT version FROM schema_version")) == SCHEMA_VERSION,
              "%s: reopening adds no schema_version row" % db.name)
    db_newer.script("CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);"
                    "INSERT INTO schema_version VALUES(99, 'future');")
    p = run([tool, "open", db_newer.url], check_rc=False)
    check(p.returncode == 1 and re.search(r"\b99\b", p.stderr) and "newer" in p.stderr and
          re.search(r"\b%d\b" % SCHEMA_VERSION, p.stderr),
          "%s: a schema version 99 database is refused naming 99 and %d: %s"
          % (db_newer.name, SCHEMA_VERSION, p.stderr.strip()))
    check(db_newer.query("SELECT version FROM schema_version") == [{"version": 99}] and
          db_newer.columns("traces") == [],
          "%s: the refused database is left as it was" % db_newer.name)


def suite_migration_v2(tool, db, work):
    """A version-2 database made here (the seed's SQL and the version-2 tables, with rows) is
    migrated to version 3 on open; its rows read back; a migrated bundle can be signed and a
    migrated trace re-resolved."""
    raw = b"version-2 snapshot bytes\0\1\2" * 100
    gz = gzip.compress(raw, mtime=0)
    dsha = hashlib.sha256(gz).hexdigest()
    bblob = b"a version-2 bundle" * 50
    bsha = hashlib.sha256(bblob).hexdigest()
    tid = "0b5e2c1a-7d3f-4e21-8a6b-fedcba987654"
    r1, r2 = "7c0e7e0e-0000-4000-8000-000000000001", "7c0e7e0e-0000-4000-8000-000000000002"
    chain = '[{"column":2,"file":"h.h","function":"inl","line":7}]'
    db.script(SEED_SQL + V2_SQL +
              "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);"
              "INSERT INTO schema_version VALUES(1, 'then');"
              "INSERT INTO schema_version VALUES(2, 'later');"
              "INSERT INTO trace_data VALUES('%s', %d, %s);" % (dsha, len(raw), db.blob(gz)) +
              "INSERT INTO traces(trace_id, platform, captured_at, build_id, symbol_bundle_sha256, dsse_ref, arch,"
              " data_sha256) VALUES('%s', 'linux', '2026-02-03T04:05:06.789012Z', 'beef', '%s', 'dsse:v2', 'arm64',"
              " '%s');" % (tid, bsha, dsha) +
              "INSERT INTO threads VALUES('%s', 0, 4242, 'main');"
              "INSERT INTO threads VALUES('%s', 1, -1, 'worker');" % (tid, tid) +
              "INSERT INTO frames(trace_id, frame_index, ip, module_path, module_build_id, resolved_symbol,"
              " symbol_offset, resolver, thread_index, module_offset, file, line, column_no, inline_chain, source,"
              " bundle_sha256, unwind_method) VALUES"
              " ('%s', 0, 4096, '/bin/a', 'beef', 'main', 16, 'bundle', 0, 4096, 'a.c', 12, 3, '[]', 'sha256:%s', '%s',"
              " 'cfi'),"
              " ('%s', 1, 8192, '/bin/a', 'beef', 'helper', 0, 'dwarf', 0, 8192, 'b.c', 40, 1, '%s', '/bin/a', '', 'fp'),"
              " ('%s', 2, -1, '', '', '', 0, '', 1, -1, '', 0, 0, '[]', '', '', 'scan');"
              % (tid, bsha, bsha, tid, chain, tid) +
              "INSERT INTO symbol_bundles VALUES('%s', 'linux', %s, '{\"v\":2}', 'old-key', 'tile:1/2');"
              % (bsha, db.blob(bblob)) +
              "INSERT INTO replays(replay_id, trace_id, seed, started_at, finished_at, replay_success_ratio,"
              " verify_time_ms, verifier_version, notes, symbol_coverage_pct) VALUES"
              " ('%s', '%s', 7, '2026-02-03T05:00:00.000002Z', '2026-02-03T05:00:01.000000Z', 0.5, 100, 'v2', NULL,"
              " 50.0),"
              " ('%s', '%s', 8, '2026-02-03T05:00:00.000001Z', '2026-02-03T05:00:02.000000Z', 1.0, 200, 'v2',"
              " '{\"a\":1}', 100.0);" % (r1, tid, r2, tid))
    p = run([tool, "open", db.url], check_rc=False)
    if not check(p.returncode == 0 and p.stdout.strip() == str(SCHEMA_VERSION),
                 "%s: open migrates version 2 to version %d (%s)" % (db.name, SCHEMA_VERSION, p.stderr.strip())):
        return
    check_v3_schema(db)
    # module_id_kind "": rows written before the kind was stored read as ELF build-ids (migration 4).
    frame = {"module_path": "", "module_build_id": "", "symbol": "", "symbol_offset": "0", "file": "", "line": 0,
             "column": 0, "inline_chain": [], "resolver": "", "source": "", "bundle_sha256": "", "module_id_kind": ""}
    u64max = str((1 << 64) - 1)
    want = {"id": tid, "platform": "linux", "arch": "arm64", "captured_at": "2026-02-03T04:05:06.789012Z",
            "build_id": "beef", "data_sha256": dsha, "data_size": len(raw), "symbol_bundle_sha256": bsha,
            "dsse_ref": "dsse:v2", "threads": [{"tid": "4242", "name": "main"}, {"tid": u64max, "name": "worker"}],
            "frames": [dict(frame, thread_index=0, ip="4096", module_path="/bin/a", module_build_id="beef",
                            module_offset="4096", symbol="main", symbol_offset="16", file="a.c", line=12, column=3,
                            resolver="bundle", source="sha256:" + bsha, bundle_sha256=bsha, unwind_method="cfi"),
                       dict(frame, thread_index=0, ip="8192", module_path="/bin/a", module_build_id="beef",
                            module_offset="8192", symbol="helper", file="b.c", line=40, column=1,
                            inline_chain=json.loads(chain), resolver="dwarf", source="/bin/a", unwind_method="fp"),
                       dict(frame, thread_index=1, ip=u64max, module_offset=u64max, unwind_method="scan")]}
    d = dumped(tool, db, tid)
    check(d == want, "%s: the version-2 trace as written by SQL reads back after migration: %r" % (db.name, d))
    g = get_bundle(tool, db, bsha)
    check(g is not None and g["blob_hex"] == bblob.hex() and g["os"] == "linux" and g["signer"] == "old-key" and
          g["rekor_tile_ref"] == "tile:1/2" and same_json_text(g["index_json"], '{"v":2}') and
          g["dsse_envelope"] == g["tlog_proof"] == g["checkpoint"] == "",
          "%s: the version-2 bundle reads back after migration: %r" % (db.name, g and dict(g, blob_hex="...")))
    p = run([tool, "list-replays", db.url, tid], check_rc=False)
    check(p.returncode == 0 and [(r["replay_id"], r["seed"], r["started_at"], r["notes_json"] != "")
                                 for r in json.loads(p.stdout or "[]")] ==
          [(r2, 8, "2026-02-03T05:00:00.000001Z", True), (r1, 7, "2026-02-03T05:00:00.000002Z", False)],
          "%s: the version-2 replays, by started_at: %s %s" % (db.name, p.stdout.strip()[:300], p.stderr.strip()))
    # sign the migrated bundle: the new columns are set, its signer is kept (empty in the new row)
    p = put_bundle(tool, db, work, {"sha256": bsha, "os": "linux", "blob_hex": bblob.hex(), "index_json": "",
                                    "signer": "", "rekor_tile_ref": "tile:9/9", "dsse_envelope": '{"payload":"e30="}',
                                    "tlog_proof": "tlog-proof@v1\n", "checkpoint": "cp\n"})
    check(p.returncode == 0, "%s: signing a migrated bundle: %s" % (db.name, p.stderr.strip()))
    check_bundle(tool, db, bsha, bblob, {"os": "linux", "index_json": '{"v":2}', "signer": "old-key",
                                         "rekor_tile_ref": "tile:9/9", "dsse_envelope": '{"payload":"e30="}',
                                         "tlog_proof": "tlog-proof@v1\n", "checkpoint": "cp\n"},
                 "the migrated bundle signed")
    # re-resolve the migrated trace
    threads = gen_threads(random.Random(3004), 3, 25)
    p = run([tool, "replace", db.url, tid, write_json(work, db.name + "-v2-replace.json",
                                                      {"symbol_bundle_sha256": "", "threads": threads})],
            check_rc=False)
    check(p.returncode == 0, "%s: replace_frames of a migrated trace: %s" % (db.name, p.stderr.strip()))
    check_trace_rows(db, tid, threads, "a migrated trace after replace_frames")
    p = run([tool, "open", db.url], check_rc=False)
    check(p.returncode == 0 and p.stdout.strip() == str(SCHEMA_VERSION), "%s: reopening the migrated database" % db.name)


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
    codes = error_codes()
    suite_urls(a.tool, work)
    server = None
    try:
        server = PgServer(work)
        print("postgresql started on 127.0.0.1:%d in %.1f s" % (server.port, time.monotonic() - t0), flush=True)
        # every database of the suite at once, over one connection
        pg_urls = server.create_databases(["rt", "v1", "seedonly", "newer", "v2", "conc", "kill"])
        backends = [
            (lambda n: SqliteDb(os.path.join(work, n + ".db"))),
            (lambda n: PgDb(pg_urls[n])),
        ]
        for make in backends:
            db = make("rt")
            out = suite_roundtrip(a.tool, db, work)
            if out and db.name == "sqlite":
                suite_parser(a.tool, out, work)
            if out:
                exp = json.load(open(os.path.join(out, "expected.json")))
                suite_bundles(a.tool, db, work, codes)
                suite_replace(a.tool, db, work, exp, codes)
                suite_replays(a.tool, db, work, exp, codes)
            suite_migrations(a.tool, make("v1"), make("seedonly"), make("newer"))
            suite_migration_v2(a.tool, make("v2"), work)
            suite_concurrent(a.tool, make("conc"), work)
            suite_kill(a.tool, make("kill"), work, a.kills)
            print("%s suite done at %.1f s" % (db.name, time.monotonic() - t0), flush=True)
    except Exception as e:  # a crashed suite is a failed test, with its reason
        check(False, "suite aborted: %r" % e)
    finally:
        close_all()
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
