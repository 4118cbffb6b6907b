#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# stackprov's own naming (`--symbols=stackprov`, as `stack`/`perf-import` name frames): PLT stubs vs objdump's <sym@plt> labels, debug-file labels (ld.so _start) vs gdb.
"""Two independent oracles, every compared address must agree (no exceptions):

1. PLT stubs: every instruction address of .plt, .plt.sec and .plt.got, named as
   objdump -d labels it (`<name@plt>`, incl. `*ABS*+0x...@plt` for IRELATIVE; "??"
   under a label that is not a PLT entry, such as `<.plt>` or `<free@plt-0x10>`), on
   python3.11, libc.so.6, node and a fixture linked lazily, with -z now, with IBT
   (.plt.sec), both, statically (IRELATIVE) and for AArch64 (with and without BTI).
2. Symbols only the separate debug file's .symtab has, including zero-sized code labels
   (ld.so's `_start`, `_dl_start_user`): every instruction from `_start` to the next sized
   function, and 300 seeded random instruction addresses of ld.so and libc, named exactly as
   elfutils names them (`eu-addr2line -S`) and as gdb's `info symbol` does in its spelling
   (no symbol version, for some clones no final `.N` counter, `f[cold]` for `f.cold`). Addresses whose
   function start carries several symbols are left to the alias rule, tested in
   tests/unit/elf/symtab_test.cpp.
A missing tool fails with its name."""
import argparse
import bisect
import json
import os
import random
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import parse_gdb_info_symbol  # noqa: E402  (tests/lib: the peers' output parsers)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


MODE = ["--symbols=stackprov"]


def ours(stackprov, obj, addrs):
    """Outermost function name per address from `stackprov symbolize --symbols=stackprov` ("??" if none)."""
    inp = "".join("0x%x\n" % a for a in addrs)
    out = subprocess.run([stackprov, "symbolize"] + MODE + ["--obj", obj, "--output-style=JSON",
                          "--no-demangle"], input=inp, check=True, stdout=subprocess.PIPE, text=True).stdout
    res = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(res) == len(addrs), (obj, len(res), len(addrs))
    return [(r.get("Symbol") or [{}])[-1].get("FunctionName") or "??" for r in res]


def objdump_plt(objdump, path):
    """{instruction address: expected name} over the PLT sections, from objdump's labels."""
    secs = [l.split()[1] for l in run(["readelf", "-SW", path]).replace("[ ", "[").splitlines()
            if re.match(r"\s*\[\s*\d+\]\s+\.plt(\.sec|\.got)?\s", l)]
    want = {}
    for sec in secs:
        label = "??"
        for line in run([objdump, "-d", "-j", sec, path]).splitlines():
            m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
            if m:
                label = m.group(2) if m.group(2).endswith("@plt") else "??"
                continue
            m = re.match(r"^\s+([0-9a-f]+):\t", line)
            if m:
                want[int(m.group(1), 16)] = label
    return want


def build_fixtures(work):
    src = os.path.join(HERE, "plt_fixture.c")
    out = []
    for name, cc, flags, objdump in (
            ("fixture lazy", "gcc", [], "objdump"),
            ("fixture -z now", "gcc", ["-Wl,-z,now"], "objdump"),
            ("fixture IBT .plt.sec", "gcc", ["-fcf-protection=full", "-Wl,-z,ibtplt"], "objdump"),
            ("fixture IBT -z now", "gcc", ["-fcf-protection=full", "-Wl,-z,ibtplt", "-Wl,-z,now"], "objdump"),
            ("fixture static (IRELATIVE)", "gcc", ["-static"], "objdump"),
            ("fixture aarch64", "aarch64-linux-gnu-gcc", [], "aarch64-linux-gnu-objdump"),
            ("fixture aarch64 BTI", "aarch64-linux-gnu-gcc", ["-mbranch-protection=standard", "-Wl,-z,force-bti"],
             "aarch64-linux-gnu-objdump"),
            # Non-PIE with BTI: binutils writes 24-byte PLT entries after a 32-byte PLT0.
            ("fixture aarch64 BTI no-pie", "aarch64-linux-gnu-gcc",
             ["-no-pie", "-mbranch-protection=standard", "-Wl,-z,force-bti"], "aarch64-linux-gnu-objdump"),
            ("fixture aarch64 PAC PLT", "aarch64-linux-gnu-gcc",
             ["-mbranch-protection=standard", "-Wl,-z,force-bti", "-Wl,-z,pac-plt"], "aarch64-linux-gnu-objdump")):
        path = os.path.join(work, re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))
        run([cc, "-O1", "-o", path, src] + flags)
        out.append((name, path, objdump))
    return out


WORK = []


def path_in_work(name):
    return os.path.join(WORK[0], name)


def gdb_names(path, addrs):
    """gdb's `info symbol` name per address ("??" for "No symbol matches")."""
    script = path_in_work("gdb-%s.cmds" % os.path.basename(path))
    with open(script, "w") as f:
        f.write("".join("info symbol 0x%x\n" % a for a in addrs))
    out = subprocess.run(["gdb", "-nx", "-batch", "-ex", "set pagination off", "-x", script, path],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout
    # gdb 13 prints a gcc cold part `f.cold` as `f[cold]` when DWARF ties it to f.
    names = [re.sub(r"\[cold\]$", ".cold", n) for n in parse_gdb_info_symbol(out)]
    if len(names) != len(addrs):
        raise RuntimeError("gdb: %d answers for %d addresses on %s" % (len(names), len(addrs), path))
    return names


def eu_names(path, addrs):
    """elfutils' symbol per address (`eu-addr2line -S`: dwfl_module_addrinfo over the module's and its
    debug file's tables), raw ELF names, "??" when none."""
    out = run(["eu-addr2line", "-S", "-e", path] + ["0x%x" % a for a in addrs]).splitlines()
    if len(out) != 2 * len(addrs):
        raise RuntimeError("eu-addr2line: %d lines for %d addresses on %s" % (len(out), len(addrs), path))
    return [re.sub(r"\+0x[0-9a-f]+$", "", out[2 * i]) for i in range(len(addrs))]


def gdb_agrees(ours_name, gdb_name):
    """gdb's `info symbol` spelling: no ELF symbol version, and for some GCC clones no final numeric
    counter (`f.isra.0` printed `f.isra`, while `g.part.0` stays)."""
    base = ours_name.split("@")[0]
    return gdb_name in (base, re.sub(r"\.\d+$", "", base))


def debug_file(path):
    bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path])).group(1)
    p = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    if not os.path.exists(p):
        raise SystemExit("FAIL: no debug file %s for %s (install libc6-dbg)" % (p, path))
    return p


def symbols(dbg):
    """(value, size, type, name) of defined FUNC/NOTYPE symbols of a .symtab (readelf)."""
    out = []
    for line in run(["readelf", "-sW", dbg]).splitlines():
        p = line.split()
        if len(p) >= 8 and p[0].endswith(":") and p[3] in ("FUNC", "NOTYPE", "IFUNC") and p[6] not in ("UND", "ABS"):
            out.append((int(p[1], 16), int(p[2], 0), p[3], p[7]))
    return out


def instructions(path, lo, hi):
    out = run(["objdump", "-d", "--no-show-raw-insn", "--start-address=0x%x" % lo, "--stop-address=0x%x" % hi, path])
    return [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M)]


class Listing:
    """Instruction addresses of [lo, hi) ranges of one binary, from one `objdump -d` of all of it rather
    than one objdump per range (each pays ~25 ms of start-up; libc needs 300). objdump decodes from
    each of its symbols, so a range that starts where the whole listing has no instruction (it
    resynchronises at a debug-file symbol objdump does not see) gets its own objdump, as before."""

    def __init__(self, path):
        self.path = path
        out = run(["objdump", "-d", "--no-show-raw-insn", path])
        self.addrs = sorted(int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M))

    def __call__(self, lo, hi):
        i = bisect.bisect_left(self.addrs, lo)
        if i == len(self.addrs) or self.addrs[i] != lo:
            return instructions(self.path, lo, hi)
        return self.addrs[i:bisect.bisect_left(self.addrs, hi)]


def label_addresses(path, seed):
    """ld.so: every instruction from _start to the next sized function; plus seeded random
    instruction addresses of functions whose start carries exactly one symbol."""
    dbg = debug_file(os.path.realpath(path))
    syms = symbols(dbg)
    starts = {}
    for v, s, t, n in syms:
        starts.setdefault(v, []).append((s, n))
    addrs = []
    listing = Listing(path)
    by_name = {n: (v, s) for v, s, t, n in syms}
    if "_start" in by_name and by_name["_start"][1] == 0:
        lo = by_name["_start"][0]
        hi = min(v for v, s, t, n in syms if v > lo and s > 0)
        addrs += listing(lo, hi)
    rnd = random.Random(seed)
    single = sorted((v, s) for v, lst in starts.items() if len(lst) == 1 for s, _ in lst if s > 0)
    for v, s in rnd.sample(single, min(300, len(single))):
        ins = listing(v, v + s)
        if ins:
            addrs.append(rnd.choice(ins))
    return addrs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--mode-flag", default="--symbols=stackprov",
                    help="stackprov symbolize option selecting its own naming (--debug-symtab before it existed)")
    args = ap.parse_args()
    MODE[0] = args.mode_flag
    for tool in ("objdump", "readelf", "gdb", "eu-addr2line", "gcc", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump"):
        if shutil.which(tool) is None:
            print("FAIL: %s not found (make deps)" % tool)
            return 1
    os.makedirs(args.work, exist_ok=True)
    WORK.append(args.work)
    failures = 0

    def report(label, addrs, got, want):
        nonlocal failures
        bad = [(a, g, w) for a, g, w in zip(addrs, got, want) if g != w]
        named = sum(1 for w in want if w != "??")
        print("%-34s %6d addrs %6d named  %s" % (label, len(addrs), named, "ok" if not bad else "%d differ" % len(bad)))
        for a, g, w in bad[:args.show]:
            print("   0x%x ours %s, oracle %s" % (a, g, w))
        # A static binary has no dynamic symbols: objdump names none of its PLT entries.
        if bad or not addrs or (not named and "static" not in label):
            failures += 1

    plt_targets = [("python3.11", "/usr/bin/python3.11", "objdump"),
                   ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "objdump"),
                   ("node", "/usr/bin/node", "objdump")]
    for label, path, _ in plt_targets:
        if not os.path.exists(path):
            print("FAIL: %s missing" % path)
            return 1
    print("PLT stubs vs objdump -d labels")
    for label, path, objdump in plt_targets + build_fixtures(args.work):
        want = objdump_plt(objdump, path)
        addrs = sorted(want)
        report(label, addrs, ours(args.stackprov, path, addrs), [want[a] for a in addrs])

    print("debug-file symbols and code labels vs eu-addr2line -S (exact) and gdb info symbol (gdb's spelling)")
    for label, path in (("ld.so", "/lib64/ld-linux-x86-64.so.2"), ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")):
        addrs = label_addresses(path, 0x5eed)
        got = ours(args.stackprov, path, addrs)
        report(label + " / eu-addr2line", addrs, got, eu_names(path, addrs))
        gdb = gdb_names(path, addrs)
        report(label + " / gdb", addrs, [g if gdb_agrees(n, g) else n for n, g in zip(got, gdb)], gdb)
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
