#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds the symbolization fixtures (gcc/clang, DWARF 4/5, compressed, stripped, split .dwo/.dwp, dwz, MiniDebugInfo) and compares every .text instruction address with llvm-symbolizer.
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


def build(work, cc, std, dwarf, src, name, extra=(), opt="-O2"):
    out = os.path.join(work, name)
    lang = ["-x", "c++"] if src.endswith(".cpp") else []
    run([cc] + lang + [opt, "-g" + dwarf, "-Wl,--build-id", "-o", out, os.path.join(HERE, src)] + list(extra) + std,
        cwd=work)
    return out


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def same_text(a, b):
    """Whether two binaries have byte-identical .text at the same address (then DWARF answers must agree)."""
    def text(p):
        out = p + ".text.bin"
        run(["objcopy", "-O", "binary", "--only-section=.text", p, out])
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        return data, run(["objdump", "-h", "-j", ".text", p]).split("\n")[-3:]
    return text(a) == text(b)


def extra_variants(work, cc, std, dwarf, src, base):
    """Variants that need their own build or tool: (label, ours, ref, extra args, address source, mode).
    mode "dwarf" compares like variants(); "symtab" compares the physical function's name only."""
    name = os.path.basename(base)
    # Split DWARF: skeleton units in the binary, .dwo found by DW_AT_dwo_name under DW_AT_comp_dir.
    d = fresh_dir(base + ".split")
    sb = build(d, cc, std, dwarf, src, name, ["-gsplit-dwarf"])
    # llvm-14 drops inline frames of clang's split C units (see doc/symbolization.md), so the reference
    # is llvm on the unsplit build when the code is identical, else llvm on the split binary.
    split_ref = base if same_text(sb, base) else sb
    yield "split .dwo", sb, split_ref, [], split_ref, "dwarf"
    # Split DWARF packaged: <binary>.dwp beside it, the .dwo files removed (so the package must be used).
    dwp_tool = shutil.which("llvm-dwp-14") or shutil.which("dwp")
    if dwp_tool:
        d = fresh_dir(base + ".splitdwp")
        pb = build(d, cc, std, dwarf, src, name, ["-gsplit-dwarf"])
        run([dwp_tool, "-e", pb, "-o", pb + ".dwp"])
        for f in os.listdir(d):
            if f.endswith(".dwo"):
                os.unlink(os.path.join(d, f))
        split_ref = base if same_text(pb, base) else pb
        yield "split .dwp", pb, split_ref, [], split_ref, "dwarf"
    else:
        print("skip split .dwp: neither llvm-dwp-14 nor dwp installed")
    if shutil.which("dwz"):
        # dwz in one file: partial units, DW_TAG_imported_unit, DW_FORM_ref_addr into them.
        # The reference is llvm on the file before dwz (same code, same DWARF meaning).
        z = base + ".dwz"
        r = subprocess.run(["dwz", "-o", z, base], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode == 0 and os.path.exists(z):
            yield "dwz", z, base, [], base, "dwarf"
        else:
            print("skip dwz: %s" % r.stderr.strip()[:200])
        # dwz -m: a supplementary file (.gnu_debugaltlink, DW_FORM_GNU_ref_alt/strp_alt) shared with a second binary.
        d = fresh_dir(base + ".dwzm")
        m1 = os.path.join(d, name)
        shutil.copy(base, m1)
        m2 = build(d, cc, std, dwarf, src, name + "-O1", opt="-O1")
        common = os.path.join(d, "common.debug")
        r = subprocess.run(["dwz", "-m", common, "-M", common, m1, m2], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode == 0 and os.path.exists(common):
            yield "dwz -m (alt file)", m1, base, [], base, "dwarf"
        else:
            print("skip dwz -m: %s" % r.stderr.strip()[:200])
    else:
        print("skip dwz: not installed (scripts/install-deps.sh)")
    # MiniDebugInfo (Fedora's recipe, weak functions kept too): stripped binary, .gnu_debugdata =
    # xz(ELF with the .symtab of function symbols not in .dynsym). Reference: llvm on the binary with
    # .symtab and no DWARF (llvm-14 does not read .gnu_debugdata itself).
    if shutil.which("xz"):
        d = fresh_dir(base + ".mini")
        dyn = set(l.split()[0] for l in run(["nm", "-D", "--format=posix", "--defined-only", base]).splitlines() if l)
        funcs = [l.split()[0] for l in run(["nm", "--format=posix", "--defined-only", base]).splitlines()
                 if len(l.split()) > 1 and l.split()[1] in ("T", "t", "W", "w")]
        keep = os.path.join(d, "keep")
        with open(keep, "w") as f:
            f.write("".join(x + "\n" for x in sorted(set(funcs) - dyn)))
        mini = os.path.join(d, "mini")
        run(["objcopy", "--only-keep-debug", base, mini])
        run(["objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
             "--keep-symbols=" + keep, mini])
        run(["xz", "-f", mini])
        mb = os.path.join(d, name)
        run(["objcopy", "--strip-all", "--add-section", ".gnu_debugdata=" + mini + ".xz", base, mb])
        ref = os.path.join(d, name + ".symtab-only")
        run(["objcopy", "--strip-debug", base, ref])
        yield "minidebuginfo", mb, ref, [], base, "symtab"


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


SIZED = []  # (start, end, name) of sized function symbols of the fixture being compared


def load_sized(path):
    del SIZED[:]
    for line in run(["nm", "-S", "--defined-only", path]).splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in ("T", "t", "W", "w"):
            a, n = int(p[0], 16), int(p[1], 16)
            if n:
                SIZED.append((a, a + n, p[3]))


def compare_symtab(ours, ref, addrs):
    """Physical function names where a sized function symbol covers the address (no guessing past st_size)."""
    n = ok = 0
    for a, x, y in zip(addrs, ours, ref):
        if not any(lo <= a < hi for lo, hi, _ in SIZED):
            continue
        n += 1
        fx, fy = x.get("Symbol", [{}])[-1].get("FunctionName"), y.get("Symbol", [{}])[-1].get("FunctionName")
        ok += fx == fy or (fx in ALIASES and ALIASES.get(fx) == ALIASES.get(fy))
    return n, ok


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
            cases = [(l, o, r, e, None, "dwarf") for l, o, r, e in variants(args.work, base)]
            cases += list(extra_variants(os.path.dirname(base), cc, std, dwarf, src, base))
            for label, ours_obj, ref_obj, extra, addr_obj, mode in cases:
                vaddrs = addrs if addr_obj in (None, base) else text_addresses(addr_obj)
                ours = symbolize([args.stackprov, "symbolize"], ours_obj, vaddrs, extra)
                ref = symbolize([LLVM], ref_obj, vaddrs, extra)
                if mode == "symtab":
                    load_sized(base)
                    n, ok = compare_symtab(ours, ref, vaddrs)
                    name = "%s -%s %s" % (tag, dwarf, label)
                    print("%-40s %7s %9s %9s %8d %8.2f%%" % (name, "-", "-", "-", n, 100.0 * ok / max(n, 1)))
                    if ok < n:
                        failures += 1
                    continue
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
