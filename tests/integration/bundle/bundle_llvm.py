#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Bundles vs llvm-symbolizer-14: every executable byte of C and C++ fixtures looked up through the bundle alone; determinism.
"""Compiles fixtures (-O2 -g, inlining), builds a bundle with `stackprov bundle build`, moves
the binary away so that only the bundle can answer, looks up every byte of its executable
sections (SHF_EXECINSTR, from `readelf -SW`) with `stackprov bundle lookup`, and compares the
whole answer (function, file:line:column of each inline frame, innermost first) with
llvm-symbolizer-14 --obj BINARY --no-demangle --inlining. The gate is 100% equality; the only
addresses outside it are those llvm names from the symbol table alone (one frame, "??:0:0" or
"<STT_FILE name>:0:0"),
where DWARF has nothing and the bundle must answer "??" (exceptions.txt). Also checks that
building the same bundle twice, and from copies in two directories, gives the same sha256.
A missing tool fails with its name."""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ["gcc", "g++", "readelf", "llvm-symbolizer-14"]


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


def split_answers(text):
    """llvm-symbolizer style output -> list of tuples of (function, location) frames."""
    answers, cur = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "":
            if cur:
                answers.append(tuple(cur))
                cur = []
            i += 1
            continue
        if i + 1 >= len(lines):
            sys.exit("FAIL: truncated symbolizer output near %r" % lines[i])
        cur.append((lines[i], lines[i + 1]))
        i += 2
    if cur:
        answers.append(tuple(cur))
    return answers


def llvm_answers(binary, addrs):
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--no-demangle", "--inlining", "--output-style=LLVM"],
              input="".join("0x%x\n" % a for a in addrs))
    ans = split_answers(out)
    if len(ans) != len(addrs):
        sys.exit("FAIL: llvm-symbolizer-14 gave %d answers for %d addresses" % (len(ans), len(addrs)))
    return ans


def bundle_answers(stackprov, bundle, addrs):
    ans = []
    for k in range(0, len(addrs), 4000):
        chunk = addrs[k:k + 4000]
        out = run([stackprov, "bundle", "lookup", bundle] + ["0x%x" % a for a in chunk])
        got = split_answers(out)
        if len(got) != len(chunk):
            sys.exit("FAIL: bundle lookup gave %d answers for %d addresses" % (len(got), len(chunk)))
        ans += got
    return ans


def sha256_of(path):
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def build_bundle(stackprov, binary, out, cwd):
    printed = run([stackprov, "bundle", "build", binary, "--out", out], cwd=cwd).strip()
    actual = sha256_of(out)
    if printed != actual:
        sys.exit("FAIL: bundle build printed %s but the file's sha256 is %s" % (printed, actual))
    return actual


def check_fixture(args, name, compile_cmd, report):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    binary = os.path.join(work, name)
    run(compile_cmd + ["-o", binary], cwd=HERE)
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
        shutil.copy2(binary, os.path.join(cdir, name))
        copies.append(build_bundle(args.stackprov, os.path.join(cdir, name), os.path.join(cdir, "b.sbundle"), cdir))
    if len({d1, d2} | set(copies)) != 1:
        sys.exit("FAIL: %s: bundles differ between builds: %s %s %s" % (name, d1, d2, copies))

    # Only the bundle may answer: the binary moves to a name nothing refers to.
    moved = os.path.join(args.work, name + ".moved-away")
    os.replace(binary, moved)
    for sub in ("copy1", "copy2/deeper"):
        os.remove(os.path.join(work, sub, name))
    expected = llvm_answers(moved, addrs)
    got = bundle_answers(args.stackprov, b1, addrs)

    gated = agree = symtab_only = 0
    bad = []
    for a, e, g in zip(addrs, expected, got):
        if len(e) == 1 and re.fullmatch(r"(\?\?|[^/]+):0:0", e[0][1]) and g == (("??", "??:0:0"),):
            symtab_only += 1   # exceptions.txt: llvm names it from the symbol table, DWARF has nothing
            continue
        gated += 1
        if e == g:
            agree += 1
        elif len(bad) < 15:
            bad.append("0x%x: llvm %r bundle %r" % (a, e, g))
    inlined = sum(1 for e in expected if len(e) > 1)
    size_bin = os.path.getsize(moved)
    size_bundle = os.path.getsize(b1)
    report.append("%s: %d executable bytes, %d answered from DWARF (%d with inline frames), %d symtab-only; "
                  "agreement %d/%d = %.2f%%; binary %d bytes, bundle %d bytes; %s"
                  % (name, len(addrs), gated, inlined, symtab_only, agree, gated, 100.0 * agree / max(gated, 1),
                     size_bin, size_bundle, d1))
    if inlined == 0:
        sys.exit("FAIL: %s: llvm-symbolizer-14 saw no inlined frame: the fixture does not exercise inlining" % name)
    if gated == 0 or agree != gated:
        sys.exit("FAIL: %s: %d of %d addresses differ from llvm-symbolizer-14:\n  %s"
                 % (name, gated - agree, gated, "\n  ".join(bad)))


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
    print("\n".join(report))
    print("PASS")


if __name__ == "__main__":
    main()
