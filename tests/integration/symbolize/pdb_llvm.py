#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""stackprov symbolize --obj X.exe (PE + PDB, doc/windows.md "PDB symbols") vs llvm-symbolizer-14 on every
byte of .text: the PDB fixtures of tests/unit/pdb/fixtures (C and C++, -O0 and -O2 with inlining, with and
without column info) built here with clang-14 -gcodeview and lld-link-14 /debug, each answered by one
llvm-symbolizer-14 process and one stackprov process (addresses on stdin). Compared: the LLVM-style output
byte for byte (demangled names, file:line:column, inline chains), the JSON output's frames with
--no-demangle and with --functions=short (FunctionName, FileName, Line, Column), and the GNU style with
addresses and the pretty-printed style without inlines, line by line.

Also a MinGW-target image (clang-14 --target=x86_64-w64-mingw32 -gcodeview linked by lld with --pdb: two
CodeView objects after mingw's CRT objects, which carry DWARF): the same comparison over every byte of its
.text, with the reviewed exceptions of pdb_llvm_exceptions.txt (addresses the PDB knows nothing of, where
the expected answer is llvm-symbolizer-14's on the same image read through its DWARF)."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_json  # noqa: E402
from toolrun import run_files  # noqa: E402  (megabytes of answers: files, not pipes)

FIX = os.path.join(HERE, "..", "..", "unit", "pdb", "fixtures")
MINIDUMP_FIX = os.path.join(HERE, "..", "..", "unit", "minidump", "fixtures")
EXCEPTIONS = os.path.join(HERE, "pdb_llvm_exceptions.txt")
LLVM = "llvm-symbolizer-14"
TOOLS = ("clang-14", "lld-link-14", "ld.lld-14", "llvm-objdump-14", "llvm-pdbutil-14", "llvm-readobj-14", LLVM)
# MinGW-target fixtures: name -> ([(source, extra clang flags)], optimisation). clang-14 drives lld in its
# MinGW mode (-fuse-ld=lld -Wl,--pdb=...), which links mingw-w64's CRT objects (crt2.o, crtbegin.o,
# libmingw32.a, ...: DWARF, no CodeView) before ours, their .text contributions end to end.
MINGW_FIXTURES = {
    "mingw_O2": ([(os.path.join(MINIDUMP_FIX, "mdprog.c"), []), (os.path.join(FIX, "pdb_lib.c"), ["-gcolumn-info"])],
                 "-O2"),
}
MINGW_CRT = "/usr/x86_64-w64-mingw32/lib/crt2.o"
# name -> (sources, optimisation, extra clang flags)
FIXTURES = {
    "c_O0": (["pdb_c.c", "pdb_lib.c"], "-O0", ["-gcolumn-info"]),
    "c_O2": (["pdb_c.c", "pdb_lib.c"], "-O2", []),
    "cpp_O0": (["pdb_cpp.cpp"], "-O0", []),
    "cpp_O2": (["pdb_cpp.cpp"], "-O2", ["-gcolumn-info"]),
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw).stdout


def build(work, name):
    srcs, opt, extra = FIXTURES[name]
    objs = []
    for s in srcs:
        obj = os.path.join(work, "%s_%s.obj" % (name, os.path.splitext(s)[0]))
        run(["clang-14", "--target=x86_64-pc-windows-msvc", opt, "-g", "-gcodeview"] + extra +
            ["-c", os.path.join(FIX, s), "-o", obj])
        objs.append(obj)
    exe = os.path.join(work, name + ".exe")
    run(["lld-link-14", "/entry:mainCRTStartup", "/subsystem:console", "/nodefaultlib", "/debug",
         "/pdb:" + os.path.join(work, name + ".pdb")] + objs + ["/out:" + exe])
    return exe


def build_mingw(work, name):
    """A MinGW-target image with an lld PDB, and its DWARF twin: the same bytes but for the CodeView
    record's PDB path (first byte zeroed), which llvm-symbolizer-14 then reads through the DWARF."""
    srcs, opt = MINGW_FIXTURES[name]
    libgcc = sorted(glob.glob("/usr/lib/gcc/x86_64-w64-mingw32/*-win32/libgcc.a"))
    if not os.path.exists(MINGW_CRT) or not libgcc:
        raise RuntimeError("%s or a win32 libgcc.a is missing: install g++-mingw-w64-x86-64 (make deps)" % MINGW_CRT)
    objs = []
    for src, extra in srcs:
        obj = os.path.join(work, "%s_%s.o" % (name, os.path.splitext(os.path.basename(src))[0]))
        run(["clang-14", "--target=x86_64-w64-mingw32", opt, "-g", "-gcodeview"] + extra + ["-c", src, "-o", obj])
        objs.append(obj)
    exe, pdb = os.path.join(work, name + ".exe"), os.path.join(work, name + ".pdb")
    run(["clang-14", "--target=x86_64-w64-mingw32", "-fuse-ld=lld", "-g", "-Wl,--pdb=" + pdb,
         "-L" + os.path.dirname(libgcc[-1])] + objs + ["-ldbghelp", "-o", exe])
    image = bytearray(open(exe, "rb").read())
    rsds = b"RSDS"
    at = image.find(rsds)
    if at < 0 or image.find(rsds, at + 1) >= 0 or \
            image[at + 24:at + 24 + len(pdb) + 1] != pdb.encode() + b"\0":
        raise RuntimeError("%s: not exactly one CodeView RSDS record naming %s" % (exe, pdb))
    image[at + 24] = 0
    twin = os.path.join(work, name + "-dwarf.exe")
    with open(twin, "wb") as f:
        f.write(image)
    if "PDBFileName: \n" not in run(["llvm-readobj-14", "--coff-debug-directory", twin]) + "\n":
        raise RuntimeError("%s: llvm-readobj-14 still sees a PDB path" % twin)
    return exe, twin


def contrib_modules(pdb):
    """[(begin RVA, end RVA, object base name)] of the .text-like section contributions, by llvm-pdbutil-14
    (dump --modules --section-contribs --section-headers)."""
    mods = {int(m.group(1)): os.path.basename(m.group(2))
            for m in re.finditer(r"Mod (\d+) \| `[^`]*`:\s*\n\s*Obj: `([^`]*)`",
                                 run(["llvm-pdbutil-14", "dump", "--modules", pdb], errors="replace"))}
    # errors="replace": the section headers' raw bytes need not be UTF-8.
    out = run(["llvm-pdbutil-14", "dump", "--section-contribs", "--section-headers", pdb], errors="replace")
    rvas = {}
    for m in re.finditer(r"SECTION HEADER #(\d+)\n(?:.*\n)*?\s*([0-9A-F]+) virtual address", out):
        rvas[int(m.group(1))] = int(m.group(2), 16)
    ranges = []
    for m in re.finditer(r"SC\[[^\]]*\]\s*\| mod = (\d+), (\d+):(\d+), size = (\d+)", out):
        mod, sect, off, size = (int(g) for g in m.groups())
        if size > 0 and sect in rvas:
            ranges.append((rvas[sect] + off, rvas[sect] + off + size, mods.get(mod, "")))
    if not mods or not ranges:
        raise RuntimeError("%s: llvm-pdbutil-14 listed no modules or section contributions" % pdb)
    return ranges


def load_exceptions():
    """pdb_llvm_exceptions.txt -> {fixture: {module base name: reason}}."""
    ex = {}
    with open(EXCEPTIONS) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fixture, module, reason = line.rstrip("\n").split("\t")
            ex.setdefault(fixture, {})[module] = reason
    return ex


def excepted_addresses(exe, addrs, load, modules, ranges):
    """The addresses of `addrs` where llvm-symbolizer-14 answers nothing from the PDB ("", ??:0:0) and
    which lie in a contribution of one of `modules` -> {address: module}; also the module of every
    such address outside them (never excepted)."""
    js = llvm_symbolizer_json(answers([LLVM, "--obj=" + exe, "--output-style=JSON"], addrs))
    out, others = {}, {}
    for a, d in zip(addrs, js):
        fr = d["Symbol"]
        if len(fr) != 1 or fr[0]["FunctionName"] != "" or fr[0]["FileName"] != "" or fr[0]["Line"] != 0:
            continue
        rva = a - load
        mod = next((m for b, e, m in ranges if b <= rva < e), "")
        (out if mod in modules else others)[a] = mod
    return out, others


def blocks(text):
    """LLVM-style output -> one list of lines per address (an empty function name is an empty line:
    each answer is (function, location) pairs ended by an empty line)."""
    lines, out, cur, i = text.split("\n"), [], [], 0
    while i + 1 < len(lines):
        cur += lines[i:i + 2]
        i += 2
        if i < len(lines) and lines[i] == "":
            out.append(cur)
            cur, i = [], i + 1
    return out


def text_range(exe):
    """(first, end) link-time addresses of .text, from llvm-objdump's section table."""
    out = run(["llvm-objdump-14", "-h", exe])
    m = re.search(r"^\s*\d+\s+\.text\s+([0-9a-f]+)\s+([0-9a-f]+)", out, re.M)
    if not m:
        raise RuntimeError("%s: no .text in llvm-objdump -h" % exe)
    size, vma = int(m.group(1), 16), int(m.group(2), 16)
    return vma, vma + size


PDB_KEYS = {}


def pdb_key(pdb):
    """The symbol-server key of a PDB by llvm-pdbutil-14 --summary: GUID's hex digits, then the age in hex.
    Asked once per file in a run (bundles() and lookups() both need c_O2's and cpp_O2's)."""
    st = os.stat(pdb)
    ident = (pdb, st.st_size, st.st_mtime_ns)
    if ident not in PDB_KEYS:
        out = run(["llvm-pdbutil-14", "dump", "--summary", pdb])
        guid = re.search(r"GUID: \{([0-9A-F-]+)\}", out).group(1).replace("-", "")
        PDB_KEYS[ident] = guid + "%X" % int(re.search(r"Age: (\d+)", out).group(1))
    return PDB_KEYS[ident]


def lookups(work, stackprov, refs):
    """The PDB found away from the RSDS path: in a symbol-store layout (--symbol-path) the answers
    equal llvm-symbolizer's on the original; another fixture's PDB beside the image is refused, --verbose
    naming both keys, and every answer is "??"."""
    fails = 0
    exe, pdb = os.path.join(work, "c_O2.exe"), os.path.join(work, "c_O2.pdb")
    key, other_key = pdb_key(pdb), pdb_key(os.path.join(work, "cpp_O2.pdb"))
    moved, store = os.path.join(work, "moved"), os.path.join(work, "store")
    os.makedirs(moved)
    os.makedirs(os.path.join(store, "c_O2.pdb", key))
    shutil.copy(exe, moved)
    os.rename(pdb, os.path.join(store, "c_O2.pdb", key, "c_O2.pdb"))  # the RSDS path no longer serves
    addrs, ref = refs
    got = answers([stackprov, "symbolize", "--obj", os.path.join(moved, "c_O2.exe"), "--symbol-path", store], addrs)
    if got != ref:
        print("FAIL symbol store: answers with --symbol-path differ from llvm-symbolizer's on the original")
        fails += 1
    else:
        print("ok   symbol store %s/c_O2.pdb/%s/c_O2.pdb: %d addresses as llvm-symbolizer-14" % (store, key, len(addrs)))
    # bundle build finds the PDB there too (--symbol-path): its bundle answers as llvm did on the original.
    sb = os.path.join(work, "from-store.sbundle")
    run([stackprov, "bundle", "build", "-o", sb, "--symbol-path", store, os.path.join(moved, "c_O2.exe")])
    got = answers([stackprov, "symbolize", "--pdb-key", key, "--bundle", sb], addrs)
    if got != ref:
        print("FAIL bundle build --symbol-path: its answers differ from llvm-symbolizer's on the original")
        fails += 1
    else:
        print("ok   bundle build --symbol-path %s: %d addresses as llvm-symbolizer-14" % (store, len(addrs)))
    shutil.copy(os.path.join(work, "cpp_O2.pdb"), os.path.join(moved, "c_O2.pdb"))
    p = subprocess.run([stackprov, "symbolize", "--verbose", "--obj", os.path.join(moved, "c_O2.exe"), "0x%x" % addrs[0]],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if "identity mismatch" not in p.stderr or key not in p.stderr or other_key not in p.stderr or \
            p.stdout != "??\n??:0:0\n\n":
        print("FAIL mismatch: stdout %r, --verbose %r" % (p.stdout, p.stderr))
        fails += 1
    else:
        print("ok   another PDB beside the image is refused, naming %s and %s" % (key, other_key))
    return fails


BUNDLE_STYLES = (("--output-style=LLVM",), ("--output-style=GNU", "-a"), ("-p", "--no-inlines"))


def bundles(work, stackprov, refs_by):
    """Each fixture's bundle (`bundle build` into a store: keyed pdb-guid-age, its ranges from the PDB)
    answers with the .exe and the .pdb gone, by the PDB's symbol-server key from llvm-pdbutil-14
    (`symbolize --pdb-key KEY --store DIR`), every byte of .text as llvm-symbolizer-14 did on the
    original files (LLVM style with inline chains, GNU style with addresses, and without inlines);
    another build's bundle is refused naming both keys (symbolize --bundle, bundle lookup --pdb-key)."""
    fails = 0
    t0 = time.time()
    store = os.path.join(work, "bundle-store")
    away = os.path.join(work, "away")
    os.makedirs(away)
    keys = {}
    for name in FIXTURES:
        exe, pdb = os.path.join(work, name + ".exe"), os.path.join(work, name + ".pdb")
        keys[name] = pdb_key(pdb)
        run([stackprov, "bundle", "build", "--store", store, "-o", os.path.join(work, name + ".sbundle"), exe])
        for f in (exe, pdb):
            os.rename(f, os.path.join(away, os.path.basename(f)))
    sizes = []
    for name in FIXTURES:
        addrs = refs_by[name]["addrs"]
        for style in BUNDLE_STYLES:
            got = answers([stackprov, "symbolize", "--store", store, "--pdb-key", keys[name], "--inlines"] + list(style),
                          addrs)
            rl, gl = refs_by[name][style].split("\n"), got.split("\n")
            bad = [(i, r, g) for i, (r, g) in enumerate(zip(rl, gl)) if r != g]
            if len(rl) != len(gl):
                bad.append((len(rl), "%d lines" % len(rl), "%d lines" % len(gl)))
            for i, r, g in bad[:5]:
                print("FAIL bundle %s %s line %d:\n  llvm:      %r\n  stackprov: %r" % (name, " ".join(style), i, r, g))
            if bad:
                print("FAIL bundle %s %s: %d lines differ" % (name, " ".join(style), len(bad)))
                fails += 1
            else:
                print("ok   bundle %s %s (--pdb-key %s, no .exe, no .pdb): %d addresses as llvm-symbolizer-14" %
                      (name, " ".join(style), keys[name], len(addrs)))
        sizes.append("%s %d" % (name, os.path.getsize(os.path.join(work, name + ".sbundle"))))
    print("bundle sizes (bytes): " + ", ".join(sizes))
    # Another build's bundle: refused, both keys named.
    p = subprocess.run([stackprov, "symbolize", "--pdb-key", keys["c_O2"], "--bundle", os.path.join(work, "cpp_O2.sbundle"),
                        "0x140001000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q = subprocess.run([stackprov, "bundle", "lookup", os.path.join(work, "cpp_O2.sbundle"), "--pdb-key", keys["c_O2"],
                        "0x140001000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for what, r in (("symbolize --bundle", p), ("bundle lookup --pdb-key", q)):
        if r.returncode != 1 or keys["c_O2"] not in r.stderr or keys["cpp_O2"] not in r.stderr:
            print("FAIL %s of another build: exit %d, %r (want 1 naming %s and %s)" %
                  (what, r.returncode, r.stderr, keys["c_O2"], keys["cpp_O2"]))
            fails += 1
        else:
            print("ok   %s of another build refused, naming %s and %s" % (what, keys["c_O2"], keys["cpp_O2"]))
    for f in os.listdir(away):
        os.rename(os.path.join(away, f), os.path.join(work, f))
    print("bundles: %.2f s" % (time.time() - t0))
    return fails


def answers(cmd, addrs):
    inp = "".join("0x%x\n" % a for a in addrs)
    return run_files(cmd, inp).stdout


def json_lines(text):
    """The answer lines of JSON output, as llvm_symbolizer_json splits them."""
    return [line for line in text.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        print("FAIL: missing tool(s): %s (make deps)" % ", ".join(missing))
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    failures, total, inlined = 0, 0, 0
    refs = None
    refs_by = {}
    t0 = time.time()
    exceptions = load_exceptions()
    for name in list(FIXTURES) + list(MINGW_FIXTURES):
        twin = None
        if name in FIXTURES:
            exe = build(args.work, name)
        else:
            exe, twin = build_mingw(args.work, name)
        lo, hi = text_range(exe)
        addrs = list(range(lo, hi))
        total += len(addrs)
        # The reviewed exceptions (MinGW: the CRT's DWARF-only objects): llvm-symbolizer-14 on the twin.
        excepted, unexcepted = {}, {}
        if twin:
            load = int(re.search(r"ImageBase: 0x([0-9A-F]+)", run(["llvm-readobj-14", "--file-headers", exe])).group(1), 16)
            excepted, unexcepted = excepted_addresses(exe, addrs, load, exceptions.get(name, {}),
                                                      contrib_modules(os.path.join(args.work, name + ".pdb")))
            for mod in exceptions.get(name, {}):
                n = sum(1 for m in excepted.values() if m == mod)
                if n == 0:
                    print("FAIL %s: stale exception for module %s (no address excepted)" % (name, mod))
                    failures += 1
                else:
                    print("ok   %s: %d addresses of %s excepted (PDB answers nothing; expected: llvm-symbolizer-14 on "
                          "%s, the image's DWARF)" % (name, n, mod, os.path.basename(twin)))
            if unexcepted:
                print("note %s: %d addresses without a PDB answer outside the excepted modules (%s): compared with "
                      "llvm's PDB answer" % (name, len(unexcepted), ", ".join(sorted(set(unexcepted.values())))))
        for style in (["--output-style=LLVM"], ["--output-style=JSON", "--no-demangle"],
                      ["--output-style=JSON", "--functions=short"], ["--output-style=GNU", "-a"],
                      ["-p", "--no-inlines"]):
            if excepted:
                # One llvm-symbolizer-14 process: "IMAGE ADDRESS" lines, the twin for the excepted addresses.
                inp = "".join("%s 0x%x\n" % (twin if a in excepted else exe, a) for a in addrs)
                ref = run_files([LLVM, "--inlines"] + style, inp).stdout
                ref = ref.replace(os.path.basename(twin), os.path.basename(exe))  # JSON's ModuleName
            else:
                ref = answers([LLVM, "--obj=" + exe, "--inlines"] + style, addrs)
            refs_by.setdefault(name, {"addrs": addrs})[tuple(style)] = ref
            got = answers([args.stackprov, "symbolize", "--obj", exe, "--inlines"] + style, addrs)
            if style[0].endswith("LLVM"):
                if name == "c_O2":
                    refs = (addrs, ref)
                ra, ga = blocks(ref), blocks(got)
                inlined += sum(1 for a in ra if len(a) > 2)
                if len(ra) != len(addrs) or len(ga) != len(addrs):
                    print("FAIL %s: %d/%d answers for %d addresses" % (name, len(ra), len(ga), len(addrs)))
                    failures += 1
                    continue
                bad = [(a, r, g) for a, r, g in zip(addrs, ra, ga) if r != g]
            elif not style[0].endswith("JSON"):
                # Other styles: the whole output, line by line.
                rl, gl = ref.split("\n"), got.split("\n")
                bad = [(i, r, g) for i, (r, g) in enumerate(zip(rl, gl)) if r != g]
                if len(rl) != len(gl):
                    bad.append((len(rl), "%d lines" % len(rl), "%d lines" % len(gl)))
            else:
                rj, gl = llvm_symbolizer_json(ref), json_lines(got)
                key = lambda d: [(f["FunctionName"], f["FileName"], f["Line"], f["Column"]) for f in d["Symbol"]]
                # An answer line of the same text as llvm's has its frames: only the others are read.
                bad = []
                for a, r, rl, gline in zip(addrs, rj, json_lines(ref), gl):
                    kr = key(r)
                    kg = kr if gline == rl else key(llvm_symbolizer_json(gline)[0])
                    if kr != kg:
                        bad.append((a, kr, kg))
                if len(rj) != len(gl):
                    bad.append((0, len(rj), len(gl)))
            for a, r, g in bad[:5]:
                print("FAIL %s %s 0x%x:\n  llvm:      %r\n  stackprov: %r" % (name, " ".join(style), a, r, g))
            if bad:
                print("FAIL %s %s: %d of %d addresses differ" % (name, " ".join(style), len(bad), len(addrs)))
                failures += 1
            else:
                print("ok   %s %s: %d addresses (.text 0x%x-0x%x) as llvm-symbolizer-14%s" %
                      (name, " ".join(style), len(addrs), lo, hi,
                       " (%d excepted: as on its DWARF)" % len(excepted) if excepted else ""))
    # Provenance: the resolver is "pdb", its source the PDB beside the image.
    prov = llvm_symbolizer_json(answers([args.stackprov, "symbolize", "--obj", os.path.join(args.work, "cpp_O2.exe"),
                                         "--output-style=JSON", "--provenance"], [0x140001010]))[0]
    if prov.get("Resolver") != "pdb" or prov.get("Source") != os.path.join(args.work, "cpp_O2.pdb"):
        print("FAIL provenance: %r" % prov)
        failures += 1
    failures += bundles(args.work, args.stackprov, refs_by)
    failures += lookups(args.work, args.stackprov, refs)
    if inlined == 0:
        print("FAIL: no address of the -O2 fixtures has an inline chain (the fixtures lost their inlining)")
        failures += 1
    print("%d addresses, %d with inline chains, %.1f s" % (total, inlined, time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
