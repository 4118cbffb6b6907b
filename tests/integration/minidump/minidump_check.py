#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`stackprov stack --minidump` against independent answers (tests/unit/minidump/fixtures.cmake):
the dumped program's own printout (its worker's tid, the worker's registers from GetThreadContext,
the exception, and the worker's frames as RtlVirtualUnwind walked them) and llvm-readobj-14's
GUID/Age of the program.

  minidump_check.py --stackprov BIN --fixtures DIR cli     header, exception, frame 0, notes, errors
  minidump_check.py --stackprov BIN --fixtures DIR chain [--symbol-path DIR]
      every dump's worker thread unwinds to the chain the thread printed (the pdata unwind source;
      --symbol-path: where wine's DLLs are)
  minidump_check.py --stackprov BIN --fixtures DIR pdb [--symbol-path DIR]
      the PDB program's dumps (mdpdb.exe, clang-14 + lld-link-14): its PDB in a symbol-store layout
      on --symbol-path: the worker's chain as printed, its frames named as llvm-symbolizer-14 names
      them; then offline from a bundle of the PE+PDB whose files are gone
  minidump_check.py --stackprov BIN --fixtures DIR code-id --symbol-path SYSTEM32
      pe-code-id identities (TimeDateStamp + SizeOfImage) of the PDB program's dump against
      llvm-readobj-14 of the files; bundles of wine's DLLs so keyed; the dump unwound offline through
      them to the end of the stack
  minidump_check.py --stackprov BIN --fixtures DIR trace --symbol-path SYSTEM32
      trace-capture --minidump of that dump: frames keyed as llvm-readobj-14 reads the files, the
      gate's platform-id check with the trace's bundle and with another image's
  minidump_check.py --stackprov BIN --fixtures DIR offline
      the exception dump, with mdprog.exe's CodeView record filled in as Windows writes it, copied
      with a bundle store holding mdprog.exe's bundle to a temporary directory: `stack --minidump
      --offline --store` unwinds the faulting thread from the bundle's rows to the chain the thread
      printed and names its frames as llvm-symbolizer-14 does on mdprog.exe
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile


def printout(fix, mode):
    p = {"self": []}
    for line in open(os.path.join(fix, mode + ".out")):
        w = line.split()
        if w[:1] == ["tid"]:
            p["tid"] = int(w[1], 16)
        elif w[:1] == ["self"]:
            p["self"].append((int(w[3], 16), int(w[5], 16)))
        elif w[:1] == ["ctx"]:
            p["ctx"] = {"rip": int(w[2], 16), "rsp": int(w[4], 16), "rbp": int(w[6], 16)}
        elif w[:1] == ["exc"]:
            p["exc"] = {"code": int(w[2], 16), "addr": int(w[4], 16)}
    return p


def readobj_key(fix, prog="mdprog"):
    """The symbol-server key of PROG.exe from llvm-readobj-14 --coff-debug-directory: GUID in
    Data1-Data2-Data3-Data4 order, 32 uppercase hex digits, then the age in hex."""
    t = open(os.path.join(fix, prog + ".readobj.txt")).read()
    g = [int(b, 16) for b in re.search(r"PDBGUID: \(([0-9A-F ]+)\)", t).group(1).split()]
    age = int(re.search(r"PDBAge: (\d+)", t).group(1))
    d1 = g[3::-1]
    d2 = g[5:3:-1]
    d3 = g[7:5:-1]
    return "".join("%02X" % b for b in d1 + d2 + d3 + g[8:]) + "%X" % age


def run(args, binary):
    return subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def fail(msg):
    print("FAIL: " + msg)
    return 1


def thread_of(doc, tid):
    for t in doc["threads"]:
        if t["tid"] == tid:
            return t
    return None


def check_cli(a):
    bad = 0
    key = readobj_key(a.fixtures)
    for mode in ("normal", "full", "exception"):
        dump = os.path.join(a.fixtures, mode + ".dmp")
        p = printout(a.fixtures, mode)
        r = run(["stack", "--minidump", dump, "--json"], a.stackprov)
        # Without --symbol-path wine's DLLs are not found and the walks stop short (exit 1): the JSON
        # is complete either way.
        if r.returncode not in (0, 1) or not r.stdout.startswith("{"):
            bad += fail(f"{mode}: exit {r.returncode}: {r.stderr}")
            continue
        doc = json.loads(r.stdout)
        t = thread_of(doc, p["tid"])
        if t is None:
            bad += fail(f"{mode}: no thread {p['tid']:#x} in {[x['tid'] for x in doc['threads']]}")
            continue
        f0 = t["frames"][0]
        if mode == "exception":
            e = doc["exception"]
            want = {"code": "0x%08X" % p["exc"]["code"], "address": "0x%x" % p["exc"]["addr"], "tid": p["tid"],
                    "name": "EXCEPTION_ACCESS_VIOLATION"}
            if {k: e.get(k) for k in want} != want:
                bad += fail(f"exception {e} != {want}")
            if doc["threads"][0]["tid"] != p["tid"]:
                bad += fail(f"the faulting thread {p['tid']} is not first: {doc['threads'][0]['tid']}")
            # The exception's context: the faulting instruction, in chain_c's frame (its frame 0 printed).
            if (int(f0["pc"], 16), int(f0["sp"], 16)) != (p["exc"]["addr"], p["self"][0][1]):
                bad += fail(f"exception frame 0 {f0['pc']} {f0['sp']} != the fault {p['exc']['addr']:#x} "
                            f"{p['self'][0][1]:#x}")
        else:
            if doc["exception"] is not None:
                bad += fail(f"{mode}: an exception {doc['exception']} in a dump without one")
            if (int(f0["pc"], 16), int(f0["sp"], 16)) != (p["ctx"]["rip"], p["ctx"]["rsp"]):
                bad += fail(f"{mode}: frame 0 {f0['pc']} {f0['sp']} != GetThreadContext's {p['ctx']}")
        source = "the image headers in the dump's memory" if mode == "full" else "the module file"
        want_note = re.compile(r"module .*\\mdprog\.exe: identity " + key + " from " + re.escape(source))
        if not any(want_note.match(n) for n in doc["notes"]):
            bad += fail(f"{mode}: no note '{want_note.pattern}' in {doc['notes']}")
        if mode == "exception" and not f0["module"].endswith("\\mdprog.exe"):
            bad += fail(f"{mode}: frame 0's module {f0['module']} is not mdprog.exe")
    # Text: the header says the exception, the faulting thread comes first.
    p = printout(a.fixtures, "exception")
    r = run(["stack", "--minidump", os.path.join(a.fixtures, "exception.dmp")], a.stackprov)
    lines = r.stdout.splitlines()
    want = "exception: 0x%08X EXCEPTION_ACCESS_VIOLATION at 0x%x, thread %d" % (p["exc"]["code"], p["exc"]["addr"], p["tid"])
    if len(lines) < 2 or not lines[0].startswith("PID ") or not lines[0].endswith(" - minidump") or lines[1] != want:
        bad += fail(f"text header {lines[:2]} != ['PID n - minidump', '{want}']")
    first_tid = [ln for ln in lines if ln.startswith("TID ")][:1]
    if first_tid != ["TID %d:" % p["tid"]]:
        bad += fail(f"first thread {first_tid}, want TID {p['tid']}")
    # Errors: usage (2) and hostile or missing files (1, naming the file and the problem).
    r = run(["stack", "--symbol-path", "/tmp", "--pid", "1"], a.stackprov)
    if r.returncode != 2 or "--symbol-path" not in r.stderr:
        bad += fail(f"--symbol-path without --minidump: exit {r.returncode} {r.stderr}")
    with tempfile.TemporaryDirectory() as tmp:
        data = open(os.path.join(a.fixtures, "exception.dmp"), "rb").read()
        cases = {"cut.dmp": (data[:200], "passes the end of the file"),
                 "notmd.dmp": (b"ELF!" + data[4:], "is not a minidump")}
        for name, (content, words) in cases.items():
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(content)
            r = run(["stack", "--minidump", path], a.stackprov)
            if r.returncode != 1 or f"cannot read minidump '{path}'" not in r.stderr or words not in r.stderr:
                bad += fail(f"{name}: exit {r.returncode}, stderr {r.stderr!r} (want '{words}')")
        r = run(["stack", "--minidump", os.path.join(tmp, "absent.dmp")], a.stackprov)
        if r.returncode != 1 or "No such file" not in r.stderr:
            bad += fail(f"absent dump: exit {r.returncode}, {r.stderr!r}")
    return bad


def check_chain(a):
    bad = 0
    for mode in ("normal", "full", "exception"):
        p = printout(a.fixtures, mode)
        args = ["stack", "--minidump", os.path.join(a.fixtures, mode + ".dmp"), "--json", "--no-lines"]
        if a.symbol_path:
            args += ["--symbol-path", a.symbol_path]
        r = run(args, a.stackprov)
        # Every thread with a context unwinds to its end: the stacks are whole (exit 0).
        if r.returncode != 0:
            bad += fail(f"{mode}: exit {r.returncode}: {r.stderr}")
        doc = json.loads(r.stdout)
        t = thread_of(doc, p["tid"])
        frames = [(int(f["pc"], 16), int(f["sp"], 16)) for f in t["frames"]]
        # chain_c's activation: the frame at the stack pointer the thread printed for it. Its pc is
        # another call site (the wait, or the fault); the callers' return addresses and stack
        # pointers are the ones printed.
        at = [i for i, (_, sp) in enumerate(frames) if sp == p["self"][0][1]]
        if not at:
            bad += fail(f"{mode}: no frame with chain_c's sp {p['self'][0][1]:#x}: {[(hex(a), hex(b)) for a, b in frames]}")
            continue
        got = frames[at[0] + 1:at[0] + len(p["self"])]
        if got != p["self"][1:]:
            bad += fail(f"{mode}: frames after chain_c {[(hex(x), hex(y)) for x, y in got]} != RtlVirtualUnwind's "
                        f"{[(hex(x), hex(y)) for x, y in p['self'][1:]]}")
    return bad


def readobj_rsds(fix, prog="mdprog"):
    """GUID bytes (as the RSDS record stores them) and age of PROG.exe, from llvm-readobj-14."""
    t = open(os.path.join(fix, prog + ".readobj.txt")).read()
    g = bytes(int(b, 16) for b in re.search(r"PDBGUID: \(([0-9A-F ]+)\)", t).group(1).split())
    return g, int(re.search(r"PDBAge: (\d+)", t).group(1))


def fill_codeview(dump, module_suffix, guid, age):
    """The dump with the CodeView record of the module whose name ends in module_suffix filled in
    (an RSDS record appended and named by the module's CvRecord), as Windows' dbghelp writes it and
    wine's leaves empty. Read here from the MINIDUMP_* layouts of minidumpapiset.h, not lib/minidump."""
    d = bytearray(dump)
    sig, _, nstreams, dir_rva = struct.unpack_from("<IIII", d, 0)
    if sig != 0x504D444D:
        raise RuntimeError("not a minidump")
    for i in range(nstreams):
        kind, _, rva = struct.unpack_from("<III", d, dir_rva + 12 * i)
        if kind != 4:  # ModuleListStream
            continue
        n, = struct.unpack_from("<I", d, rva)
        for k in range(n):
            m = rva + 4 + 108 * k  # MINIDUMP_MODULE: CvRecord at +76
            name_rva, = struct.unpack_from("<I", d, m + 20)
            ln, = struct.unpack_from("<I", d, name_rva)
            if not d[name_rva + 4:name_rva + 4 + ln].decode("utf-16-le").lower().endswith(module_suffix):
                continue
            rec = b"RSDS" + guid + struct.pack("<I", age) + b"\0"
            struct.pack_into("<II", d, m + 76, len(rec), len(d))
            return bytes(d + rec)
    raise RuntimeError("no module " + module_suffix)


def set_exception_context(dump, rip, rsp):
    """The dump with the exception's context (MINIDUMP_EXCEPTION_STREAM's ThreadContext, an x64
    CONTEXT: Rsp at 0x98, Rip at 0xF8, winnt.h) at rip and rsp."""
    d = bytearray(dump)
    _, _, nstreams, dir_rva = struct.unpack_from("<IIII", d, 0)
    for i in range(nstreams):
        kind, _, rva = struct.unpack_from("<III", d, dir_rva + 12 * i)
        if kind == 6:  # ExceptionStream: ThreadId, align, MINIDUMP_EXCEPTION (152 bytes), ThreadContext
            _, ctx = struct.unpack_from("<II", d, rva + 160)
            struct.pack_into("<Q", d, ctx + 0x98, rsp)
            struct.pack_into("<Q", d, ctx + 0xF8, rip)
            return bytes(d)
    raise RuntimeError("no exception stream")


def epilog_states(exe, func, rsp_body):
    """(rip, rsp) at each instruction of `func`'s last epilog ([add $n,%rsp] pops ret, from
    llvm-objdump-14's disassembly) for a body whose rsp is rsp_body: the x64 semantics of those
    instructions give rsp there."""
    out = subprocess.run(["llvm-objdump-14", "-d", "--no-show-raw-insn", exe], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    body = out.split("<%s>:\n" % func, 1)[1].split("\n\n", 1)[0]
    insns = [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"^\s*([0-9a-f]+):\s*(.*)$", body, re.M)]
    ret = max(i for i, (_, t) in enumerate(insns) if t.startswith("ret"))
    first = ret
    while first > 0 and re.match(r"(popq\s+%\w+|addq\s+\$\d+, %rsp)$", insns[first - 1][1]):
        first -= 1
    states, rsp = [], rsp_body
    for addr, text in insns[first:ret + 1]:
        states.append((addr, rsp, text))
        m = re.match(r"addq\s+\$(\d+), %rsp$", text)
        rsp += int(m.group(1)) if m else 8
    return states


def llvm_frames(exe, addrs):
    """llvm-symbolizer-14's chains (innermost first) of (function, file, line, column) per address."""
    r = subprocess.run(["llvm-symbolizer-14", "--obj=" + exe, "--output-style=JSON", "--inlines"],
                       input="".join("0x%x\n" % x for x in addrs), stdout=subprocess.PIPE, text=True, check=True)
    return [[(s["FunctionName"], s["FileName"], s["Line"], s["Column"]) for s in json.loads(l)["Symbol"]]
            for l in r.stdout.splitlines() if l.strip()]


def check_offline(a):
    """Unwinding and naming from bundles alone: no module file anywhere (--offline), the dump and the
    store in a fresh directory."""
    if shutil.which("llvm-symbolizer-14") is None:
        return fail("llvm-symbolizer-14 missing (make deps)")
    bad = 0
    exe = os.path.join(a.fixtures, "mdprog.exe")
    p = printout(a.fixtures, "exception")
    guid, age = readobj_rsds(a.fixtures)
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        r = run(["bundle", "build", "--store", store, exe], a.stackprov)
        if r.returncode != 0:
            return fail(f"bundle build {exe}: {r.stderr}")
        cv = fill_codeview(open(os.path.join(a.fixtures, "exception.dmp"), "rb").read(), "mdprog.exe", guid, age)
        # The fault, then frame 0 moved into chain_c's epilog (the thread's own stack, rsp where those
        # instructions put it): offline the bundle's epilog rows must unwind it as the code would.
        variants = [("fault", cv, p["exc"]["addr"], p["self"][0][1])]
        for rip, rsp, text in epilog_states(exe, "chain_c", p["self"][0][1]):
            variants.append((f"chain_c epilog '{text}'", set_exception_context(cv, rip, rsp), rip, rsp))
        for what, data, rip, rsp in variants:
            dump = os.path.join(tmp, "exception-cv.dmp")
            with open(dump, "wb") as f:
                f.write(data)
            r = subprocess.run([os.path.abspath(a.stackprov), "stack", "--minidump", dump, "--offline", "--store", store, "--json"],
                               cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            bad += check_offline_walk(a, exe, p, what, json.loads(r.stdout), rip, rsp)
    print(f"{'ok' if bad == 0 else 'FAIL'}   offline: {len(variants)} states of the exception dump")
    return bad


def check_offline_walk(a, exe, p, what, doc, rip0, rsp0, prog="mdprog"):
    """One offline walk of the faulting thread: frame 0 at (rip0, rsp0), then the frames the thread
    printed after chain_c's, named as llvm-symbolizer-14 names them."""
    bad = 0
    key = readobj_key(a.fixtures, prog)
    note = [n for n in doc.get("notes", []) if prog + ".exe" in n]
    if not note or key not in note[0] or "CodeView" not in note[0] or "no module file" not in note[0]:
        bad += fail(f"offline {what}: mdprog's note {note} (want key {key} from the CodeView record, no module file)")
    t = doc["threads"][0]
    if t["tid"] != p["tid"]:
        return bad + fail(f"offline {what}: first thread {t['tid']}, the faulting one is {p['tid']}")
    frames = t["frames"]
    pcs = [(int(f["pc"], 16), int(f["sp"], 16)) for f in frames]
    # Frame 0 is the fault; the callers are the frames the thread printed after chain_c's, through
    # mdprog's frames to the first frame of another module: the store holds no bundle of wine's DLLs
    # (keyed by their code id: minidump_code_id), so the walk stops there (no_unwind_info).
    in_exe = [i for i, (rip, _) in enumerate(p["self"]) if 0x140000000 <= rip < 0x150000000]
    want = p["self"][1:in_exe[-1] + 2]
    if pcs[0] != (rip0, rsp0) or pcs[1:] != want:
        bad += fail(f"offline {what}: frames {[(hex(x), hex(y)) for x, y in pcs]}, want {rip0:#x} at sp {rsp0:#x} "
                    f"then {[(hex(x), hex(y)) for x, y in want]}")
    if t.get("stop_reason") != "no_unwind_info" or any(f["method"] not in ("context", "cfi_bundle") for f in frames):
        bad += fail(f"offline {what}: stop {t.get('stop_reason')}, methods {[f['method'] for f in frames]}")
    # Names: frame 0 at its pc, callers at pc - 1, as llvm-symbolizer-14 answers on the original file.
    named = [f for f in frames if 0x140000000 <= int(f["pc"], 16) < 0x150000000]
    ref = llvm_frames(exe, [int(f["pc"], 16) - (1 if f["index"] else 0) for f in named])
    for f, r in zip(named, ref):
        got = [(i["function"], i["file"], i["line"], i["column"]) for i in f["inlined"]] + \
              [(f.get("resolved_function"), f.get("file"), f.get("line"), f.get("column"))]
        if got != r or f["resolver"] != "bundle":
            bad += fail(f"offline {what}: frame {f['index']} at {f['pc']}: {got} from {f['resolver']}, llvm-symbolizer-14 {r}")
    if bad == 0:
        print(f"ok   offline {what}: {len(frames)} frames from the bundle alone as the thread printed them, "
              f"{len(named)} named as llvm-symbolizer-14 ({', '.join(r[-1][0] for r in ref)}); stop at "
              f"{frames[-1]['module']} (no bundle of it)")
    return bad


def pdbutil_key(fix):
    """mdpdb.pdb's symbol-server key from llvm-pdbutil-14 dump --summary: the GUID's 32 hex digits
    as it prints them ({6DAA8AB0-FC22-...}) then the age in hex."""
    t = open(os.path.join(fix, "mdpdb.pdbutil.txt")).read()
    guid = re.search(r"GUID: \{([0-9A-F-]+)\}", t).group(1).replace("-", "")
    return guid + "%X" % int(re.search(r"Age: (\d+)", t).group(1))


def frame_answer(f):
    """(function, file, line, column) of each frame of a stack frame's chain, innermost first."""
    return [(i["function"], i["file"], i["line"], i["column"]) for i in f["inlined"]] + \
        [(f.get("resolved_function"), f.get("file") or "", f.get("line") or 0, f.get("column") or 0)]


def check_pdb(a):
    """A PDB program's dumps (mdpdb.exe: clang-14 + lld-link-14, its PDB in mdpdb-pdb/, the CodeView
    record naming "mdpdb.pdb" alone): with the PDB in a symbol-store layout NAME.pdb/KEY/NAME.pdb on
    --symbol-path, each dump's worker unwinds to the chain it printed with RtlVirtualUnwind and its
    frames in mdpdb.exe are named as llvm-symbolizer-14 names them on mdpdb.exe with its PDB beside
    it; without that directory they are not (the PDB is nowhere else). Then offline: a bundle of the
    PE+PDB built in a directory that is removed, the exception dump's CodeView record filled in."""
    for tool in ("llvm-symbolizer-14",):
        if shutil.which(tool) is None:
            return fail(f"{tool} missing (make deps)")
    bad = 0
    fix = a.fixtures
    key = pdbutil_key(fix)
    if key != readobj_key(fix, "mdpdb"):
        return fail(f"llvm-pdbutil-14's key {key} != llvm-readobj-14's {readobj_key(fix, 'mdpdb')}")
    pdb = os.path.join(fix, "mdpdb-pdb", "mdpdb.pdb")
    with tempfile.TemporaryDirectory() as tmp:
        syms = os.path.join(tmp, "syms")
        os.makedirs(os.path.join(syms, "mdpdb.pdb", key))
        in_store = os.path.join(syms, "mdpdb.pdb", key, "mdpdb.pdb")
        shutil.copy(pdb, in_store)
        oracle = os.path.join(tmp, "oracle")
        os.makedirs(oracle)
        exe = os.path.join(oracle, "mdpdb.exe")
        shutil.copy(os.path.join(fix, "mdpdb.exe"), exe)
        shutil.copy(pdb, oracle)
        for mode in ("normal", "exception"):
            p = printout(fix, "pdb-" + mode)
            dump = os.path.join(fix, "pdb-%s.dmp" % mode)
            sp = ":".join(x for x in (a.symbol_path, syms) if x)
            r = run(["stack", "--minidump", dump, "--json", "--symbol-path", sp], a.stackprov)
            if r.returncode != 0:  # every thread with a context unwinds to its end
                bad += fail(f"pdb {mode}: exit {r.returncode}: {r.stderr}")
                continue
            doc = json.loads(r.stdout)
            t = thread_of(doc, p["tid"])
            if t is None:
                bad += fail(f"pdb {mode}: no thread {p['tid']:#x}")
                continue
            frames = t["frames"]
            pcs = [(int(f["pc"], 16), int(f["sp"], 16)) for f in frames]
            at = [i for i, (_, x) in enumerate(pcs) if x == p["self"][0][1]]
            if not at or pcs[at[0] + 1:] != p["self"][1:]:
                bad += fail(f"pdb {mode}: frames {[(hex(x), hex(y)) for x, y in pcs]}: not chain_c's sp "
                            f"{p['self'][0][1]:#x} then RtlVirtualUnwind's {[(hex(x), hex(y)) for x, y in p['self'][1:]]}")
                continue
            if mode == "exception" and (at[0] != 0 or pcs[0][0] != p["exc"]["addr"]):
                bad += fail(f"pdb exception: frame 0 {pcs[0][0]:#x} (index {at[0]}) is not the fault {p['exc']['addr']:#x}")
            named = [f for f in frames if f["module"].lower().endswith("\\mdpdb.exe")]
            ref = llvm_frames(exe, [int(f["module_offset"], 16) - (1 if f["index"] else 0) for f in named])
            names = [r[-1][0] for r in ref]
            if names != ["chain_c", "chain_b", "chain_a", "worker"]:
                bad += fail(f"pdb {mode}: llvm-symbolizer-14 names the exe's frames {names}")
            for f, want in zip(named, ref):
                if frame_answer(f) != want or f["resolver"] != "pdb" or f["source"] != in_store:
                    bad += fail(f"pdb {mode}: frame {f['index']} at {f['pc']}: {frame_answer(f)} from {f['resolver']} "
                                f"{f['source']}, llvm-symbolizer-14 {want} (want the store's {in_store})")
            # The text form names them too (lld-link writes no COFF symbols: the PDB's name).
            text = run(["stack", "--minidump", dump, "--symbol-path", sp], a.stackprov).stdout.splitlines()
            for f, want in zip(named, ref):
                line = "#%-2d 0x%016x %s - " % (f["index"], int(f["pc"], 16), want[-1][0])
                if not any(ln.startswith(line) and ln.endswith(f["module"] + " [%s]" % f["method"]) for ln in text):
                    bad += fail(f"pdb {mode}: no text line '{line}... {f['module']}' in "
                                f"{[ln for ln in text if 'mdpdb.exe [' in ln]}")
            # Without the store the PDB is found nowhere: the same frames, unnamed.
            r = run(["stack", "--minidump", dump, "--json"] + (["--symbol-path", a.symbol_path] if a.symbol_path else []),
                    a.stackprov)
            t = thread_of(json.loads(r.stdout), p["tid"])
            unnamed = [f for f in t["frames"] if f["module"].lower().endswith("\\mdpdb.exe")]
            if len(unnamed) != len(named) or any(f["resolver"] == "pdb" or f.get("resolved_function") for f in unnamed):
                bad += fail(f"pdb {mode}: without the symbol store: {[(f['resolver'], f.get('resolved_function')) for f in unnamed]}")
            if bad == 0:
                print(f"ok   pdb {mode}: {len(frames)} frames as the thread printed them, {len(named)} named from "
                      f"the symbol store's PDB as llvm-symbolizer-14 names them ({', '.join(names)})")
        # Offline: the bundle of the PE+PDB, built from a copy that is then removed.
        gone = os.path.join(tmp, "gone")
        os.makedirs(gone)
        shutil.copy(exe, gone)
        shutil.copy(pdb, gone)
        store = os.path.join(tmp, "store")
        r = run(["bundle", "build", "--store", store, os.path.join(gone, "mdpdb.exe")], a.stackprov)
        if r.returncode != 0:
            return bad + fail(f"bundle build mdpdb.exe: {r.stderr}")
        shutil.rmtree(gone)
        p = printout(fix, "pdb-exception")
        guid, age = readobj_rsds(fix, "mdpdb")
        dump = os.path.join(tmp, "pdb-exception-cv.dmp")
        with open(dump, "wb") as f:
            f.write(fill_codeview(open(os.path.join(fix, "pdb-exception.dmp"), "rb").read(), "mdpdb.exe", guid, age))
        r = subprocess.run([os.path.abspath(a.stackprov), "stack", "--minidump", dump, "--offline", "--store", store,
                            "--json"], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        bad += check_offline_walk(a, exe, p, "pdb fault", json.loads(r.stdout), p["exc"]["addr"], p["self"][0][1],
                                  prog="mdpdb")
    return bad


def readobj_code_id(path):
    """The code id key of a PE file from llvm-readobj-14 --file-headers: TimeDateStamp as 8 uppercase
    hex digits ("TimeDateStamp: 2023-02-18 22:16:11 (0x63F14E2B)"), then SizeOfImage (printed in
    decimal) in lowercase hex."""
    t = run_tool(["llvm-readobj-14", "--file-headers", path])
    stamp = int(re.search(r"TimeDateStamp: .*\(0x([0-9A-Fa-f]+)\)", t).group(1), 16)
    size = int(re.search(r"SizeOfImage: (\d+)", t).group(1))
    return "%08X%x" % (stamp, size), stamp, size


def run_tool(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True).stdout


def dump_modules(dump):
    """{name: (base, SizeOfImage, TimeDateStamp)} of a dump's MINIDUMP_MODULEs, read here from
    minidumpapiset.h's layout (BaseOfImage u64, SizeOfImage, CheckSum, TimeDateStamp, ModuleNameRva)."""
    d = open(dump, "rb").read()
    _, _, nstreams, dir_rva = struct.unpack_from("<IIII", d, 0)
    out = {}
    for i in range(nstreams):
        kind, _, rva = struct.unpack_from("<III", d, dir_rva + 12 * i)
        if kind != 4:
            continue
        n, = struct.unpack_from("<I", d, rva)
        for k in range(n):
            m = rva + 4 + 108 * k
            base, size, _, stamp, name_rva = struct.unpack_from("<QIIII", d, m)
            ln, = struct.unpack_from("<I", d, name_rva)
            out[d[name_rva + 4:name_rva + 4 + ln].decode("utf-16-le")] = (base, size, stamp)
    return out


def check_code_id(a):
    """The pe-code-id identity (TimeDateStamp + SizeOfImage) of images without a CodeView record:
    every module of the PDB program's normal dump (wine writes every CodeView record empty) is keyed,
    offline, by its module-list entry, and that key equals llvm-readobj-14 --file-headers of the
    module's file (wine's DLLs in the prefix, mdpdb.exe); bundles of wine's ntdll, kernel32 and
    kernelbase are keyed so, and with mdpdb.exe's bundle the dump's worker unwinds from bundles alone
    through wine's DLLs to the end of its stack: the chain it printed, the DLL frames named as
    llvm-symbolizer-14 names them on the files; symbolize --code-id KEY answers from the store, and a
    key of another size is refused naming it."""
    for tool in ("llvm-symbolizer-14", "llvm-readobj-14"):
        if shutil.which(tool) is None:
            return fail(f"{tool} missing (make deps)")
    bad = 0
    fix, sysdir = a.fixtures, a.symbol_path
    dump = os.path.join(fix, "pdb-normal.dmp")
    mods = dump_modules(dump)
    files = {}
    for name in mods:
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        path = os.path.join(fix, base) if base.lower() == "mdpdb.exe" else os.path.join(sysdir, base.lower())
        if not os.path.exists(path):
            bad += fail(f"code-id: no file {path} for the dump's module {name}")
            continue
        files[name] = path
    r = run(["stack", "--minidump", dump, "--offline", "--json"], a.stackprov)
    notes = json.loads(r.stdout)["notes"]
    keyed = 0
    for name, path in files.items():
        key, stamp, size = readobj_code_id(path)
        _, dsize, dstamp = mods[name]
        if (dstamp, dsize) != (stamp, size):
            bad += fail(f"code-id: {name}: the dump's TimeDateStamp/SizeOfImage {dstamp:#x}/{dsize:#x} are not the file's "
                        f"{stamp:#x}/{size:#x} ({path})")
        want = "module %s: identity code-id %s from the dump's module list" % (name, key)
        if not any(n.startswith(want) for n in notes):
            bad += fail(f"code-id: no note '{want}...' in {[n for n in notes if name in n]}")
        else:
            keyed += 1
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        gone = os.path.join(tmp, "gone")
        os.makedirs(gone)
        shutil.copy(os.path.join(fix, "mdpdb.exe"), gone)
        shutil.copy(os.path.join(fix, "mdpdb-pdb", "mdpdb.pdb"), gone)
        dlls = [os.path.join(sysdir, d) for d in ("ntdll.dll", "kernel32.dll", "kernelbase.dll")]
        for f in dlls + [os.path.join(gone, "mdpdb.exe")]:
            r = run(["bundle", "build", "--store", store, f], a.stackprov)
            if r.returncode != 0:
                return bad + fail(f"bundle build {f}: {r.stderr}")
            if f in dlls:
                doc = json.loads(run(["bundle", "inspect", "--json", "--store", store, r.stdout.strip()], a.stackprov).stdout)
                key, stamp, size = readobj_code_id(f)
                want = {"id_kind": "pe-code-id", "id": struct.pack("<II", stamp, size).hex()}
                got = {k: doc["modules"][0][k] for k in want}
                if got != want:
                    bad += fail(f"code-id: bundle of {f}: {got}, want {want} (llvm-readobj-14: {key})")
        shutil.rmtree(gone)
        guid, age = readobj_rsds(fix, "mdpdb")
        cv = os.path.join(tmp, "pdb-normal-cv.dmp")
        with open(cv, "wb") as f:
            f.write(fill_codeview(open(dump, "rb").read(), "mdpdb.exe", guid, age))
        p = printout(fix, "pdb-normal")
        r = subprocess.run([os.path.abspath(a.stackprov), "stack", "--minidump", cv, "--offline", "--store", store, "--json"],
                           cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        t = thread_of(json.loads(r.stdout), p["tid"])
        frames = t["frames"] if t else []
        pcs = [(int(f["pc"], 16), int(f["sp"], 16)) for f in frames]
        at = [i for i, (_, x) in enumerate(pcs) if x == p["self"][0][1]]
        if not at or pcs[at[0] + 1:] != p["self"][1:] or t.get("stop_reason") != "end_of_stack":
            bad += fail(f"code-id offline: frames {[(hex(x), hex(y)) for x, y in pcs]} (stop {t and t.get('stop_reason')}): "
                        f"not chain_c's sp {p['self'][0][1]:#x} then RtlVirtualUnwind's "
                        f"{[(hex(x), hex(y)) for x, y in p['self'][1:]]} to the end of the stack")
        if any(f["method"] != ("context" if f["index"] == 0 else "cfi_bundle") for f in frames):
            bad += fail(f"code-id offline: methods {[f['method'] for f in frames]}")
        # Every frame of a wine DLL named from its bundle as llvm-symbolizer-14 names it on the file.
        named = 0
        for f in frames:
            path = files.get(f["module"])
            if path is None or path.endswith("mdpdb.exe"):
                continue
            ref = llvm_frames(path, [int(f["module_offset"], 16) - (1 if f["index"] else 0)])[0]
            if frame_answer(f) != ref or f["resolver"] != "bundle":
                bad += fail(f"code-id offline: frame {f['index']} {f['module']}+{f['module_offset']}: {frame_answer(f)} "
                            f"from {f['resolver']}, llvm-symbolizer-14 {ref}")
            named += 1
        # symbolize by the key alone, and a key of another size.
        k32 = os.path.join(sysdir, "kernel32.dll")
        key = readobj_code_id(k32)[0]
        k32_frames = [f for f in frames if f["module"] == "C:\\windows\\system32\\kernel32.dll"]
        if not k32_frames:
            bad += fail("code-id offline: no kernel32 frame")
        else:
            addr = int(k32_frames[0]["module_offset"], 16) - 1
            got = run(["symbolize", "--code-id", key, "--store", store, "0x%x" % addr], a.stackprov).stdout
            want = run_tool(["llvm-symbolizer-14", "--obj=" + k32, "0x%x" % addr])
            if got != want:
                bad += fail(f"symbolize --code-id {key} 0x{addr:x}: {got!r}, llvm-symbolizer-14 {want!r}")
            other = key[:8] + "%x" % (int(key[8:], 16) + 0x1000)
            r = run(["symbolize", "--code-id", other, "--store", store, "0x%x" % addr], a.stackprov)
            if r.returncode != 1 or other not in r.stderr:
                bad += fail(f"symbolize --code-id {other} (no such image): exit {r.returncode}, {r.stderr!r}")
    if bad == 0:
        print(f"ok   code-id: {keyed} modules keyed as llvm-readobj-14 reads their files; offline from bundles: "
              f"{len(frames)} frames to the end of the stack, {named} wine DLL frames named as llvm-symbolizer-14")
    return bad


def check_trace(a):
    """A trace of a Windows target: `trace-capture --minidump` of the PDB program's normal dump (its PDB
    in a symbol-store layout on --symbol-path, wine's DLLs from the prefix) with --bundle: every frame
    keyed as llvm-readobj-14 reads the module's file (mdpdb.exe pdb-guid-age: its RSDS GUID and age;
    wine's DLLs pe-code-id: TimeDateStamp and SizeOfImage), the worker's frames the chain it printed,
    and trace-replay's platform-id check passing with the trace's bundle; a trace resolved with a
    bundle of another image named ntdll.dll fails platform-id naming both code ids."""
    if shutil.which("llvm-readobj-14") is None:
        return fail("llvm-readobj-14 missing (make deps)")
    bad = 0
    fix, sysdir = a.fixtures, a.symbol_path
    key = pdbutil_key(fix)
    guid, age = readobj_rsds(fix, "mdpdb")
    want_ids = {"mdpdb.exe": ("pdb-guid-age", (guid + struct.pack("<I", age)).hex())}
    for d in ("ntdll.dll", "kernel32.dll", "kernelbase.dll"):
        _, stamp, size = readobj_code_id(os.path.join(sysdir, d))
        want_ids[d] = ("pe-code-id", struct.pack("<II", stamp, size).hex())
    p = printout(fix, "pdb-normal")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOME=tmp, XDG_DATA_HOME=os.path.join(tmp, "xdg"), TMPDIR=tmp)
        env.pop("STACKPROV_STORE", None)
        syms = os.path.join(tmp, "syms")
        os.makedirs(os.path.join(syms, "mdpdb.pdb", key))
        shutil.copy(os.path.join(fix, "mdpdb-pdb", "mdpdb.pdb"), os.path.join(syms, "mdpdb.pdb", key))
        dump = os.path.join(fix, "pdb-normal.dmp")

        def sp(*args, **kw):
            return subprocess.run([a.stackprov] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  timeout=120, env=env, **kw)
        store = "sqlite:" + os.path.join(tmp, "t.db")
        r = sp("trace-capture", "--minidump", dump, "--symbol-path", sysdir + ":" + syms, "--store", store, "--bundle",
               "--bundle-store", os.path.join(tmp, "bundles"))
        if r.returncode != 0:
            return fail(f"trace-capture --minidump --bundle: exit {r.returncode}: {r.stderr}")
        tid = r.stdout.strip()
        ev = json.loads(sp("trace-show", tid, "--json", "--store", store).stdout)
        if ev.get("platform") != "windows":
            bad += fail(f"trace platform {ev.get('platform')}, want windows")
        frames = [f for f in ev["frames"] if f["tid"] == p["tid"]]
        for f in frames:
            base = f["module"].rsplit("\\", 1)[-1].lower()
            got = (f.get("module_id_kind"), f["module_build_id"])
            if got != want_ids.get(base):
                bad += fail(f"trace frame {f['ip']} in {f['module']}: identity {got}, llvm-readobj-14 {want_ids.get(base)}")
        ips = [int(f["ip"], 16) for f in frames]
        printed = [rip for rip, _ in p["self"][1:]]  # the callers of chain_c, as RtlVirtualUnwind walked them
        if printed[0] not in ips or ips[ips.index(printed[0]):] != printed:
            bad += fail(f"trace frames {[hex(x) for x in ips]}: not ending with the printed chain {[hex(x) for x in printed]}")
        rep = json.loads(sp("trace-replay", "--trace", tid, "--seeds", "1", "--json", "--store", store).stdout)
        checks = {c["name"]: c for c in rep["checks"]}
        if not checks.get("platform-id", {}).get("passed") or not checks.get("success", {}).get("passed"):
            bad += fail(f"trace-replay of the minidump trace: {checks.get('platform-id')}, {checks.get('success')}")
        # Another image's bundle under ntdll.dll's name: platform-id names both code ids.
        store2 = "sqlite:" + os.path.join(tmp, "t2.db")
        tid2 = sp("trace-capture", "--minidump", dump, "--symbol-path", sysdir + ":" + syms, "--store", store2).stdout.strip()
        ob = os.path.join(tmp, "other.bundle")
        r = sp("bundle", "build", "--name", "ntdll.dll", "-o", ob, os.path.join(sysdir, "kernel32.dll"))
        if r.returncode != 0:
            return bad + fail(f"bundle build --name ntdll.dll kernel32.dll: {r.stderr}")
        sp("trace-resolve", "--trace", tid2, "--bundle", ob, "--store", store2)
        rep = json.loads(sp("trace-replay", "--trace", tid2, "--seeds", "1", "--json", "--store", store2).stdout)
        pid = {c["name"]: c for c in rep["checks"]}.get("platform-id", {})
        d = pid.get("detail", "")
        nt, k32 = want_ids["ntdll.dll"][1], want_ids["kernel32.dll"][1]
        if pid.get("passed") is not False or not re.search(r"ntdll\.dll pe-code-id %s: no bundle of the trace holds it; "
                                                           r"bundle sha256:[0-9a-f]+ holds ntdll\.dll as pe-code-id %s"
                                                           % (nt, k32), d):
            bad += fail(f"platform-id with another image's bundle named ntdll.dll: {pid} (want {nt} and {k32} named)")
    if bad == 0:
        print(f"ok   trace of a minidump: {len(frames)} frames keyed as llvm-readobj-14 reads the files (pdb-guid-age, "
              f"pe-code-id), platform-id passes with its bundle and names both code ids with another image's")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--symbol-path", default="")
    ap.add_argument("mode", choices=["cli", "chain", "offline", "pdb", "code-id", "trace"])
    a = ap.parse_args()
    bad = {"cli": check_cli, "chain": check_chain, "offline": check_offline, "pdb": check_pdb,
           "code-id": check_code_id, "trace": check_trace}[a.mode](a)
    print("ok" if bad == 0 else f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
