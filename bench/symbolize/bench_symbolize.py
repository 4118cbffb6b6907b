#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench/symbolize driver: identical seeded address sets for stackprov (in-process and CLI), llvm-symbolizer-14, addr2line, eu-addr2line.
"""Every CLI is run --runs times per address set (median reported) with its output kept; every
run must exit 0 and print the same as the first. Every tool runs without demangling
(--no-demangle; addr2line and eu-addr2line without -C): equal work, and names compared as the
linkage names they are, not as the output of two different demanglers (libiberty's and LLVM's
print e.g. `operator<< <T>` / `operator<<<T>`, `{lambda()#1}` / `'lambda'()`). stackprov
symbolize's output (LLVM style, --inlines) is compared with llvm-symbolizer-14's, address by
address; the benchmark fails on any difference except the one explicit naming class below,
counted and reported:
  * the number of frames, every file:line:column and every inlined function's name must be equal;
  * the outermost function's name must be equal or, the naming class that issue 10 section 5 is
    settling in lib/symbolize ("which of several symbols at one address names the function"):
    both names, without symbol versions, are symbols covering the address in the module's symbol
    tables (nm, nm -D): C1/C2 and D1/D2 pairs, identical-code-folded functions, glibc aliases,
    two versions of one symbol (name@@V2 / name@V1).
addr2line and eu-addr2line are timed only (their output styles differ); eu-addr2line (about
1 ms per address) only on the sets of at most --eu-addr2line-max addresses. The in-process driver
fails on any address the library cannot symbolize."""
import argparse
import collections
import hashlib
import statistics
import bisect
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time


# Issue 37 (was issue 15's 3x and 0.5x): end to end >= 5x llvm-symbolizer-14 (CPU) at both sizes, extra
# heap <= 1x the raw DWARF; issue 15's warm <= 1 us per address with the inline chain is still reported.
SPEEDUP_MIN = 5.0
WARM_US_MAX = 1.0
HEAP_RATIO_MAX = 1.0
# Issue 37: `symbolize` of 5,000 seeded in-function addresses of every binary of
# integration_symbolize_real (tests/integration/symbolize/real_binaries.py: python3.11, a cargo-built Rust
# program, libc.so.6, node, the libstdc++ debug build) >= 3x faster than llvm-symbolizer-14 (wall; CPU
# printed beside it), with that test's flags and its rule for the answers (every field equal, or the
# address listed in its llvm_exceptions.txt).
REAL_SPEEDUP_MIN = 3.0
REAL_ADDRESSES = 5000
HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def debug_file(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]))
    if m:
        p = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
        if os.path.exists(p):
            return p
    return None


def dwarf_bytes(path):
    """Raw (decompressed) size of the .debug_* sections of an ELF64 LE file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return 0
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = secs[shstrndx][4]
    total = 0
    for name, typ, flags, addr, off, size, *_ in secs:
        end = data.index(b"\0", stroff + name)
        n = data[stroff + name:end].decode()
        if not n.startswith(".debug_") or typ == 8:
            continue
        total += struct.unpack_from("<Q", data, off + 8)[0] if flags & 0x800 else size  # SHF_COMPRESSED: ch_size
    return total


def func_ranges(symfile):
    rs = set()
    for line in run(["nm", "-S", "--defined-only", symfile]).splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in ("T", "t", "W", "w", "i") and int(p[1], 16):
            rs.add((int(p[0], 16), int(p[1], 16)))
    return sorted(rs)


def sample(ranges, n, seed):
    rnd = random.Random(seed)
    cum, acc = [], 0
    for _, s in ranges:
        acc += s
        cum.append(acc)
    out = []
    for _ in range(n):
        k = rnd.randrange(acc)
        i = bisect.bisect_right(cum, k)
        out.append(ranges[i][0] + (k - (cum[i] - ranges[i][1])))
    return out


# Every child runs under GNU time, which reports its peak RSS: a child forked from this (large)
# Python process would count the parent's resident pages in its own ru_maxrss (Linux records the
# pre-exec mm's high-water mark at exec), so wait4's figure would be this script's size.
GNU_TIME = "/usr/bin/time"


def small_parent(cmd, rss_path):
    return [GNU_TIME, "-f", "%U %S %M", "-o", rss_path] + cmd


def read_rss_mib(rss_path):
    with open(rss_path) as f:
        return int(f.read().split()[-1]) / 1024.0


def read_cpu_s(rss_path):
    """User + system CPU seconds of the child (GNU time's %U %S): the figure a loaded machine disturbs least."""
    with open(rss_path) as f:
        u, s = f.read().split()[-3:-1]
    return float(u) + float(s)


def timed(cmd, stdin_path, timeout, runs, out_path):
    """Median wall seconds, median CPU seconds (user + system) and peak RSS (MiB) of `runs` runs;
    stdout of the last run kept in out_path. Raises BenchFail on a timeout, a non-zero exit or runs
    that print different things."""
    secs, cpu, rss, digests = [], [], [], set()
    rss_path = out_path + ".rss"
    for _ in range(runs):
        with open(stdin_path) as fin, open(out_path, "wb") as fout:
            t0 = time.time()
            p = subprocess.Popen(small_parent(cmd, rss_path), stdin=fin, stdout=fout, stderr=subprocess.PIPE)
            deadline = t0 + timeout
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.time() > deadline:
                    p.kill()
                    os.wait4(p.pid, 0)
                    raise BenchFail("%s: timeout (> %.0f s)" % (" ".join(cmd), timeout))
                time.sleep(0.005)
            secs.append(time.time() - t0)
            rc = os.waitstatus_to_exitcode(status)
            err = p.stderr.read().decode(errors="replace")
        if rc != 0:
            raise BenchFail("%s exited %d: %s" % (" ".join(cmd), rc, err[-500:]))
        rss.append(read_rss_mib(rss_path))
        cpu.append(read_cpu_s(rss_path))
        with open(out_path, "rb") as f:
            digests.add(hashlib.sha256(f.read()).hexdigest())
    if len(digests) != 1:
        raise BenchFail("%s: %d runs printed %d different outputs" % (" ".join(cmd), runs, len(digests)))
    return {"runs": runs, "seconds": round(statistics.median(secs), 3), "min_seconds": round(min(secs), 3),
            "cpu_seconds": round(statistics.median(cpu), 3), "peak_rss_mib": round(max(rss), 1)}


class BenchFail(Exception):
    pass


_VERSION = re.compile(r"@@?[A-Za-z0-9_.]+$")


def unversioned(name):
    return _VERSION.sub("", name)


class SymbolNames:
    """Version-stripped FUNC names by address range, from nm and nm -D of the module files."""

    def __init__(self, paths):
        rs = []
        for path in paths:
            for extra in ([], ["--dynamic"]):
                r = subprocess.run(["nm", "-S", "--defined-only"] + extra + [path], capture_output=True, text=True)
                for line in r.stdout.splitlines():
                    p = line.split(" ", 3)
                    if len(p) == 4 and p[2] in ("T", "t", "W", "w", "i"):
                        try:
                            rs.append((int(p[0], 16), int(p[1], 16), unversioned(p[3].strip())))
                        except ValueError:
                            pass
        self.ranges = sorted(set(rs))

    def at(self, addr):
        return {n for lo, size, n in self.ranges if lo <= addr < lo + max(size, 1)}


def llvm_blocks(path):
    with open(path, errors="replace") as f:
        text = f.read()
    return [b.split("\n") for b in text.strip("\n").split("\n\n")] if text.strip() else []


def compare_llvm(ours_path, llvm_path, addrs, symbols):
    """stackprov symbolize vs llvm-symbolizer-14 (LLVM style, --inlines), address by address."""
    ours, theirs = llvm_blocks(ours_path), llvm_blocks(llvm_path)
    classes, examples = collections.Counter(), []
    if len(ours) != len(addrs) or len(theirs) != len(addrs):
        return {"addresses": len(addrs), "failures": ["answers: stackprov %d, llvm-symbolizer-14 %d, addresses %d"
                                                      % (len(ours), len(theirs), len(addrs))]}
    pending = []
    for i, (o, t) in enumerate(zip(ours, theirs)):
        if o == t:
            classes["identical"] += 1
            continue
        if len(o) != len(t) or o[1::2] != t[1::2]:
            classes["FAIL frames or file:line:column differ"] += 1
            examples.append((addrs[i], o, t))
            continue
        if o[:-2:2] != t[:-2:2]:
            classes["FAIL inlined function name differs"] += 1
            examples.append((addrs[i], o, t))
            continue
        pending.append((i, o[-2], t[-2]))
    for i, on, tn in pending:
        if unversioned(on) == unversioned(tn) or {unversioned(on), unversioned(tn)} <= symbols.at(addrs[i]):
            classes["naming class: another symbol at the same address"] += 1
            continue
        classes["FAIL function name differs"] += 1
        examples.append((addrs[i], ["..", on], ["..", tn]))
    failures = ["0x%x: stackprov %s | llvm-symbolizer-14 %s" % (a, " / ".join(o), " / ".join(t))
                for a, o, t in examples[:8]]
    return {"addresses": len(addrs), "classes": dict(classes),
            "identical_pct": round(100.0 * classes["identical"] / max(len(addrs), 1), 2),
            "failures": failures if any(k.startswith("FAIL") for k in classes) else []}


def real_binaries(args, failures):
    """Issue 37's row: each binary of integration_symbolize_real, both tools with that test's flags on
    the same seeded addresses, at least 5 runs each (median wall and CPU), the answers compared by the
    test's rule. Appends to `failures` on a difference the test does not list, a missing binary or
    tool; returns one row per binary."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration", "symbolize"))
    import real_binaries as rb  # noqa: E402  (the test's targets, sampling and comparison)
    work = os.path.join(args.work, "real")
    os.makedirs(work, exist_ok=True)
    runs = max(args.runs, 5)
    rows = []
    try:
        tlist = list(rb.targets(work))
    except (rb.Missing, subprocess.CalledProcessError) as e:
        failures.append("real binaries: %s" % e)
        return rows
    exceptions = rb.load_exceptions()
    flags = ["--inlines", "--output-style=JSON", "--no-demangle", "--obj"]
    print("== real binaries (integration_symbolize_real's), %d addresses each, median of %d runs, load average %s"
          % (REAL_ADDRESSES, runs, " ".join("%.2f" % x for x in os.getloadavg())))
    for label, binary, symfile in tlist:
        try:
            row = real_binary(args, rb, exceptions, flags, runs, work, label, binary, symfile, failures)
        except (subprocess.CalledProcessError, ValueError, RuntimeError, KeyError, OSError) as e:
            failures.append("real binaries, %s: %s" % (label, e))
            continue
        if row is not None:
            rows.append(row)
    return rows


def real_binary(args, rb, exceptions, flags, runs, work, label, binary, symfile, failures):
    """One binary of real_binaries(): its row, or None after appending to `failures`."""
    addrs = rb.sample(rb.func_ranges(symfile), REAL_ADDRESSES, seed=0x5eed)
    base = os.path.join(work, re.sub(r"[^A-Za-z0-9.+_-]+", "_", label))
    path = base + ".addrs"
    with open(path, "w") as f:
        f.write("".join("0x%x\n" % a for a in addrs))
    try:
        ours = timed([args.stackprov, "symbolize"] + flags + [binary], path, args.timeout, runs, base + ".stackprov.out")
        llvm = timed(["llvm-symbolizer-14"] + flags + [binary], path, args.timeout, runs, base + ".llvm.out")
    except BenchFail as e:
        failures.append("real binaries, %s: %s" % (label, e))
        return None
    with open(base + ".stackprov.out") as f:
        x_all = rb.llvm_symbolizer_json(f.read())
    with open(base + ".llvm.out") as f:
        y_all = rb.llvm_symbolizer_json(f.read())
    unlisted = listed = 0
    if len(x_all) != len(addrs) or len(y_all) != len(addrs):
        failures.append("real binaries, %s: %d and %d answers for %d addresses" % (label, len(x_all), len(y_all),
                                                                                  len(addrs)))
        return None
    for a, x, y in zip(addrs, x_all, y_all):
        if rb.difference(x, y):
            if (label, a) in exceptions:
                listed += 1
            else:
                unlisted += 1
    if unlisted:
        failures.append("real binaries, %s: %d answers differ from llvm-symbolizer-14's (not in %s)" % (
            label, unlisted, os.path.basename(rb.EXCEPTIONS)))
    wall = llvm["seconds"] / max(ours["seconds"], 1e-9)
    cpu = llvm["cpu_seconds"] / max(ours["cpu_seconds"], 1e-3)
    row = {"binary": label, "path": binary, "addresses": len(addrs), "runs": runs, "stackprov": ours,
           "llvm-symbolizer-14": llvm, "wall_speedup": round(wall, 2), "cpu_speedup": round(cpu, 2),
           "identical": len(addrs) - listed - unlisted, "listed_differences": listed,
           "unlisted_differences": unlisted, "met": wall >= REAL_SPEEDUP_MIN and unlisted == 0}
    print("  %-28s stackprov %.3f s (CPU %.3f)  llvm-symbolizer-14 %.3f s (CPU %.3f)  x%.2f (CPU x%.2f); "
          "%d identical, %d listed, %d unlisted" % (label, ours["seconds"], ours["cpu_seconds"], llvm["seconds"],
                                                  llvm["cpu_seconds"], wall, cpu, row["identical"], listed, unlisted))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default=os.environ.get("BENCH_SYMBOLIZE_SIZES", "10000 200000"))
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("BENCH_SYMBOLIZE_TIMEOUT", "180")))
    ap.add_argument("--eu-addr2line-max", type=int, default=10000,
                    help="eu-addr2line only on address sets up to this size")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_SYMBOLIZE_RUNS", "3")))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split()]
    modules = []
    lsc = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6"
    py = "/usr/bin/python3.11"
    failures = []
    if not os.path.exists(lsc):
        failures.append("%s missing (libstdc++6-12-dbg)" % lsc)
    else:
        modules.append(("libstdc++.so.6 (libstdc++6-12-dbg build)", lsc, lsc))
    if not os.path.exists(py) or not debug_file(py):
        failures.append("python3.11 or its debug file missing (python3.11-dbg)")
    else:
        modules.append(("python3.11 (+python3.11-dbg, zlib)", py, debug_file(py)))
    peers = [("llvm-symbolizer-14", ["llvm-symbolizer-14", "--inlines", "--no-demangle", "--obj"]),
             ("addr2line", ["addr2line", "-f", "-i", "-e"]),
             ("eu-addr2line", ["eu-addr2line", "-f", "-i", "-e"])]
    for name, cmd in peers:
        if not shutil.which(cmd[0]):
            failures.append("%s not found" % cmd[0])
    if not os.path.exists(GNU_TIME):
        failures.append("%s not found (Debian package time)" % GNU_TIME)
    report = {"modules": [], "runs": args.runs}
    print("bench/symbolize: median of %d runs per tool; ratio = peer / stackprov (> 1: stackprov is faster)" % args.runs)
    try:
        if failures:
            raise BenchFail("; ".join(failures))
        for label, obj, dwarf in modules:
            raw = dwarf_bytes(dwarf)
            ranges = func_ranges(dwarf)
            symbols = SymbolNames(sorted({obj, dwarf}))
            mod = {"module": label, "path": obj, "dwarf_file": dwarf, "raw_dwarf_bytes": raw, "sizes": []}
            print("== %s: raw DWARF %.1f MiB" % (label, raw / 2**20))
            for n in sizes:
                addrs = sample(ranges, n, seed=0x5eed + n)
                path = os.path.join(args.work, "%s.%d.addrs" % (os.path.basename(obj), n))
                with open(path, "w") as f:
                    f.write("".join("0x%x\n" % a for a in addrs))
                r = subprocess.run(small_parent([args.driver, obj, path], path + ".driver.rss"),
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise BenchFail("bench_symbolize %s %s exited %d: %s" % (obj, path, r.returncode, r.stderr[-500:]))
                inproc = json.loads(r.stdout)
                inproc["extra_heap_ratio_to_raw_dwarf"] = round(inproc["heap_bytes"] / max(raw, 1), 3)
                row = {"addresses": n, "in_process": inproc, "cli": {}}
                outs = {}
                base = os.path.join(args.work, "%s.%d" % (os.path.basename(obj), n))
                outs["stackprov"] = base + ".stackprov.out"
                row["cli"]["stackprov"] = timed([args.stackprov, "symbolize", "--inlines", "--no-demangle", "--obj", obj], path,
                                                args.timeout, args.runs, outs["stackprov"])
                for name, cmd in peers:
                    if name == "eu-addr2line" and n > args.eu_addr2line_max:
                        continue  # ~1 ms per address: minutes per run on the large set
                    outs[name] = base + "." + name + ".out"
                    row["cli"][name] = timed(cmd + [obj], path, args.timeout, args.runs, outs[name])
                ours = row["cli"]["stackprov"]
                for name, r in row["cli"].items():
                    if name != "stackprov":
                        r["stackprov_speedup"] = round(r["seconds"] / max(ours["seconds"], 1e-9), 2)
                        r["stackprov_cpu_speedup"] = round(r["cpu_seconds"] / max(ours["cpu_seconds"], 1e-3), 2)
                cmp = compare_llvm(outs["stackprov"], outs["llvm-symbolizer-14"], addrs, symbols)
                row["vs_llvm_symbolizer"] = cmp
                mod["sizes"].append(row)
                print("  %7d addresses: in-process first %.1f ms, warm %.3f us/addr (CPU %.3f; raw names %.3f), %.2f "
                      "frames/addr, heap %.1f MiB = %.2fx raw DWARF, peak RSS %.0f MiB" %
                      (n, inproc["first_address_ms"], inproc["warm_us_per_address"], inproc["warm_cpu_us_per_address"],
                       inproc["warm_raw_us_per_address"], inproc["frames"] / n, inproc["heap_bytes"] / 2**20,
                       inproc["extra_heap_ratio_to_raw_dwarf"], inproc["peak_rss_kib"] / 1024.0))
                for name, r in row["cli"].items():
                    print("    %-20s %8.3f s (CPU %.3f s) %8.1f MiB%s" % (
                        name, r["seconds"], r["cpu_seconds"], r["peak_rss_mib"],
                        ("   ratio x%.2f (CPU x%.2f)" % (r["stackprov_speedup"], r["stackprov_cpu_speedup"]))
                        if "stackprov_speedup" in r else ""))
                print("    output vs llvm-symbolizer-14: %.2f%% identical; %s" % (
                    cmp.get("identical_pct", 0.0),
                    ", ".join("%s %d" % kv for kv in sorted(cmp.get("classes", {}).items()) if kv[0] != "identical")
                    or "no differences"))
                for f in cmp["failures"]:
                    print("    FAIL " + f)
                    failures.append("%s, %d addresses: %s" % (label, n, f))
            report["modules"].append(mod)
    except BenchFail as e:
        failures.append(str(e))
    report["real_binaries"] = real_binaries(args, failures)
    report["targets"] = {"warm_us_per_address_max": WARM_US_MAX, "extra_heap_ratio_max": HEAP_RATIO_MAX,
                         "cli_faster_than": "llvm-symbolizer-14", "cli_speedup_min": SPEEDUP_MIN}
    # Issue 15's goals per module and size, reported (met or not), not asserted. The speedup is
    # judged by CPU time (user + system; the wall-clock ratio is reported beside it): on a shared,
    # loaded machine wall time measures the other load as much as the tool.
    goals = []
    for m in report["modules"]:
        for r in m["sizes"]:
            sp = r["cli"].get("llvm-symbolizer-14", {}).get("stackprov_cpu_speedup", 0.0)
            wall_sp = r["cli"].get("llvm-symbolizer-14", {}).get("stackprov_speedup", 0.0)
            warm = r["in_process"]["warm_us_per_address"]
            heap = r["in_process"]["extra_heap_ratio_to_raw_dwarf"]
            g = {"module": m["module"].split(" ")[0], "addresses": r["addresses"],
                 "speedup_vs_llvm_symbolizer": sp, "speedup_met": sp >= SPEEDUP_MIN,
                 "wall_speedup_vs_llvm_symbolizer": wall_sp,
                 "warm_us_per_address": warm, "warm_met": warm <= WARM_US_MAX,
                 "warm_cpu_us_per_address": r["in_process"]["warm_cpu_us_per_address"],
                 "extra_heap_ratio": heap, "heap_met": heap <= HEAP_RATIO_MAX}
            goals.append(g)
            print("goal %-16s %6d addresses: >= %.0fx llvm-symbolizer-14 (CPU time) %s (x%.2f, wall x%.2f); "
                  "warm <= %.1f us (issue 15) %s (%.2f, CPU %.2f); heap <= %.1fx raw DWARF %s (%.2fx)" % (
                      g["module"], g["addresses"], SPEEDUP_MIN, "met" if g["speedup_met"] else "NOT met", sp, wall_sp,
                      WARM_US_MAX, "met" if g["warm_met"] else "NOT met", warm, g["warm_cpu_us_per_address"],
                      HEAP_RATIO_MAX, "met" if g["heap_met"] else "NOT met", heap))
    for r in report["real_binaries"]:
        print("goal %-28s %d addresses: >= %.0fx llvm-symbolizer-14 (wall) %s (x%.2f, CPU x%.2f)" % (
            r["binary"], r["addresses"], REAL_SPEEDUP_MIN, "met" if r["met"] else "NOT met", r["wall_speedup"],
            r["cpu_speedup"]))
    report["goals"] = goals
    report["failures"] = failures
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote %s" % args.out)
    if failures:
        print("bench/symbolize: FAIL\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
