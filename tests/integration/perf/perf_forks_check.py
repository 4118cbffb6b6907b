#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A server forking a child per request, each exiting (fixture_forks.c): the parent has 4,096
# executable mappings, forks 300 children that exit at once, then a last child that spins in
# forks_leaf <- forks_mid <- main. The module tracker keeps at most 2^20 mappings over all
# processes; before it freed exited processes, children past the 255th started without modules
# and the last child's samples were unnamed. Checked through both paths into the tracker:
# `stackprov record` (its capture file, imported) against the fixture's call chain, and
# `perf record --call-graph dwarf` imported by `stackprov perf-import` against `perf script` on
# the same file, sample by sample.
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_check import find_perf, finish, run, script_args, strip_version  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_perf_script  # noqa: E402  (tests/lib: the peers' output parsers)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

MAPS, CHILDREN, SECONDS = "4096", "300", "0.5"
CHAIN = ("forks_leaf", "forks_mid", "main")


def has_chain(names):
    """forks_leaf, forks_mid and main in this order, forks_leaf the first of them (callees above it:
    clock_gettime, the vDSO)."""
    it = iter(names)
    return all(any(n == c for n in it) for c in CHAIN)


def last_child(stdout):
    m = re.search(r"^last child (\d+)$", stdout, re.M)
    return int(m.group(1)) if m else None


def user_names(o):
    return [strip_version(f["function"]) for f in o["frames"] if f["method"] != "kernel"]


def main():
    args = script_args()
    perf = find_perf()
    if perf is None:
        return 1
    workdir = tempfile.mkdtemp(prefix="stackprov-perfforks-")
    forks = os.path.join(workdir, "forks")
    run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", forks, os.path.join(args.source_dir, "fixture_forks.c")])
    failures = []
    # The names are the binary's own (nm), not taken from stackprov.
    syms = set(l.split()[-1] for l in run(nm_command() + [forks]).stdout.splitlines() if l.split()[1:2] in (["T"], ["t"]))
    if not set(CHAIN) <= syms:
        failures.append("nm %s: %s not all defined (%s)" % (forks, CHAIN, sorted(syms & set(CHAIN))))

    # 1. stackprov record: its capture file against the fixture's chain.
    cap = os.path.join(workdir, "forks.cap")
    rec = run([args.stackprov, "record", "-F", "999", "-o", cap, "--", forks, MAPS, CHILDREN, SECONDS])
    print("record: " + rec.stderr.strip())
    last = last_child(rec.stdout)
    imp = run([args.stackprov, "perf-import", cap, "--format", "json"])
    lines = [json.loads(l) for l in imp.stdout.splitlines() if l.strip()]
    mine = [o for o in lines if o["pid"] == last]
    named = sum(1 for o in mine if has_chain(user_names(o)))
    print("record: last child %s: %d samples, %d through %s" % (last, len(mine), named, " <- ".join(CHAIN)))
    if last is None or len(mine) < 200 or named < 0.95 * len(mine):
        failures.append("record: the last child (%s) has %d samples, %d of them through %s (want >= 95%% of >= 200)"
                        % (last, len(mine), named, "/".join(CHAIN)))
    for what, text in (("record", rec.stderr), ("perf-import of the capture", imp.stderr)):
        if "without modules" in text or "further mappings ignored" in text:
            failures.append("%s warns of the mapping bound: %s" % (what, text.strip()))

    # 2. perf record + perf-import against perf script, the last child's samples one by one.
    data = os.path.join(workdir, "forks.data")
    pr = run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf", "-o", data, "--",
              forks, MAPS, CHILDREN, SECONDS])
    last = last_child(pr.stdout)
    script = run([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym,symoff,dso", "--no-inline"]).stdout
    perf_samples, _ = parse_perf_script(script)
    imp = run([args.stackprov, "perf-import", data, "--format", "json"])
    ours = {(o["tid"], o["time"] // 1000): o for o in (json.loads(l) for l in imp.stdout.splitlines() if l.strip())}
    total = agree = perf_chain = 0
    differ = []
    for key, pframes in perf_samples.items():
        if key[0] != last:
            continue
        total += 1
        pnames = [strip_version(f[1]) for f in pframes]
        if not has_chain(pnames):
            continue  # perf itself did not unwind it through the fixture (not counted)
        perf_chain += 1
        o = ours.get(key)
        # from the leaf down to main, name for name
        want = pnames[:pnames.index("main") + 1]
        got = user_names(o)[:len(want)] if o else None
        if got == want:
            agree += 1
        elif len(differ) < 3:
            differ.append("%s: perf %s, stackprov %s" % (key, want, got))
    print("perf-import: last child %s: %d samples, %d through %s by perf script, %d named the same by stackprov"
          % (last, total, perf_chain, " <- ".join(CHAIN), agree))
    if last is None or perf_chain < 200 or agree < 0.95 * perf_chain:
        failures.append("perf-import: the last child (%s): %d of %d samples perf script unwinds through %s named the "
                        "same (want >= 95%% of >= 200); e.g. %s" % (last, agree, perf_chain, "/".join(CHAIN), differ))
    if "without modules" in imp.stderr or "further mappings ignored" in imp.stderr:
        failures.append("perf-import warns of the mapping bound: " + imp.stderr.strip())
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
