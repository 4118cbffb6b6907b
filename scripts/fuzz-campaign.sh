#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fuzzing campaign of issue 18: runs scripts/fuzz.sh in rounds until every target has used
# GOAL seconds of CPU, adding up each round's CPU time in a ledger. Interrupt it at any point and
# run it again: the ledger and the corpora (BUILD_DIR/fuzz/corpus, kept by fuzz.sh) carry over, so
# the campaign resumes where it stopped (a round cut short counts nothing for its targets).
#
# usage: scripts/fuzz-campaign.sh BUILD_DIR [GOAL_SECONDS [ROUND_SECONDS]]
#   BUILD_DIR      a STACKPROV_FUZZ build (make fuzz-campaign makes it)
#   GOAL_SECONDS   CPU seconds per target (default 3600: one CPU-hour)
#   ROUND_SECONDS  libFuzzer -max_total_time per target and round (default 1200)
# Environment: as fuzz.sh (FUZZ_JOBS targets at a time, FUZZ_CLI, FUZZ_RSS_MB); FUZZ_CARRIED;
# FUZZ_TARGETS (a subset, below).
# Do not pause it (SIGSTOP, a cgroup freeze): libFuzzer's per-input -timeout is wall time, and a
# pause longer than 25 s ends the target with a timeout- reproducer that is no finding (run the
# reproducer alone to tell). Stop it (Ctrl-C, kill) and run it again instead.
# Ledger: BUILD_DIR/fuzz/campaign.tsv (fuzz.sh's FUZZ_LEDGER lines; a new one starts from
# doc/fuzz-campaign.tsv, see FUZZ_CARRIED below). The table of figures
# (doc/hardening.md "Campaign figures") is printed at the end and written to
# BUILD_DIR/fuzz/campaign.md.
#
# Exit status: 0 every target reached GOAL without a crash; 1 a target crashed (its reproducer in
# BUILD_DIR/fuzz/artifacts/<target>/; the other targets go on, that one waits until the directory
# is emptied); 2 usage.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ] || ! [[ "${2:-3600}" =~ ^[0-9]+$ ]] || ! [[ "${3:-1200}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz-campaign.sh BUILD_DIR [GOAL_SECONDS [ROUND_SECONDS]]" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
goal=${2:-3600}
round=${3:-1200}
ledger=$build/fuzz/campaign.tsv
mkdir -p "$build/fuzz"
# A new ledger starts from the one committed (doc/fuzz-campaign.tsv: the rounds run so far, on
# machines since gone), so a clean clone goes on with the campaign rather than starting again;
# FUZZ_CARRIED=FILE starts from another, FUZZ_CARRIED= from nothing. Its lines are ledger lines
# (a session's rounds, or one line per target whose time column reads "carried:rounds=N:...").
# The corpora are not carried: a new machine's rounds start from the seeds.
carried=${FUZZ_CARRIED-$src/doc/fuzz-campaign.tsv}
if [ ! -s "$ledger" ] && [ -n "$carried" ]; then
  [ -f "$carried" ] || { echo "fuzz-campaign.sh: FUZZ_CARRIED '$carried' does not exist" >&2; exit 2; }
  cp "$carried" "$ledger"
fi
touch "$ledger"
# Run niced in a session of its own (setsid), it also nices the session's scheduling group: with
# autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled) a task's nice weighs only against
# its own session, and a niced campaign would still take half the CPU from builds in another one.
if [ "$(nice)" -gt 0 ] && [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo "$(nice)" > /proc/self/autogroup 2>/dev/null || true
fi

all=()
for f in "$build"/bin/fuzz_*; do
  n=${f##*/fuzz_}
  [ "$n" = make_seeds ] || all+=("$n")
done
[ ${#all[@]} -gt 0 ] || { echo "fuzz-campaign.sh: no fuzz_* targets in $build/bin" >&2; exit 2; }
# FUZZ_TARGETS="a b": the campaign for these targets only (e.g. one issue's new parsers), each named
# as fuzz.sh names it (without fuzz_); an unknown name stops it, naming the name.
if [ -n "${FUZZ_TARGETS:-}" ]; then
  only=()
  for t in $FUZZ_TARGETS; do
    [ -x "$build/bin/fuzz_$t" ] && [ "$t" != make_seeds ] ||
      { echo "fuzz-campaign.sh: FUZZ_TARGETS names '$t', which is no fuzz target in $build/bin" >&2; exit 2; }
    only+=("$t")
  done
  all=("${only[@]}")
fi

# CPU seconds so far of target $1 (the ledger's second column, summed).
cpu_of() { awk -F'\t' -v t="$1" '$1 == t { s += $2 } END { printf "%d", s }' "$ledger"; }
# A target with a reproducer in its artifacts directory is left out until the crash is fixed and
# the reproducer moved to tests/fuzz/regress/<target>/.
crashed_of() { ls "$build/fuzz/artifacts/$1" 2>/dev/null | grep -vc '^slow-unit-' || true; }

status=0
while :; do
  # the targets short of the goal, least CPU first: a campaign stopped and started again reaches
  # every target, not the first ones of the list again and again
  todo=()
  while read -r cpu t; do
    if [ "$(crashed_of "$t")" -ne 0 ]; then status=1; continue; fi
    [ "$cpu" -lt "$goal" ] && todo+=("$t")
  done < <(for t in "${all[@]}"; do echo "$(cpu_of "$t") $t"; done | sort -n -k1,1 -s)
  [ ${#todo[@]} -eq 0 ] && break
  echo "fuzz-campaign: round of ${round}s for ${#todo[@]} target(s) short of ${goal} CPU-s: ${todo[*]}" >&2
  FUZZ_LEDGER=$ledger "$src/scripts/fuzz.sh" "$build" "$round" "${todo[@]}" >&2 || status=1
done

# The figures: per target, CPU time and executions summed over the rounds, the last round's cov, ft
# and corpus, crashes found.
{
  echo "| target | CPU time | executions | exec/s | cov | ft | corpus | crashes | rounds |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '{ cpu[$1] += $2; ex[$1] += $3; cov[$1] = $4; ft[$1] = $5; cor[$1] = $6; cr[$1] += $7
         r = 1; if (match($8, /^carried:rounds=[0-9]+/)) r = substr($8, 16, RLENGTH - 15) + 0; n[$1] += r }
    END { for (t in cpu) printf "| `%s` | %.2f h | %d | %d | %d | %d | %d | %d | %d |\n",
            t, cpu[t] / 3600, ex[t], (cpu[t] > 0 ? ex[t] / cpu[t] : 0), cov[t], ft[t], cor[t], cr[t], n[t] }' \
    "$ledger" | sort
} | tee "$build/fuzz/campaign.md"
exit $status
