#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Nothing lost with real capturing processes, on SQLite and on a PostgreSQL this script starts.

Four fixtures (fixture_pipeline.c, built here with gcc -g -O2: 4 parked threads each) run for the
whole test (a process has one tracer at a time, so each concurrent capture takes its own). Per store:
  1. 4 `stackprov trace-capture --pid` processes at once, one per fixture: each prints an id, all 4
     are stored.
  2. 50 rounds: a `trace-capture --pid` is killed with SIGKILL after a random delay in
     [0, 1.2 x the measured duration of one capture]. An id it printed before dying must be in
     the store.
  3. Every trace in the store (read with sqlite3 / psql, not with stackprov) is whole: 4 threads,
     its frame rows match `trace-show --json` frame for frame, every thread has frames, the
     captured data's gzip hashes (Python's hashlib) to its address and inflates (Python's gzip)
     to the recorded size, and `trace-resolve` can read it back.
  4. The fixture is never left stopped by a killed tracer (/proc/PID/task/*/stat state is not
     't' or 'T' a moment after the kills), and a new capture of it succeeds.
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from pgserver import PG_TOOLS, PSQL, PgServer  # noqa: E402

FAILURES = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)
    return ok


def must(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p.stdout


class Sqlite:
    def __init__(self, path):
        self.url = "sqlite:" + path
        self.path = path

    def rows(self, sql):
        out = must(["sqlite3", "-json", self.path, sql])
        return json.loads(out) if out.strip() else []


class Postgres:
    def __init__(self, url):
        self.url = url

    def rows(self, sql):
        out = must([PSQL, self.url, "-XAtqc", "SELECT coalesce(json_agg(q), '[]') FROM (%s) q" % sql])
        return json.loads(out)


def thread_states(pid):
    states = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            states[int(tid)] = f.read().rsplit(")", 1)[1].split()[0]
    return states


def run_store(name, db, stackprov, fixture_pids):
    print("== %s" % name, flush=True)
    fixture_pid = fixture_pids[0]
    cap = [stackprov, "trace-capture", "--store", db.url, "--pid", str(fixture_pid)]
    # 1. four at once
    procs = [subprocess.Popen(cap[:-1] + [str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in fixture_pids]
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0, "%s: concurrent trace-capture exit 0 (%d: %s)" % (name, p.returncode, err.strip()[-300:]))
        ids.append(out.strip())
    check(len(set(ids)) == 4, "%s: 4 concurrent captures give 4 distinct ids %s" % (name, ids))
    # 2. kill -9 at random points
    t0 = time.time()
    must(cap)
    one = time.time() - t0
    rng = random.Random(1234)
    printed, killed_early = [], 0
    for i in range(50):
        p = subprocess.Popen(cap, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(rng.uniform(0, 1.2 * one))
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate(timeout=60)
        if out.strip():
            printed.append(out.strip())
        else:
            killed_early += 1
    print("%s: one capture takes %.2f s; of 50 killed captures %d had printed an id, %d had not"
          % (name, one, len(printed), killed_early), flush=True)
    check(killed_early > 0, "%s: some captures were killed before they finished (%d)" % (name, killed_early))
    # 3. every stored trace is whole
    traces = {r["trace_id"]: r for r in db.rows("SELECT trace_id, data_sha256 FROM traces")}
    for i in ids + printed:
        check(i in traces, "%s: trace %s reported stored is in the store" % (name, i))
    # Every trace's rows in one query per table (a CLI process each), split here by trace.
    threads_of, frames_of, data_of = {}, {}, {}
    for r in db.rows("SELECT trace_id, thread_index, tid FROM threads"):
        threads_of.setdefault(r["trace_id"], []).append(r)
    for r in db.rows("SELECT trace_id, thread_index, frame_index, ip FROM frames ORDER BY trace_id, frame_index"):
        frames_of.setdefault(r["trace_id"], []).append(r)
    for r in db.rows("SELECT sha256, raw_size, %s AS gz FROM trace_data"
                     % ("hex(gzip)" if isinstance(db, Sqlite) else "encode(gzip, 'hex')")):
        data_of.setdefault(r["sha256"], []).append(r)
    bad = []
    for tid, row in traces.items():
        threads = threads_of.get(tid, [])
        frames = frames_of.get(tid, [])
        data = data_of.get(row["data_sha256"], [])
        show = subprocess.run([stackprov, "trace-show", tid, "--store", db.url, "--json"], capture_output=True, text=True)
        if show.returncode != 0:
            bad.append("%s: trace-show exit %d" % (tid, show.returncode))
            continue
        ev = json.loads(show.stdout.splitlines()[0])
        per_thread = {}
        for f in frames:
            per_thread[f["thread_index"]] = per_thread.get(f["thread_index"], 0) + 1
        if len(threads) != 4 or len(per_thread) != 4:
            bad.append("%s: %d threads, %d with frames (fixture has 4)" % (tid, len(threads), len(per_thread)))
        if [int(f["ip"], 16) for f in ev["frames"]] != [f["ip"] % (1 << 64) for f in frames]:
            bad.append("%s: frame rows differ from trace-show's frames" % tid)
        if len(data) != 1:
            bad.append("%s: captured data %s missing" % (tid, row["data_sha256"]))
            continue
        gz = bytes.fromhex(data[0]["gz"])
        if hashlib.sha256(gz).hexdigest() != row["data_sha256"] or len(gzip.decompress(gz)) != data[0]["raw_size"]:
            bad.append("%s: captured data does not hash to its address or inflate to its size" % tid)
    check(not bad, "%s: all %d stored traces are whole (%s)" % (name, len(traces), "; ".join(bad[:5])))
    some = sorted(traces)[0]
    r = subprocess.run([stackprov, "trace-resolve", "--trace", some, "--store", db.url], capture_output=True, text=True)
    check(r.returncode == 0, "%s: trace-resolve reads a trace back (%s)" % (name, r.stderr.strip()[-300:]))
    # 4. the target is running again
    time.sleep(0.3)
    states = thread_states(fixture_pid)
    check(all(s not in ("t", "T") for s in states.values()), "%s: no fixture thread left stopped: %s" % (name, states))
    again = subprocess.run(cap, capture_output=True, text=True)
    check(again.returncode == 0, "%s: the fixture can be captured again after the kills (%s)" % (name, again.stderr.strip()[-300:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    for tool in ["gcc", "sqlite3"] + PG_TOOLS:
        if not shutil.which(tool) and not os.path.exists(tool):
            print("FAIL: required tool '%s' not found (make deps installs it)" % tool)
            return 1
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = tempfile.mkdtemp(dir=a.work)
    fixture = os.path.join(work, "fixture")
    must(["gcc", "-g", "-O2", "-pthread", os.path.join(HERE, "fixture_pipeline.c"), "-o", fixture, "-ldl"])
    tidfiles = [os.path.join(work, "tids%d" % i) for i in range(4)]
    fxs = [subprocess.Popen([fixture, "600000", t]) for t in tidfiles]
    server = None
    try:
        deadline = time.time() + 20
        while not all(os.path.exists(t) for t in tidfiles) and time.time() < deadline:
            time.sleep(0.05)
        pids = [fx.pid for fx in fxs]
        run_store("sqlite", Sqlite(os.path.join(work, "traces.db")), a.stackprov, pids)
        server = PgServer(a.work)
        run_store("postgresql", Postgres(server.create_database("kill")), a.stackprov, pids)
    finally:
        for fx in fxs:
            fx.kill()
            fx.wait()
        if server:
            server.stop()
    if FAILURES:
        print("%d FAILURES:\n  %s" % (len(FAILURES), "\n  ".join(FAILURES)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
