#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds the symbolization fixtures (gcc/clang, DWARF 4/5, compressed, stripped) and compares every .text instruction address with llvm-symbolizer.
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

LLVM = "llvm-symbolizer-14"
HERE = os.path.dirname(os.path.abspath(__file__))
CORE = ("FunctionName", "FileName", "Line", "Column")
EXTRA = ("Discriminator", "StartLine", "StartFileName", "StartAddress")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def text_addresses(path):
    out = run(["objdump", "-d", "-j", ".text", "--no-show-raw-insn", path])
    return [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M)]


def symbolize(tool, obj, addrs, extra):
    inp = "".join("0x%x\n" % a for a in addrs)
    # Linkage names: libiberty and LLVM's demangler print some names differently
    # ("operator< <T>" vs "operator<<T>"), which is not a DWARF question.
    cmd = tool + ["--obj", obj, "--inlines", "--output-style=JSON", "--no-demangle"] + extra
    out = subprocess.run(cmd, input=inp, check=True, stdout=subprocess.PIPE, text=True).stdout
    res = [json.loads(line) for line in out.splitlines() if line.strip()]
    if len(res) != len(addrs):
        raise RuntimeError("%s gave %d answers for %d addresses" % (tool[0], len(res), len(addrs)))
    return res


def build(work, cc, std, dwarf, src, name):
    out = os.path.join(work, name)
    lang = ["-x", "c++"] if src.endswith(".cpp") else []
    run([cc] + lang + ["-O2", "-g" + dwarf, "-Wl,--build-id", "-o", out, os.path.join(HERE, src)] + std)
    return out


def variants(work, base):
    """(label, file given to stackprov, file given to llvm-symbolizer, extra args)."""
    yield "plain", base, base, []
    z = base + ".zlib"
    run(["objcopy", "--compress-debug-sections=zlib", base, z])
    yield "zlib", z, z, []
    zs = base + ".zstd"
    run(["objcopy", "--compress-debug-sections=zstd", base, zs])
    yield "zstd", zs, base, []  # llvm-symbolizer-14 has no zstd: its answer on the uncompressed file
    # stripped, debug file by build-id under a debug directory
    dbgdir = base + ".dbgdir"
    bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", base])).group(1)
    os.makedirs(os.path.join(dbgdir, ".build-id", bid[:2]), exist_ok=True)
    run(["objcopy", "--only-keep-debug", base, os.path.join(dbgdir, ".build-id", bid[:2], bid[2:] + ".debug")])
    sb = base + ".stripped-bid"
    run(["objcopy", "--strip-debug", base, sb])
    yield "strip+build-id", sb, sb, ["--debug-file-directory", dbgdir]
    # stripped, debug file by .gnu_debuglink next to the binary
    ldir = base + ".linkdir"
    os.makedirs(ldir, exist_ok=True)
    dbg = os.path.join(ldir, os.path.basename(base) + ".debug")
    run(["objcopy", "--only-keep-debug", base, dbg])
    sl = os.path.join(ldir, os.path.basename(base))
    run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + dbg, base, sl])
    yield "strip+debuglink", sl, sl, []


def frames_key(r, fields):
    return [tuple(s.get(f) for f in fields) for s in r.get("Symbol", [])]


ALIASES = {}  # symbol name -> address, for the fixture being compared


def load_aliases(path):
    ALIASES.clear()
    for line in run(["nm", "--defined-only", path]).splitlines():
        parts = line.split()
        if len(parts) == 3:
            ALIASES[parts[2]] = int(parts[0], 16)


def same_frames(a, b, fields):
    """Frame lists equal on `fields`; two function names are equal when they
    are aliases (symbols at one address: D1/D2 structors, ...), whose choice
    is a documented rule of ours (doc/symbols.md), not a DWARF question."""
    fa, fb = a.get("Symbol", []), b.get("Symbol", [])
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        for f in fields:
            u, v = x.get(f), y.get(f)
            if u == v:
                continue
            if f == "FunctionName" and u in ALIASES and ALIASES.get(u) == ALIASES.get(v):
                continue
            if f == "StartFileName" and v == "":
                continue  # llvm-14 leaves it empty for DW_FORM_implicit_const decl_file (gcc DWARF 5)
            return False
    return True


def symtab_only(r):
    """llvm answered from the symbol table alone (no DWARF line for any frame)."""
    return all(f.get("Line", 0) == 0 for f in r.get("Symbol", []))


def compare(ours, ref, show, label):
    """Counts over addresses with DWARF (llvm gives a line): agreement on
    function/file/line/column of every frame (core) and on every field (all);
    plus agreement over the symbol-table-only addresses (crt code)."""
    dw = core = full = so = so_ok = 0
    shown = 0
    for a, b in zip(ours, ref):
        if symtab_only(b):
            so += 1
            so_ok += same_frames(a, b, ("FunctionName",))
            continue
        dw += 1
        ok_core = same_frames(a, b, CORE)
        ok_full = ok_core and same_frames(a, b, EXTRA)
        core += ok_core
        full += ok_full
        if not ok_full and shown < show:
            shown += 1
            print("  [%s] %s\n    ours: %s\n    llvm: %s" % (label, b.get("Address"), json.dumps(a.get("Symbol"))[:600],
                                                           json.dumps(b.get("Symbol"))[:600]))
    return dw, core, full, so, so_ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--min-core", type=float, default=99.0, help="minimum %% of addresses agreeing on function/file/line/column and chain")
    ap.add_argument("--show", type=int, default=3)
    args = ap.parse_args()
    if shutil.which(LLVM) is None:
        print("SKIP: %s not found" % LLVM)
        return 77
    os.makedirs(args.work, exist_ok=True)
    compilers = [("gcc", "gcc", "fixture_c.c", []), ("g++", "g++", "fixture_inline.cpp", ["-std=c++17"]),
                 ("clang", "clang-14", "fixture_c.c", []), ("clang++", "clang++-14", "fixture_inline.cpp", ["-std=c++17"])]
    failures = 0
    print("%-40s %7s %9s %9s %8s %9s" % ("fixture / variant", "dwarf", "core %", "all %", "symtab", "name %"))
    for tag, cc, src, std in compilers:
        if shutil.which(cc) is None:
            print("skip %s: not installed" % cc)
            continue
        for dwarf in ("dwarf-4", "dwarf-5"):
            base = build(args.work, cc, std, dwarf, src, "%s-%s" % (tag, dwarf))
            addrs = text_addresses(base)
            load_aliases(base)
            for label, ours_obj, ref_obj, extra in variants(args.work, base):
                ours = symbolize([args.stackprov, "symbolize"], ours_obj, addrs, extra)
                ref = symbolize([LLVM], ref_obj, addrs, extra)
                for r in ref:  # llvm names the module it was given
                    r["ModuleName"] = ours_obj
                name = "%s -%s %s" % (tag, dwarf, label)
                n, core, full, so, so_ok = compare(ours, ref, args.show, name)
                pc, pf = 100.0 * core / max(n, 1), 100.0 * full / max(n, 1)
                print("%-40s %7d %8.2f%% %8.2f%% %8d %8.2f%%" % (name, n, pc, pf, so, 100.0 * so_ok / max(so, 1)))
                if pc < args.min_core:
                    failures += 1
    if failures:
        print("FAIL: %d variants below %.1f%% core agreement" % (failures, args.min_core))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
