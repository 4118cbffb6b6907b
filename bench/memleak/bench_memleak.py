#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/memleak: slowdown of a malloc-heavy workload under stackprov-memleak (every allocation;
--sample-bytes 524288 with -p PID, sampled by the BPF side; --sample-bytes 524288 -- COMMAND, sampled
in the process by the LD_PRELOAD sampler) vs heaptrack vs memleak-bpfcc, in one run.

The workload (workload.c) times its own allocation loop after a gate (--wait), so the tracers'
start-up (BPF load, bcc's compilation, heaptrack's preload) is not in the figures; each tracer is
attached before the gate opens (stackprov-memleak and memleak-bpfcc with -p PID; heaptrack and
stackprov-memleak -- COMMAND as the launcher). The workload reports the loop's wall time and its
own CPU time (user + system: uprobe traps and BPF programs run in it; a tracer's other processes do
not). Slowdown = traced / untraced (median of --rounds, the configurations interleaved in each
round), on CPU time and on wall time; the target of issue 16 (--sample-bytes 524288 slowdown <= 5%)
is judged on CPU time (the machine is shared: wall time also counts other programs). Two workloads
by default: WORK=0 (nothing but allocations: ~0.15 us per iteration untraced) and WORK=100000 (the
program computes ~0.4 ms between allocations). Prints the ratios and writes them as JSON.
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
    """tracer: None, a function pid -> (argv, ready_text, env) for -p tracers, or a launcher: a list
    of arguments put before the workload's command line. Returns (wall ns, CPU ns) of the loop."""
    wl = [workload, "--wait", str(iters), str(work)]
    tool = None
    if isinstance(tracer, list):
        wl = tracer + wl
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
        elapsed = cpu = None
        for line in fx.stdout:
            if line.startswith("elapsed_ns "):
                elapsed = int(line.split()[1])
            if line.startswith("cpu_ns "):
                cpu = int(line.split()[1])
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
    if elapsed is None or cpu is None:
        raise RuntimeError(f"no elapsed_ns/cpu_ns from {wl}")
    return elapsed, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memleak", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--workloads", nargs="+", default=["0:100000", "100000:1000"],
                    help="WORK:ITERATIONS of each workload")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target-check", default="2000000:15",
                    help="ITERATIONS:ROUNDS of the issue-16 check: the WORK=0 loop untraced and under "
                         "--sample-bytes 524288 -- COMMAND, alternating (0:0 skips it)")
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

    sampled = "stackprov-memleak --sample-bytes 524288 -- COMMAND"
    # the sampler library without a loader (no ring: it only forwards): the cost of interposing alone
    preload = os.path.join(os.path.dirname(os.path.realpath(args.memleak)), "..", "lib",
                           "stackprov-memleak-preload.so")
    if not os.path.exists(preload):
        sys.exit(f"bench/memleak: {preload} not found (build target stackprov-memleak-preload)")
    configs = [
        ("untraced", None),
        ("stackprov-memleak -p PID", ours([])),
        ("stackprov-memleak -p PID --sample-bytes 524288", ours(["--sample-bytes", "524288"])),
        (sampled, [args.memleak, "--interval", "0", "--top", "5", "--sample-bytes", "524288", "--"]),
        ("LD_PRELOAD of the sampler alone (forwarding only)", [need("env"), "LD_PRELOAD=" + os.path.realpath(preload)]),
        ("heaptrack", [need("heaptrack"), "-o", os.path.join(workdir, "ht")]),
        ("memleak-bpfcc", bcc_tracer),
    ]
    results = {"rounds": args.rounds, "workloads": []}
    for spec in args.workloads:
        work, iters = (int(x) for x in spec.split(":"))
        wall = {name: [] for name, _ in configs}
        cpu = {name: [] for name, _ in configs}
        for r in range(args.rounds):
            for name, tracer in configs:
                w, c = run_once(args.workload, iters, work, tracer, workdir)
                wall[name].append(w)
                cpu[name].append(c)
        mw = {name: statistics.median(v) for name, v in wall.items()}
        mc = {name: statistics.median(v) for name, v in cpu.items()}
        bw, bc = mw["untraced"], mc["untraced"]
        print(f"\nworkload WORK={work}: {iters} iterations (1 allocation + 1 free each), untraced: CPU "
              f"{bc / 1e6:.1f} ms = {bc / iters / 1e3:.3f} us per iteration, wall {bw / 1e6:.1f} ms "
              f"(medians of {args.rounds}); load average {os.getloadavg()[0]:.2f}")
        entry = {"work": work, "iterations": iters, "untraced_cpu_ns": bc, "untraced_wall_ns": bw,
                 "loadavg_1min": os.getloadavg()[0], "tools": {}}
        for name, _ in configs[1:]:
            rc, rw = mc[name] / bc, mw[name] / bw
            per_call = (mc[name] - bc) / iters / 1e3
            print(f"  {name:50s} CPU x{rc:8.3f} (+{per_call:.3f} us per iteration)  wall x{rw:8.3f}")
            entry["tools"][name] = {"cpu_ns": mc[name], "wall_ns": mw[name], "cpu_slowdown": rc, "wall_slowdown": rw,
                                    "added_cpu_us_per_iteration": per_call, "all_cpu_ns": cpu[name],
                                    "all_wall_ns": wall[name]}
        s = entry["tools"][sampled]["cpu_slowdown"]
        print(f"  {sampled}: CPU slowdown {100 * (s - 1):.1f}% (target <= 5%): {'met' if s <= 1.05 else 'NOT met'}")
        results["workloads"].append(entry)
    # The issue-16 target on a loop long enough to judge 5% (the 100,000-iteration one lasts ~15 ms,
    # and its baseline moves more than that between runs): the two configurations alternating.
    t_iters, t_rounds = (int(x) for x in args.target_check.split(":"))
    if t_iters > 0 and t_rounds > 0:
        runs = {"untraced": [], sampled: []}
        for r in range(t_rounds):
            for name, tracer in configs:
                if name in runs:
                    runs[name].append(run_once(args.workload, t_iters, 0, tracer, workdir)[1])
        bu, bs = statistics.median(runs["untraced"]), statistics.median(runs[sampled])
        s = bs / bu
        # Other programs on shared vCPUs only add time: the minimum of each configuration is the
        # cost without them (timeit's argument); both figures are printed, the median decides.
        mu, ms = min(runs["untraced"]), min(runs[sampled])
        print(f"\nissue-16 check, WORK=0, {t_iters} iterations x {t_rounds} alternating rounds, CPU medians: untraced "
              f"{bu / 1e6:.1f} ms, {sampled} {bs / 1e6:.1f} ms: {100 * (s - 1):+.1f}% (target <= 5%): "
              f"{'met' if s <= 1.05 else 'NOT met'}; minimums {mu / 1e6:.1f} and {ms / 1e6:.1f} ms: "
              f"{100 * (ms / mu - 1):+.1f}%; load average {os.getloadavg()[0]:.2f}")
        results["target_check"] = {"iterations": t_iters, "rounds": t_rounds, "untraced_cpu_ns": runs["untraced"],
                                   "sampled_cpu_ns": runs[sampled], "cpu_slowdown": s,
                                   "cpu_slowdown_of_minimums": ms / mu, "met": s <= 1.05}
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
