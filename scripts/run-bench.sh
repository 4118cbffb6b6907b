#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every benchmark of a build tree (after `cmake --build BUILD --target bench_all`); figures go to BUILD/bench/*.json.
#
# A benchmark folder bench/<name>/ either installs a runner, BUILD/bench/<name>/run.sh, which
# prepares its inputs and runs the driver (it gets BUILD/bench/<name>.json as its argument), or
# builds a binary BUILD/bin/bench_<name> that is run as `bench_<name> BUILD/bench/<name>.json`.
# A binary whose folder has a runner is run by that runner only.
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
  if "$runner" "$BUILD/bench/$name.json"; then ran=$((ran + 1)); else failed+=("$name"); fi
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
  if "$bin" "$BUILD/bench/$name.json"; then ran=$((ran + 1)); else failed+=("$name"); fi
  echo "==== bench/$name: $(( $(date +%s) - start )) s"
done

echo
echo "run-bench: $ran benchmark(s) ran, ${#failed[@]} failed${failed:+: ${failed[*]}}"
ls -1 "$BUILD"/bench/*.json 2>/dev/null | sed 's/^/  /'
[ ${#failed[@]} -eq 0 ] && [ "$ran" -gt 0 ]
