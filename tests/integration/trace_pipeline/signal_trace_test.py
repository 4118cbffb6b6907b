#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# A trace of a process whose main thread sits in a signal handler, resolved offline from its bundle alone: libc's __restore_rt named as eu-stack names it, 100% coverage.
"""Usage: signal_trace_test.py --stackprov PATH --work DIR

fixture_signal.c, built here (gcc -g -O2, dynamically linked against the system's libc, whose
separate debug file is installed: libc.so.6 is stripped, so only the debug file's .symtab has the
local symbol __restore_rt), parks its main thread inside a SIGUSR1 handler and a worker in
nanosleep. While it is parked:

 1. eu-stack -p PID -m (the oracle): the main thread's frames, one of them named __restore_rt in
    libc.so.6 (the sigreturn trampoline);
 2. `trace-capture --pid PID --store sqlite:DB --bundle --bundle-store DIR`; the process is killed
    and the fixture binary deleted;
 3. `trace-resolve --trace ID --offline --json` (nothing but the trace and its bundle: --offline
    opens no module file), then `trace-show ID --json`:
    - the main thread's frames have eu-stack's pcs, in eu-stack's order;
    - the frame at eu-stack's __restore_rt pc is named "__restore_rt" by the bundle (resolver
      bundle+symtab: a symbol-table range of libc's bundle module);
    - every frame has a function, the report's symbol_coverage_pct is 100 and its "named" count
      equals the frame count (coverage recomputed here from the frames, too).
A missing tool fails the test naming it. Exit 0 on success, 1 on any failure.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "lib"))
from peers import parse_eu_stack  # noqa: E402

FAILS = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        FAILS.append(msg)
    return ok


def run(cmd, env=None, timeout=180):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    cli = os.path.abspath(a.stackprov)
    missing = [t for t in ("gcc", "eu-stack") if shutil.which(t) is None]
    if not os.access(cli, os.X_OK):
        missing.append(cli)
    if missing:
        print("FAIL: missing tools: %s (make deps installs them)" % ", ".join(missing))
        return 1
    w = os.path.abspath(a.work)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    # A private environment: no user store, bundle store or debuginfod.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKPROV_", "DEBUGINFOD_", "XDG_"))}
    env.update(HOME=os.path.join(w, "home"), XDG_DATA_HOME=os.path.join(w, "home", "data"),
               XDG_CACHE_HOME=os.path.join(w, "home", "cache"), TMPDIR=os.path.join(w, "tmp"))
    for k in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "TMPDIR"):
        os.makedirs(env[k], exist_ok=True)

    fixture = os.path.join(w, "fixture_signal")
    p = run(["gcc", "-g", "-O2", "-pthread", "-o", fixture, os.path.join(HERE, "fixture_signal.c")])
    if not check(p.returncode == 0, "gcc -g -O2 fixture_signal.c (%s)" % p.stderr.strip()[-800:]):
        return 1
    ready = os.path.join(w, "ready")
    db = "sqlite:" + os.path.join(w, "traces.db")
    bstore = os.path.join(w, "bundles")
    proc = subprocess.Popen([fixture, ready], env=env)
    try:
        t = time.monotonic()
        while not (os.path.exists(ready) and open(ready).read().endswith("\n")):
            if proc.poll() is not None or time.monotonic() - t > 20:
                check(False, "the fixture wrote %s from its handler" % ready)
                return 1
            time.sleep(0.01)
        time.sleep(0.3)  # both threads were about to block
        eu = run(["eu-stack", "-p", proc.pid, "-m", "-n", "256"], env=env)
        cap = run([cli, "trace-capture", "--pid", proc.pid, "--store", db, "--bundle", "--bundle-store", bstore],
                  env=env)
    finally:
        proc.kill()
        proc.wait()
    os.unlink(fixture)  # the offline resolve has the trace and its bundle only

    # 1. the oracle: eu-stack's frames of the main thread, through __restore_rt.
    eu_threads = parse_eu_stack(eu.stdout)
    main_eu = eu_threads.get(proc.pid, [])
    tramp = [(pc, name, mod) for pc, name, mod in main_eu if name == "__restore_rt"]
    if not check(len(tramp) == 1 and os.path.basename(tramp[0][2]).startswith("libc.so"),
                 "eu-stack -p names one frame of the main thread __restore_rt in libc.so.6: %r (exit %d, %s)"
                 % (main_eu, eu.returncode, eu.stderr.strip()[-400:])):
        return 1
    tramp_pc = tramp[0][0]

    # 2. the capture.
    tid = cap.stdout.strip()
    if not check(cap.returncode == 0 and len(tid) == 36, "trace-capture --pid --bundle: exit 0 and a trace id "
                 "(exit %d: %s %s)" % (cap.returncode, cap.stdout.strip(), cap.stderr.strip()[-800:])):
        return 1

    # 3. offline resolve from the bundle alone.
    p = run([cli, "trace-resolve", "--trace", tid, "--store", db, "--offline", "--json"], env=env)
    check(p.returncode == 0, "trace-resolve --offline --json: exit 0 (%s)" % p.stderr.strip()[-800:])
    rr = json.loads(p.stdout) if p.returncode == 0 else {}
    p = run([cli, "trace-show", tid, "--store", db, "--json"], env=env)
    if not check(p.returncode == 0, "trace-show --json: exit 0 (%s)" % p.stderr.strip()[-800:]):
        return 1
    ev = json.loads(p.stdout.splitlines()[0])
    frames = ev["frames"]
    # eu-stack shows the frames on the stack: the tail-call frames a capture inferred from DWARF call
    # sites ("unwind":"tail_call+inferred", libc's when its debug file is installed) are left out.
    main_frames = [f for f in frames if f.get("tid") == proc.pid and not f.get("unwind", "").endswith("+inferred")]
    check([int(f["ip"], 16) for f in main_frames] == [pc for pc, _, _ in main_eu],
          "the main thread's frames have eu-stack's pcs: %s vs eu-stack %s"
          % ([f["ip"] for f in main_frames], [hex(pc) for pc, _, _ in main_eu]))
    at = [f for f in main_frames if int(f["ip"], 16) == tramp_pc]
    check(len(at) == 1 and at[0].get("symbol") == "__restore_rt" and at[0].get("resolver") == "bundle+symtab",
          "the frame at eu-stack's __restore_rt pc %#x is named __restore_rt from the bundle's symbol-table "
          "range (resolver bundle+symtab): %r" % (tramp_pc, at))
    unnamed = [(f.get("tid"), f.get("ip"), f.get("module")) for f in frames if not f.get("symbol")]
    check(not unnamed, "every frame of the trace has a function after the offline resolve (unnamed: %s)" % unnamed)
    check(all(f.get("resolver", "").startswith("bundle") for f in frames),
          "every frame is named from the bundle: %s" % sorted({f.get("resolver") for f in frames}))
    n = len(frames)
    named = sum(1 for f in frames if f.get("symbol"))
    check(n > 0 and rr.get("frames") == n and rr.get("named") == named == n
          and abs(float(rr.get("symbol_coverage_pct", -1)) - 100.0) < 1e-9,
          "trace-resolve --offline reports 100%% coverage, %d of %d frames named: %s" % (named, n, json.dumps(rr)[:400]))
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
