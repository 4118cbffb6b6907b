#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# DWARF in mingw PE images and their COFF symbols: `stackprov symbolize` vs llvm-symbolizer-14 on every byte of .text, and the COFF function symbols vs llvm-readobj-14 and binutils nm.
"""The fixtures (built by CMakeLists.txt with x86_64-w64-mingw32-gcc/g++, -O0/-O2, C/C++, with and
without --build-id, and copies stripped of DWARF or of everything) are symbolized at every byte of
their .text by one llvm-symbolizer-14 process and one `stackprov symbolize` process per output
style (LLVM and JSON); the outputs must be byte-identical. The COFF function symbols `stackprov
symbolize --symbols=stackprov` names (ObjectImage::symbols) are checked against llvm-readobj-14
--symbols, cross-checked with x86_64-w64-mingw32-nm. Bundles of the -O2 images answer every byte of
.text from the bundle alone as llvm-symbolizer-14 does from the image; the Python binding answers
one image's .text as the CLI does (PYTHONPATH: the build's python/)."""
import argparse
import functools
import itertools
import mmap
import os
import re
import shutil
import subprocess
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers, llvm_symbolizer_json, parse_nm, parse_readobj_coff_symbols  # noqa: E402
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

LLVM = "llvm-symbolizer-14"
READOBJ = "llvm-readobj-14"
OBJDUMP = "x86_64-w64-mingw32-objdump"
NM = "x86_64-w64-mingw32-nm"
EXCEPTIONS = os.path.join(HERE, "pe_dwarf_exceptions.txt")

# (fixture, what its answers must hold besides equality: "dwarf" file:line and inline chains,
# "symbols" COFF symbol names without lines, "exports" names from the export table only).
FIXTURES = [
    ("c_O0.exe", "dwarf"),
    ("c_O2.exe", "dwarf"),
    ("cxx_O2.exe", "dwarf"),
    ("cxx_O0_nobuildid.exe", "dwarf"),
    ("c_O2.nodebug.exe", "symbols"),
    ("cxx_O2.nodebug.exe", "symbols"),
    ("c_O2.stripped.exe", "exports"),
]
# The fixtures' own functions (fixture_mingw.c, ../symbolize/fixture_inline.cpp), as llvm-symbolizer
# prints them (demangled, without parameters): each must be named, with a line of its source where
# DWARF is present. INLINED: those that -O2 inlines everywhere (named by DWARF's inline frames only).
OWN = {"c": ("work", "classify", "hash", "recurse", "exported_entry", "main"),
       "cxx": ("main", "fixture::recurse", "fixture::count_words", "fixture::make", "fixture::Accumulator<long>::add")}
INLINED = {"c": ("classify", "hash"), "cxx": ("fixture::Accumulator<long>::add",)}
# The image the Python binding symbolizes (check_python).
PYTHON_FIXTURE = "c_O2.exe"


def run(cmd, inp=None):
    # surrogateescape: a symbol name may hold any byte (llvm-readobj prints it as it is).
    r = subprocess.run(cmd, input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       encoding="utf-8", errors="surrogateescape")
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout


def run_to(cmd, inp, out, append=False):
    """Runs CMD with INP (str) on its stdin, its stdout into the file OUT (appended to with APPEND);
    returns OUT. The symbolizers' answers for every byte of .text are up to 56 MB: they stay in files,
    compared block by block as bytes (same_bytes: stricter than text, no newline translation) and
    read whole only where needed (reading one whole, or from a pipe as text, costs ~0.3 CPU-s here)."""
    with tempfile.TemporaryFile() as i, open(out, "ab" if append else "wb") as o, tempfile.TemporaryFile() as e:
        i.write(inp.encode())
        i.seek(0)
        r = subprocess.run(cmd, stdin=i, stdout=o, stderr=e)
        e.seek(0)
        if r.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode,
                                                     e.read()[-2000:].decode(errors="replace")))
    return out


def same_bytes(a, b):
    """Whether the files A and B hold the same bytes."""
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as f, open(b, "rb") as g:
        while True:
            x = f.read(1 << 16)
            if x != g.read(1 << 16):
                return False
            if not x:
                return True


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def decode(out):
    """A tool's stdout bytes as run() reads them (UTF-8, surrogateescape, universal newlines)."""
    return out.decode("utf-8", "surrogateescape").replace("\r\n", "\n").replace("\r", "\n")


def answer_chunks(f, style):
    """Yields the bytes of each answer in a symbolizer's output (the binary file F), in order, split at
    newlines as the parser of the style splits the text: llvm_symbolizer_json one non-empty line
    each, llvm_symbolizer_answers blocks of non-empty lines."""
    block = []
    for line in f:
        line = line[:-1] if line.endswith(b"\n") else line
        if style == "JSON":
            if line.strip():
                yield line
        elif line:
            block.append(line)
        elif block:
            yield b"\n".join(block)
            block = []
    if block:
        yield b"\n".join(block)


def parse_answer(chunk, style):
    """One answer of answer_chunks, parsed by the style's parser."""
    return (llvm_symbolizer_json if style == "JSON" else llvm_symbolizer_answers)(decode(chunk))[0]


@functools.lru_cache(maxsize=None)
def text_addresses(exe):
    """Every address of EXE's .text, and them as the symbolizers' input ("0x..." lines)."""
    lo, size, _ = sections(exe)[".text"]
    addrs = list(range(lo, lo + size))
    return addrs, "".join("0x%x\n" % a for a in addrs)


@functools.lru_cache(maxsize=None)
def sections(path):
    """{name: (vma, size, flags line)} from objdump -h (binutils, not our reader)."""
    out = run([OBJDUMP, "-h", path]).splitlines()
    secs = {}
    for i, line in enumerate(out):
        m = re.match(r"^\s*\d+\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s", line)
        if m:
            secs[m.group(1)] = (int(m.group(3), 16), int(m.group(2), 16), out[i + 1] if i + 1 < len(out) else "")
    return secs


def load_exceptions():
    """pe_dwarf_exceptions.txt: {mangled name: reason} of names whose demangled spelling may differ."""
    out = {}
    with open(EXCEPTIONS) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, reason = line.rstrip("\n").split("\t", 1)
                out[name] = reason
    return out


def compare(stackprov, exe, style, work, failures, exceptions, used):
    """One llvm-symbolizer and one stackprov process over `addrs`; the outputs must be identical,
    but for names listed in pe_dwarf_exceptions.txt (demangling: the --no-demangle answers of those
    addresses must then be identical). Returns the file with llvm-symbolizer's output, in WORK (the
    caller removes it). Where the outputs differ, only the answers whose text differs are parsed and
    compared (answers with equal text parse equal)."""
    addrs, inp = text_addresses(exe)
    extra = ["--output-style=JSON"] if style == "JSON" else []
    base = os.path.join(work, "%s.%s" % (os.path.basename(exe), style))
    t0 = time.time()
    ref = run_to([LLVM, "--obj=" + exe] + extra, inp, base + ".llvm")
    t1 = time.time()
    ours = run_to([stackprov, "symbolize", "--obj", exe] + extra, inp, base + ".stackprov")
    t2 = time.time()
    print("  %-24s %-4s %6d addresses: llvm-symbolizer %.2f s, stackprov %.2f s" %
          (os.path.basename(exe), style, len(addrs), t1 - t0, t2 - t1))
    differ, counts = {}, [0, 0]  # answer index -> (llvm-symbolizer's, stackprov's) text; answers of each
    if not same_bytes(ref, ours):
        with open(ref, "rb") as fa, open(ours, "rb") as fb:
            for i, pair in enumerate(itertools.zip_longest(answer_chunks(fa, style), answer_chunks(fb, style))):
                counts = [n + (x is not None) for n, x in zip(counts, pair)]
                if pair[0] != pair[1]:
                    differ[i] = pair
    os.unlink(ours)
    if not differ:
        return ref
    if counts[0] != counts[1]:
        failures.append("%s %s: %d answers from llvm-symbolizer, %d from stackprov" % (exe, style, *counts))
        return ref
    a = {i: parse_answer(x, style) for i, (x, _) in differ.items()}
    b = {i: parse_answer(y, style) for i, (_, y) in differ.items()}
    bad = [i for i in sorted(a) if a[i] != b[i]]
    # The differing addresses again, linkage names: identical, and each differing name excepted.
    raw_inp = "".join("0x%x\n" % addrs[i] for i in bad)
    raw = ["--output-style=JSON", "--no-demangle"]
    ra = llvm_symbolizer_json(run([LLVM, "--obj=" + exe] + raw, raw_inp))
    rb = llvm_symbolizer_json(run([stackprov, "symbolize", "--obj", exe] + raw, raw_inp))
    unexplained = []
    for k, i in enumerate(bad):
        names = {f["FunctionName"] for f in ra[k]["Symbol"]}
        if ra[k] != rb[k] or not names & set(exceptions):
            unexplained.append(i)
        used.update(names & set(exceptions))
    if unexplained:
        failures.append("%s %s: output differs at %d of %d addresses" % (exe, style, len(unexplained), len(addrs)))
    for i in unexplained[:8]:
        failures.append("  0x%x\n    llvm-symbolizer: %s\n    stackprov:       %s" % (addrs[i], a[i], b[i]))
    if bad and not unexplained:
        print("    %d addresses differ only in the demangling of pe_dwarf_exceptions.txt's names" % len(bad))
    return ref


def content_answers(ref, names, want_chain):
    """check_content's answers of REF (llvm-symbolizer's JSON output, a bytes-like object): each line
    that NAMES matches, parsed once, and with WANT_CHAIN, if none of them has an inline chain, the
    lines from the first one up to the first with one."""

    def line_from(start):
        """The answer line at START, and where the next one starts."""
        end = ref.find(b"\n", start)
        end = len(ref) if end < 0 else end
        return ref[start:end], end + 1

    answers = [parse_answer(line_from(start)[0], "JSON")
               for start in sorted({ref.rfind(b"\n", 0, m.start()) + 1 for m in names.finditer(ref)})]
    chains = sum(len(a["Symbol"]) > 1 for a in answers)
    start = 0
    while want_chain and not chains and start < len(ref):
        line, start = line_from(start)
        if line.strip():
            answers.append(parse_answer(line, "JSON"))
            chains += len(answers[-1]["Symbol"]) > 1
    return answers


def check_content(exe, kind, ref_file, failures):
    """The answers are not vacuous: the fixture's own functions named (with their source line where
    DWARF is present), inline chains in the -O2 builds, names without lines in the stripped ones.
    REF_FILE: llvm-symbolizer's JSON output, one answer a line. Only the answers that can matter
    are parsed (all of them cost ~10 CPU-s): those with a "FunctionName" that is one of the
    fixture's function names or starts with one and "(" (none has a character JSON escapes, so the
    answer holds it verbatim after the key), and where an inline chain is required, the answers up
    to the first one with more than one frame."""
    lang = "cxx" if os.path.basename(exe).startswith("cxx") else "c"
    src = "fixture_inline.cpp" if lang == "cxx" else "fixture_mingw.c"
    want_chain = kind == "dwarf" and "_O2" in exe
    names = re.compile(rb'"FunctionName"\s*:\s*"(?:%s)["(]' %
                       b"|".join(re.escape(n.encode()) for n in OWN[lang] + ("exported_entry",)))
    with open(ref_file, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            answers = []
        else:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as ref:
                answers = content_answers(ref, names, want_chain)
    chains = sum(len(a["Symbol"]) > 1 for a in answers)
    named = {}
    for ans in answers:
        frames = ans["Symbol"]
        for f in frames:
            fn = f["FunctionName"].split("(")[0]
            if fn in OWN[lang]:
                named.setdefault(fn, set()).add(os.path.basename(f["FileName"]))
    for fn in OWN[lang]:
        if kind == "exports" or (kind == "symbols" and fn in INLINED[lang]):
            continue
        if fn not in named:
            failures.append("%s: llvm-symbolizer never names %s" % (exe, fn))
        elif kind == "dwarf" and src not in named[fn]:
            failures.append("%s: %s has no line in %s (%s)" % (exe, fn, src, named[fn]))
        elif kind == "symbols" and named[fn] != {""}:
            failures.append("%s: %s has a file without DWARF (%s)" % (exe, fn, named[fn]))
    if want_chain and chains == 0:
        failures.append("%s: no inline chain at any address" % exe)
    if kind == "exports" and not any(f["FunctionName"] == "exported_entry" for a in answers for f in a["Symbol"]):
        failures.append("%s: the export exported_entry names nothing" % exe)


def expected_functions(exe):
    """The COFF function symbols by llvm-readobj-14: symbols of a code section with storage class
    EXTERNAL (2) or STATIC (3) that are not section definitions (STATIC with auxiliary records and
    no function type) -> {address: {names}}."""
    secs = sections(exe)
    code = {n for n, (_, _, flags) in secs.items() if "CODE" in flags}
    out = {}
    for s in parse_readobj_coff_symbols(run([READOBJ, "--symbols", exe])):
        if s["section"] not in code or s["storage_class"] not in (2, 3):
            continue
        if s["storage_class"] == 3 and s["aux"] > 0 and s["complex_type"] != 2:
            continue
        out.setdefault(secs[s["section"]][0] + s["value"], set()).add(s["name"])
    # Cross-check with binutils nm: every text symbol it lists is one of these, a section
    # definition, a label (.l_*) or a FILE-record; and every one of these is in nm's list.
    nm = {(a, n) for a, t, n in parse_nm(run(nm_command(NM) + ["--no-demangle", exe])) if t in "tT"}
    mine = {(a, n) for a, ns in out.items() for n in ns}
    missing = mine - nm
    if missing:
        raise RuntimeError("%s: nm lacks COFF function symbols readobj lists: %s" % (exe, sorted(missing)[:5]))
    return out


def check_symbols(stackprov, exe, failures):
    """`stackprov symbolize --symbols=stackprov` (our own naming: ObjectImage::symbols) names each
    function symbol's first byte by one of its names, and the byte before it by the previous one."""
    funcs = expected_functions(exe)
    text_lo, text_size, _ = sections(exe)[".text"]
    addrs, want = [], []
    starts = sorted(funcs)
    for i, a in enumerate(starts):
        addrs.append(a)
        want.append(funcs[a])
        if i > 0 and a - 1 not in funcs and a - 1 >= text_lo:
            addrs.append(a - 1)
            want.append(funcs[starts[i - 1]])
    inp = "".join("0x%x\n" % a for a in addrs)
    got = llvm_symbolizer_answers(run([stackprov, "symbolize", "--symbols=stackprov", "--no-demangle", "--obj", exe], inp))
    bad = [(hex(a), sorted(w), g[0][0]) for a, w, g in zip(addrs, want, got) if g[0][0] not in w]
    if len(got) != len(addrs) or bad:
        failures.append("%s: %d of %d COFF symbol lookups differ from llvm-readobj: %s" % (exe, len(bad), len(addrs), bad[:8]))
    print("  %-24s %d COFF function symbols (%d lookups) as llvm-readobj-14 lists them" %
          (os.path.basename(exe), len(funcs), len(addrs)))


def check_bundle(stackprov, exe, work, failures):
    """`stackprov bundle build` of a mingw image keys it by its PDB GUID+age and carries its DWARF:
    `bundle lookup` (from the bundle alone) answers every byte of .text as llvm-symbolizer-14
    --no-demangle does from the image (linkage names, as bundle_llvm.py compares ELF bundles)."""
    bundle = os.path.join(work, os.path.basename(exe) + ".bundle")
    run([stackprov, "bundle", "build", "-o", bundle, exe])
    info = run([stackprov, "bundle", "inspect", bundle])
    if "module pdb-guid-age " not in info:
        failures.append("%s: the bundle's module is not keyed by its PDB GUID+age:\n%s" % (exe, info))
    addrs, inp = text_addresses(exe)
    t0 = time.time()
    want_file = run_to([LLVM, "--obj=" + exe, "--no-demangle"], inp, bundle + ".llvm")
    want = llvm_symbolizer_answers(decode(read_bytes(want_file)))
    t1 = time.time()
    got_file = bundle + ".lookup"
    for k in range(0, len(addrs), 8000):
        run_to([stackprov, "bundle", "lookup", bundle] + ["0x%x" % a for a in addrs[k:k + 8000]], "", got_file,
               append=k > 0)
    t2 = time.time()
    # The same bytes parse to the same answers: the answers are compared one by one only otherwise.
    got = want if same_bytes(want_file, got_file) else llvm_symbolizer_answers(decode(read_bytes(got_file)))
    os.unlink(want_file)
    os.unlink(got_file)
    bad = [(hex(a), w, g) for a, w, g in zip(addrs, want, got) if w != g]
    if len(got) != len(addrs) or bad:
        failures.append("%s: bundle lookup differs from llvm-symbolizer at %d of %d addresses: %s" %
                        (exe, len(bad), len(addrs), bad[:5]))
    inlined = sum(1 for w in want if len(w) > 1)
    print("  %-24s bundle %d bytes, %d addresses (%d with inline frames): llvm-symbolizer %.2f s, bundle lookup %.2f s" %
          (os.path.basename(exe), os.path.getsize(bundle), len(addrs), inlined, t1 - t0, t2 - t1))


def check_python(exe, ref, work, failures):
    """The Python binding (`python3 -m stackprov symbolize`, sprov_symbolizer_addr_ex through
    `import stackprov`) takes the PE too: its LLVM-style answers at every byte of .text equal
    llvm-symbolizer-14's (addresses on stdin). REF: the file with llvm-symbolizer-14's output for the
    same input, from compare() (LLVM style)."""
    lo, size, _ = sections(exe)[".text"]
    inp = text_addresses(exe)[1]
    t0 = time.time()
    ours = run_to([sys.executable, "-m", "stackprov", "symbolize", "--obj", exe], inp,
                  os.path.join(work, os.path.basename(exe) + ".python"))
    if not same_bytes(ref, ours):
        a, b = llvm_symbolizer_answers(decode(read_bytes(ref))), llvm_symbolizer_answers(decode(read_bytes(ours)))
        bad = [(hex(lo + i), x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
        failures.append("%s: python3 -m stackprov symbolize differs at %d of %d addresses: %s" %
                        (exe, len(bad), size, bad[:5]))
    os.unlink(ours)
    print("  %-24s python3 -m stackprov symbolize, %d addresses: %.2f s" % (os.path.basename(exe), size, time.time() - t0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    failures = []
    exceptions, used = load_exceptions(), set()
    t0 = time.time()
    python_ref = None  # llvm-symbolizer's LLVM-style answers for PYTHON_FIXTURE, for check_python
    for name, kind in FIXTURES:
        exe = os.path.join(args.fixtures, name)
        ref = compare(args.stackprov, exe, "LLVM", args.work, failures, exceptions, used)
        if name == PYTHON_FIXTURE:
            python_ref = ref
        else:
            os.unlink(ref)
        ref = compare(args.stackprov, exe, "JSON", args.work, failures, exceptions, used)
        check_content(exe, kind, ref, failures)
        os.unlink(ref)
    for name in sorted(set(exceptions) - used):
        failures.append("pe_dwarf_exceptions.txt: stale entry %s (no address differs by it any more)" % name)
    for name in ("c_O2.nodebug.exe", "cxx_O2.nodebug.exe"):
        check_symbols(args.stackprov, os.path.join(args.fixtures, name), failures)
    check_python(os.path.join(args.fixtures, PYTHON_FIXTURE), python_ref, args.work, failures)
    os.unlink(python_ref)
    for name in ("c_O2.exe", "cxx_O2.exe"):
        check_bundle(args.stackprov, os.path.join(args.fixtures, name), args.work, failures)
    # Without --build-id a mingw image has no CodeView record: its bundle is keyed by its code id,
    # TimeDateStamp and SizeOfImage as llvm-readobj-14 --file-headers reads them.
    nobuildid = os.path.join(args.fixtures, "cxx_O0_nobuildid.exe")
    r = subprocess.run([args.stackprov, "bundle", "build", "-o", os.path.join(args.work, "x.bundle"), nobuildid],
                       capture_output=True, text=True)
    h = subprocess.run(["llvm-readobj-14", "--file-headers", nobuildid], capture_output=True, text=True).stdout
    stamp = int(re.search(r"TimeDateStamp: .*\(0x([0-9A-Fa-f]+)\)", h).group(1), 16)
    size = int(re.search(r"SizeOfImage: (\d+)", h).group(1))
    want = '"id_kind":"pe-code-id","id":"%s"' % struct.pack("<II", stamp, size).hex()
    ins = subprocess.run([args.stackprov, "bundle", "inspect", "--json", os.path.join(args.work, "x.bundle")],
                         capture_output=True, text=True)
    if r.returncode != 0 or want not in ins.stdout:
        failures.append("bundle build of an image without a debug directory: exit %d, %r; inspect %r, want %s" %
                        (r.returncode, r.stderr, ins.stdout[:300], want))
    print("%.1f s" % (time.time() - t0))
    if failures:
        print("FAIL\n" + "\n".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
