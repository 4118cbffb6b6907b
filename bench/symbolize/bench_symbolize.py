#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench/symbolize driver: identical seeded address sets for stackprov (in-process and CLI), llvm-symbolizer-14, addr2line, eu-addr2line.
import argparse
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


def timed(cmd, stdin_path, timeout):
    """Wall seconds and peak RSS (MiB) of one child, stdout discarded; None on timeout/failure."""
    with open(stdin_path) as fin, open(os.devnull, "w") as fout:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.time() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                return None
            time.sleep(0.005)
        secs = time.time() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        return None
    return {"seconds": round(secs, 3), "peak_rss_mib": round(ru.ru_maxrss / 1024.0, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default=os.environ.get("BENCH_SYMBOLIZE_SIZES", "10000 200000"))
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("BENCH_SYMBOLIZE_TIMEOUT", "120")))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split()]
    modules = []
    lsc = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6"
    if os.path.exists(lsc):
        modules.append(("libstdc++.so.6 (libstdc++6-12-dbg build)", lsc, lsc))
    py = "/usr/bin/python3.11"
    if os.path.exists(py) and debug_file(py):
        modules.append(("python3.11 (+python3.11-dbg, zlib)", py, debug_file(py)))
    if not modules:
        print("bench/symbolize: neither libstdc++6-12-dbg nor python3.11-dbg installed")
        return 77
    peers = [("llvm-symbolizer-14", ["llvm-symbolizer-14", "--inlines", "--obj"]),
             ("addr2line", ["addr2line", "-f", "-i", "-C", "-e"]),
             ("eu-addr2line", ["eu-addr2line", "-f", "-i", "-C", "-e"])]
    report = {"modules": []}
    for label, obj, dwarf in modules:
        raw = dwarf_bytes(dwarf)
        ranges = func_ranges(dwarf)
        mod = {"module": label, "path": obj, "dwarf_file": dwarf, "raw_dwarf_bytes": raw, "sizes": []}
        print("== %s: raw DWARF %.1f MiB" % (label, raw / 2**20))
        for n in sizes:
            addrs = sample(ranges, n, seed=0x5eed + n)
            path = os.path.join(args.work, "%s.%d.addrs" % (os.path.basename(obj), n))
            with open(path, "w") as f:
                f.write("".join("0x%x\n" % a for a in addrs))
            inproc = json.loads(run([args.driver, obj, path]))
            inproc["extra_heap_ratio_to_raw_dwarf"] = round(inproc["heap_bytes"] / max(raw, 1), 3)
            row = {"addresses": n, "in_process": inproc, "cli": {}}
            row["cli"]["stackprov"] = timed([args.stackprov, "symbolize", "--inlines", "--obj", obj], path, args.timeout)
            for name, cmd in peers:
                row["cli"][name] = timed(cmd + [obj], path, args.timeout) if shutil.which(cmd[0]) else None
            ours = row["cli"]["stackprov"]
            for name, r in row["cli"].items():
                if r and ours and name != "stackprov":
                    r["stackprov_speedup"] = round(r["seconds"] / max(ours["seconds"], 1e-9), 2)
            mod["sizes"].append(row)
            print("  %7d addresses: in-process first %.1f ms, warm %.3f us/addr (raw names %.3f), %.2f frames/addr, "
                  "heap %.1f MiB = %.2fx raw DWARF, peak RSS %.0f MiB" %
                  (n, inproc["first_address_ms"], inproc["warm_us_per_address"], inproc["warm_raw_us_per_address"],
                   inproc["frames"] / n, inproc["heap_bytes"] / 2**20, inproc["extra_heap_ratio_to_raw_dwarf"],
                   inproc["peak_rss_kib"] / 1024.0))
            for name, r in row["cli"].items():
                if r is None:
                    print("    %-20s timeout (> %.0f s) or unavailable" % (name, args.timeout))
                else:
                    print("    %-20s %8.3f s %8.1f MiB%s" % (name, r["seconds"], r["peak_rss_mib"],
                          ("   stackprov %.2fx faster" % r["stackprov_speedup"]) if "stackprov_speedup" in r else ""))
        report["modules"].append(mod)
    report["targets"] = {"warm_us_per_address_max": 1.0, "extra_heap_ratio_max": 0.5,
                         "cli_faster_than": "llvm-symbolizer-14"}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
