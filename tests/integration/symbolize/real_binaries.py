#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Binaries we did not build (python3.11, libc, libstdc++ debug build, a Rust program): 10,000 seeded in-function addresses each vs llvm-symbolizer-14.
import argparse
import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

LLVM = "llvm-symbolizer-14"
HERE = os.path.dirname(os.path.abspath(__file__))
CORE = ("FunctionName", "FileName", "Line", "Column")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]))
    return m.group(1) if m else None


def debug_file(path):
    bid = build_id(path)
    if bid:
        p = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
        if os.path.exists(p):
            return p
    return None


def targets(work):
    """(label, binary, file with .symtab and DWARF, why skipped)."""
    py = "/usr/bin/python3.11" if os.path.exists("/usr/bin/python3.11") else None
    yield "python3.11", py, py and debug_file(os.path.realpath(py)), "python3.11-dbg"
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    yield "libc.so.6", libc, debug_file(os.path.realpath(libc)), "libc6-dbg"
    # libstdc++6-12-dbg ships a debug *build* of the library (DWARF inside), not a detached debug file.
    lsc = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6"
    yield "libstdc++.so.6 (-dbg build)", lsc, lsc if os.path.exists(lsc) else None, "libstdc++6-12-dbg"
    rustc = shutil.which("rustc") or next((p for p in ("/root/.cargo/bin/rustc", "/usr/local/cargo/bin/rustc")
                                           if os.path.exists(p)), None)
    out = os.path.join(work, "fixture_rust")
    ok = False
    if rustc:
        r = subprocess.run([rustc, "-C", "opt-level=2", "-g", "-o", out, os.path.join(HERE, "fixture_rust.rs")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ok = r.returncode == 0
    yield "rust (rustc -O -g)", out, out if ok else None, "rustc"


def func_ranges(symfile):
    """Sized function symbols (T/t/W/w/i) of the file holding .symtab."""
    out = run(["nm", "-S", "--defined-only", symfile])
    rs = []
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in ("T", "t", "W", "w", "i"):
            a, n = int(p[0], 16), int(p[1], 16)
            if n:
                rs.append((a, n))
    return sorted(set(rs))


def sample(ranges, n, seed):
    """n addresses, uniform over the bytes of the functions (weighted by size), deterministic."""
    rnd = random.Random(seed)
    total = sum(s for _, s in ranges)
    cum, acc = [], 0
    for a, s in ranges:
        acc += s
        cum.append(acc)
    import bisect
    out = []
    for _ in range(n):
        k = rnd.randrange(total)
        i = bisect.bisect_right(cum, k)
        a, s = ranges[i]
        out.append(a + (k - (cum[i] - s)))
    return out


def symbolize(tool, obj, addrs):
    inp = "".join("0x%x\n" % a for a in addrs)
    t0 = time.time()
    out = subprocess.run(tool + ["--obj", obj, "--inlines", "--output-style=JSON", "--no-demangle"], input=inp,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    res = [json.loads(l) for l in out.splitlines() if l.strip()]
    if len(res) != len(addrs):
        raise RuntimeError("%s: %d answers for %d addresses" % (tool[0], len(res), len(addrs)))
    return res, time.time() - t0


def classify(x, y, aliases):
    """'' when equal on CORE for every frame (accepting aliases for names), else a class name."""
    fx, fy = x.get("Symbol", []), y.get("Symbol", [])
    if len(fx) != len(fy):
        return "chain length"
    for i, (a, b) in enumerate(zip(fx, fy)):
        for f in CORE:
            u, v = a.get(f), b.get(f)
            if u == v:
                continue
            if f == "FunctionName" and u and v and aliases.get(u.split("@")[0], -1) == aliases.get(v.split("@")[0], -2):
                continue  # aliases at one address (incl. symbol versions X@@V2 / X@V1): doc/symbolization.md class 2
            return "%s (frame %s)" % (f, "outer" if i == len(fx) - 1 else "inlined")
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--min", type=float, default=99.9)
    ap.add_argument("--show", type=int, default=2)
    args = ap.parse_args()
    if shutil.which(LLVM) is None:
        print("SKIP: %s not found" % LLVM)
        return 77
    os.makedirs(args.work, exist_ok=True)
    failures = tested = 0
    t_start = time.time()
    print("%-28s %7s %9s %8s %8s  %s" % ("binary", "addrs", "agree %", "ours s", "llvm s", "details"))
    for label, binary, symfile, pkg in targets(args.work):
        if not binary or not symfile or not os.path.exists(binary):
            print("%-28s skipped: install %s" % (label, pkg))
            continue
        ranges = func_ranges(symfile)
        aliases = {}  # names (version suffix dropped) -> address, from .symtab and .dynsym
        for cmd in (["nm", "--defined-only", symfile], ["nm", "-D", "--defined-only", binary]):
            for line in run(cmd).splitlines():
                p = line.split()
                if len(p) == 3:
                    aliases.setdefault(p[2].split("@")[0], int(p[0], 16))
        addrs = sample(ranges, args.count, seed=0x5eed)
        ours, t_ours = symbolize([args.stackprov, "symbolize"], binary, addrs)
        ref, t_ref = symbolize([LLVM], binary, addrs)
        classes = collections.Counter()
        shown = 0
        for a, x, y in zip(addrs, ours, ref):
            c = classify(x, y, aliases)
            if c:
                classes[c] += 1
                if shown < args.show:
                    shown += 1
                    print("  0x%x %s\n    ours: %s\n    llvm: %s" % (a, c, json.dumps([[f[k] for k in CORE] for f in x["Symbol"]])[:400],
                                                              json.dumps([[f[k] for k in CORE] for f in y["Symbol"]])[:400]))
        # Every address counts (stackprov symbolize names addresses without DWARF only from the
        # module's own .symtab/.dynsym, as llvm-symbolizer-14 does: doc/symbolization.md class 8).
        agree = 100.0 * (len(addrs) - sum(classes.values())) / len(addrs)
        print("%-28s %7d %8.3f%% %8.2f %8.2f  %s" % (label, len(addrs), agree, t_ours, t_ref, dict(classes)))
        tested += 1
        if agree < args.min:
            failures += 1
    print("total %.1fs" % (time.time() - t_start))
    if tested == 0:
        print("SKIP: no real binary with debug info installed")
        return 77
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
