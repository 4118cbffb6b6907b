#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/memleak: slowdown of a malloc-heavy workload under stackprov-memleak (every allocation, and
--sample-bytes 524288) vs heaptrack vs memleak-bpfcc, in one run.

The workload (workload.c) times its own allocation loop after a gate (--wait), so the tracers'
start-up (BPF load, bcc's compilation, heaptrack's preload) is not in the figures; each tracer is
attached before the gate opens (stackprov-memleak and memleak-bpfcc with -p PID, heaptrack as the
launcher). Slowdown = traced elapsed / untraced elapsed (median of --rounds). Two workloads by
default: WORK=0 (nothing but allocations: ~0.2 us per iteration untraced) and WORK=100000 (the
program computes ~0.35 ms between allocations). Prints the ratios and writes them as JSON.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration",
                                "memleak"))
from memleak_check import bcc_kernel_source, need  # noqa: E402  (the header tree bcc needs, tool lookup)


def run_once(workload, iters, work, tracer, workdir):
    """tracer: None, or a function pid -> (argv, ready_text) for -p tracers, or "heaptrack"."""
    wl = [workload, "--wait", str(iters), str(work)]
    tool = None
    if tracer == "heaptrack":
        wl = [need("heaptrack"), "-o", os.path.join(workdir, "ht")] + wl
    fx = subprocess.Popen(wl, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        while True:
            line = fx.stdout.readline()
            if not line:
                raise RuntimeError(f"workload ended before its gate: {wl}")
            if line.startswith("ready "):
                pid = int(line.split()[1])
                break
        if callable(tracer):
            argv, ready, env = tracer(pid)
            log = os.path.join(workdir, "tracer.log")
            with open(log, "w") as out:
                tool = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
            t0 = time.time()
            while ready not in open(log).read():
                if tool.poll() is not None or time.time() - t0 > 60:
                    raise RuntimeError(f"{argv[0]} did not attach: {open(log).read()[-1000:]}")
                time.sleep(0.1)
            time.sleep(0.5)
        fx.stdin.write("go\n")
        fx.stdin.flush()
        elapsed = None
        for line in fx.stdout:
            if line.startswith("elapsed_ns "):
                elapsed = int(line.split()[1])
                break
        fx.stdin.close()
        fx.wait(timeout=120)
    finally:
        if tool is not None:
            tool.send_signal(signal.SIGINT)
            try:
                tool.wait(timeout=60)
            except subprocess.TimeoutExpired:
                tool.kill()
        if fx.poll() is None:
            fx.kill()
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memleak", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--workloads", nargs="+", default=["0:20000", "100000:1000"],
                    help="WORK:ITERATIONS of each workload")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/memleak: needs root (BPF programs and uprobes)")
    workdir = tempfile.mkdtemp(prefix="bench-memleak-")
    bcc = need("memleak-bpfcc")
    ksrc = bcc_kernel_source(workdir)

    def ours(extra):
        return lambda pid: ([args.memleak, "-p", str(pid), "--interval", "0", "--top", "5"] + extra, "tracing pid", None)

    def bcc_tracer(pid):
        cmd = [bcc, "-p", str(pid), "60"]
        if not os.path.exists("/sys/kernel/tracing/uprobe_events"):
            cmd = [need("unshare"), "--mount", "--propagation", "private", "sh", "-c",
                   'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"', "sh"] + cmd
        return cmd, "Attaching to pid", dict(os.environ, BCC_KERNEL_SOURCE=ksrc)

    configs = [
        ("untraced", None),
        ("stackprov-memleak", ours([])),
        ("stackprov-memleak --sample-bytes 524288", ours(["--sample-bytes", "524288"])),
        ("heaptrack", "heaptrack"),
        ("memleak-bpfcc", bcc_tracer),
    ]
    results = {"rounds": args.rounds, "workloads": []}
    for spec in args.workloads:
        work, iters = (int(x) for x in spec.split(":"))
        times = {name: [] for name, _ in configs}
        for r in range(args.rounds):
            for name, tracer in configs:
                times[name].append(run_once(args.workload, iters, work, tracer, workdir))
        med = {name: statistics.median(v) for name, v in times.items()}
        base = med["untraced"]
        print(f"\nworkload WORK={work}: {iters} iterations (1 allocation + 1 free each), untraced "
              f"{base / 1e6:.1f} ms = {base / iters / 1e3:.2f} us per iteration (median of {args.rounds})")
        entry = {"work": work, "iterations": iters, "untraced_ns": base, "tools": {}}
        for name, _ in configs[1:]:
            ratio = med[name] / base
            per_call = (med[name] - base) / iters / 1e3
            print(f"  {name:42s} {med[name] / 1e6:10.1f} ms  slowdown x{ratio:8.2f}  (+{per_call:.2f} us per iteration)")
            entry["tools"][name] = {"elapsed_ns": med[name], "slowdown": ratio, "added_us_per_iteration": per_call,
                                    "all_ns": times[name]}
        s = entry["tools"]["stackprov-memleak --sample-bytes 524288"]["slowdown"]
        print(f"  --sample-bytes 524288 slowdown {100 * (s - 1):.1f}% (target <= 5%): {'met' if s <= 1.05 else 'NOT met'}")
        results["workloads"].append(entry)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
