#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every benchmark of a build tree (after `cmake --build BUILD --target bench_all`); figures go to BUILD/bench/*.json.
#
# A benchmark folder bench/<name>/ either installs a runner, BUILD/bench/<name>/run.sh, which
# prepares its inputs and runs the driver (it gets BUILD/bench/<name>.json as its argument), or
# builds a binary BUILD/bin/bench_<name> that is run as `bench_<name> BUILD/bench/<name>.json`.
# A binary whose folder has a runner is run by that runner only. A benchmark fails when it exits
# non-zero (a wrong answer, a missing tool) or writes no JSON; run-bench fails when one fails.
set -uo pipefail
BUILD="${1:-build}"
if [ ! -d "$BUILD" ]; then
  echo "run-bench: no build tree at '$BUILD' (run: make bench)" >&2
  exit 1
fi
BUILD="$(cd "$BUILD" && pwd)"
mkdir -p "$BUILD/bench"

ran=0
failed=()
declare -A claimed=()

for runner in "$BUILD"/bench/*/run.sh; do
  [ -x "$runner" ] || continue
  name="$(basename "$(dirname "$runner")")"
  claimed["bench_$name"]=1
  echo "==== bench/$name ($runner)"
  start=$(date +%s)
  rm -f "$BUILD/bench/$name.json"
  if "$runner" "$BUILD/bench/$name.json" && [ -s "$BUILD/bench/$name.json" ]; then ran=$((ran + 1)); else failed+=("$name"); fi
  echo "==== bench/$name: $(( $(date +%s) - start )) s"
done

for bin in "$BUILD"/bin/bench_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  base="$(basename "$bin")"
  case "$base" in *_fixture_*) continue ;; esac
  [ -n "${claimed[$base]:-}" ] && continue
  name="${base#bench_}"
  # A binary of a folder that has a runner (bench_unwind_fixture_native, ...) is that runner's business.
  prefix_claimed=0
  for c in "${!claimed[@]}"; do case "$base" in "$c"_*) prefix_claimed=1 ;; esac; done
  [ "$prefix_claimed" = 1 ] && continue
  echo "==== bench/$name ($bin)"
  start=$(date +%s)
  rm -f "$BUILD/bench/$name.json"
  if "$bin" "$BUILD/bench/$name.json" && [ -s "$BUILD/bench/$name.json" ]; then ran=$((ran + 1)); else failed+=("$name"); fi
  echo "==== bench/$name: $(( $(date +%s) - start )) s"
done

echo
echo "run-bench: peer ratios (peer time / stackprov time; > 1: stackprov is faster)"
/usr/bin/python3 - "$BUILD/bench" <<'PY' || echo "run-bench: the summary could not be printed (see the output above)"
import json, os, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
s = load("stack")
for t, r in (s or {}).get("targets", {}).items():
    print("  stack      %-22s eu-stack -m x%.2f, eu-stack -m -i -s x%.2f (with lines), gdb x%.1f; outputs %s" % (
        t, r["ratio_eu_stack_over_stackprov"], r["ratio_eu_stack_lines_over_stackprov_lines"],
        r["ratio_gdb_over_stackprov"], "identical" if r["compared"]["identical"] else "DIFFER"))
p = load("perf_import")
for w in (p or {}).get("workloads", []):
    print("  perf       %-22s %d samples: perf script x%.2f (%.2f%% identical), perf report x%.2f (%.2f%% identical)" % (
        w["workload"], w["samples"], w["ratio_perf_script_over_stackprov"], w["per_sample"]["identical_pct"],
        w["ratio_perf_report_over_stackprov"], w["aggregated"]["identical_pct"]))
y = load("symbolize")
for m in (y or {}).get("modules", []):
    for r in m["sizes"]:
        peers = ", ".join("%s x%.2f" % (k, v["stackprov_speedup"]) for k, v in r["cli"].items() if "stackprov_speedup" in v)
        print("  symbolize  %-22s %6d addresses: %s; vs llvm-symbolizer-14 %.2f%% identical" % (
            m["module"].split(" ")[0], r["addresses"], peers, r["vs_llvm_symbolizer"].get("identical_pct", 0)))
u = load("unwind")
if u:
    cpu = u["stackprov_warm_cpu_ns_per_frame"]
    print("  unwind     warm %.1f ns/frame: libunwind x%.2f, libdwfl x%.2f; warm CPU time %.1f ns/frame: libunwind x%.2f, "
          "libdwfl x%.2f; cold: libunwind x%.2f, libdwfl x%.2f; identical %.2f%% (libunwind %.2f%%, libdwfl %.2f%%)" % (
              u["stackprov_warm_ns_per_frame"], u["libunwind_over_stackprov_warm"], u["libdwfl_over_stackprov_warm"],
              cpu, u["libunwind_warm_cpu_ns_per_frame"] / cpu, u["libdwfl_warm_cpu_ns_per_frame"] / cpu,
              u["libunwind_over_stackprov_cold"], u["libdwfl_over_stackprov_cold"], u["identical_frames_pct"],
              u["stackprov_libunwind_identical_pct"], u["stackprov_libdwfl_identical_pct"]))
c = load("cross")
for a, r in (c or {}).get("arches", {}).items():
    print("  cross      %-10s warm %.1f ns/frame (x%.2f of x86_64), cold %.1f ns/frame" % (
        a, r["warm_ns_per_frame"], r["warm_over_x86_64"], r["cold_ns_per_frame"]))
v = load("provenance")
if v:
    print("  provenance Rekor v1 verify: stackprov / bare mbedTLS floor = %.2f" % v["ratio_stackprov_over_peer_rekor_v1"])

# Issue 37's table, each figure beside its goal (from the benchmarks' own JSON; a benchmark that did
# not run prints nothing here).
rows = []
def row(what, measured, goal, met):
    rows.append("  %-62s %-10s %-20s %s" % (what, measured, goal, "met" if met else "NOT met"))
if u:
    inc = u.get("stackprov_incache_ns_per_frame", 0.0)
    row("unwind in-cache, ns/frame (bench/unwind)", "%.1f" % inc, "<= 10", 0 < inc <= 10)
    lu = u.get("libunwind_over_stackprov_incache", 0.0)
    row("unwind in-cache vs libunwind", "x%.1f" % lu, ">= 50x", lu >= 50)
    sw = u.get("stackprov_warm_cpu_ns_per_frame", 0.0)
    row("unwind sweep, CPU ns/frame", "%.1f" % sw, "<= 35", 0 < sw <= 35)
    miss = u.get("stackprov_miss_ns", 0.0)
    row("rule-cache miss in a loaded module, ns", "%.1f" % miss, "<= 60", 0 < miss <= 60)
for g in (p or {}).get("goals", []):
    row("perf-import %s %s" % (g["workload"], g["what"]), "x%.2f" % g["measured"], g["want"], g["met"])
for n, r in ((load("bundle") or {}).get("targets") or {}).items():
    row("bundle bytes / GSYM, %s" % n, "%.3f" % r["size_ratio_bundle_to_gsym"], "<= 0.5",
        r["targets"]["size_ratio_le_0.5"])
for n, g in (s or {}).get("goal", {}).items():
    a, b = g["no_lines_vs_eu_stack"], g["lines_vs_eu_stack_i_s"]
    row("stack --pid --no-lines vs eu-stack -m, %s" % n, "x%.2f" % a["measured"], a["want"], a["met"])
    row("stack --pid vs eu-stack -m -i -s, %s" % n, "x%.2f" % b["measured"], b["want"], b["met"])
for g in (y or {}).get("goals", []):
    row("symbolize CLI vs llvm-symbolizer-14 (CPU), %s %d" % (g["module"], g["addresses"]),
        "x%.2f" % g["speedup_vs_llvm_symbolizer"], ">= 5x", g["speedup_vs_llvm_symbolizer"] >= 5)
    row("symbolize extra heap / raw DWARF, %s %d" % (g["module"], g["addresses"]),
        "%.2f" % g["extra_heap_ratio"], "<= 1", g["heap_met"])
for r in (y or {}).get("real_binaries", []):
    row("symbolize 5,000 random addresses (wall), %s" % r["binary"], "x%.2f" % r["wall_speedup"], ">= 3x", r["met"])
if rows:
    print()
    print("run-bench: issue 37's goals (figure, goal, met or not)")
    print("\n".join(rows))
PY
echo "run-bench: $ran benchmark(s) passed, ${#failed[@]} failed${failed:+: ${failed[*]}} (load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
for j in "$BUILD"/bench/*.json; do [ -e "$j" ] && echo "  $j"; done
[ ${#failed[@]} -eq 0 ] && [ "$ran" -gt 0 ]
