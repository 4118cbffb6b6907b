#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Core of a crash through a NULL (or wild) function pointer: `stackprov stack --core` against gdb.

The fixture crashes under gdb, which writes the core (gcore) at the SIGSEGV and prints its
backtrace: that backtrace is the oracle. Every frame gdb prints must be ours, same pc and same
function, frame 1 must be tagged bad_pc_return, and our walk must go on to _start and end with
end_of_stack. Missing gdb fails the test with its name.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_gdb_bt  # noqa: E402  (tests/lib: the peers' output parsers)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--mode", required=True, choices=["core_null", "core_wild"])
    args = ap.parse_args()
    gdb = shutil.which("gdb")
    if gdb is None:
        print("FAIL: gdb not found (make deps installs it)")
        return 1
    with tempfile.TemporaryDirectory(prefix="sprov-crash-") as tmp:
        core = os.path.join(tmp, "core")
        r = subprocess.run([gdb, "-nx", "-batch", "-ex", "set startup-with-shell off", "-ex", "run",
                            "-ex", "bt", "-ex", f"gcore {core}", "--args", args.fixture, args.mode],
                           capture_output=True, text=True, timeout=60)
        # Every frame line gdb printed with an address: (index, pc, function).
        gdb_frames = [(f["index"], f["pc"], f["function"]) for frames in parse_gdb_bt(r.stdout).values()
                      for f in frames if f["pc"] is not None]
        if "SIGSEGV" not in r.stdout or not os.path.exists(core) or len(gdb_frames) < 4:
            print("FAIL: gdb did not stop at the crash and write a core\n" + r.stdout + r.stderr)
            return 1
        s = subprocess.run([args.stackprov, "stack", "--core", core, "--exe", args.fixture, "--json"],
                           capture_output=True, text=True, timeout=60)
        if s.returncode != 0:
            print(f"FAIL: stackprov stack exited {s.returncode}\n{s.stderr}")
            return 1
        doc = json.loads(s.stdout)
    threads = doc["threads"]
    ours = threads[0]["frames"]
    want_pc0 = 0 if args.mode == "core_null" else 0x10000
    fail = []
    print("gdb:", [(i, hex(pc), name) for i, pc, name in gdb_frames])
    print("ours:", [(f["index"], f["pc"], f["function"], f["method"]) for f in ours],
          threads[0].get("stop_reason"))
    if gdb_frames[0][1] != want_pc0:
        fail.append(f"gdb frame 0 is {hex(gdb_frames[0][1])}, expected {hex(want_pc0)}")
    for i, pc, name in gdb_frames:
        if i >= len(ours):
            fail.append(f"gdb frame #{i} {hex(pc)} {name}: we have only {len(ours)} frames")
            break
        if int(ours[i]["pc"], 16) != pc:
            fail.append(f"frame #{i}: pc {ours[i]['pc']}, gdb {hex(pc)}")
        if name not in (None, "??") and ours[i]["function"] != name:
            fail.append(f"frame #{i}: function {ours[i]['function']!r}, gdb {name!r}")
    if len(ours) < 2 or ours[1]["method"] != "bad_pc_return":
        fail.append("frame #1 is not tagged bad_pc_return")
    if [f["function"] for f in ours[1:4]] != ["caller_fn", "b_fn", "a_fn"]:
        fail.append(f"frames 1-3 are {[f['function'] for f in ours[1:4]]}, not caller_fn b_fn a_fn")
    if not ours or ours[-1]["function"] != "_start" or threads[0].get("stop_reason") != "end_of_stack":
        fail.append(f"the walk does not end at _start with end_of_stack: last "
                    f"{ours[-1]['function'] if ours else None!r}, stop {threads[0].get('stop_reason')!r}")
    for f in fail:
        print("FAIL", f)
    print("PASS" if not fail else "FAILED")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
