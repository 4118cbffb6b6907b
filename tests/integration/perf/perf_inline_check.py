#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# perf-import's folded and SVG outputs show inlined functions (issue 36): a fixture whose hot loop is
# inlined two deep (hot_a -> outer_inline -> mid_inline), recorded by perf with DWARF call graphs.
# The oracle is `perf script --inline` (Debian has no stackcollapse script: folded here): each
# sample's frames of the fixture, root first, perf's "(inlined)" frames marked _[i], must equal the
# fixture frames of ours (perf-import -f folded, per line weighted by its count), sample for sample
# in aggregate; --no-inline must equal perf script --no-inline the same way; the SVG draws the
# inlined frames (aqua, flamegraph.pl's colour for _[i]) with the folded output's counts.
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import perf_script_samples  # noqa: E402  (tests/lib: the peers' output parsers)

FIXTURE_FUNCS = {"main", "hot_a", "plain_b", "outer_inline", "mid_inline"}  # fixture_inline.c


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300, **kw)


def perf_projection(samples, exe, inline):
    """perf script's samples -> Counter of 'root;...;leaf' over the fixture's frames (inlined: _[i])."""
    out = collections.Counter()
    for _, (comm, frames) in samples.items():
        names, pending = [], []
        for addr, sym, off, dso in frames:  # leaf first; an inlined frame precedes its physical one
            if dso == "inlined":
                pending.append(sym)
                continue
            if dso == exe:
                names += [s + "_[i]" for s in pending] if inline else []
                names.append(sym)
            pending = []
        names = [n for n in names if n.replace("_[i]", "") in FIXTURE_FUNCS]
        out[";".join(reversed(names))] += 1
    return out


def ours_projection(folded):
    out = collections.Counter()
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        names = [x for x in stack.split(";")[1:] if x.replace("_[i]", "") in FIXTURE_FUNCS]
        out[";".join(names)] += int(n)
    return out


def compare(what, ours, perf, failures, tolerance):
    total = sum(perf.values())
    differ = sum((perf - ours).values())
    print("%s: %d samples; %d stacks; %d samples differ (allowed %d); top: %s" % (
        what, total, len(ours), differ, int(tolerance * total), ours.most_common(3)))
    if sum(ours.values()) != total:
        failures.append("%s: ours %d samples, perf script %d" % (what, sum(ours.values()), total))
    if differ > tolerance * total:
        failures.append("%s: %d of %d samples differ from perf script: perf %s, ours %s" % (
            what, differ, total, (perf - ours).most_common(4), (ours - perf).most_common(4)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    for tool in ("perf", "gcc"):
        if not shutil.which(tool):
            print("FAIL: required tool '%s' not found (make deps)" % tool)
            return 1
    work = tempfile.mkdtemp(prefix="sprov-perf-inline-")
    failures = []
    try:
        exe = os.path.join(work, "fixture_inline")
        run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", exe, os.path.join(a.source_dir, "fixture_inline.c")])
        data = os.path.join(work, "inline.data")
        run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf,8192", "-o", data, "--",
             exe, "30000"])
        fields = ["-F", "comm,tid,time,ip,sym,symoff,dso"]
        with_inline = perf_script_samples(run(["perf", "script", "-i", data] + fields + ["--inline"]).stdout)
        without = perf_script_samples(run(["perf", "script", "-i", data] + fields + ["--no-inline"]).stdout)
        want = perf_projection(with_inline, exe, True)
        want_plain = perf_projection(without, exe, False)
        deep = "main;hot_a;outer_inline_[i];mid_inline_[i]"
        if want[deep] < 20:
            failures.append("perf script --inline shows %d samples in %s: the fixture is not what this test "
                            "needs (%s)" % (want[deep], deep, want.most_common(4)))
        folded = run([a.stackprov, "perf-import", data, "-f", "folded", "-q"]).stdout
        ours = ours_projection(folded)
        # The dwarf unwinds of the two tools may differ on a sample or two (a leaf in a prologue).
        compare("folded (inlined frames)", ours, want, failures, 0.02)
        plain = run([a.stackprov, "perf-import", data, "-f", "folded", "-q", "--no-inline"]).stdout
        if "_[i]" in plain:
            failures.append("--no-inline: folded output has inlined frames")
        compare("folded --no-inline", ours_projection(plain), want_plain, failures, 0.02)
        # SVG: the inlined frames are drawn, aqua, with the folded counts.
        svg = os.path.join(work, "inline.svg")
        run([a.stackprov, "perf-import", data, "-f", "svg", "-o", svg, "-q"])
        ns = "{http://www.w3.org/2000/svg}"
        drawn = collections.Counter()
        for g in ET.parse(svg).getroot().iter(ns + "g"):
            t = g.find(ns + "title")
            if t is None or not t.text or not t.text.startswith("mid_inline_[i] ("):
                continue
            drawn["samples"] += int(g.get("data-samples"))
            r, gg, b = map(int, re.match(r"rgb\((\d+),(\d+),(\d+)\)", g.get("data-fill")).groups())
            if not (r < gg and r < b):
                failures.append("svg: mid_inline_[i] is rgb(%d,%d,%d), not aqua" % (r, gg, b))
        in_folded = 0
        for line in folded.splitlines():
            stack, _, n = line.rpartition(" ")
            if "mid_inline_[i]" in stack.split(";"):
                in_folded += int(n)
        print("svg: mid_inline_[i] drawn over %d samples; folded %d" % (drawn["samples"], in_folded))
        if drawn["samples"] != in_folded or in_folded == 0:
            failures.append("svg: mid_inline_[i] over %d samples, folded %d" % (drawn["samples"], in_folded))
    finally:
        if failures:
            print("work dir kept: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
