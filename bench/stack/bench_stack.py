#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Wall time of `stackprov stack --pid` vs `eu-stack -p` vs gdb `thread apply all bt`, same targets.
"""Targets: the 16-thread fixture (main + 15 nanosleep chains, -O2 no fp, PIE) and python3.11
blocked in time.sleep inside nested functions. Each tool is run --runs times per target (gdb a
third as often: it takes seconds), outputs to /dev/null; every run must exit 0. Reports median
and minimum wall times and the ratios peer/stackprov (> 1: stackprov is faster), writes JSON.
The goal (issue 3): stackprov >= 5x faster than eu-stack on the 16-thread target. Timings are
reported, never asserted."""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time

PY_SCRIPT = r"""
import time
def level_c():
    time.sleep(100000)
def level_b():
    level_c()
def level_a():
    level_b()
print("ready", flush=True)
level_a()
"""

TARGET_RATIO = 5.0


def wait_asleep(pid, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        states = []
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                s = f.read()
            states.append(s[s.rindex(")") + 2])
        if all(c in "SD" for c in states):
            time.sleep(0.05)
            return len(states)
        time.sleep(0.01)
    raise SystemExit("bench/stack: target %d not asleep" % pid)


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("bench/stack: %s ended before ready" % cmd)
        if line.strip() == "ready":
            break
    return p, wait_asleep(p.pid)


def time_runs(cmd, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit("bench/stack: %s exited %d: %s" %
                             (" ".join(cmd), r.returncode, r.stderr.decode()[-500:]))
        times.append(dt)
    return {"runs": runs, "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3}


def bench_target(name, proc, threads, a):
    pid = str(proc.pid)
    tools = {
        # Like for like: function names only (eu-stack's default), then with
        # source lines and inline frames on both sides.
        "stackprov": [a.stackprov, "stack", "--no-lines", "--pid", pid],
        "eu-stack": [a.eu_stack, "-p", pid],
        "stackprov+lines": [a.stackprov, "stack", "--pid", pid],
        "eu-stack -i -s": [a.eu_stack, "-i", "-s", "-p", pid],
        "gdb": ["timeout", "-s", "KILL", "200", a.gdb, "-nx", "-batch", "-ex",
                "set debuginfod enabled off", "-p", pid, "-ex", "thread apply all bt"],
    }
    # One warm-up run each (page cache, debug files), not counted.
    for cmd in tools.values():
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    res = {"threads": threads, "tools": {}}
    for tool, cmd in tools.items():
        runs = a.runs if tool != "gdb" else max(1, a.runs // 3)
        res["tools"][tool] = time_runs(cmd, runs)
    sp = res["tools"]["stackprov"]["median_ms"]
    res["ratio_eu_stack_over_stackprov"] = res["tools"]["eu-stack"]["median_ms"] / sp
    res["ratio_gdb_over_stackprov"] = res["tools"]["gdb"]["median_ms"] / sp
    res["ratio_eu_stack_lines_over_stackprov_lines"] = (res["tools"]["eu-stack -i -s"]["median_ms"] /
                                                       res["tools"]["stackprov+lines"]["median_ms"])
    print("%-22s %2d threads  stackprov %7.1f ms  eu-stack %7.1f ms (x%.2f)  gdb %8.1f ms (x%.1f)" %
          (name, threads, sp, res["tools"]["eu-stack"]["median_ms"],
           res["ratio_eu_stack_over_stackprov"], res["tools"]["gdb"]["median_ms"],
           res["ratio_gdb_over_stackprov"]), flush=True)
    print("  %s with source lines and inline frames: stackprov %.1f ms, eu-stack -i -s %.1f ms (%.2fx)" %
          (name, res["tools"]["stackprov+lines"]["median_ms"], res["tools"]["eu-stack -i -s"]["median_ms"],
           res["ratio_eu_stack_lines_over_stackprov_lines"]), flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--eu-stack", default=shutil.which("eu-stack") or "/usr/bin/eu-stack")
    ap.add_argument("--gdb", default=shutil.which("gdb") or "/usr/bin/gdb")
    ap.add_argument("--python311", default="/usr/bin/python3.11")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    for tool in (a.stackprov, a.eu_stack, a.gdb):
        if not os.path.exists(tool):
            raise SystemExit("bench/stack: %s not found" % tool)

    results = {"benchmark": "stack", "unit": "ms wall time per invocation (median of runs)",
               "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
               "targets": {}}
    print("bench/stack: median wall time per invocation, ratio = peer / stackprov")
    targets = [("fixture-16-threads", [a.fixture, "bench"])]
    if os.path.exists(a.python311):
        targets.append(("python3.11-sleep", [a.python311, "-c", PY_SCRIPT]))
    else:
        print("bench/stack: %s missing; python target skipped" % a.python311)
    for name, cmd in targets:
        proc, threads = start(cmd)
        try:
            results["targets"][name] = bench_target(name, proc, threads, a)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    ratio = results["targets"]["fixture-16-threads"]["ratio_eu_stack_over_stackprov"]
    results["goal"] = {"stackprov_vs_eu_stack_16_threads": ">= %.0fx" % TARGET_RATIO,
                       "measured": round(ratio, 2), "met": ratio >= TARGET_RATIO}
    print("goal: stackprov >= %.0fx faster than eu-stack on 16 threads: %s (x%.2f)" %
          (TARGET_RATIO, "met" if ratio >= TARGET_RATIO else "NOT met", ratio))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print("bench/stack: wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
