#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`stackprov stack --raw` with ELF modules (doc/raw-state.md): gdb stops a real process in leaf_fn and
writes its registers, its stack bytes (hex) and its modules (path + the address of each file's offset-0
mapping); stackprov's stack of that document must equal gdb's unwind frame for frame (pc and sp, down
to _start in libc's caller chain). A wrong identity must be refused naming both identities."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def compare(args, d, stop, argv, chain):
    """gdb stops the fixture at `stop` (RAW_STATE_STOP) and writes the state; stackprov's stack of it must be
    gdb's frame for frame."""
    out = os.path.join(d, "gdb.json")
    if os.path.exists(out):
        os.unlink(out)
    env = dict(os.environ, RAW_STATE_OUT=out, RAW_STATE_STOP=stop)
    g = subprocess.run([args.gdb, "-batch", "-nx", "-x", os.path.join(os.path.dirname(__file__), "gdb_state.py"),
                        "--args", args.fixture] + argv, capture_output=True, text=True, env=env, timeout=120)
    if not os.path.exists(out):
        sys.exit("gdb wrote no state at %s (%d): %s" % (stop, g.returncode, g.stderr.strip()[-2000:]))
    doc = json.load(open(out))
    state_path = os.path.join(d, "state.json")
    json.dump(doc["state"], open(state_path, "w"))
    r = subprocess.run([args.stackprov, "stack", "--raw", state_path, "--json", "--no-lines"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("stackprov stack --raw failed at %s (%d): %s" % (stop, r.returncode, r.stderr.strip()))
    threads = json.loads(r.stdout)["threads"]
    assert len(threads) == 1, "one state, %d stacks" % len(threads)
    got, want = threads[0]["frames"], doc["gdb_frames"]
    names = [f["function"] for f in want]
    assert names[:4] == chain, "gdb's chain at %s: %s" % (stop, names)
    bad = []
    if len(got) != len(want):
        bad.append("%d frames, gdb %d (%s)" % (len(got), len(want), names))
    for k, (g_, w) in enumerate(zip(got, want)):
        if int(g_["pc"], 16) != w["pc"] or int(g_["sp"], 16) != w["sp"]:
            bad.append("frame %d: pc %s sp %s %s, gdb pc 0x%x sp 0x%x %s" % (k, g_["pc"], g_["sp"], g_["function"],
                                                                           w["pc"], w["sp"], w["function"]))
    if bad:
        sys.exit("stackprov differs from gdb at %s:\n  " % stop + "\n  ".join(bad))
    print("at %s: %d frames equal gdb's (%s)" % (stop, len(want), " <- ".join(names)))
    return doc, names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--gdb", required=True)
    ap.add_argument("--fixture", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="raw-state-") as d:
        # At leaf_fn's entry; then at fp_leaf's `ret`, after `pop %rbp`: the CFI row still has rbp at
        # CFA-16, below the sp where the copied stack starts, and fp_middle's CFA is rbp + 16 (the
        # register already holds the caller's value: a slot the epilogue has released is not read).
        for stop, argv, chain in (("leaf_fn", [], ["leaf_fn", "middle", "outer", "main"]),
                                  ("ret:fp_leaf", ["fp"], ["fp_leaf", "fp_middle", "outer", "main"])):
            doc, names = compare(args, d, stop, argv, chain)
        # The identity check: a document naming another build-id for the program is refused.
        state_path = os.path.join(d, "state.json")
        st = doc["state"]
        st["modules"][0]["identity"] = {"kind": "elf-build-id", "hex": "00" * 20}
        json.dump(st, open(state_path, "w"))
        r = subprocess.run([args.stackprov, "stack", "--raw", state_path], capture_output=True, text=True)
        if r.returncode != 1 or "0000000000000000000000000000000000000000" not in r.stderr or "elf-build-id" not in r.stderr:
            sys.exit("a wrong identity was not refused naming it (%d): %s" % (r.returncode, r.stderr.strip()))
        print("3 passed, 0 failed")


if __name__ == "__main__":
    main()
