#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of stackprov-memleak (examples/memleak, issue 16) against independent answers.

  memleak_check.py MODE --memleak BIN --fixture BIN --work DIR
  MODE:
    leaks       leaks chosen here (sizes, counts, one call site per allocator): the tool's outstanding
                bytes per call site (-- COMMAND mode) equal them, and equal heaptrack's report of its
                own run of the same command (heaptrack_print --flamegraph-cost-type leaked), call chains
                from main to the site included (heaptrack does not intercept memalign: that site is
                checked against the known bytes only)
    bcc         the same leaks in two live runs (-p PID), one traced by memleak-bpfcc, one by the tool:
                bytes per call site equal the known ones in both reports
    trampoline  seed 002: the same workload without and with a uretprobe on an intermediate function
                (--scope scope_mid) gives identical stacks, the repaired frame tagged trampoline; with
                --no-trampoline-repair the walk shows the [uprobes] frame and loses the callers
    cli         --help (Exit status section), usage errors exit 2 naming the value, no such process,
                no root: exit 1 with one line
    sampled     -- COMMAND with --sample-bytes (the in-process sampler, LD_PRELOAD): with N=1 (smaller
                than every leak) each leak is reported with its exact bytes and count, equal to the known
                ones and heaptrack's, and every outstanding stack equals the unsampled mode's stack of
                its call site frame by frame (function, module, offset); sampled allocations that were
                freed are not reported; with N=4096 the estimated bytes per site are within 5 standard
                deviations of the truth (binomial sampling, see below); LD_PRELOAD set by the user is
                kept (ours appended); a missing sampler library fails naming it
Needs root (CI runs as root), heaptrack, memleak-bpfcc (bpfcc-tools) and linux-headers-amd64 (bcc
compiles its program against kernel headers): a missing tool fails naming it.
"""
import argparse
import glob
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KINDS = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc"]
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def need(tool):
    path = shutil.which(tool) or (os.path.exists("/usr/sbin/" + tool) and "/usr/sbin/" + tool)
    if not path:
        sys.exit(f"FAIL: required program '{tool}' not found (make deps / scripts/install-deps.sh installs it)")
    return path


def choose_leaks(seed):
    rnd = random.Random(seed)
    leaks = {}
    for k in KINDS:
        leaks[k] = (rnd.randrange(1, 6000), rnd.randrange(1, 9))
    leaks["scoped"] = (rnd.randrange(1, 3000), rnd.randrange(1, 6))
    return leaks


def specs(leaks, noise=True):
    out = [f"{k}:{s}:{c}" for k, (s, c) in leaks.items()]
    if noise:
        out.append("noise:100:500")  # freed at once: never outstanding
    return out


def expected_per_site(leaks):
    return {("site_" + k if k != "scoped" else "site_scoped"): s * c for k, (s, c) in leaks.items()}


def site_of(names):
    """names: innermost first; the first site_* function."""
    for n in names:
        if n.startswith("site_"):
            return n
    return None


def ours_per_site(report):
    per_site, chains = {}, {}
    for st in report["stacks"]:
        names = [f["function"] for f in st["frames"]]
        site = site_of(names)
        if site is None:
            continue
        per_site[site] = per_site.get(site, 0) + st["bytes"]
        i = names.index(site)
        chain = names[i:]
        chain = chain[: chain.index("main") + 1] if "main" in chain else chain
        chains[site] = list(reversed(chain))  # main first
    return per_site, chains


def run_ours_command(args, extra, cmd, timeout=60):
    p = subprocess.run([args.memleak, "--json", "--interval", "0", "--top", "0"] + extra + ["--"] + cmd,
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        print(p.stderr)
    check(p.returncode == 0, f"stackprov-memleak {' '.join(extra)} -- COMMAND exits 0 (got {p.returncode})")
    try:
        return json.loads(p.stdout)
    except ValueError:
        print(p.stdout[:2000], p.stderr[:2000])
        check(False, "stackprov-memleak --json prints JSON")
        return {"stacks": []}


def heaptrack_per_site(args, cmd, work):
    heaptrack, htprint = need("heaptrack"), need("heaptrack_print")
    out = os.path.join(work, "ht")
    for f in glob.glob(out + "*"):
        os.remove(f)
    p = subprocess.run([heaptrack, "-o", out] + cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"heaptrack runs the fixture (exit {p.returncode})")
    data = (glob.glob(out + "*.zst") + glob.glob(out + "*.gz"))[0]
    folded = os.path.join(work, "ht.folded")
    subprocess.run([htprint, "-f", data, "--flamegraph-cost-type", "leaked", "-F", folded],
                   capture_output=True, text=True, timeout=60, check=True)
    per_site, chains = {}, {}
    for line in open(folded):
        stack, _, value = line.rstrip("\n").rpartition(" ")
        names = [re.sub(r" \([^)]*\)$", "", n) for n in stack.split(";") if n]
        site = site_of(list(reversed(names)))
        if site is None or int(value) == 0:
            continue
        per_site[site] = per_site.get(site, 0) + int(value)
        chains[site] = names[names.index("main"):] if "main" in names else names
    return per_site, chains


def mode_leaks(args):
    seed = int(os.environ.get("MEMLEAK_SEED", time.time_ns() % 100000))
    leaks = choose_leaks(seed)
    print(f"seed {seed}: leaks {leaks}")
    cmd = [args.fixture] + specs(leaks)
    want = expected_per_site(leaks)
    report = run_ours_command(args, [], cmd)
    ours, our_chains = ours_per_site(report)
    check(ours == want, f"outstanding bytes per call site equal the known leaks: ours {ours} want {want}")
    ht, ht_chains = heaptrack_per_site(args, cmd, args.work)
    ht_want = {k: v for k, v in want.items() if k != "site_memalign"}
    check(ht == ht_want, f"heaptrack's leaked bytes per call site (no memalign: not intercepted) equal the known ones: {ht}")
    check({k: v for k, v in ours.items() if k in ht} == ht, "ours equal heaptrack's per call site")
    for site, chain in sorted(ht_chains.items()):
        check(our_chains.get(site) == chain, f"call chain of {site} as heaptrack: ours {our_chains.get(site)} heaptrack {chain}")
    # each frame of the site stacks has a method and a source line from DWARF
    for st in report["stacks"]:
        names = [f["function"] for f in st["frames"]]
        if site_of(names):
            f = st["frames"][names.index(site_of(names))]
            check(f["file"].endswith("fixture_leaky.c") and f["line"] > 0 and f["method"].startswith("cfi"),
                  f"{site_of(names)} frame has file:line and a CFI method: {f}")
            check(st["stop"] == "end_of_stack", f"{site_of(names)} stack unwound to its end: {st['stop']}")


def bcc_kernel_source(work):
    """bcc compiles against kernel headers; Debian splits them in -common and -amd64 trees that
    bcc (BCC_KERNEL_SOURCE) wants as one: a tree of symlinks merging both."""
    commons = sorted(glob.glob("/usr/src/linux-headers-*-common"))
    if not commons:
        sys.exit("FAIL: required package 'linux-headers-amd64' not installed (memleak-bpfcc compiles against "
                 "kernel headers; make deps installs it)")
    common = commons[-1]
    arch = common[: -len("-common")] + "-amd64"
    dst = os.path.join(work, "kernel-headers")
    if os.path.isdir(dst):
        return dst

    def merge(d, srcs):
        os.makedirs(d, exist_ok=True)
        names = {}
        for s in srcs:
            for n in os.listdir(s):
                names.setdefault(n, []).append(os.path.join(s, n))
        for n, paths in names.items():
            dirs = [p for p in paths if os.path.isdir(p) and not os.path.islink(p)]
            if len(dirs) > 1:
                merge(os.path.join(d, n), dirs)
            else:
                os.symlink(os.path.realpath(paths[-1]), os.path.join(d, n))

    tmp = tempfile.mkdtemp(dir=work)
    merge(tmp, [common, arch])
    os.rename(tmp, dst)
    return dst


def parse_bcc(text, block):
    """Report block `block` (1 = the first) of memleak-bpfcc: bytes per site_* function."""
    blocks = text.split("stacks with outstanding allocations")  # each report's header ("[T] Top N ...")
    last = blocks[block] if 0 < block < len(blocks) else ""
    per_site = {}
    for m in re.finditer(r"(\d+) bytes in (\d+) allocations from stack\n((?:\t\t.*\n?)*)", last):
        names = re.findall(r"\t\t(?:0x[0-9a-f]+\s+)?([A-Za-z_][\w.]*)\+0x", m.group(3))
        site = site_of(names)
        if site:
            per_site[site] = per_site.get(site, 0) + int(m.group(1))
    return per_site


def traced_live(args, leaks, tool_cmd, ready_text, out_path, env=None, report_text=None):
    """Runs the fixture (--wait --hold), starts tool_cmd(pid) on it, lets the fixture allocate once the
    tool prints ready_text, waits for a report made after the allocations, stops the tool with SIGINT;
    returns (its output, the number of that report or None).

    With report_text (a periodic tool's report header), the report taken is the second to begin after
    the fixture said "done": the first may begin at once, before the allocations are older than the
    tool's age filter (memleak-bpfcc -o, 500 ms); the second begins an interval later. It is taken once
    a third has begun, so that it is whole (CI, stop 60: a fixed 2.5 s wait and the last block, cut by
    the SIGINT or not yet printed on a loaded machine, gave memleak-bpfcc's sites as {})."""
    fx = subprocess.Popen([args.fixture, "--wait", "--hold"] + specs(leaks), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    try:
        pid = int(fx.stdout.readline().split()[1])
        with open(out_path, "w") as out:
            tool = subprocess.Popen(tool_cmd(pid), stdout=out, stderr=subprocess.STDOUT, env=env)
            t0 = time.time()
            while time.time() - t0 < 40 and tool.poll() is None and ready_text not in open(out_path).read():
                time.sleep(0.2)
            text = open(out_path).read()
            check(ready_text in text, f"{os.path.basename(tool_cmd(pid)[0])} attached to pid {pid}: {text[-600:]}")
            time.sleep(0.5)
            fx.stdin.write("go\n")
            fx.stdin.flush()
            check(fx.stdout.readline().strip() == "done", "fixture allocated")
            block = None
            if report_text is None:
                time.sleep(2.5)  # the tool's events are in; it prints its report at SIGINT
            else:
                n0 = open(out_path).read().count(report_text)
                t1 = time.time()
                while time.time() - t1 < 30 and tool.poll() is None and \
                        open(out_path).read().count(report_text) < n0 + 3:
                    time.sleep(0.2)
                n = open(out_path).read().count(report_text)
                check(n >= n0 + 3, f"three reports after the allocations within 30 s: {n - n0}")
                block = n0 + 2
            tool.send_signal(signal.SIGINT)
            tool.wait(timeout=30)
    finally:
        fx.stdin.close()
        fx.wait(timeout=10)
    return open(out_path).read(), block


def mode_bcc(args):
    """memleak-bpfcc and the tool trace two runs of the same fixture with the same leaks, one after the
    other: not the same process at once, as the kernel refuses the second registration at malloc's
    offset (dmesg: "ref_ctr_offset mismatch ... old: 0x0 new: 0x6": bcc 0.26 registers a reference
    counter offset that libbpf's uprobes do not have)."""
    bcc = need("memleak-bpfcc")
    ksrc = bcc_kernel_source(args.work)
    seed = int(os.environ.get("MEMLEAK_SEED", time.time_ns() % 100000))
    leaks = choose_leaks(seed)
    print(f"seed {seed}: leaks {leaks}")
    want = expected_per_site(leaks)

    def bcc_cmd(pid):
        # bcc attaches through tracefs (uprobe_events): mount it in a private mount namespace when the
        # system has not (nothing changes outside this process tree)
        cmd = [bcc, "-p", str(pid), "-T", "50", "1"]
        if not os.path.exists("/sys/kernel/tracing/uprobe_events"):
            cmd = [need("unshare"), "--mount", "--propagation", "private", "sh", "-c",
                   'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"', "sh"] + cmd
        return cmd

    # Ready at its first report, not at "Attaching to pid": memleak-bpfcc prints that line before it
    # attaches its uprobes, and on a loaded machine allocations made 0.5 s later were missed (CI, stop 40:
    # memleak-bpfcc reported nothing). The first report comes after every attach and one interval.
    bcc_text, bcc_block = traced_live(args, leaks, bcc_cmd, "stacks with outstanding allocations",
                                      os.path.join(args.work, "bcc.out"),
                                      env=dict(os.environ, BCC_KERNEL_SOURCE=ksrc),
                                      report_text="stacks with outstanding allocations")
    ours_path = os.path.join(args.work, "ours.json")
    traced_live(args, leaks, lambda pid: [args.memleak, "-p", str(pid), "--json", "--top", "0"], "tracing pid",
                ours_path)
    text = open(ours_path).read()
    report = json.loads(text[text.index("{"):text.rindex("}") + 1])
    per_site, _ = ours_per_site(report)
    theirs = parse_bcc(bcc_text, bcc_block)
    check(per_site == want, f"-p PID: ours per call site equal the known leaks: {per_site} want {want}")
    check(theirs == want, f"memleak-bpfcc per call site equal the known leaks: {theirs}")
    check(per_site == theirs, "ours equal memleak-bpfcc's per call site")


def site_stack(report, site):
    for st in report["stacks"]:
        names = [f["function"] for f in st["frames"]]
        if site_of(names) == site:
            return st
    return None


def mode_trampoline(args):
    cmd = [args.fixture, "malloc:300:2", "scoped:40:3", "noise:64:50"]
    plain = run_ours_command(args, [], cmd)
    scoped = run_ours_command(args, ["--scope", "scope_mid"], cmd)
    broken = run_ours_command(args, ["--scope", "scope_mid", "--no-trampoline-repair"], cmd)
    a, b, c = (site_stack(r, "site_scoped") for r in (plain, scoped, broken))
    check(a is not None and b is not None and c is not None, "site_scoped stacks in all three runs")
    if not (a and b and c):
        return

    def key(st):  # identical stacks: the same functions at the same module offsets
        return [(f["function"], os.path.basename(f["module"]), f["module_offset"]) for f in st["frames"]]

    print("without a uretprobe:", [f["function"] for f in a["frames"]])
    print("with --scope scope_mid:", [(f["function"], f["method"]) for f in b["frames"]])
    print("without the repair:", [(f["function"], f["method"]) for f in c["frames"]])
    check(key(a) == key(b), "stacks without and with a uretprobe on scope_mid are identical")
    check(a["bytes"] == b["bytes"] == 120, f"site_scoped bytes {a['bytes']} {b['bytes']} == 120")
    tramp = [f["function"] for f in b["frames"] if f["method"] == "trampoline"]
    check(tramp == ["scope_outer"], f"the frame returning through the trampoline (scope_outer) is tagged trampoline: {tramp}")
    check(scoped["trampolines_repaired"] >= 1, "the report counts repaired trampolines")
    check(site_stack(scoped, "site_malloc") is None, "--scope: allocations outside scope_mid are not counted")
    names_c = [f["function"] for f in c["frames"]]
    check("[uprobes]" in names_c and "main" not in names_c and "scope_outer" not in names_c,
          f"without the repair the walk shows the corrupted [uprobes] frame and loses the callers: {names_c}")
    if "[uprobes]" in names_c:
        check(names_c[names_c.index("[uprobes]") - 1] == "scope_mid", "the [uprobes] frame is scope_mid's return address")


def frames_key(st):
    """A stack frame by frame: function, module file, module offset (addresses differ between runs)."""
    return [(f["function"], os.path.basename(f["module"]), f["module_offset"]) for f in st["frames"]]


def site_stacks(report):
    return {site_of([f["function"] for f in st["frames"]]): st for st in report["stacks"]}


def mode_sampled(args):
    seed = int(os.environ.get("MEMLEAK_SEED", time.time_ns() % 100000))
    rnd = random.Random(seed)
    # sizes >= 64: with N = 1 each is sampled with probability 1 - exp(-64) (1.0 in a double), and
    # its estimate size / (1 - exp(-size)) is the size itself
    leaks = {k: (rnd.randrange(64, 6000), rnd.randrange(1, 9)) for k in KINDS}
    print(f"seed {seed}: leaks {leaks}")
    cmd = [args.fixture] + specs(leaks, noise=False) + ["noise:100:300"]
    want = expected_per_site(leaks)
    plain = run_ours_command(args, [], cmd)
    p = subprocess.run([args.memleak, "--json", "--interval", "0", "--top", "0", "-v", "--sample-bytes", "1", "--"]
                       + cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "sampling in the process" in p.stderr,
          f"--sample-bytes 1 -- COMMAND runs with the in-process sampler (exit {p.returncode}): {p.stderr[-300:]}")
    sampled = json.loads(p.stdout)
    m = re.search(r"(\d+) samples from the in-process sampler", p.stderr)
    n_allocs = sum(c for _, c in leaks.values()) + leaks["realloc"][1] + 300  # site_realloc reallocs twice
    check(m is not None and int(m.group(1)) >= n_allocs,
          f"N=1: every allocation of the fixture was sampled, the 300 freed ones too ({m and m.group(1)} >= {n_allocs})")
    ours, _ = ours_per_site(sampled)
    check(ours == want, f"N=1: outstanding bytes per call site equal the known leaks: {ours} want {want}")
    counts = {site_of([f["function"] for f in st["frames"]]): st["allocations"] for st in sampled["stacks"]}
    want_counts = {("site_" + k): c for k, (_, c) in leaks.items()}
    check(counts == want_counts, f"N=1: allocations per call site equal the known counts: {counts}")
    check("site_noise" not in counts, "a sampled allocation that was freed (site_noise) is not reported as outstanding")
    check(all(site is not None for site in counts), "every sampled outstanding stack is one of the known call sites")
    ht, _ = heaptrack_per_site(args, cmd, args.work)
    check({k: v for k, v in ours.items() if k in ht} == ht and len(ht) == len(KINDS) - 1,
          f"N=1: ours equal heaptrack's leaked bytes per call site (memalign: not intercepted by heaptrack): {ht}")
    a, b = site_stacks(plain), site_stacks(sampled)
    check(set(a) == set(b), f"the same call sites with and without sampling: {sorted(a, key=str)} {sorted(b, key=str)}")
    for site in sorted(k for k in a if k in b):
        check(frames_key(a[site]) == frames_key(b[site]),
              f"{site}: the sampled stack equals the unsampled one frame by frame: {frames_key(b[site])[:3]}...")
        check(b[site]["frames"][0]["method"] == "context" and b[site]["stop"] == a[site]["stop"],
              f"{site}: frame 0 is the libc allocator at its entry (method context), same stop reason")

    # Unwound in the process (the default): every sample; the fallback that sends the stack to
    # the loader (STACKPROV_MEMLEAK_UNWIND=loader) gives the same stacks frame by frame.
    m = re.search(r"(\d+) samples unwound in the process \((\d+) walks reused\), (\d+) sent their stack", p.stderr)
    check(m is not None and int(m.group(1)) >= n_allocs and m.group(3) == "0",
          f"every sample was unwound in the process: {m and m.group(0)}")
    # each site allocates several times from one place: the sampler reuses its walk (checked
    # against the return addresses in the stack); the stacks below equal the loader's own walks
    check(m is not None and int(m.group(2)) >= n_allocs // 2,
          f"repeated call paths reuse the sampler's walk: {m and m.group(0)}")
    p = subprocess.run([args.memleak, "--json", "--interval", "0", "--top", "0", "-v", "--sample-bytes", "1", "--"]
                       + cmd, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, STACKPROV_MEMLEAK_UNWIND="loader"))
    m = re.search(r"(\d+) samples unwound in the process \(\d+ walks reused\), (\d+) sent their stack", p.stderr)
    check(p.returncode == 0 and m is not None and m.group(1) == "0" and int(m.group(2)) >= n_allocs,
          f"STACKPROV_MEMLEAK_UNWIND=loader: every sample sent its stack ({p.returncode} {m and m.group(0)})")
    c = site_stacks(json.loads(p.stdout)) if p.returncode == 0 else {}
    check(set(c) == set(b), f"the same call sites unwound by the loader: {sorted(c, key=str)}")
    for site in sorted(k for k in b if k in c):
        check(frames_key(c[site]) == frames_key(b[site]) and c[site]["stop"] == b[site]["stop"],
              f"{site}: unwound in the process = unwound by the loader from the copied stack")

    # Sampled blocks are tagged in front (preload.c): each allocator's contract holds for them and
    # for blocks passing between sampled and not (N=1: all; N=300, N=5000: some), and nothing of the
    # contract rounds, all freed, is outstanding.
    for n in (1, 300, 5000):
        p = subprocess.run([args.memleak, "--json", "--interval", "0", "--top", "0", "--sample-bytes", str(n), "--",
                            args.fixture, "contract:64:300", "contract:3000:100", "malloc:77:3"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "contract broken" not in p.stderr,
              f"N={n}: the allocators' contract holds under the sampler ({p.returncode}: {p.stderr.strip()[-300:]})")
        sites = site_stacks(json.loads(p.stdout)) if p.returncode == 0 else {}
        check(None not in sites and all(s == "site_malloc" for s in sites),
              f"N={n}: only site_malloc is outstanding after the contract rounds: {sorted(sites, key=str)}")

    # What a sampler inside the process must survive (review findings): errno kept by successful
    # allocations, allocations in a key destructor at thread exit (after the sampler's own state is
    # gone), allocations on a coroutine stack with nothing mapped above it, in both unwinding modes.
    for n, mode in ((1, None), (4096, None), (1, "loader")):
        extra = dict(os.environ, STACKPROV_MEMLEAK_UNWIND=mode) if mode else None
        p = subprocess.run([args.memleak, "--json", "--interval", "0", "--top", "0", "--sample-bytes", str(n), "--",
                            args.fixture, "hostile:4096:3", "malloc:77:2"],
                           capture_output=True, text=True, timeout=60, env=extra)
        check(p.returncode == 0 and "exited with status 0" in p.stderr,
              f"N={n}{' ' + mode if mode else ''}: the hostile rounds run to the end "
              f"({p.returncode}: {p.stderr.strip()[-300:]})")
        # what the fixture's own code allocated is all freed; glibc keeps the threads' TLS blocks
        # with its stack cache (pthread_create -> allocate_stack -> _dl_allocate_tls), which stay
        ours_left = [[f["function"] for f in st["frames"]][:2] for st in json.loads(p.stdout)["stacks"]
                     if len(st["frames"]) > 1 and ("hostile" in st["frames"][1]["function"])] \
            if p.returncode == 0 else ["no report"]
        check(not ours_left, f"N={n}: nothing the hostile rounds allocated themselves is outstanding: {ours_left}")

    # A large N: each allocation of SIZE is sampled independently with probability P = 1 - exp(-SIZE/N)
    # and stands for SIZE / P bytes, so the estimate of COUNT allocations has mean SIZE * COUNT and
    # standard deviation SIZE / P * sqrt(COUNT * P * (1 - P)); 5 of them: a false failure in ~1e6 runs.
    n = 4096
    big = {"malloc": (100, 20000), "calloc": (3000, 300), "posix_memalign": (20000, 40)}
    cmd = [args.fixture] + specs(big, noise=False) + ["noise:2000:2000"]
    est = run_ours_command(args, ["--sample-bytes", str(n)], cmd)
    got, _ = ours_per_site(est)
    for kind, (size, count) in big.items():
        pr = -math.expm1(-size / n)
        sd = size / pr * math.sqrt(count * pr * (1 - pr))
        truth = size * count
        g = got.get("site_" + kind, 0)
        check(abs(g - truth) <= 5 * sd, f"N={n}: site_{kind} estimate {g:.0f} within 5 sd ({5 * sd:.0f}) of {truth}")
    check("site_noise" not in got, f"N={n}: the freed allocations (site_noise) are not reported")

    h = subprocess.run([args.memleak, "--help"], capture_output=True, text=True).stdout
    check("stackprov-memleak-preload.so" in h and "LD_PRELOAD" in h and "every call still traps" in h,
          "--help names the in-process sampler, LD_PRELOAD and the -p PID limit")

    # LD_PRELOAD of the user is kept, ours appended; the sampler's library missing: exit 1 naming it
    user = "/lib/x86_64-linux-gnu/libdl.so.2"
    p = subprocess.run([args.memleak, "--interval", "0", "--sample-bytes", "1", "--", need("sh"), "-c",
                        'echo "LD_PRELOAD=$LD_PRELOAD"'], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_PRELOAD=user))
    line = [l for l in p.stdout.splitlines() if l.startswith("LD_PRELOAD=")]
    check(line == [f"LD_PRELOAD={user}:{os.path.realpath(args.preload)}"], f"LD_PRELOAD appended to the user's: {line}")
    lone = os.path.join(args.work, "alone")
    os.makedirs(lone, exist_ok=True)
    shutil.copy(args.memleak, os.path.join(lone, "stackprov-memleak"))
    p = subprocess.run([os.path.join(lone, "stackprov-memleak"), "--sample-bytes", "1", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and "stackprov-memleak-preload.so is missing" in lines[0],
          f"no sampler library beside the program: exit 1, one line naming it ({p.returncode} {lines})")


def mode_cli(args):
    h = subprocess.run([args.memleak, "--help"], capture_output=True, text=True)
    check(h.returncode == 0 and "Exit status" in h.stdout and h.stdout.rstrip().splitlines()[-1].strip().startswith("2"),
          "--help exits 0 and ends with an Exit status section")
    for opt in ["--interval", "--duration", "--top", "--min-size", "--stack-bytes", "--sample-bytes", "--scope",
                "--json", "--folded", "--svg", "--no-trampoline-repair", "-p"]:
        check(opt in h.stdout, f"--help documents {opt}")
    bad = [(["-p", "abc"], "abc"), (["-p", "1", "--top", "x"], "x"), (["--stack-bytes", "70000", "-p", "1"], "70000"),
           (["--interval", "-3", "-p", "1"], "-3"), (["--bogus"], "--bogus"), ([], "-p PID"),
           (["-p", "1", "--", "true"], "not both"), (["--sample-bytes", "1e5", "-p", "1"], "1e5")]
    for argv, needle in bad:
        p = subprocess.run([args.memleak] + argv, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and needle in lines[0], f"{argv}: exit 2 naming '{needle}': {p.returncode} {lines}")
    p = subprocess.run([args.memleak, "-p", "4000000"], capture_output=True, text=True)
    check(p.returncode == 1 and "no such process: 4000000" in p.stderr, f"no such process: exit 1 ({p.returncode} {p.stderr.strip()})")
    p = subprocess.run([args.memleak, "--", "/nonexistent/prog"], capture_output=True, text=True)
    check(p.returncode == 1 and "/nonexistent/prog" in p.stderr, f"missing command: exit 1 ({p.returncode} {p.stderr.strip()})")
    setpriv = need("setpriv")
    p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", args.memleak, "-p", str(os.getpid())],
                       capture_output=True, text=True)
    check(p.returncode == 1 and "needs root" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          f"without root: exit 1, one line saying root is needed ({p.returncode} {p.stderr.strip()})")
    # --folded / --svg of a run: folded lines end in bytes; the SVG names the site
    folded, svg = os.path.join(args.work, "out.folded"), os.path.join(args.work, "out.svg")
    p = subprocess.run([args.memleak, "--interval", "0", "--folded", folded, "--svg", svg, "--",
                        args.fixture, "malloc:1234:2"], capture_output=True, text=True, timeout=60)
    lines = [l for l in open(folded).read().splitlines() if "site_malloc" in l] if os.path.exists(folded) else []
    check(p.returncode == 0 and len(lines) == 1 and lines[0].endswith(";main;site_malloc;__libc_malloc 2468")
          and lines[0].startswith(os.path.basename(args.fixture) + ";"), f"--folded: {lines}")
    check(os.path.exists(svg) and "site_malloc" in open(svg).read(), "--svg names site_malloc")
    p = subprocess.run([args.memleak, "--interval", "0", "--folded", "/nonexistent/dir/x", "--", args.fixture, "malloc:1:1"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "/nonexistent/dir/x" in p.stderr, f"unwritable --folded: exit 1 ({p.returncode})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["leaks", "bcc", "trampoline", "cli", "sampled"])
    ap.add_argument("--memleak", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--preload", help="stackprov-memleak-preload.so (mode sampled)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if os.geteuid() != 0:
        sys.exit("FAIL: these checks need root (BPF programs and uprobes); CI runs them as root")
    {"leaks": mode_leaks, "bcc": mode_bcc, "trampoline": mode_trampoline, "cli": mode_cli,
     "sampled": mode_sampled}[args.mode](args)
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
