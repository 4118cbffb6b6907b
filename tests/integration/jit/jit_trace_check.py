#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# JIT frames in traces: trace-capture of a process with a perf map, trace-resolve --offline once the map is gone, trace-replay.
"""fixture_jit.c ("block") generates jitOuter -> jitInner -> native_callback into an anonymous executable
mapping and names them in /tmp/perf-PID.map; main calls jitOuter.

1. `trace-capture -p PID --bundle --sign` while native_callback blocks: the stored trace (trace-show --json)
   holds native_callback <- jitInner <- jitOuter <- main in that order (the fixture's call chain); each JIT
   frame is named as the map the fixture wrote names the entry that covers its return address - 1 (the
   map parsed here), resolver "perfmap", source the map's path, unwind method flagged "+jit"; no other
   frame is flagged.
2. The fixture is killed and its map removed; `trace-resolve --offline` (no module file, no map): the
   same function names for every frame, the JIT frames still resolver "perfmap" from the map's path.
3. `trace-replay --seeds 5` with the signing key and the log's trusted root: exit 0, success 1.0, and a
   coverage equal to the share of frames this script counts as covered (a name, and file:line for
   DWARF-class resolvers), the JIT frames among them.
A missing tool (gcc) fails naming it."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHAIN = ["native_callback", "jitInner", "jitOuter", "main"]


def need(tool):
    p = shutil.which(tool)
    if not p:
        sys.exit("missing tool: %s (scripts/install-deps.sh installs it)" % tool)
    return p


def run(cmd, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-800:]))
    return p.stdout


def parse_map(path):
    """perf's reading of a perf map (tools/perf/Documentation/jit-interface.txt): START SIZE NAME, hex."""
    out = []
    with open(path) as f:
        for line in f:
            start, size, name = line.rstrip("\n").split(" ", 2)
            out.append((int(start, 16), int(size, 16), name))
    return out


def entry_for(entries, addr):
    hits = [e for e in entries if e[0] <= addr < e[0] + e[1]]
    return hits[-1] if hits else None  # the later line wins


def frames_of(stackprov, store, tid):
    ev = json.loads(run([stackprov, "trace-show", tid, "--store", store, "--json"]))
    return ev["frames"]


def chain_at(frames, entries):
    """Index of native_callback in native_callback <- jitInner <- jitOuter <- main, the JIT names taken from the map."""
    names = [f["symbol"] for f in frames]
    for i in range(len(names) - 3):
        if names[i] != "native_callback" or names[i + 3] != "main":
            continue
        if all(entry_for(entries, int(frames[i + k]["ip"], 16) - 1) for k in (1, 2)):
            return i
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    sp = a.stackprov
    w = a.work
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    fx = os.path.join(w, "fixture_jit")
    run([need("gcc"), "-O1", "-fno-omit-frame-pointer", "-g", "-o", fx, os.path.join(HERE, "fixture_jit.c")])
    for k in ("signer", "logkey"):
        run([sp, "keygen", "--out", os.path.join(w, k)])
    log = os.path.join(w, "log")
    run([sp, "log", "init", log, "--key", os.path.join(w, "logkey")])
    store = "sqlite:" + os.path.join(w, "traces.db")
    bad = []

    # ---- 1. capture while the map exists
    p = subprocess.Popen([fx, "block"], stdout=subprocess.PIPE, text=True)
    map_path = "/tmp/perf-%d.map" % p.pid
    try:
        if p.stdout.readline().strip() != "READY":
            sys.exit("fixture did not start")
        entries = parse_map(map_path)
        by_name = {e[2]: e for e in entries}
        want = {"jitInner": "LazyCompile:*jitInner /srv/app.js:7", "jitOuter": "LazyCompile:~jitOuter /srv/app.js:3"}
        if sorted(by_name) != sorted(want.values()):
            sys.exit("the fixture's map %s names %s, not %s" % (map_path, sorted(by_name), sorted(want.values())))
        out = run([sp, "trace-capture", "-p", str(p.pid), "--store", store, "--bundle", "--bundle-store",
                   os.path.join(w, "bundles"), "--sign", os.path.join(w, "signer"), "--log", log, "--log-key",
                   os.path.join(w, "logkey")], timeout=180)
        tid = out.strip().splitlines()[-1]
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        if os.path.exists(map_path):
            os.remove(map_path)

    captured = frames_of(sp, store, tid)
    at = chain_at(captured, entries)
    names = [f["symbol"] for f in captured]
    if at is None:
        sys.exit("trace-capture: %s not found in order in %s" % (" <- ".join(CHAIN), names))
    for k, short in ((1, "jitInner"), (2, "jitOuter")):
        f = captured[at + k]
        e = entry_for(entries, int(f["ip"], 16) - 1)
        if f["symbol"] != e[2] or e[2] != want[short]:
            bad.append("capture: frame %d (%s) is named %r, the map names its return address - 1 %r" %
                       (at + k, short, f["symbol"], e[2]))
        if f["resolver"] != "perfmap" or f["source"] != map_path or not f["unwind"].endswith("+jit"):
            bad.append("capture: JIT frame %s: resolver %s, source %s, unwind %s; want perfmap, %s, +jit" %
                       (short, f["resolver"], f["source"], f["unwind"], map_path))
    for i, f in enumerate(captured):
        if i not in (at + 1, at + 2) and f["unwind"].endswith("+jit"):
            bad.append("capture: frame %d (%s) outside the JIT code is flagged jit (%s)" % (i, f["symbol"], f["unwind"]))
    print("capture: %s" % " <- ".join(names[at:at + 4]))

    # ---- 2. the map is gone: offline resolve names the JIT frames from the captured entries
    if os.path.exists(map_path):
        sys.exit("%s still exists" % map_path)
    rep = json.loads(run([sp, "trace-resolve", "--trace", tid, "--offline", "--store", store, "--json"]))
    resolved = frames_of(sp, store, tid)
    if [f["symbol"] for f in resolved] != names:
        bad.append("resolve --offline: names %s, capture %s" % ([f["symbol"] for f in resolved], names))
    for k in (1, 2):
        if k + at >= len(resolved):
            continue
        f = resolved[at + k]
        if f["resolver"] != "perfmap" or f["source"] != map_path:
            bad.append("resolve --offline: JIT frame %s: resolver %s source %s" % (f["symbol"], f["resolver"], f["source"]))
    if rep["resolvers"].get("perfmap") != 2:
        bad.append("resolve --offline: report resolvers %s, want 2 perfmap" % rep["resolvers"])
    print("resolve --offline (map removed): %s" % " <- ".join(f["symbol"] for f in resolved[at:at + 4]))

    # ---- 3. replay: the gate passes, the JIT frames count as resolved
    r = subprocess.run([sp, "trace-replay", "--trace", tid, "--store", store, "--seeds", "5", "--json", "--key",
                        os.path.join(w, "signer.pub"), "--trusted-root", os.path.join(log, "trusted_root.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
    if r.returncode != 0:
        bad.append("trace-replay: exit %d: %s %s" % (r.returncode, r.stdout[-600:], r.stderr.strip()[-600:]))
    else:
        j = json.loads(r.stdout)
        dwarf = ("bundle", "dwarf")
        covered = sum(1 for f in resolved if f["symbol"] and (f["resolver"] not in dwarf and
                                                            not f["resolver"].startswith("debuginfod") or
                                                            (f.get("file") and f.get("line"))))
        want_cov = 100.0 * covered / len(resolved)
        if j["replay_success_ratio"] != 1.0 or abs(j["symbol_coverage_pct"] - want_cov) > 0.05:
            bad.append("trace-replay: success %s coverage %s; want 1.0 and %.1f" %
                       (j["replay_success_ratio"], j["symbol_coverage_pct"], want_cov))
        print(j["summary"])
    shutil.rmtree(w, ignore_errors=True)
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
