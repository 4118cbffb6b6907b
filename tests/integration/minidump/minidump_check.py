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
"""
import argparse
import json
import os
import re
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--symbol-path", default="")
    ap.add_argument("mode", choices=["cli", "chain"])
    a = ap.parse_args()
    bad = check_cli(a) if a.mode == "cli" else check_chain(a)
    print("ok" if bad == 0 else f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
