#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# JIT code named by perf maps (/tmp/perf-PID.map): `stackprov stack --pid` through JIT frames (frame pointers, no CFI),
# and `stackprov perf-import` vs `perf script` with the same map on the same perf.data.
"""fixture_jit.c generates two functions (jitOuter -> jitInner -> native_callback) into an anonymous
executable mapping and names them in /tmp/perf-PID.map as node --perf-basic-prof does.

1. `stackprov stack --pid --json` while native_callback blocks: the thread's frames hold, in order,
   native_callback, "LazyCompile:*jitInner /srv/app.js:7", "LazyCompile:~jitOuter /srv/app.js:3", main
   (the fixture's stated call structure); the two JIT frames are flagged "jit", named by resolver
   "perfmap" from that map, at the return address the fixture emitted (start + 16); the frame above
   jitInner and main are found by frame pointer (no CFI covers JIT code).
2. `perf record -g` (kernel frame-pointer callchains) of the spinning fixture, its map kept: for every
   sample, each frame perf script names from /tmp/perf-PID.map has the same name in
   `stackprov perf-import --format json` at the same position; at least 50 such samples.
3. `stackprov record` (user stacks unwound by stackprov) of the same fixture: at least 50 samples whose
   stack is native_callback <- jitInner <- jitOuter <- main, JIT frames flagged.
A missing tool (gcc, perf) or a refused perf record fails naming it."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import parse_perf_script  # noqa: E402  (tests/lib: perf script's samples: user frames, leaf first)
INNER = "LazyCompile:*jitInner /srv/app.js:7"
OUTER = "LazyCompile:~jitOuter /srv/app.js:3"


def need(tool):
    p = shutil.which(tool)
    if not p:
        sys.exit("missing tool: %s (scripts/install-deps.sh installs it)" % tool)
    return p


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def check_stack(stackprov, fx, bad):
    p = subprocess.Popen([fx, "block"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        time.sleep(0.2)
        r = subprocess.run([stackprov, "stack", "--pid", str(p.pid), "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        text = subprocess.run([stackprov, "stack", "--pid", str(p.pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60).stdout
    finally:
        p.terminate()
        p.wait(timeout=10)
    print(text)
    js = json.loads(r.stdout)
    frames = js["threads"][0]["frames"]
    names = [f["function"] for f in frames]
    want = ["native_callback", INNER, OUTER, "main"]
    at = next((i for i in range(len(names)) if names[i:i + 4] == want), None)
    if at is None:
        bad.append("stack --pid: %s not found in order in %s" % (want, names))
        return
    for k in (1, 2):
        f = frames[at + k]
        if "jit" not in f.get("flags", []) or f["resolver"] != "perfmap" or f["source"] != "/tmp/perf-%d.map" % p.pid:
            bad.append("stack --pid: JIT frame %s not flagged jit / resolver perfmap / source the map: %s" % (names[at + k], f))
        if int(f["function_offset"], 16) != 16:
            bad.append("stack --pid: %s at +%s, the fixture's return address is +0x10" % (names[at + k], f["function_offset"]))
    for k in (2, 3):
        if frames[at + k]["method"] != "frame_pointer":
            bad.append("stack --pid: %s found by %s, want frame_pointer" % (names[at + k], frames[at + k]["method"]))
    print("stack --pid: %s" % " <- ".join(want))


def check_perf(stackprov, fx, work, bad):
    perf = need("perf")
    data = os.path.join(work, "jit.data")
    p = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-o", data, "--", fx, "spin",
                        "1.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("perf record refused: %s" % p.stderr)
    maps = []
    try:
        script = run([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso"]).stdout
        js = run([stackprov, "perf-import", data, "--format", "json", "--quiet"]).stdout
        maps = sorted(set(re.findall(r"\((/tmp/perf-\d+\.map)\)", script)))
    finally:
        for m in maps:
            os.unlink(m)
    ours = {}
    for line in js.splitlines():
        if line.strip():
            o = json.loads(line)
            ours[(o["tid"], o["time"] // 1000)] = o  # perf-import's time is in ns, perf script's in us
    samples, _ = parse_perf_script(script)
    compared = jit_frames = 0
    for (tid, t), user in sorted(samples.items()):
        if not any(f[2].startswith("/tmp/perf-") for f in user):
            continue
        o = ours.get((tid, t))
        if o is None:
            bad.append("perf-import has no sample %d/%d" % (tid, t))
            continue
        mine = [f for f in o["frames"] if f["method"] != "kernel"]
        compared += 1
        for k, (addr, sym, dso, _start) in enumerate(user):
            if not dso.startswith("/tmp/perf-"):
                continue
            jit_frames += 1
            if k >= len(mine) or mine[k]["function"] != sym:
                bad.append("sample %d/%d frame %d: perf script %r (%s), stackprov %r" %
                           (tid, t, k, sym, dso, mine[k]["function"] if k < len(mine) else None))
    print("perf-import vs perf script: %d samples with JIT frames, %d JIT frames compared" % (compared, jit_frames))
    if compared < 50:
        bad.append("only %d perf samples with JIT frames (want >= 50)" % compared)


def check_record(stackprov, fx, work, bad):
    cap = os.path.join(work, "jit.cap")
    r = subprocess.run([stackprov, "record", "-o", cap, "--", fx, "spin", "1.5"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("stackprov record failed: %s" % r.stderr)
    js = run([stackprov, "perf-import", cap, "--format", "json", "--quiet"]).stdout
    for m in set(re.findall(r"/tmp/perf-\d+\.map", js)):
        if os.path.exists(m):
            os.unlink(m)
    good = 0
    for line in js.splitlines():
        if not line.strip():
            continue
        names = [f["function"] for f in json.loads(line)["frames"] if f["method"] != "kernel"]
        if any(names[i:i + 4] == ["native_callback", INNER, OUTER, "main"] for i in range(len(names))):
            good += 1
    print("record: %d samples unwound native_callback <- jitInner <- jitOuter <- main" % good)
    if good < 50:
        bad.append("record: only %d samples unwound through the JIT frames (want >= 50)" % good)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    fx = os.path.join(args.work, "fixture_jit")
    run([need("gcc"), "-O1", "-fno-omit-frame-pointer", "-g", "-o", fx, os.path.join(HERE, "fixture_jit.c")])
    bad = []
    check_stack(args.stackprov, fx, bad)
    check_perf(args.stackprov, fx, args.work, bad)
    check_record(args.stackprov, fx, args.work, bad)
    for b in bad[:40]:
        print("MISMATCH " + b)
    print("OK" if not bad else "%d mismatches" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
