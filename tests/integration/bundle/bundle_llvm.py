#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Bundles vs llvm-symbolizer-14: every executable byte of C and C++ fixtures looked up through the bundle alone; determinism.
"""Compiles fixtures (-O2 -g, inlining), builds a bundle with `stackprov bundle build`, moves
the binary away so that only the bundle can answer, looks up every byte of its executable
sections (SHF_EXECINSTR, from `readelf -SW`) with `stackprov bundle lookup`, and compares the
whole answer (function, file:line:column of each inline frame, innermost first) with
llvm-symbolizer-14 --obj BINARY --no-demangle --inlining. The gate is 100% equality; the only
addresses llvm names from the symbol table alone (one frame, "??:0:0" or "<STT_FILE name>:0:0":
_start, crt stubs, .init/.fini, .plt) are inside it too: the bundle carries symbol-table ranges
and must give llvm's exact answer there (counted separately). Also checks that
building the same bundle twice, and from copies in two directories, gives the same sha256.
Unwind rows: at every executable byte, `stackprov bundle unwind` must print the row that
binutils `readelf -wF` (decoded CFI tables) shows for the FDE covering it (.eh_frame first, as
the unwinder), rendered in llvm-dwarfdump's notation, or "end-of-stack" (ra undefined), "full"
where the row cannot be written in the compact form (expressions, register rules, offsets that
are not int8 words), "none" outside every FDE. Same-value and unset registers, and registers
the x86_64 unwinder does not track, carry no rule. (Not llvm-dwarfdump-14: it does not restore
the CFA at DW_CFA_restore_state, see exceptions.txt.)
The C++ fixture is also built with clang++-14, and with its DWARF in a separate file (objcopy
--only-keep-debug, .gnu_debuglink). `bundle inspect --json` must give the build-id readelf -n
shows, the basename, and the sha256 of the file and of the debug file (hashlib).
Then the same lookups and rows for 3,000 seeded addresses of the system libc.so.6 (DWARF from
libc6-dbg), which we did not build; where llvm-symbolizer-14 names nothing on libc.so.6, its
answer on the debug file (/usr/lib/debug/.build-id/...: the .symtab locals libc.so.6 lost).
A missing tool fails with its name."""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers  # noqa: E402  (tests/lib: the peers' output parsers)

TOOLS = ["gcc", "g++", "clang++-14", "readelf", "objcopy", "llvm-symbolizer-14"]


def need_tools():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        sys.exit("FAIL: missing tool(s): %s (make deps)" % ", ".join(missing))


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd[:6]), p.returncode, p.stderr.strip()[:2000]))
    return p.stdout


def exec_ranges(path):
    """[lo, hi) of SHF_EXECINSTR PROGBITS sections, from binutils readelf (not our ELF reader)."""
    out = run(["readelf", "-SW", path])
    ranges = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if not m or m.group(2) != "PROGBITS" or "X" not in m.group(6):
            continue
        lo, size = int(m.group(3), 16), int(m.group(5), 16)
        if size:
            ranges.append((lo, lo + size))
    if not ranges:
        sys.exit("FAIL: readelf found no executable section in %s" % path)
    return ranges


def llvm_answers(binary, addrs):
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--no-demangle", "--inlining", "--output-style=LLVM"],
              input="".join("0x%x\n" % a for a in addrs))
    ans = llvm_symbolizer_answers(out)
    if len(ans) != len(addrs):
        sys.exit("FAIL: llvm-symbolizer-14 gave %d answers for %d addresses" % (len(ans), len(addrs)))
    return ans


def bundle_answers(stackprov, bundle, addrs):
    ans = []
    for k in range(0, len(addrs), 4000):
        chunk = addrs[k:k + 4000]
        out = run([stackprov, "bundle", "lookup", bundle] + ["0x%x" % a for a in chunk])
        got = llvm_symbolizer_answers(out)
        if len(got) != len(chunk):
            sys.exit("FAIL: bundle lookup gave %d answers for %d addresses" % (len(got), len(chunk)))
        ans += got
    return ans


X86_REGS = ["RAX", "RDX", "RCX", "RBX", "RSI", "RDI", "RBP", "RSP", "R8", "R9", "R10", "R11", "R12", "R13",
            "R14", "R15", "RIP"]


def compact_row(cols, vals):
    """One row of binutils `readelf -wF` -> what the compact row prints (llvm-dwarfdump notation)
    or "end-of-stack" / "full"."""
    row = dict(zip(cols, vals))
    if row.get("ra", "u") == "u":
        return "end-of-stack"
    m = re.fullmatch(r"([a-z0-9]+)([+-]\d+)", row["CFA"])
    if not m or m.group(1).upper() not in X86_REGS[:16] or abs(int(m.group(2))) >= 2 ** 31:
        return "full"
    off = int(m.group(2))
    cfa = "CFA=%s%s" % (m.group(1).upper(), "" if off == 0 else "%+d" % off)
    kept = []
    for name, val in row.items():
        if name in ("LOC", "CFA"):
            continue
        reg = "RIP" if name == "ra" else name.upper()
        if reg not in X86_REGS or val in ("u", "s"):
            continue   # not tracked by the unwinder / no rule / same value: nothing to restore
        vm = re.fullmatch(r"c([+-]\d+)", val)
        if not vm:
            return "full"   # register rule, val_offset, expression
        o = int(vm.group(1))
        if o % 8 or not -128 <= o // 8 <= 127:
            return "full"
        kept.append((X86_REGS.index(reg), "%s=[CFA%s]" % (reg, "" if o == 0 else "%+d" % o)))
    if len(kept) > 13:
        return "full"
    return cfa + ":" + "".join((", " if i else " ") + t for i, (_, t) in enumerate(sorted(kept)))


def readelf_rows(binary):
    """{section: [(fde_lo, fde_hi, [(row_pc, text)])]} from binutils readelf -wF (decoded CFI tables)."""
    out = run(["readelf", "--debug-dump=no-follow-links,frames-interp", binary])
    secs, cur_sec, entry, cols = {".eh_frame": [], ".debug_frame": []}, None, None, None
    cies = {}   # (section, offset) -> rows of the CIE's initial instructions (at LOC 0)
    for line in out.splitlines():
        m = re.match(r"^Contents of the (\.eh_frame|\.debug_frame) section:", line)
        if m:
            cur_sec, entry = m.group(1), None
            continue
        m = re.match(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if m and cur_sec:
            rows = []
            entry, cols = rows, None
            # An FDE without instructions prints no table: its CIE's initial row applies.
            secs[cur_sec].append((int(m.group(3), 16), int(m.group(4), 16), rows,
                                  cies.get((cur_sec, int(m.group(2), 16)), [])))
            continue
        m = re.match(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE", line)
        if m and cur_sec:
            entry, cols = [], None
            cies[(cur_sec, int(m.group(1), 16))] = entry
            continue
        if re.match(r"^[0-9a-f]+ .*ZERO terminator", line):
            entry = None
            continue
        if entry is None:
            continue
        if line.strip().startswith("LOC "):
            cols = line.split()
            continue
        m = re.match(r"^([0-9a-f]{8,16}) (.*)$", line)
        if m and cols:
            vals = re.findall(r"\S+ \([^)]*\)|\S+", line)   # "r9 (r9)": a register rule
            if len(vals) != len(cols):
                sys.exit("FAIL: readelf -wF row %r does not match its header %r" % (line, cols))
            entry.append((int(m.group(1), 16), compact_row(cols, vals)))
    out_secs = {}
    for name, fdes in secs.items():
        out_secs[name] = []
        for lo, hi, rows, cie_rows in fdes:
            if not rows:
                if not cie_rows:
                    sys.exit("FAIL: readelf -wF: FDE at 0x%x has no row and its CIE none" % lo)
                rows = [(lo, cie_rows[-1][1])]
            out_secs[name].append((lo, hi, rows))
    secs = out_secs
    return secs


def expected_unwind(binary, addrs):
    secs = readelf_rows(binary)
    if not secs[".eh_frame"]:
        sys.exit("FAIL: readelf -wF shows no .eh_frame FDE in %s" % binary)
    want = {}
    for name in (".debug_frame", ".eh_frame"):  # .eh_frame last: it wins, as in the unwinder
        for lo, hi, rows in secs[name]:
            for i, (pc, text) in enumerate(rows):
                end = rows[i + 1][0] if i + 1 < len(rows) else hi
                for a in range(max(pc, lo), min(end, hi)):
                    want[a] = text
    return [want.get(a, "none") for a in addrs]


def bundle_unwind(stackprov, bundle, addrs):
    got = []
    for k in range(0, len(addrs), 4000):
        chunk = addrs[k:k + 4000]
        out = run([stackprov, "bundle", "unwind", bundle] + ["0x%x" % a for a in chunk]).splitlines()
        if len(out) != len(chunk):
            sys.exit("FAIL: bundle unwind gave %d lines for %d addresses" % (len(out), len(chunk)))
        got += out
    return got


def sha256_of(path):
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def build_bundle(stackprov, binary, out, cwd):
    printed = run([stackprov, "bundle", "build", binary, "--out", out], cwd=cwd).strip()
    actual = sha256_of(out)
    if printed != actual:
        sys.exit("FAIL: bundle build printed %s but the file's sha256 is %s" % (printed, actual))
    return actual


def check_identity(stackprov, bundle, binary, debug_file):
    """inspect --json vs readelf -n (build-id) and hashlib (file and debug-file sha256)."""
    import json
    info = json.loads(run([stackprov, "bundle", "inspect", bundle, "--json"]))
    notes = run(["readelf", "-n", binary])
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    if not m:
        sys.exit("FAIL: readelf -n shows no build-id in %s" % binary)
    mods = info["modules"]
    want = {"id_kind": "elf-build-id", "id": m.group(1), "name": os.path.basename(binary),
            "sha256_file": sha256_of(binary)[7:], "sha256_debug": sha256_of(debug_file)[7:]}
    if len(mods) != 1 or any(mods[0][k] != v for k, v in want.items()):
        sys.exit("FAIL: bundle inspect %s: %r, expected %r" % (bundle, mods, want))
    if info["bundle"] != sha256_of(bundle) or info["size"] != os.path.getsize(bundle):
        sys.exit("FAIL: bundle inspect %s: identity %s size %d" % (bundle, info["bundle"], info["size"]))


def check_fixture(args, name, compile_cmd, report, split_debug=False):
    work = os.path.join(args.work, name)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    binary = os.path.join(bindir, name)
    run(compile_cmd + ["-o", binary], cwd=HERE)
    debug_file = binary
    if split_debug:
        # DWARF only in a separate file found through .gnu_debuglink (next to the binary).
        debug_file = binary + ".debug"
        run(["objcopy", "--only-keep-debug", binary, debug_file])
        run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + debug_file, binary])
        if "debug_info" in run(["readelf", "-SW", binary]):
            sys.exit("FAIL: objcopy left .debug_info in %s" % binary)
    ranges = exec_ranges(binary)
    addrs = [a for lo, hi in ranges for a in range(lo, hi)]

    # Determinism: twice from one path, and from copies in two other directories (other cwd).
    b1 = os.path.join(work, name + ".sbundle")
    d1 = build_bundle(args.stackprov, binary, b1, work)
    d2 = build_bundle(args.stackprov, binary, os.path.join(work, "again.sbundle"), work)
    copies = []
    for sub in ("copy1", "copy2/deeper"):
        cdir = os.path.join(work, sub)
        os.makedirs(cdir, exist_ok=True)
        for f in os.listdir(bindir):
            shutil.copy2(os.path.join(bindir, f), os.path.join(cdir, f))
        copies.append(build_bundle(args.stackprov, os.path.join(cdir, name), os.path.join(cdir, "b.sbundle"), cdir))
    if len({d1, d2} | set(copies)) != 1:
        sys.exit("FAIL: %s: bundles differ between builds: %s %s %s" % (name, d1, d2, copies))
    check_identity(args.stackprov, b1, binary, debug_file)

    # Only the bundle may answer: the binary (and its debug file) move to a directory
    # nothing refers to.
    moved_dir = os.path.join(args.work, name + ".moved-away")
    os.replace(bindir, moved_dir)
    moved = os.path.join(moved_dir, name)
    for sub in ("copy1", "copy2/deeper"):
        shutil.rmtree(os.path.join(work, sub))
    expected = llvm_answers(moved, addrs)
    got = bundle_answers(args.stackprov, b1, addrs)

    gated = agree = symtab_only = 0
    bad = []
    for a, e, g in zip(addrs, expected, got):
        gated += 1
        if len(e) == 1 and e[0][0] != "??" and re.fullmatch(r"(\?\?|[^/]+):0:0", e[0][1]):
            symtab_only += 1   # llvm names it from the symbol table alone: the bundle must say the same
        if e == g:
            agree += 1
        elif len(bad) < 15:
            bad.append("0x%x: llvm %r bundle %r" % (a, e, g))
    want_rows = expected_unwind(moved, addrs)
    got_rows = bundle_unwind(args.stackprov, b1, addrs)
    row_bad = ["0x%x: readelf -wF %r bundle %r" % (a, w, g)
               for a, w, g in zip(addrs, want_rows, got_rows) if w != g]
    kinds = {}
    for w in want_rows:
        k = w if w in ("full", "none", "end-of-stack") else "compact"
        kinds[k] = kinds.get(k, 0) + 1
    if kinds.get("compact", 0) == 0:
        sys.exit("FAIL: %s: no compact unwind row expected: the comparison would be empty" % name)
    inlined = sum(1 for e in expected if len(e) > 1)
    size_bin = os.path.getsize(moved) + (os.path.getsize(moved + ".debug") if split_debug else 0)
    size_bundle = os.path.getsize(b1)
    report.append("%s: %d executable bytes, %d compared (%d with inline frames, %d named from the symbol table only); "
                  "agreement %d/%d = %.2f%%; binary %d bytes, bundle %d bytes; %s"
                  % (name, len(addrs), gated, inlined, symtab_only, agree, gated, 100.0 * agree / max(gated, 1),
                     size_bin, size_bundle, d1))
    report.append("%s unwind: %d/%d bytes agree with readelf -wF (%s)"
                  % (name, len(addrs) - len(row_bad), len(addrs),
                     ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
    if row_bad:
        sys.exit("FAIL: %s: %d unwind rows differ from readelf -wF:\n  %s"
                 % (name, len(row_bad), "\n  ".join(row_bad[:15])))
    if inlined == 0:
        sys.exit("FAIL: %s: llvm-symbolizer-14 saw no inlined frame: the fixture does not exercise inlining" % name)
    if symtab_only == 0:
        sys.exit("FAIL: %s: llvm-symbolizer-14 named no address from the symbol table alone (_start, .init): "
                 "the symbol-table ranges are not exercised" % name)
    if gated == 0 or agree != gated:
        sys.exit("FAIL: %s: %d of %d addresses differ from llvm-symbolizer-14:\n  %s"
                 % (name, gated - agree, gated, "\n  ".join(bad)))


def check_real(args, path, count, report):
    """A binary we did not build (its DWARF in /usr/lib/debug, package libc6-dbg): seeded
    addresses of its executable sections, same comparisons as the fixtures."""
    import random
    if not os.path.exists(path):
        sys.exit("FAIL: %s is missing" % path)
    bundle = os.path.join(args.work, os.path.basename(path) + ".sbundle")
    p = subprocess.run([args.stackprov, "bundle", "build", path, "--out", bundle],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: bundle build %s (is libc6-dbg installed? make deps): %s" % (path, p.stderr.strip()))
    ranges = exec_ranges(path)
    rnd = random.Random(20261125)
    addrs = sorted({rnd.randrange(*rnd.choice(ranges)) for _ in range(count)})
    expected = llvm_answers(path, addrs)
    # Where llvm-symbolizer-14 names nothing on the module, the bundle holds its answer on the
    # module's separate debug file (doc/bundles.md "Symbol-table ranges": the local symbols of
    # libc6-dbg's .symtab that the stripped libc.so.6 lost).
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]))
    debug_file = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:]) if m else ""
    unnamed = [k for k, e in enumerate(expected) if e == (("??", "??:0:0"),)]
    from_debug = 0
    if unnamed and os.path.exists(debug_file):
        again = llvm_answers(debug_file, [addrs[k] for k in unnamed])
        for k, e in zip(unnamed, again):
            from_debug += e != expected[k]
            expected[k] = e
    got = bundle_answers(args.stackprov, bundle, addrs)
    gated = agree = 0
    bad = []
    symtab_only = 0
    for a, e, g in zip(addrs, expected, got):
        gated += 1
        symtab_only += len(e) == 1 and e[0][0] != "??" and bool(re.fullmatch(r"(\?\?|[^/]+):0:0", e[0][1]))
        if e == g:
            agree += 1
        elif len(bad) < 15:
            bad.append("0x%x: llvm %r bundle %r" % (a, e, g))
    want_rows = expected_unwind(path, addrs)
    got_rows = bundle_unwind(args.stackprov, bundle, addrs)
    row_bad = ["0x%x: readelf -wF %r bundle %r" % (a, w, g) for a, w, g in zip(addrs, want_rows, got_rows) if w != g]
    report.append("%s: %d sampled addresses, %d compared (%d named from the symbol table only, %d of them by the debug "
                  "file's alone), agreement %d/%d; unwind %d/%d; file %d bytes, bundle %d bytes"
                  % (path, len(addrs), gated, symtab_only, from_debug, agree, gated, len(addrs) - len(row_bad), len(addrs),
                     os.path.getsize(path), os.path.getsize(bundle)))
    if gated == 0 or agree != gated:
        sys.exit("FAIL: %s: %d of %d addresses differ from llvm-symbolizer-14:\n  %s"
                 % (path, gated - agree, gated, "\n  ".join(bad)))
    if row_bad:
        sys.exit("FAIL: %s: %d unwind rows differ from readelf -wF:\n  %s"
                 % (path, len(row_bad), "\n  ".join(row_bad[:15])))


def check_errors(args):
    """Refusals name the offending value and exit non-zero."""
    work = os.path.join(args.work, "errors")
    os.makedirs(work)
    src = os.path.join(work, "noid.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 0; }\n")
    noid = os.path.join(work, "noid")
    run(["gcc", "-g", "-Wl,--build-id=none", src, "-o", noid])
    notbundle = os.path.join(work, "not-a-bundle")
    with open(notbundle, "wb") as f:
        f.write(b"\x7fELF not a bundle at all")
    good = os.path.join(args.work, "fx_c", "fx_c.sbundle")
    cases = [
        (["bundle", "build", noid, "--out", os.path.join(work, "x.sbundle")], noid, "build-id"),
        (["bundle", "build", os.path.join(work, "missing")], os.path.join(work, "missing"), ""),
        (["bundle", "inspect", notbundle], notbundle, "bundle"),
        (["bundle", "lookup", good, "0xzz"], "0xzz", "address"),
        (["bundle", "lookup", good, "--build-id", "abcd", "0x10"], "abcd", "build-id"),
        (["bundle", "frobnicate"], "frobnicate", "subcommand"),
        (["bundle", "build", good, "--bogus"], "--bogus", "option"),
    ]
    for argv, must, also in cases:
        p = subprocess.run([args.stackprov] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode == 0 or must not in p.stderr or also not in p.stderr:
            sys.exit("FAIL: stackprov %s: exit %d, stderr %r (expected a refusal naming %r and %r)"
                     % (" ".join(argv), p.returncode, p.stderr, must, also))
    if os.path.exists(os.path.join(work, "x.sbundle")):
        sys.exit("FAIL: a refused build left its output file")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.stackprov = os.path.abspath(args.stackprov)
    args.work = os.path.abspath(args.work)
    need_tools()
    if os.path.isdir(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    report = []
    base = ["-O2", "-g", "-Wl,--build-id"]
    check_fixture(args, "fx_c", ["gcc"] + base + ["fixture_a.c", "fixture_b.c"], report)
    check_fixture(args, "fx_cpp", ["g++", "-std=c++17"] + base + ["fixture.cpp"], report)
    check_fixture(args, "fx_cpp_split", ["g++", "-std=c++17"] + base + ["fixture.cpp"], report, split_debug=True)
    check_fixture(args, "fx_cpp_clang", ["clang++-14", "-std=c++17"] + base + ["fixture.cpp"], report)
    check_real(args, "/usr/lib/x86_64-linux-gnu/libc.so.6", 3000, report)
    check_errors(args)
    print("\n".join(report))
    print("PASS")


if __name__ == "__main__":
    main()
