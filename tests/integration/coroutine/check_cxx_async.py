#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""C++20 awaiter frames (issue 35; doc/async-stacks.md) against the program's records and llvm-symbolizer-14.

Runs cxx_async_fixture in both conventions (folly: the exported pthread key; slot:
sprov_async_set_thread_root_slot). For each capture the fixture prints stackprov's walk and the truth
it keeps: the return addresses its folly-shaped AsyncStackFrame records hold (from the running leaf's
frame outward) and the names of the coroutines awaiting it. Asserted, per capture:
  - the frames tagged async_boundary(awaiter) are exactly the records' return addresses, in order;
  - they sit between the suspended leaf's actor (the physical frame that calls capture_here) and the
    event loop's frame (run_loop, which installed the root), as folly's getAsyncStackTraceSafe splices;
  - llvm-symbolizer-14 (--no-inlines, at each return address - 1, all addresses in one run) names them
    the awaiting coroutines in the known order, then main (the spawn site), and stackprov's function
    names and lines for every frame equal llvm-symbolizer-14's;
  - outside the loop (no root) no frame is an awaiter.
Exit 0 when all holds; each difference is printed."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_chains  # noqa: E402  (tests/lib: the peers' output parsers)

SPROV_METHOD_ASYNC_BOUNDARY = "async_boundary"
SPROV_FRAME_ASYNC_AWAITER = 1 << 4
SPROV_DOMAIN_ASYNC = 3
EXPECTED = {"chain_a": ["middle", "top_a", "main"], "chain_b": ["top_b", "main"]}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def base_name(function):
    """'middle(char const*) [clone .actor]' -> 'middle'."""
    return function.split("(")[0].split(" ")[0]


def main():
    fixture, symbolizer = sys.argv[1], sys.argv[2]
    captures = []
    for mode in ("folly", "slot"):
        try:
            out = subprocess.run([fixture, mode], capture_output=True, text=True, timeout=60)
        except OSError as e:
            print("FAIL: cannot run %s: %s" % (fixture, e))
            return 1
        if out.returncode != 0:
            print(out.stdout + out.stderr)
            print("FAIL: %s %s exited %d" % (fixture, mode, out.returncode))
            return 1
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                c = json.loads(line)
                c["mode"] = mode
                captures.append(c)
            else:
                print(line)
    # One llvm-symbolizer run for every frame with a module: return addresses at pc - 1.
    queries = []
    for c in captures:
        for f in c["frames"]:
            if f["module"] == os.path.realpath(fixture) or f["module"] == fixture:
                off = f["module_offset"] - (1 if f["return_address"] else 0)
                f["query"] = len(queries)
                queries.append("0x%x" % off)
    try:
        sym = subprocess.run([symbolizer, "--obj=" + fixture, "--no-inlines", "--functions=linkage", "--demangle"],
                             input="\n".join(queries) + "\n", capture_output=True, text=True, timeout=60)
    except OSError as e:
        print("FAIL: %s is needed: %s" % (symbolizer, e))
        return 1
    if sym.returncode != 0:
        print("FAIL: %s exited %d: %s" % (symbolizer, sym.returncode, sym.stderr))
        return 1
    answers = llvm_symbolizer_chains(sym.stdout)
    if len(answers) != len(queries):
        print("FAIL: %d llvm-symbolizer answers for %d addresses" % (len(answers), len(queries)))
        return 1

    def llvm(f):
        return answers[f["query"]][0] if "query" in f else None

    seen = set()
    for c in captures:
        tag = "%s/%s" % (c["mode"], c["tag"])
        seen.add(tag)
        frames = c["frames"]
        awaiters = [i for i, f in enumerate(frames) if f["flags"] & SPROV_FRAME_ASYNC_AWAITER]
        for i, f in enumerate(frames):
            print("%s #%d %s 0x%x %s %s:%d" % (tag, i, f["method"] + ("(awaiter)" if i in awaiters else ""),
                                               f["pc"], f["function"], f["file"], f["line"]))
            want = llvm(f)
            if want is not None and (f["function"], f["line"]) != (want[0], want[2]):
                fail("%s frame %d: ours %s line %d, llvm-symbolizer-14 %s line %d" %
                     (tag, i, f["function"], f["line"], want[0], want[2]))
        if c["tag"] == "no_root":
            if awaiters:
                fail("%s: %d awaiter frames without a root" % (tag, len(awaiters)))
            continue
        got = [frames[i]["pc"] for i in awaiters]
        if got != c["records"]:
            fail("%s: awaiter pcs %s, the records hold %s" % (tag, [hex(p) for p in got], [hex(p) for p in c["records"]]))
            continue
        if awaiters != list(range(awaiters[0], awaiters[0] + len(awaiters))):
            fail("%s: awaiter frames not contiguous: %s" % (tag, awaiters))
            continue
        for i in awaiters:
            f = frames[i]
            if f["method"] != SPROV_METHOD_ASYNC_BOUNDARY or f["domain"] != SPROV_DOMAIN_ASYNC:
                fail("%s frame %d: method %s domain %d, want async_boundary/async" % (tag, i, f["method"], f["domain"]))
        names = [base_name(llvm(frames[i])[0]) if llvm(frames[i]) else "??" for i in awaiters]
        if names != EXPECTED[c["tag"]] or names[:-1] != c["awaiting"]:
            fail("%s: llvm-symbolizer-14 names the awaiters %s; the awaiting order is %s then main" %
                 (tag, names, c["awaiting"]))
        before = llvm(frames[awaiters[0] - 1]) if awaiters[0] > 0 else None
        after = llvm(frames[awaiters[-1] + 1]) if awaiters[-1] + 1 < len(frames) else None
        if before is None or base_name(before[0]) != "sleeper" or ".actor" not in before[0]:
            fail("%s: the frame before the awaiters is %s, want the leaf's actor (sleeper ... .actor)" % (tag, before))
        if after is None or base_name(after[0]) != "run_loop":
            fail("%s: the frame after the awaiters is %s, want run_loop (the root's frame)" % (tag, after))
    for mode in ("folly", "slot"):
        for t in ("chain_a", "chain_b", "no_root"):
            if "%s/%s" % (mode, t) not in seen:
                fail("no capture %s/%s" % (mode, t))
    print("FAILED" if failures else "PASS: awaiter frames equal the records, in the awaiting order, named and lined as llvm-symbolizer-14")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
