#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# llvm-symbolizer drop-in: every flag combination callers send (pprof, scripts) gives llvm-symbolizer-14's stdout byte for byte, on a compiled inlining fixture and libc.so.6.
"""Gate: for each flag combination below, in each output style, `stackprov symbolize` prints
exactly what llvm-symbolizer-14 prints (stdout compared byte for byte, same exit status):
-a/--addresses/--print-address, --adjust-vma, --inlining[=true|false], --inlines, -i,
--no-inlines, --print-source-context-lines, -demangle=false, grouped -aCp, --functions, -s;
inputs given with --obj (arguments and stdin) and without it (stdin lines `FILE ADDR`,
`"FILE" ADDR`, `'FILE' ADDR`, `CODE FILE ADDR`, a path with spaces, unparsable lines, a missing
file), as pprof drives llvm-symbolizer (`--inlining -demangle=false --output-style=JSON`, `CODE
FILE 0xADDR` lines). Modules: the g++ -O2 inlining fixture (deep inline chains, sources on disk
for the context lines) and libc.so.6 with libc6-dbg (no sources; libc+0x2a000 is
internal_ucs4_loop_single under --no-inlines). `--` (which llvm-symbolizer-14 rejects) must give
the answer of the same inputs without it. A missing tool or package fails naming it."""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys

LLVM = "llvm-symbolizer-14"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from toolrun import nm_command  # noqa: E402  (nm without bfd's LLVM plugins)
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

# Flag combinations, each run in the three output styles.
COMBOS = [
    [],
    ["-a"],
    ["--addresses", "-p"],
    ["--print-address", "--no-inlines"],
    ["--no-inlines"],
    ["--no-inlines", "-p", "-a"],
    ["--inlining=false"],
    ["--inlining=true", "-a"],
    ["--inlining"],
    ["--inlines"],
    ["-i", "--functions=short"],
    ["--no-inlines", "-f=short"],
    ["--no-inlines", "--no-demangle"],
    ["-demangle=false", "-a"],
    ["-aCp"],
    ["--adjust-vma=0x10"],
    ["--adjust-vma", "16", "-a", "--no-inlines"],
    ["--print-source-context-lines=3"],
    ["--print-source-context-lines", "2", "-p", "-a"],
    ["--print-source-context-lines=5", "--no-inlines"],
    ["--print-source-context-lines=1", "-s"],
    ["--functions=none", "-p"],
    ["--functions=none", "--no-inlines", "--print-source-context-lines=2"],
]
STYLES = [[], ["--output-style=GNU"], ["--output-style=JSON"]]


class Missing(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def need(tool, pkg):
    if shutil.which(tool) is None:
        raise Missing("%s not found (install %s; make deps)" % (tool, pkg))


def text_addresses(path):
    out = run(["objdump", "-d", "-j", ".text", "--no-show-raw-insn", path])
    return [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M)]


def libc_addresses(rng, n):
    """libc+0x2a000 and n seeded addresses inside libc's functions (from its debug file's .symtab)."""
    bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", os.path.realpath(LIBC)])).group(1)
    dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    if not os.path.exists(dbg):
        raise Missing("%s: no debug file %s (install libc6-dbg)" % (LIBC, dbg))
    funcs = []
    for line in run(nm_command() + ["-S", "--defined-only", dbg]).splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwWiI" and int(p[1], 16) > 0:
            funcs.append((int(p[0], 16), int(p[1], 16)))
    pick = rng.sample(funcs, n)
    return [0x2a000] + [a + rng.randrange(s) for a, s in pick]


def symbolize(cmd, args, stdin):
    r = subprocess.run(cmd + args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def first_difference(a, b):
    la, lb = a.decode(errors="replace").split("\n"), b.decode(errors="replace").split("\n")
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            k = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lo = max(0, k - 120)
            return "line %d, column %d:\n    ours: ...%s\n    llvm: ...%s" % (i + 1, k + 1, x[lo:k + 180], y[lo:k + 180])
    return "lengths differ: %d vs %d lines" % (len(la), len(lb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        for tool, pkg in [(LLVM, "llvm-14"), ("g++", "g++"), ("objdump", "binutils"), ("readelf", "binutils"),
                          ("nm", "binutils")]:
            need(tool, pkg)
        if not os.path.exists(LIBC):
            raise Missing("%s missing (libc6)" % LIBC)
        shutil.rmtree(args.work, ignore_errors=True)
        os.makedirs(args.work)
        fixture = os.path.join(args.work, "inline-O2")
        run(["g++", "-x", "c++", "-O2", "-g", "-std=c++17", "-Wl,--build-id", "-o", fixture,
             os.path.join(HERE, "fixture_inline.cpp")])
        spaced_dir = os.path.join(args.work, "dir with space")
        os.makedirs(spaced_dir)
        spaced = os.path.join(spaced_dir, "fixture copy")
        shutil.copy(fixture, spaced)
        rng = random.Random(13)
        fx = text_addresses(fixture)
        fx_addrs = sorted(set(rng.sample(fx, 150) + [fx[0], fx[-1]]))
        libc_addrs = libc_addresses(rng, 120)
    except (Missing, subprocess.CalledProcessError) as e:
        print("FAIL: %s" % e)
        return 1

    ours = [args.stackprov, "symbolize"]
    llvm = [LLVM]
    failures = []
    compared = 0

    def compare(label, extra_ours, extra_llvm, stdin=b""):
        nonlocal compared
        ro, so, eo = symbolize(ours, extra_ours, stdin)
        rl, sl, el = symbolize(llvm, extra_llvm, stdin)
        compared += 1
        if (ro, so) != (rl, sl):
            failures.append("%s: exit %d vs llvm %d; %s%s" % (label, ro, rl, first_difference(so, sl),
                                                            ("\n    stderr: " + eo.strip()[:300]) if ro else ""))
        return so

    # --obj with stdin addresses, and the module named on each stdin line (no --obj), per combo/style.
    fx_in = "".join("0x%x\n" % a for a in fx_addrs).encode()
    mixed = []
    for i, a in enumerate(fx_addrs[:60]):
        forms = ["%s 0x%x", "\"%s\" 0x%x", "'%s' 0x%x", "CODE %s 0x%x"]
        mixed.append(forms[i % 4] % (fixture, a))
    for i, a in enumerate(libc_addrs[:60]):
        mixed.append(("CODE %s 0x%x" if i % 2 else "%s 0x%x") % (LIBC, a))
    mixed += ["\"%s\" 0x%x" % (spaced, fx_addrs[3]), "'%s' %d" % (spaced, fx_addrs[4]),
              "bogus", "", "%s" % fixture, "\"%s 0x10" % fixture, "/nonexistent/module 0x10",
              "%s 0x%x trailing words" % (fixture, fx_addrs[5])]
    mixed_in = ("\n".join(mixed) + "\n").encode()
    libc_in = "".join("0x%x\n" % a for a in libc_addrs).encode()
    # Every combination in every style on the fixture; on libc (whose debug file takes llvm-symbolizer
    # ~0.3 s to load each run) and on the mixed FILE ADDR lines in one style each, rotating, so that
    # each combination and each style still meet libc's DWARF (23 + 23 runs instead of 69 + 69).
    for ci, combo in enumerate(COMBOS):
        for si, style in enumerate(STYLES):
            flags = combo + style
            compare("--obj fixture %s (stdin)" % flags, ["--obj", fixture] + flags, ["--obj", fixture] + flags, fx_in)
            if si != ci % len(STYLES):
                continue
            compare("--obj libc %s (stdin)" % flags, ["--obj=" + LIBC] + flags, ["--obj=" + LIBC] + flags, libc_in)
            compare("no --obj %s (stdin FILE ADDR lines)" % flags, flags, flags, mixed_in)
    # Inputs on the command line (JSON: one array), with and without --obj.
    for style in STYLES:
        argv = ["0x%x" % a for a in fx_addrs[:40]]
        compare("--obj fixture arguments %s" % style, ["-e", fixture, "-a"] + style + argv,
                ["-e", fixture, "-a"] + style + argv)
        pairs = ["%s 0x%x" % (fixture, a) for a in fx_addrs[:10]] + ["%s 0x%x" % (LIBC, a) for a in libc_addrs[:10]]
        compare("FILE ADDR arguments %s" % style, style + pairs, style + pairs)
        # `--`: llvm-symbolizer-14 rejects it; the answer must be the same inputs' without it.
        compare("-- %s" % style, ["--obj", fixture] + style + ["--"] + argv[:5], ["--obj", fixture] + style + argv[:5])
    # pprof's exact invocation and protocol (internal/binutils/addr2liner_llvm.go).
    pprof_in = "".join("CODE %s 0x%x\n" % (LIBC, a) for a in libc_addrs[:40]).encode()
    pprof_in += "".join("CODE %s 0x%x\n" % (fixture, a) for a in fx_addrs[:40]).encode()
    compare("pprof --inlining -demangle=false --output-style=JSON", ["--inlining", "-demangle=false",
            "--output-style=JSON"], ["--inlining", "-demangle=false", "--output-style=JSON"], pprof_in)
    # The example, stated: libc+0x2a000 under --no-inlines is internal_ucs4_loop_single.
    out = compare("libc 0x2a000 --no-inlines", ["--obj", LIBC, "--no-inlines", "0x2a000"],
                  ["--obj", LIBC, "--no-inlines", "0x2a000"])
    if not out.startswith(b"internal_ucs4_loop_single\n"):
        failures.append("libc+0x2a000 --no-inlines: %r, expected internal_ucs4_loop_single" % out[:80])

    # Our conventions where llvm's differ (stated in --help): a bad option exits 2 with one
    # line naming it; --help ends with the exit-status section.
    for bad, named in ((["--adjust-vma=zz"], "'zz'"), (["--adjust-vma"], "--adjust-vma"),
                       (["--inlining=maybe"], "'maybe'"), (["--output-style", "XML"], "'XML'"),
                       (["--print-source-context-lines=x"], "'x'"), (["--bogus"], "'--bogus'"),
                       (["-aZ"], "'-aZ'"), (["--functions=long"], "'long'")):
        r = subprocess.run(ours + ["--obj", fixture, "0x10"] + bad, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        lines = r.stderr.splitlines()
        if r.returncode != 2 or len(lines) != 1 or named not in lines[0] or r.stdout:
            failures.append("usage %s: exit %d (want 2), stderr %r" % (bad, r.returncode, r.stderr))
    h = subprocess.run(ours + ["--help"], stdout=subprocess.PIPE, text=True)
    tail = h.stdout.rstrip("\n").split("\n\n")[-1]
    if h.returncode != 0 or not tail.startswith("Exit status:") or not all(" %d  " % c in tail for c in (0, 1, 2)):
        failures.append("--help does not end with the exit-status section: %r" % tail[:300])

    for f in failures[:25]:
        print("FAIL", f)
    print("%d comparisons (%d flag combinations x %d styles x 3 input forms + arguments, --, pprof), "
          "%d fixture and %d libc addresses; %d differ" % (compared, len(COMBOS), len(STYLES), len(fx_addrs),
                                                           len(libc_addrs), len(failures)))
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
