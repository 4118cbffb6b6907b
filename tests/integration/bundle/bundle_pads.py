#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Return pads of bundles vs binutils objdump (call instructions) and llvm-symbolizer-14 (the inline chain at each call).
"""Builds bundles of the C and C++ fixtures (gcc, g++, clang++-14, -O2 -g; both also for arm64
and mips32, the C one also little-endian mips32) and of the system python3.11 (DWARF from
python3.11-dbg) and the debug build of libstdc++.so.6 (libstdc++6-12-dbg), and reads every return pad back through the bundle (BundleReader::return_pads,
printed by bundle_pads_dump). Independent answers:
- binutils `objdump -d -w` (the target's objdump) lists the call instructions (x86-64: call,
  bnd call, notrack call, ... with their bytes; a call at A of L bytes has its return pad at
  A + L; arm64 bl/blr/blra*: A + 4; mips jal/jalr/bal/bgezal/bltzal: A + 8, after the delay
  slot).
- llvm-symbolizer-14 --inlining at A (the call instruction itself) gives the chain.
Checks: (1) every pad is the end of an objdump call (no pad anywhere else); (2) each pad's
chain (function, file:line:column of every frame, innermost first) equals llvm-symbolizer's at
the call; (3) a call without a pad is allowed only where llvm-symbolizer has just a
symbol-table answer (one frame, "??:0:0" or "<STT_FILE name>:0:0": .plt/.init/.fini, crt code),
counted; any other call without a pad fails (coverage of the DWARF-described calls: 100%). A missing tool fails."""
import argparse
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers  # noqa: E402  (tests/lib: the peers' output parsers)

TOOLS = ["gcc", "g++", "clang++-14", "objdump", "llvm-symbolizer-14", "aarch64-linux-gnu-gcc",
         "aarch64-linux-gnu-objdump", "mips-linux-gnu-gcc", "mipsel-linux-gnu-gcc", "mips-linux-gnu-objdump", "aarch64-linux-gnu-g++", "mips-linux-gnu-g++"]
SYMTAB_ONLY = re.compile(r"^[^/]*:0:0$")  # "??:0:0" or "crtstuff.c:0:0": no DWARF line


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd[:6]), p.returncode, p.stderr.strip()[:2000]))
    return p.stdout


# Per architecture: objdump, call mnemonics, bytes from the call's address to its return pad
# (None: the instruction's length, x86-64; mips: call + delay slot).
ARCHES = {
    "x86_64": ("objdump", {"call", "callq", "lcall"}, None),
    "arm64": ("aarch64-linux-gnu-objdump", {"bl", "blr", "blraa", "blrab", "blraaz", "blrabz"}, 4),
    "mips": ("mips-linux-gnu-objdump", {"jal", "jalr", "bal", "bgezal", "bltzal"}, 8),
}


PREFIXES = {"data16", "addr32", "bnd", "notrack", "lock", "rep", "repz", "repnz", "repe", "repne", "cs", "ds",
            "es", "ss", "fs", "gs"}


def candidate_lines(cmd, needles):
    """The lines of CMD's output (as run() gives them, split by str.splitlines) that hold one of
    NEEDLES: the output goes to a file, and only the newline-delimited lines a search of its bytes
    finds are decoded and split (objdump -d -w of python3.11 is 42 MB, ~1.2 M lines)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run(cmd, stdout=out, stderr=err)
        if p.returncode != 0:
            err.seek(0)
            sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd[:6]), p.returncode,
                                                  err.read().decode(errors="replace").strip()[:2000]))
        if os.fstat(out.fileno()).st_size == 0:
            return []
        with mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ) as text:
            find = re.compile(b"|".join(re.escape(n.encode()) for n in sorted(needles)))
            lines = []
            for start in sorted({text.rfind(b"\n", 0, m.start()) + 1 for m in find.finditer(text)}):
                end = text.find(b"\n", start)
                lines += text[start:len(text) if end < 0 else end].decode().splitlines()
            return lines


def objdump_calls(binary, arch):
    """{address: bytes to the return pad} of every call instruction objdump -d shows (its own
    linear sweep). Only lines holding a call mnemonic can be calls (candidate_lines)."""
    tool, mnemonics, fixed = ARCHES[arch]
    calls = {}
    insn = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]+(?: [0-9a-f]+)*)\s*\t(.*)$")
    for line in candidate_lines([tool, "-d", "-w", binary], mnemonics):
        m = insn.match(line)
        if not m:
            continue
        words = m.group(3).split()
        while words and (words[0] in PREFIXES or words[0].startswith("rex")):
            words.pop(0)  # "data16 data16 rex.W call" (TLS sequences), "bnd call", "notrack call"
        if words and words[0] in mnemonics:
            calls[int(m.group(1), 16)] = fixed or len(m.group(2).split())
    return calls


def split_frames(lines):
    if len(lines) % 2:
        sys.exit("FAIL: odd frame lines %r" % lines[:4])
    return tuple((lines[i], lines[i + 1]) for i in range(0, len(lines), 2))


def llvm_answers(binary, addrs):
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--no-demangle", "--inlining", "--output-style=LLVM"],
              input="".join("0x%x\n" % a for a in addrs))
    answers = llvm_symbolizer_answers(out)
    if len(answers) != len(addrs):
        sys.exit("FAIL: llvm-symbolizer-14 gave %d answers for %d addresses" % (len(answers), len(addrs)))
    return answers


def bundle_pads(dump, bundle):
    pads = {}
    for block in run([dump, bundle]).split("\n\n"):
        lines = block.strip("\n").split("\n")
        if not lines or not lines[0]:
            continue
        if not lines[0].startswith("PAD 0x"):
            sys.exit("FAIL: bundle_pads_dump: unexpected line %r" % lines[0])
        pads[int(lines[0][4:], 16)] = split_frames(lines[1:])
    return pads


def check(args, name, binary, report, min_calls, arch="x86_64"):
    bundle = os.path.join(args.work, name + ".sbundle")
    run([args.stackprov, "bundle", "build", binary, "--out", bundle])
    pads = bundle_pads(args.dump, bundle)
    calls = objdump_calls(binary, arch)
    if len(calls) < min_calls:
        sys.exit("FAIL: %s: objdump shows %d calls, expected at least %d" % (name, len(calls), min_calls))
    ends = {a + n: a for a, n in calls.items()}
    stray = sorted(p for p in pads if p not in ends)
    if stray:
        sys.exit("FAIL: %s: %d return pads are not the end of an objdump call, e.g. 0x%x"
                 % (name, len(stray), stray[0]))
    addrs = sorted(calls)
    want = dict(zip(addrs, llvm_answers(binary, addrs)))
    symtab_only = covered = 0
    bad = []
    for a in addrs:
        pad = a + calls[a]
        w = want[a]
        if pad in pads:
            covered += 1
            if pads[pad] != w:
                bad.append("0x%x: pad 0x%x chain %r, llvm-symbolizer-14 at the call %r" % (a, pad, pads[pad], w))
        elif len(w) == 1 and SYMTAB_ONLY.match(w[0][1]):
            symtab_only += 1  # no DWARF line or subprogram: no chain to give, no pad
        else:
            bad.append("0x%x: call (pad offset %d) has no return pad at 0x%x (llvm: %r)" % (a, calls[a], pad, w))
    if bad:
        sys.exit("FAIL: %s: %d of %d calls wrong:\n  %s" % (name, len(bad), len(addrs), "\n  ".join(bad[:20])))
    inlined = sum(1 for p in pads.values() if len(p) > 1)
    report.append("%s: %d objdump calls: %d with DWARF, all %d have a return pad whose chain equals "
                  "llvm-symbolizer-14 at the call (%d with inline frames); %d symbol-table-only calls "
                  "(.plt/.init/crt), no pad; coverage 100%%" % (name, len(addrs), covered, covered, inlined,
                                                              symtab_only))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        sys.exit("FAIL: missing tool(s): %s (make deps)" % ", ".join(missing))
    args.work = os.path.abspath(args.work)
    if os.path.isdir(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    report = []
    base = ["-O2", "-g", "-Wl,--build-id"]
    fixtures = [("fx_c", ["gcc"] + base + ["fixture_a.c", "fixture_b.c"]),
                ("fx_cpp", ["g++", "-std=c++17"] + base + ["fixture.cpp"]),
                ("fx_cpp_clang", ["clang++-14", "-std=c++17"] + base + ["fixture.cpp"])]
    for name, cmd in fixtures:
        binary = os.path.join(args.work, name)
        run(cmd + ["-o", binary], cwd=HERE)
        check(args, name, binary, report, 5)
    cross = [("fx_c_arm64", "aarch64-linux-gnu-gcc", "arm64"), ("fx_c_mips", "mips-linux-gnu-gcc", "mips"),
             ("fx_c_mipsel", "mipsel-linux-gnu-gcc", "mips")]
    cross += [("fx_cpp_arm64", "aarch64-linux-gnu-g++", "arm64"), ("fx_cpp_mips", "mips-linux-gnu-g++", "mips")]
    for name, cc, arch in cross:
        binary = os.path.join(args.work, name)
        srcs = ["-std=c++17", "fixture.cpp"] if cc.endswith("g++") else ["fixture_a.c", "fixture_b.c"]
        run([cc] + base + srcs + ["-o", binary], cwd=HERE)
        check(args, name, binary, report, 3, arch)
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        sys.exit("FAIL: missing %s (apt-get install python3.11 python3.11-dbg)" % py)
    check(args, "python3.11", py, report, 10000)
    cxx = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"  # DWARF inside (debug build)
    if not os.path.exists(cxx):
        sys.exit("FAIL: missing %s (apt-get install libstdc++6-12-dbg)" % cxx)
    check(args, "libstdc++.so.6-debug", cxx, report, 10000)
    print("\n".join(report))
    print("PASS")


if __name__ == "__main__":
    main()
