#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# bench/perf_import driver: stackprov perf-import vs perf script (per sample) and perf report (aggregated), equal work, outputs compared.
"""For each workload (the two-thread C fixture, python3.11 running fib) one perf.data is recorded
in the benchmark run (`perf record -e cpu-clock -F HZ --call-graph dwarf,8192`), re-recorded
longer until it holds at least --min-samples samples (perf script's count). Then, each timed
--runs times (median reported), the outputs of the timed runs kept:

  per sample   stackprov perf-import --format json (JSON Lines, one object per sample)
               vs perf script -F comm,tid,time,ip,sym,symoff,dso --no-inline
  aggregated   stackprov perf-import --format folded (one line per unique stack + count)
               vs perf report --stdio --no-children --no-inline --sort comm -g folded,0,caller,count
               (perf aggregates every sample's call chain per command: the same folded stacks)

Both pairs do the same work: read perf.data, unwind every sample's copied stack with DWARF CFI,
symbolize every frame, write the result. The outputs are compared: per sample, frame by frame
(user frames; module-relative pc and function name, as tests/integration/perf does); aggregated,
stack by stack (count of each `comm;root;...;leaf` after normalising symbol versions, aliases
seen at one symbol start in the per-sample comparison, and kernel names, which stackprov's
folded output marks with _[k]: see FoldedNames). A pair
whose agreement is below --min-agree percent of the samples fails the benchmark, as does any
tool that exits non-zero. Ratios are peer time / stackprov time (> 1: stackprov is faster)."""
import argparse
import collections
import json
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys

# The perf-script/stackprov frame helpers the perf tests use (one copy): address deltas of ET_EXEC
# mappings, version-stripped names, stackprov frames in perf script's terms.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration", "perf"))
from perf_check import perf_addr_delta, stackprov_frames, strip_version  # noqa: E402
# perf script's output read as the perf tests read it (tests/lib: the peers' output parsers).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
from peers import parse_perf_script  # noqa: E402
import time

GOAL_RATIO = 10.0  # issue 37: perf-import --format json vs perf script (per sample) and --format folded vs
                   # perf report (aggregated), each >= 10x (issue 15 had asked 20x per sample)

PY_WORK = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def work(seconds):
    end = time.time() + seconds
    while time.time() < end:
        fib(20)
work(float(sys.argv[1]))
"""


class BenchFail(Exception):
    pass


def run_checked(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        raise BenchFail("%s exited %d: %s" % (" ".join(cmd), r.returncode,
                                              r.stderr.decode(errors="replace")[-800:]))
    return r


def timed(cmd, out_path, runs):
    """Median/min wall seconds of `runs` runs of cmd, stdout to out_path (kept from the last run), and
    the median CPU seconds (user + system of the child, getrusage): the machine is shared, and
    wall time there measures the other load as much as the tool."""
    times, cpus = [], []
    for _ in range(runs):
        with open(out_path, "wb") as out:
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE)
            dt = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise BenchFail("%s exited %d: %s" % (" ".join(cmd), r.returncode,
                                                  r.stderr.decode(errors="replace")[-800:]))
        times.append(dt)
        cpus.append((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime))
    return {"runs": runs, "median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4),
            "max_s": round(max(times), 4), "cpu_median_s": round(statistics.median(cpus), 4)}


# ------------------------------------------------------------------ per-sample comparison


def compare_samples(perf_samples, sp_lines, aliases):
    """Samples whose user frames are identical (pc and name, frame by frame); difference classes.
    Pairs of names that perf and stackprov give one symbol (same start address) go to aliases."""
    classes, examples = collections.Counter(), []
    agree = 0
    by_key = {(o["tid"], o["time"] // 1000): o for o in sp_lines}
    for key, pframes in perf_samples.items():
        o = by_key.get(key)
        if o is None:
            classes["sample missing in stackprov"] += 1
            continue
        sframes = stackprov_frames(o)
        why = None
        for i in range(max(len(pframes), len(sframes))):
            if i >= len(pframes):
                why = "stackprov deeper than perf"
            elif i >= len(sframes):
                why = "perf deeper than stackprov (stop: %s)" % o.get("stop_reason")
            else:
                pa, ps, pd, pstart = pframes[i]
                sa, sn, sd, sstart = sframes[i]
                if pd.startswith("/") and pa != sa:
                    why = "pc differs"
                elif strip_version(ps) != strip_version(sn or "[unknown]"):
                    if pstart is not None and pstart == sstart:
                        classes["(agrees) alias of the same symbol"] += 1
                        aliases.add((strip_version(ps), strip_version(sn)))
                    else:
                        why = "function name differs"
            if why:
                classes[why] += 1
                if len(examples) < 5:
                    examples.append("tid %d time %d frame %d: perf %s vs stackprov %s (%s)" % (
                        key[0], key[1], i,
                        "%#x %s (%s)" % pframes[i][:3] if i < len(pframes) else "-",
                        "%#x %s (%s)" % sframes[i][:3] if i < len(sframes) else "-", why))
                break
        if why is None:
            agree += 1
    extra = len(set(by_key) - set(perf_samples))
    if extra:
        classes["sample missing in perf script"] += extra
    return agree, len(perf_samples), classes, examples


# ------------------------------------------------------------------ aggregated comparison


def norm_folded_name(name):
    return strip_version(name.strip())


class FoldedNames:
    """Known naming classes between perf and stackprov in folded stacks, each checked elsewhere:
    - aliases: two names of one symbol (same start address in the per-sample comparison, e.g.
      perf's clone3 and stackprov's __clone3): both map to perf's name;
    - kernel frames: stackprov names them from /proc/kallsyms as perf does and marks them with
      the _[k] suffix in folded output (stackcollapse-perf's convention); perf's kernel names
      (those perf script printed with a [kernel.*] dso) get the same suffix here."""

    def __init__(self, aliases, kernel_names):
        self.ours = {b: a for a, b in aliases}
        self.kernel = set(kernel_names)

    def perf(self, name):
        n = norm_folded_name(name)
        return n + "_[k]" if n in self.kernel else n

    def stackprov(self, name):
        n = norm_folded_name(name)
        return self.ours.get(n, n)


def parse_perf_report_folded(text, names):
    """perf report --sort comm -g folded,0,caller,count: {comm;root;...;leaf: count}."""
    out = collections.Counter()
    comm = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^\s+[0-9.]+%\s+(.+?)\s*$", line)
        if m:
            comm = m.group(1)
            continue
        m = re.match(r"^(\d+) (.*)$", line)
        if m and comm is not None:
            frames = [names.perf(x) for x in m.group(2).split(";")]
            out[";".join([comm] + frames)] += int(m.group(1))
    return out


def parse_folded(text, names):
    out = collections.Counter()
    for line in text.splitlines():
        if not line.strip():
            continue
        stack, _, n = line.rpartition(" ")
        parts = stack.split(";")
        out[";".join([parts[0]] + [names.stackprov(x) for x in parts[1:]])] += int(n)
    return out


def compare_folded(perf, ours):
    """Samples on identical stacks (sum over stacks of the smaller count) and the largest differences."""
    same = sum(min(n, ours.get(k, 0)) for k, n in perf.items())
    total = max(sum(perf.values()), sum(ours.values()))
    diffs = sorted(((abs(perf.get(k, 0) - ours.get(k, 0)), k) for k in set(perf) | set(ours)), reverse=True)
    examples = ["%s: perf report %d, stackprov %d" % (k, perf.get(k, 0), ours.get(k, 0))
                for d, k in diffs[:5] if d]
    return same, total, examples


# ------------------------------------------------------------------ workloads


def count_samples(perf, data):
    r = run_checked([perf, "script", "-i", data, "-F", "tid"])
    return sum(1 for l in r.stdout.splitlines() if l.strip())


def record(perf, data, cmd_for, seconds, hz, min_samples):
    """Records cmd_for(seconds); re-records longer until the file holds min_samples samples."""
    for attempt in range(4):
        run_checked([perf, "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf,8192",
                     "-o", data, "--"] + cmd_for(seconds))
        n = count_samples(perf, data)
        print("  recorded %d samples in %.1f s of workload (-F %d)" % (n, seconds, hz), flush=True)
        if n >= min_samples:
            return n, seconds
        seconds = min(60.0, seconds * max(1.3, 1.25 * min_samples / max(n, 1)))
    raise BenchFail("perf record: fewer than %d samples after 4 attempts" % min_samples)


def bench_workload(name, cmd_for, a, perf):
    print("== %s" % name, flush=True)
    w = os.path.join(a.work, name)
    os.makedirs(w, exist_ok=True)
    data = os.path.join(w, "perf.data")
    samples, seconds = record(perf, data, cmd_for, a.seconds, a.hz, a.min_samples)
    sp = a.stackprov
    # Untimed warm-up of each tool: page cache, perf's build-id cache, debug files.
    run_checked([sp, "perf-import", data, "--format", "none", "--quiet"])
    run_checked([perf, "script", "-i", data, "-F", "tid", "--no-inline"])
    res = {"workload": name, "samples": samples, "workload_seconds": round(seconds, 2), "frequency_hz": a.hz}

    # Per sample.
    sp_json, ps_txt = os.path.join(w, "stackprov.jsonl"), os.path.join(w, "perf_script.txt")
    res["stackprov_json"] = timed([sp, "perf-import", data, "--format", "json", "--quiet"], sp_json, a.runs)
    res["perf_script"] = timed([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym,symoff,dso",
                                "--no-inline"], ps_txt, a.runs)
    with open(sp_json) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    kernel_by_sample, aliases = {}, set()
    with open(ps_txt, errors="replace") as f:
        psamples, _ = parse_perf_script(f.read(), kernel_names=kernel_by_sample)
    kernel_names = {name for names in kernel_by_sample.values() for name in names}
    agree, total, classes, examples = compare_samples(psamples, lines, aliases)
    res["per_sample"] = {"samples_compared": total, "identical": agree,
                         "identical_pct": round(100.0 * agree / max(total, 1), 2),
                         "differences": dict(classes), "examples": examples}
    res["ratio_perf_script_over_stackprov"] = round(res["perf_script"]["median_s"] /
                                                    res["stackprov_json"]["median_s"], 2)
    res["ratio_perf_script_over_stackprov_cpu"] = round(res["perf_script"]["cpu_median_s"] /
                                                        max(res["stackprov_json"]["cpu_median_s"], 1e-4), 2)

    # Aggregated.
    sp_folded, pr_txt = os.path.join(w, "stackprov.folded"), os.path.join(w, "perf_report.txt")
    res["stackprov_folded"] = timed([sp, "perf-import", data, "--format", "folded", "--quiet", "--no-inline"],
                                    sp_folded, a.runs)  # equal work: perf report --no-inline
    res["perf_report"] = timed([perf, "report", "-i", data, "--stdio", "--no-children", "--no-inline",
                                "--sort", "comm", "-g", "folded,0,caller,count"], pr_txt, a.runs)
    names = FoldedNames(aliases, kernel_names)
    with open(sp_folded) as f:
        ours = parse_folded(f.read(), names)
    with open(pr_txt, errors="replace") as f:
        theirs = parse_perf_report_folded(f.read(), names)
    same, ftotal, fexamples = compare_folded(theirs, ours)
    res["aggregated"] = {"samples": ftotal, "on_identical_stacks": same,
                         "identical_pct": round(100.0 * same / max(ftotal, 1), 2),
                         "unique_stacks": {"stackprov": len(ours), "perf_report": len(theirs)},
                         "aliases_mapped": sorted("%s = %s" % p for p in aliases),
                         "largest_differences": fexamples}
    res["ratio_perf_report_over_stackprov"] = round(res["perf_report"]["median_s"] /
                                                    res["stackprov_folded"]["median_s"], 2)
    res["ratio_perf_report_over_stackprov_cpu"] = round(res["perf_report"]["cpu_median_s"] /
                                                        max(res["stackprov_folded"]["cpu_median_s"], 1e-4), 2)

    print("  per sample: stackprov --format json %.3f s, perf script %.3f s -> x%.2f (CPU %.3f s vs %.3f s -> x%.2f); "
          "identical samples %.2f%%"
          % (res["stackprov_json"]["median_s"], res["perf_script"]["median_s"],
             res["ratio_perf_script_over_stackprov"], res["stackprov_json"]["cpu_median_s"],
             res["perf_script"]["cpu_median_s"], res["ratio_perf_script_over_stackprov_cpu"],
             res["per_sample"]["identical_pct"]), flush=True)
    for k, n in classes.most_common():
        print("    %6d  %s" % (n, k))
    for e in examples:
        print("    e.g. " + e)
    print("  aggregated: stackprov --format folded %.3f s, perf report %.3f s -> x%.2f (CPU %.3f s vs %.3f s -> x%.2f); "
          "samples on identical stacks %.2f%%" % (
              res["stackprov_folded"]["median_s"], res["perf_report"]["median_s"],
              res["ratio_perf_report_over_stackprov"], res["stackprov_folded"]["cpu_median_s"],
              res["perf_report"]["cpu_median_s"], res["ratio_perf_report_over_stackprov_cpu"],
              res["aggregated"]["identical_pct"]), flush=True)
    for e in fexamples:
        print("    e.g. " + e)
    failures = []
    if res["per_sample"]["identical_pct"] < a.min_agree:
        failures.append("%s: per-sample agreement with perf script %.2f%% < %.2f%%" %
                        (name, res["per_sample"]["identical_pct"], a.min_agree))
    if res["aggregated"]["identical_pct"] < a.min_agree:
        failures.append("%s: folded agreement with perf report %.2f%% < %.2f%%" %
                        (name, res["aggregated"]["identical_pct"], a.min_agree))
    res["passed"] = not failures
    return res, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--python311", default="/usr/bin/python3.11")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_PERF_RUNS", "5")))
    ap.add_argument("--hz", type=int, default=int(os.environ.get("BENCH_PERF_HZ", "10000")))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_PERF_SECONDS", "3")))
    ap.add_argument("--min-samples", type=int, default=20000)
    ap.add_argument("--min-agree", type=float, default=99.0)
    a = ap.parse_args()
    perf = shutil.which("perf")
    for what, path in (("perf (linux-perf)", perf), ("stackprov", a.stackprov), ("fixture", a.fixture),
                       ("python3.11", a.python311)):
        if not path or not os.path.exists(path):
            print("bench/perf_import: FAIL: %s not found" % what)
            return 1
    os.makedirs(a.work, exist_ok=True)
    script = os.path.join(a.work, "work.py")
    with open(script, "w") as f:
        f.write(PY_WORK)
    workloads = [("native-2-threads", lambda s: [a.fixture, "%.2f" % s]),
                 ("python3.11-fib", lambda s: [a.python311, script, "%.2f" % s])]
    print("bench/perf_import: median of %d runs, ratio = peer / stackprov (> 1: stackprov is faster); load average %.2f %.2f %.2f"
          % ((a.runs,) + os.getloadavg()))
    results, failures = [], []
    try:
        for name, cmd_for in workloads:
            r, f = bench_workload(name, cmd_for, a, perf)
            results.append(r)
            failures += f
    except BenchFail as e:
        failures.append(str(e))
    # Issue 37's goals: on a >= 20,000-sample recording, per-sample output >= 10x faster than perf
    # script and aggregated output >= 10x faster than perf report (wall time, medians).
    goals = []
    for r in results:
        for what, key, peer in (("per sample", "ratio_perf_script_over_stackprov", "perf script"),
                                ("aggregated", "ratio_perf_report_over_stackprov", "perf report")):
            ratio = r.get(key, 0.0)
            goals.append({"workload": r.get("workload"), "what": what, "samples": r.get("samples"),
                          "want": ">= %.0fx %s" % (GOAL_RATIO, peer), "measured": ratio,
                          "met": ratio >= GOAL_RATIO and r.get("samples", 0) >= 20000})
            print("goal %-18s %-10s >= %.0fx %s: %s (x%.2f, %s samples)" % (
                r.get("workload"), what, GOAL_RATIO, peer, "met" if goals[-1]["met"] else "NOT met", ratio,
                r.get("samples")))
    print("load average at the end: %.2f %.2f %.2f" % os.getloadavg())
    doc = {"benchmark": "perf_import", "unit": "s wall time per invocation (median of runs)",
           "host": {"cpus": os.cpu_count(), "loadavg": os.getloadavg()},
           "min_agree_pct": a.min_agree, "workloads": results, "goals": goals, "failures": failures}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("bench/perf_import: wrote %s" % a.out)
    if failures:
        print("bench/perf_import: FAIL\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
