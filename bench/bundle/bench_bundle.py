#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench/bundle driver: bundle bytes vs llvm-gsymutil-14 GSYM, open time, warm inline-chain lookups vs GSYM and DWARF peers.
"""For python3.11 (DWARF from python3.11-dbg), the debug build of libstdc++.so.6
(libstdc++6-12-dbg, /usr/lib/x86_64-linux-gnu/debug/) and libc.so.6 (DWARF from its debug file,
libc6-dbg), in one run:
  * `stackprov bundle build` (built twice: the sha256 must be equal), its bytes and build time
    per MB of DWARF (.debug_* sections of the file DWARF comes from);
  * `llvm-gsymutil-14 --convert <debug file> --out-file X.gsym` (inline info included), its
    bytes and conversion time; the size ratio bundle / GSYM (issue target <= 0.5);
  * the same seeded random addresses (default 5,000, uniform over the executable sections) looked
    up through the bundle by bench_bundle (open time, first lookup, warm ns/address with the
    full inline chain), through GSYM by `llvm-gsymutil-14 --addresses-from-stdin` and through
    DWARF by `llvm-symbolizer-14 --inlining`. The peers run as batch processes; their warm
    per-address cost is the marginal one: (time for the set twice - time for the set once) /
    addresses, which removes process start and the one-time parse. Speed-ups are peer / bundle.
  * agreement: every bundle answer (function, file:line:column of each frame, innermost first)
    must equal llvm-symbolizer-14's, including where llvm-symbolizer has only a symbol-table answer
    (one frame, "??:0:0" or "<STT_FILE name>:0:0"; the bundle's symbol-table ranges; counted), and
    where it says ?? on the module, llvm-symbolizer-14's on the debug file (the bundle names such
    bytes from the debug file's .symtab; counted).
    Any difference fails the benchmark.
Writes JSON to --out. Missing tools or packages fail with their names."""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

TOOLS = ["readelf", "llvm-gsymutil-14", "llvm-symbolizer-14"]
TARGETS = [
    ("python3.11", "/usr/bin/python3.11", "python3.11-dbg"),
    ("libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30", "libstdc++6-12-dbg"),
    ("libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6-dbg"),  # DWARF in its debug file
]
SYMTAB_ONLY = re.compile(r"^[^/]*:0:0$")


def run(cmd, inp=None):
    p = subprocess.run(cmd, input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd[:5]), p.returncode, p.stderr.strip()[:1000]))
    return p.stdout


def timed(cmd, inp=None, runs=3):
    """Median wall seconds of `runs` runs and the (identical) output."""
    times, outs = [], set()
    for _ in range(runs):
        t0 = time.perf_counter()
        out = run(cmd, inp)
        times.append(time.perf_counter() - t0)
        outs.add(out)
    if len(outs) != 1:
        sys.exit("FAIL: %s printed different outputs across runs" % cmd[0])
    return statistics.median(times), outs.pop()


def debug_file(path):
    if ".debug_info" in run(["readelf", "-SW", path]):
        return path
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]))
    if m:
        p = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
        if os.path.exists(p):
            return p
    return None


def sections(path):
    out = []
    for line in run(["readelf", "-SW", path]).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if m:
            out.append((m.group(1), m.group(2), int(m.group(3), 16), int(m.group(5), 16), m.group(6)))
    return out


def split_answers(text):
    return [tuple(b.strip("\n").split("\n")) for b in text.split("\n\n") if b.strip()]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def bench_target(args, name, path, pkg):
    if not os.path.exists(path):
        sys.exit("FAIL: %s: %s missing (apt-get install %s)" % (name, path, pkg))
    dbg = debug_file(path)
    if dbg is None:
        sys.exit("FAIL: %s: no DWARF for %s (apt-get install %s)" % (name, path, pkg))
    dwarf_bytes = sum(s[3] for s in sections(dbg) if s[0].startswith(".debug_"))
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)

    bundle = os.path.join(work, name + ".sbundle")
    builds, digests = [], set()
    for _ in range(2):
        t0 = time.perf_counter()
        run([args.stackprov, "bundle", "build", path, "--out", bundle])
        builds.append(time.perf_counter() - t0)
        digests.add(sha256(bundle))
    if len(digests) != 1:
        sys.exit("FAIL: %s: two builds of the bundle differ" % name)
    inspect = json.loads(run([args.stackprov, "bundle", "inspect", bundle, "--json"]))
    gsym = os.path.join(work, name + ".gsym")
    t0 = time.perf_counter()
    run(["llvm-gsymutil-14", "--convert", dbg, "--out-file", gsym])
    gsym_time = time.perf_counter() - t0
    bundle_bytes, gsym_bytes = os.path.getsize(bundle), os.path.getsize(gsym)
    # Bytes per part, from the section table (doc/bundles.md "Layout"): what GSYM also has
    # (strings + ranges) vs what it has not (return pads, unwind rows).
    with open(bundle, "rb") as f:
        raw = f.read()
    nsec = struct.unpack_from("<I", raw, 12)[0]
    sec = {}
    for i in range(nsec):
        t, _, _, ln = struct.unpack_from("<IIQQ", raw, 32 + 24 * i)
        sec[t] = ln
    parts = {"strings": sec.get(2, 0) + sec.get(3, 0), "ranges": sec.get(4, 0) + sec.get(5, 0),
             "return_pads": sec.get(6, 0) + sec.get(7, 0), "unwind_rows": sec.get(8, 0) + sec.get(9, 0),
             "symtab_ranges": sec.get(0x80000001, 0),
             "symbol_names": sec.get(0x80000002, 0),  # format 5 (doc/bundles.md "Symbol names")
             "call_sites": sec.get(0x80000003, 0),  # doc/bundles.md "Call sites"
             "modules_and_headers": bundle_bytes - sum(sec.get(t, 0) for t in list(range(2, 10)) +
                                                       [0x80000001, 0x80000002, 0x80000003])}

    rng = random.Random(20261125)
    text = [(s[2], s[3]) for s in sections(path) if s[1] == "PROGBITS" and "X" in s[4] and s[3] > 0]
    total = sum(n for _, n in text)
    addrs = []
    for _ in range(args.addresses):
        k = rng.randrange(total)
        for lo, n in text:
            if k < n:
                addrs.append(lo + k)
                break
            k -= n
    addr_file = os.path.join(work, "addresses.txt")
    with open(addr_file, "w") as f:
        f.write("".join("%x\n" % a for a in addrs))
    answers_file = os.path.join(work, "bundle_answers.txt")
    drv = json.loads(run([args.driver, bundle, addr_file, answers_file]))
    with open(answers_file) as f:
        ours = split_answers(f.read())

    once = "".join("0x%x\n" % a for a in addrs)
    sym = ["llvm-symbolizer-14", "--obj=" + path, "--no-demangle", "--inlining", "--output-style=LLVM"]
    t1, out1 = timed(sym, once)
    t2, _ = timed(sym, once + once)
    theirs = split_answers(out1)
    if len(theirs) != len(addrs) or len(ours) != len(addrs):
        sys.exit("FAIL: %s: %d llvm-symbolizer answers, %d bundle answers for %d addresses"
                 % (name, len(theirs), len(ours), len(addrs)))
    # Where llvm-symbolizer-14 has no answer on the module but the bundle has one, the bundle named
    # the bytes from the debug file's .symtab (doc/bundles.md, e.g. libc's __restore_rt): the
    # oracle there is llvm-symbolizer-14 on the debug file itself.
    unknown = [(a, o) for a, o, t in zip(addrs, ours, theirs) if o != t and t == ("??", "??:0:0")]
    from_debug = {}
    if unknown and dbg != path:
        dsym = ["llvm-symbolizer-14", "--obj=" + dbg, "--no-demangle", "--inlining", "--output-style=LLVM"]
        answers = split_answers(run(dsym, "".join("0x%x\n" % a for a, _ in unknown)))
        from_debug = {a: t for (a, _), t in zip(unknown, answers)}
    identical = symtab_only = debug_symtab = 0
    diffs = []
    for a, o, t in zip(addrs, ours, theirs):
        if o == t:
            identical += 1
            symtab_only += len(t) == 2 and t[0] != "??" and bool(SYMTAB_ONLY.match(t[1]))
        elif from_debug.get(a) == o:
            identical += 1
            debug_symtab += 1
        else:
            diffs.append("0x%x: bundle %r, llvm-symbolizer-14 %r" % (a, o, from_debug.get(a, t)))
    if diffs:
        sys.exit("FAIL: %s: %d of %d answers differ from llvm-symbolizer-14:\n  %s"
                 % (name, len(diffs), len(addrs), "\n  ".join(diffs[:10])))

    g_once = "".join("0x%x %s\n" % (a, gsym) for a in addrs)
    gs = ["llvm-gsymutil-14", "--addresses-from-stdin"]
    g1, gout = timed(gs, g_once)
    g2, _ = timed(gs, g_once + g_once)
    gsym_found = sum(1 for line in gout.splitlines() if re.match(r"^0x[0-9a-f]+: (?!error)", line))

    n = len(addrs)
    warm = drv["warm_lookup_ns_per_address"]
    sym_marginal = max(t2 - t1, 0) / n * 1e9
    gsym_marginal = max(g2 - g1, 0) / n * 1e9
    return {
        "module": path,
        "dwarf_from": dbg,
        "dwarf_bytes": dwarf_bytes,
        "bundle": {"bytes": bundle_bytes, "sha256": digests.pop(), "module": inspect["modules"][0],
                   "build_s": min(builds), "build_s_per_dwarf_mb": min(builds) / (dwarf_bytes / 1e6)},
        "gsym": {"bytes": gsym_bytes, "convert_s": gsym_time},
        "size_ratio_bundle_to_gsym": bundle_bytes / gsym_bytes,
        "bundle_parts_bytes": parts,
        "size_ratio_strings_and_ranges_to_gsym": (parts["strings"] + parts["ranges"] + parts["symtab_ranges"])
        / gsym_bytes,
        "addresses": n,
        "bundle_open_ns_median": drv["open_ns_median"],
        "bundle_open_ns_min": drv["open_ns_min"],
        "bundle_first_lookup_ns": drv["first_lookup_ns"],
        "bundle_warm_lookup_ns_per_address": warm,
        "bundle_warm_lookup_ns_per_address_best_pass": drv["warm_lookup_ns_per_address_best"],
        "frames": drv["frames"],
        # Symbol names (doc/bundles.md "Format 6"): the bundle's format against the same records
        # rewritten in format 5 by the driver (answers checked equal there).
        "bundle_format": drv["format"],
        "symbol_names": {"records": drv["symbol_records"], "first_symbol_ns": drv["symbols_first_ns"],
                         "warm_symbol_ns_per_address": drv["symbol_warm_ns_per_address"],
                         "symbols_all_ns": drv["symbols_all_ns"]},
        "format5": {"bytes": drv["format5_bytes"], "size_ratio_to_gsym": drv["format5_bytes"] / gsym_bytes,
                    "first_symbol_ns": drv["format5_symbols_first_ns"],
                    "warm_symbol_ns_per_address": drv["format5_symbol_warm_ns_per_address"],
                    "symbols_all_ns": drv["format5_symbols_all_ns"]},
        # Unwind rows (doc/bundles.md "Format 7"): the bundle's format against the same records rewritten
        # in format 6 by the driver (every row and every address's row checked equal there).
        "unwind_rows": {"rows": drv["unwind_rows"], "bytes": drv["rows_bytes"], "first_row_ns": drv["rows_first_ns"],
                        "warm_row_ns_per_address": drv["rows_warm_ns_per_address"]},
        "format6": {"bytes": drv["format6_bytes"], "size_ratio_to_gsym": drv["format6_bytes"] / gsym_bytes,
                    "rows_bytes": drv["format6_rows_bytes"], "first_row_ns": drv["format6_rows_first_ns"],
                    "warm_row_ns_per_address": drv["format6_rows_warm_ns_per_address"]},
        "llvm_symbolizer_dwarf": {"batch_s": t1, "batch_ns_per_address": t1 / n * 1e9,
                                  "marginal_ns_per_address": sym_marginal},
        "llvm_gsymutil_gsym": {"batch_s": g1, "batch_ns_per_address": g1 / n * 1e9,
                               "marginal_ns_per_address": gsym_marginal, "addresses_found": gsym_found},
        "speedup_vs_gsym_marginal": gsym_marginal / warm if warm else None,
        "speedup_vs_dwarf_marginal": sym_marginal / warm if warm else None,
        "agreement_vs_llvm_symbolizer": {"identical": identical, "of_which_symtab_only": symtab_only,
                                         "of_which_from_debug_file_symtab": debug_symtab, "different": 0},
        "targets": {"size_ratio_le_0.5": bundle_bytes / gsym_bytes <= 0.5,
                    "open_le_1ms": drv["open_ns_median"] <= 1e6,
                    "warm_lookup_le_1us": warm <= 1000,
                    "ge_5x_vs_gsym": bool(warm) and gsym_marginal / warm >= 5,
                    "ge_5x_vs_dwarf": bool(warm) and sym_marginal / warm >= 5},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--addresses", type=int, default=int(os.environ.get("BENCH_BUNDLE_ADDRESSES", "5000")))
    args = ap.parse_args()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        sys.exit("FAIL: missing tool(s): %s (make deps)" % ", ".join(missing))
    os.makedirs(args.work, exist_ok=True)
    res = {"benchmark": "bundle", "targets": {}}
    for name, path, pkg in TARGETS:
        r = bench_target(args, name, path, pkg)
        res["targets"][name] = r
        print("bench/bundle %-15s bundle %d B / GSYM %d B = %.2f (target <= 0.5: %s; strings+ranges %.2f); open %.0f ns; first lookup %.0f ns; warm %.0f "
              "ns/addr; GSYM %.0f ns/addr (x%.1f), DWARF %.0f ns/addr (x%.1f); build %.2f s/MB DWARF; "
              "%d/%d identical to llvm-symbolizer-14 (of them %d symtab-only, %d from the debug file's symtab)"
              % (name, r["bundle"]["bytes"], r["gsym"]["bytes"], r["size_ratio_bundle_to_gsym"],
                 "met" if r["targets"]["size_ratio_le_0.5"] else "NOT met", r["size_ratio_strings_and_ranges_to_gsym"],
                 r["bundle_open_ns_median"], r["bundle_first_lookup_ns"], r["bundle_warm_lookup_ns_per_address"],
                 r["llvm_gsymutil_gsym"]["marginal_ns_per_address"], r["speedup_vs_gsym_marginal"] or 0,
                 r["llvm_symbolizer_dwarf"]["marginal_ns_per_address"], r["speedup_vs_dwarf_marginal"] or 0,
                 r["bundle"]["build_s_per_dwarf_mb"], r["agreement_vs_llvm_symbolizer"]["identical"], r["addresses"],
                 r["agreement_vs_llvm_symbolizer"]["of_which_symtab_only"],
                 r["agreement_vs_llvm_symbolizer"]["of_which_from_debug_file_symtab"]))
        print("bench/bundle %-15s format %d: symbol names %d records, first symbol() %.2f ms, warm %.0f ns/addr, "
              "symbols() %.1f ms; format 5 of the same records %d B (%.3f of GSYM): first %.2f ms, warm %.0f ns/addr, "
              "symbols() %.1f ms"
              % (name, r["bundle_format"], r["symbol_names"]["records"], r["symbol_names"]["first_symbol_ns"] / 1e6,
                 r["symbol_names"]["warm_symbol_ns_per_address"], r["symbol_names"]["symbols_all_ns"] / 1e6,
                 r["format5"]["bytes"], r["format5"]["size_ratio_to_gsym"], r["format5"]["first_symbol_ns"] / 1e6,
                 r["format5"]["warm_symbol_ns_per_address"], r["format5"]["symbols_all_ns"] / 1e6))
        print("bench/bundle %-15s format %d: unwind rows %d (all equal to format 6's), %d B, first unwind_row() %.2f ms, "
              "warm %.0f ns/addr; format 6 of the same records %d B (%.3f of GSYM), rows %d B, first %.2f ms, warm %.0f ns/addr"
              % (name, r["bundle_format"], r["unwind_rows"]["rows"], r["unwind_rows"]["bytes"],
                 r["unwind_rows"]["first_row_ns"] / 1e6, r["unwind_rows"]["warm_row_ns_per_address"],
                 r["format6"]["bytes"], r["format6"]["size_ratio_to_gsym"], r["format6"]["rows_bytes"],
                 r["format6"]["first_row_ns"] / 1e6, r["format6"]["warm_row_ns_per_address"]))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    print("bench/bundle: wrote %s" % args.out)


if __name__ == "__main__":
    main()
