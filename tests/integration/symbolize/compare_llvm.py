#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds the symbolization fixtures (gcc/clang, DWARF 4/5, compressed, stripped, split .dwo/.dwp, dwz, MiniDebugInfo) and compares every .text instruction address with llvm-symbolizer.
import argparse
import collections
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

LLVM = "llvm-symbolizer-14"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_json  # noqa: E402  (tests/lib: the peers' output parsers)
from toolrun import nm_command, run_files  # noqa: E402  (nm's plugins, megabytes through files)

CORE = ("FunctionName", "FileName", "Line", "Column")
EXTRA = ("Discriminator", "StartLine", "StartFileName", "StartAddress")
EXCEPTIONS = os.path.join(HERE, "fixture_exceptions.txt")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def text_addresses(path):
    out = run(["objdump", "-d", "-j", ".text", "--no-show-raw-insn", path])
    return [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\t", out, re.M)]


NM = []  # nm_command(): nm without bfd's LLVM plugins (16 runs)

# llvm-symbolizer's answers within this run, by (file identity, addresses, arguments): several variants
# share their reference (zstd, dwz, dwz -m and often the split builds are answered on the plain build).
REFERENCE = {}


def reference(obj, addrs, extra):
    """llvm-symbolizer's answers: (JSON lines, their values)."""
    st = os.stat(obj)
    key = (os.path.realpath(obj), st.st_size, st.st_mtime_ns, st.st_ino, tuple(addrs), tuple(extra))
    if key not in REFERENCE:
        lines = symbolize_lines([LLVM], obj, addrs, extra)
        REFERENCE[key] = (lines, llvm_symbolizer_json("\n".join(lines)))
    return REFERENCE[key]


def symbolize(tool, obj, addrs, extra):
    """The parsed JSON answer of each address (why_test.py and debuginfod_test.py use it too)."""
    return llvm_symbolizer_json("\n".join(symbolize_lines(tool, obj, addrs, extra)))


def symbolize_lines(tool, obj, addrs, extra):
    """The JSON answer line of each address (llvm_symbolizer_json reads them)."""
    inp = "".join("0x%x\n" % a for a in addrs)
    # Linkage names: libiberty and LLVM's demangler print some names differently
    # ("operator< <T>" vs "operator<<T>"), which is not a DWARF question.
    cmd = tool + ["--obj", obj, "--inlines", "--output-style=JSON", "--no-demangle"] + extra
    out = run_files(cmd, inp, stderr=False).stdout
    lines = [line for line in out.splitlines() if line.strip()]  # as llvm_symbolizer_json splits
    if len(lines) != len(addrs):
        raise RuntimeError("%s gave %d answers for %d addresses" % (tool[0], len(lines), len(addrs)))
    return lines


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
    """Variants that need their own build or tool:
    (label, ours, ref, extra args, address source, extra args of stackprov only).
    Each is compared before the next is made (the .dwp variant deletes the split variant's .dwo files)."""
    name = os.path.basename(base)
    # Split DWARF: skeleton units in the binary, .dwo found by DW_AT_dwo_name under DW_AT_comp_dir.
    sd = fresh_dir(base + ".split")
    sb = build(sd, cc, std, dwarf, src, name, ["-gsplit-dwarf"])
    # llvm-14 drops inline frames of clang's split C units (see doc/symbolization.md), so the reference
    # is llvm on the unsplit build when the code is identical, else llvm on the split binary.
    split_same = same_text(sb, base)
    split_ref = base if split_same else sb
    yield "split .dwo", sb, split_ref, [], split_ref, []
    # Split DWARF packaged: <binary>.dwp beside it, the .dwo files removed (so the package must be used).
    # The binary is the split build's, copied (a second -gsplit-dwarf compile gave the same code and only
    # another DW_AT_comp_dir); its .dwo files are deleted from that comp_dir, so none is found anywhere.
    d = fresh_dir(base + ".splitdwp")
    pb = os.path.join(d, name)
    shutil.copy2(sb, pb)
    run(["llvm-dwp-14", "-e", pb, "-o", pb + ".dwp"])
    dwos = [f for f in os.listdir(sd) if f.endswith(".dwo")]
    if not dwos:
        raise RuntimeError("%s: the split build wrote no .dwo file" % sd)
    for f in dwos:
        os.unlink(os.path.join(sd, f))
    split_ref = base if split_same else pb
    yield "split .dwp", pb, split_ref, [], split_ref, []
    # dwz 0.15 cannot read clang's DWARF 5 ("Unknown debugging section .debug_addr"): there is no
    # dwz output to compare for those two builds; any other dwz failure fails the test (run() raises).
    if not (cc.startswith("clang") and dwarf == "dwarf-5"):
        # dwz in one file: partial units, DW_TAG_imported_unit, DW_FORM_ref_addr into them.
        # The reference is llvm on the file before dwz (same code, same DWARF meaning).
        z = base + ".dwz"
        run(["dwz", "-o", z, base])
        yield "dwz", z, base, [], base, []
        # dwz -m: a supplementary file (.gnu_debugaltlink, DW_FORM_GNU_ref_alt/strp_alt) shared with a second binary.
        d = fresh_dir(base + ".dwzm")
        m1 = os.path.join(d, name)
        shutil.copy(base, m1)
        m2 = build(d, cc, std, dwarf, src, name + "-O1", opt="-O1")
        common = os.path.join(d, "common.debug")
        run(["dwz", "-m", common, "-M", common, m1, m2])
        yield "dwz -m (alt file)", m1, base, [], base, []
    # MiniDebugInfo (Fedora's recipe, weak functions kept too): stripped binary, .gnu_debugdata =
    # xz(ELF with the .symtab of function symbols not in .dynsym). llvm-14 does not read
    # .gnu_debugdata, and neither does the compatible mode: llvm on the same file is the reference.
    # (stackprov's own mode, which reads it, is checked by symbol_names.py against readelf.)
    if True:  # keeps the diff small; xz is required by main()
        d = fresh_dir(base + ".mini")
        dyn = set(l.split()[0] for l in run(NM + ["-D", "--format=posix", "--defined-only", base]).splitlines() if l)
        funcs = [l.split()[0] for l in run(NM + ["--format=posix", "--defined-only", base]).splitlines()
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
        yield "minidebuginfo", mb, mb, [], base, []


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


FIELDS = CORE + EXTRA


def difference(a, b):
    """'' when every frame agrees on every field, else the first differing field
    and whether llvm answered from the symbol table alone (no line in any frame)."""
    fa, fb = a.get("Symbol", []), b.get("Symbol", [])
    if fa == fb:  # every field of every frame equal (most addresses): no per-field walk
        return ""
    where = "symtab-only" if all(f.get("Line", 0) == 0 for f in fb) else "dwarf"
    if len(fa) != len(fb):
        return "chain-length (%s)" % where
    for i, (x, y) in enumerate(zip(fa, fb)):
        for f in FIELDS:
            if x.get(f) != y.get(f):
                return "%s/%s (%s)" % (f, "outer" if i == len(fa) - 1 else "inlined", where)
    return ""


def load_exceptions(path):
    """{(label, address): reason} from `label<TAB>0xADDR<TAB>reason` lines."""
    ex = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            p = line.split("\t")
            if len(p) != 3 or not p[2].strip():
                raise SystemExit("%s:%d: want label<TAB>0xADDR<TAB>reason" % (path, n))
            ex[(p[0], int(p[1], 16))] = p[2]
    return ex


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--show", type=int, default=3)
    ap.add_argument("--report-only", action="store_true", help="print agreement, never fail")
    args = ap.parse_args()
    compilers = [("gcc", "gcc", "fixture_c.c", []), ("g++", "g++", "fixture_inline.cpp", ["-std=c++17"]),
                 ("clang", "clang-14", "fixture_c.c", []), ("clang++", "clang++-14", "fixture_inline.cpp", ["-std=c++17"])]
    for tool in [LLVM, "objdump", "objcopy", "nm", "readelf", "xz", "dwz", "llvm-dwp-14"] + [c[1] for c in compilers]:
        if shutil.which(tool) is None:
            print("FAIL: %s not found (make deps)" % tool)
            return 1
    NM[:] = nm_command()
    exceptions = load_exceptions(EXCEPTIONS)
    used = set()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    print("%-40s %7s %9s %9s  %s" % ("fixture / variant", "addrs", "symtab", "agree %", "differences"))
    for tag, cc, src, std in compilers:
        for dwarf in ("dwarf-4", "dwarf-5"):
            base = build(args.work, cc, std, dwarf, src, "%s-%s" % (tag, dwarf))
            addrs = text_addresses(base)
            cases = itertools.chain(((l, o, r, e, None, []) for l, o, r, e in variants(args.work, base)),
                                    extra_variants(os.path.dirname(base), cc, std, dwarf, src, base))
            for label, ours_obj, ref_obj, extra, addr_obj, ours_extra in cases:
                vaddrs = addrs if addr_obj in (None, base) else text_addresses(addr_obj)
                ours = symbolize_lines([args.stackprov, "symbolize"] + ours_extra, ours_obj, vaddrs, extra)
                ref_lines, ref = reference(ref_obj, vaddrs, extra)
                name = "%s -%s %s" % (tag, dwarf, label)
                classes = collections.Counter()
                unlisted = shown = symtab = 0
                # A line of ours with the text of llvm's, but for the file named (ModuleName, which is not
                # compared), is the same answer: it needs no reading. Any other line is read and compared.
                ref_mod, ours_mod = ('"ModuleName":%s' % json.dumps(o) for o in (ref_obj, ours_obj))
                for a, xl, yl, y in zip(vaddrs, ours, ref_lines, ref):
                    symtab += all(f.get("Line", 0) == 0 for f in y.get("Symbol", []))
                    if xl == yl or (ref_mod != ours_mod and xl == yl.replace(ref_mod, ours_mod, 1)):
                        continue
                    x = llvm_symbolizer_json(xl)[0]
                    d = difference(x, y)
                    if not d:
                        continue
                    classes[d] += 1
                    if (name, a) in exceptions:
                        used.add((name, a))
                        continue
                    unlisted += 1
                    if shown < args.show:
                        shown += 1
                        print("  [%s] 0x%x %s\n    ours: %s\n    llvm: %s" % (name, a, d, json.dumps(x.get("Symbol"))[:600],
                                                                       json.dumps(y.get("Symbol"))[:600]))
                agree = 100.0 * (len(vaddrs) - sum(classes.values())) / max(len(vaddrs), 1)
                print("%-40s %7d %9d %8.2f%%  %s" % (name, len(vaddrs), symtab, agree, dict(classes)))
                if unlisted:
                    failures += 1
    stale = set(exceptions) - used
    for name, a in sorted(stale):
        print("stale exception (agrees now or not compared): %s 0x%x" % (name, a))
    if args.report_only:
        return 0
    if failures or stale:
        print("FAIL: %d variants with differences not in %s, %d stale exceptions" % (
            failures, os.path.basename(EXCEPTIONS), len(stale)))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
