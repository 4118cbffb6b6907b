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


def readobj_key(fix):
    """The symbol-server key of mdprog.exe from llvm-readobj-14 --coff-debug-directory: GUID in
    Data1-Data2-Data3-Data4 order, 32 uppercase hex digits, then the age in hex."""
    t = open(os.path.join(fix, "mdprog.readobj.txt")).read()
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


def readobj_rsds(fix):
    """GUID bytes (as the RSDS record stores them) and age of mdprog.exe, from llvm-readobj-14."""
    t = open(os.path.join(fix, "mdprog.readobj.txt")).read()
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


def check_offline_walk(a, exe, p, what, doc, rip0, rsp0):
    """One offline walk of the faulting thread: frame 0 at (rip0, rsp0), then the frames the thread
    printed after chain_c's, named as llvm-symbolizer-14 names them."""
    bad = 0
    key = readobj_key(a.fixtures)
    note = [n for n in doc.get("notes", []) if "mdprog.exe" in n]
    if not note or key not in note[0] or "CodeView" not in note[0] or "no module file" not in note[0]:
        bad += fail(f"offline {what}: mdprog's note {note} (want key {key} from the CodeView record, no module file)")
    t = doc["threads"][0]
    if t["tid"] != p["tid"]:
        return bad + fail(f"offline {what}: first thread {t['tid']}, the faulting one is {p['tid']}")
    frames = t["frames"]
    pcs = [(int(f["pc"], 16), int(f["sp"], 16)) for f in frames]
    # Frame 0 is the fault; the callers are the frames the thread printed after chain_c's, through
    # mdprog's frames to the first frame of another module: wine's DLLs have no identity (no debug
    # directory), so no bundle, and the walk stops there (no_unwind_info).
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
              f"{frames[-1]['module']} (no identity)")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--symbol-path", default="")
    ap.add_argument("mode", choices=["cli", "chain", "offline"])
    a = ap.parse_args()
    bad = {"cli": check_cli, "chain": check_chain, "offline": check_offline}[a.mode](a)
    print("ok" if bad == 0 else f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
