#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Binaries we did not build (python3.11, a cargo-built Rust program, libc, node, libstdc++ debug build): seeded in-function addresses, every field as llvm-symbolizer-14.
"""Gate: 100% of the sampled addresses give exactly llvm-symbolizer-14's answer
(`--inlines --output-style=JSON --no-demangle`, both tools given the same --obj):
FunctionName, FileName, Line, Column and StartAddress of every frame, and the
chain length. A difference passes only when it is listed, with its reason, in
llvm_exceptions.txt (one line per address). A missing tool, package or binary
fails with its name."""
import argparse
import bisect
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
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_json  # noqa: E402  (tests/lib: the peers' output parsers)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

FIELDS = ("FunctionName", "FileName", "Line", "Column", "StartAddress")
EXCEPTIONS = os.path.join(HERE, "llvm_exceptions.txt")


class Missing(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]))
    return m.group(1) if m else None


def debug_file(path, pkg):
    bid = build_id(path)
    p = bid and "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    if not p or not os.path.exists(p):
        raise Missing("%s: no debug file %s (install %s)" % (path, p, pkg))
    return p


def need_file(path, pkg):
    if not os.path.exists(path):
        raise Missing("%s missing (install %s)" % (path, pkg))
    return path


def cargo_binary(work):
    """The Rust fixture built by Debian's cargo/rustc (release, with debug info)."""
    for tool in ("/usr/bin/cargo", "/usr/bin/rustc"):
        need_file(tool, "cargo rustc")
    proj = os.path.join(work, "rust")
    os.makedirs(os.path.join(proj, "src"), exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "fixture_rust.rs"), os.path.join(proj, "src", "main.rs"))
    with open(os.path.join(proj, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "fixture_rust"\nversion = "0.1.0"\nedition = "2021"\n\n'
                '[profile.release]\ndebug = true\n')
    env = dict(os.environ, CARGO_HOME=os.path.join(work, "cargo-home"), RUSTC="/usr/bin/rustc",
               CARGO_TARGET_DIR=os.path.join(proj, "target"))
    env.pop("RUSTUP_TOOLCHAIN", None)
    subprocess.run(["/usr/bin/cargo", "build", "--release", "--offline", "--quiet"], cwd=proj, env=env, check=True)
    return os.path.join(proj, "target", "release", "fixture_rust")


def targets(work):
    """(label, binary given to both tools as --obj, file whose .symtab lists the functions)."""
    py = need_file("/usr/bin/python3.11", "python3.11")
    yield "python3.11", py, debug_file(os.path.realpath(py), "python3.11-dbg")
    rust = cargo_binary(work)
    yield "rust (cargo --release)", rust, rust
    libc = need_file("/lib/x86_64-linux-gnu/libc.so.6", "libc6")
    yield "libc.so.6", libc, debug_file(os.path.realpath(libc), "libc6-dbg")
    node = need_file("/usr/bin/node", "nodejs")
    yield "node", node, node
    # libstdc++6-12-dbg ships a debug *build* of the library (DWARF inside), not a detached debug file.
    lsc = need_file("/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6", "libstdc++6-12-dbg")
    yield "libstdc++.so.6 (-dbg build)", lsc, lsc


def func_ranges(symfile):
    """Sized function symbols (T/t/W/w/i) of the file holding .symtab, from binutils nm."""
    rs = set()
    for line in run(nm_command() + ["-S", "--defined-only", symfile]).splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in ("T", "t", "W", "w", "i"):
            a, n = int(p[0], 16), int(p[1], 16)
            if n:
                rs.add((a, n))
    return sorted(rs)


def sample(ranges, n, seed):
    """n addresses, uniform over the bytes of the functions (weighted by size), deterministic."""
    rnd = random.Random(seed)
    cum, acc = [], 0
    for _, s in ranges:
        acc += s
        cum.append(acc)
    out = []
    for _ in range(n):
        k = rnd.randrange(acc)
        i = bisect.bisect_right(cum, k)
        a, s = ranges[i]
        out.append(a + (k - (cum[i] - s)))
    return out


def symbolize(tool, obj, addrs):
    inp = "".join("0x%x\n" % a for a in addrs)
    t0 = time.time()
    out = subprocess.run(tool + ["--obj", obj, "--inlines", "--output-style=JSON", "--no-demangle"], input=inp,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    res = llvm_symbolizer_json(out)
    if len(res) != len(addrs):
        raise RuntimeError("%s: %d answers for %d addresses" % (tool[0], len(res), len(addrs)))
    return res, time.time() - t0


def difference(x, y):
    """'' when every frame agrees on FIELDS, else the first differing field."""
    fx, fy = x.get("Symbol", []), y.get("Symbol", [])
    if len(fx) != len(fy):
        return "chain-length"
    for i, (a, b) in enumerate(zip(fx, fy)):
        for f in FIELDS:
            if a.get(f) != b.get(f):
                return "%s/%s" % (f, "outer" if i == len(fx) - 1 else "inlined")
    return ""


def load_exceptions():
    """{(label, address): reason} from llvm_exceptions.txt: `label<TAB>0xADDR<TAB>reason`."""
    ex = {}
    with open(EXCEPTIONS) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            p = line.split("\t")
            if len(p) != 3 or not p[2].strip():
                raise SystemExit("%s:%d: want label<TAB>0xADDR<TAB>reason" % (EXCEPTIONS, n))
            ex[(p[0], int(p[1], 16))] = p[2]
    return ex


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=0x5eed)
    ap.add_argument("--show", type=int, default=3)
    ap.add_argument("--report-only", action="store_true", help="print agreement, never fail (for before/after figures)")
    ap.add_argument("--symbols", default=None, help="pass --symbols=VALUE to stackprov symbolize")
    args = ap.parse_args()
    if shutil.which(LLVM) is None:
        print("FAIL: %s not found (install llvm-14)" % LLVM)
        return 1
    os.makedirs(args.work, exist_ok=True)
    exceptions = load_exceptions()
    used = set()
    ours_cmd = [args.stackprov, "symbolize"] + (["--symbols=" + args.symbols] if args.symbols else [])
    failures = 0
    t_start = time.time()
    print("%-28s %7s %9s %8s %8s  %s" % ("binary", "addrs", "agree %", "ours s", "llvm s", "differences"))
    try:
        tlist = list(targets(args.work))
    except (Missing, subprocess.CalledProcessError) as e:
        print("FAIL: %s" % e)
        return 1
    for label, binary, symfile in tlist:
        addrs = sample(func_ranges(symfile), args.count, seed=args.seed)
        ours, t_ours = symbolize(ours_cmd, binary, addrs)
        ref, t_ref = symbolize([LLVM], binary, addrs)
        classes = collections.Counter()
        unlisted = shown = 0
        for a, x, y in zip(addrs, ours, ref):
            d = difference(x, y)
            if not d:
                continue
            classes[d] += 1
            if (label, a) in exceptions:
                used.add((label, a))
                continue
            unlisted += 1
            if shown < args.show:
                shown += 1
                print("  0x%x %s\n    ours: %s\n    llvm: %s" % (
                    a, d, json.dumps([[f.get(k) for k in FIELDS] for f in x["Symbol"]])[:500],
                    json.dumps([[f.get(k) for k in FIELDS] for f in y["Symbol"]])[:500]))
        agree = 100.0 * (len(addrs) - sum(classes.values())) / len(addrs)
        print("%-28s %7d %8.3f%% %8.2f %8.2f  %s" % (label, len(addrs), agree, t_ours, t_ref, dict(classes)))
        if unlisted:
            failures += 1
            print("  %d differences not in %s" % (unlisted, os.path.basename(EXCEPTIONS)))
    stale = set(exceptions) - used
    for label, a in sorted(stale):
        print("stale exception (address agrees now or is not sampled): %s 0x%x" % (label, a))
    print("total %.1fs" % (time.time() - t_start))
    if args.report_only:
        return 0
    if stale:
        failures += 1
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
