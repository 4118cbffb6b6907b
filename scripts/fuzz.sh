#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target of a STACKPROV_FUZZ build (make fuzz) for SECONDS each on seed corpora
# cut from real files, and prints one line of figures per target.
#
# usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
#   BUILD_DIR  a build configured with -DSTACKPROV_FUZZ=ON (clang-14), fuzz_targets and stackprov_cli built
#   SECONDS    fuzzing time per target (libFuzzer -max_total_time); 0: run every seed once, no fuzzing
#              (works with the g++ build's file-driven targets too)
#   TARGET     names without the fuzz_ prefix (default: every bin/fuzz_* but fuzz_make_seeds)
# Environment: FUZZ_JOBS (default 1) targets at a time; FUZZ_RSS_MB (default 2048) per-process limit;
# FUZZ_LEDGER a file to which each target's run appends one tab-separated line (target, CPU seconds
# used, executions, cov, ft, corpus size, crashes, UTC time): scripts/fuzz-campaign.sh adds them up;
# FUZZ_CLI the stackprov CLI that makes seeds (default BUILD_DIR/bin/stackprov; make fuzz passes the
# g++ build's).
#
# Seeds (BUILD_DIR/fuzz/seeds/<target>): programs compiled here with gcc (DWARF 4 and 5, -O0/-O2,
# C and C++, split DWARF with a .dwp, a dwz pair, .debug_frame), /usr/bin/true and libz.so.1, a
# perf.data and a stackprov capture file of a sampled program, a gcore core file, a snapshot of a
# live process, a symbol bundle, a signed log's checkpoint, proof and tiles, the Sigstore test
# vectors, a Go program's pclntab (built offline with go), node's JIT perf map, libstdc++'s mangled
# names, plus tests/fuzz/corpus/<target> and every crash input of tests/fuzz/regress/<target>.
# Corpora grow in BUILD_DIR/fuzz/corpus/<target> (kept between runs); crashes go to
# BUILD_DIR/fuzz/artifacts/<target>/ and make the script exit 1. Figures: BUILD_DIR/fuzz/report.txt.
#
# Exit status: 0 no target crashed, 1 a target crashed or a seed could not be made, 2 usage.
set -euo pipefail
if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
seconds=$2
shift 2
bin=$build/bin
cli=${FUZZ_CLI:-$bin/stackprov}
work=$build/fuzz
jobs=${FUZZ_JOBS:-1}
rss=${FUZZ_RSS_MB:-2048}
[ -x "$bin/fuzz_make_seeds" ] || { echo "fuzz.sh: $bin/fuzz_make_seeds missing: build fuzz_targets first" >&2; exit 2; }
[ -x "$cli" ] || { echo "fuzz.sh: $cli missing: build stackprov_cli (or set FUZZ_CLI)" >&2; exit 2; }
for tool in gcc g++ dwz dwp llvm-dwp-14 gcore perf python3; do
  command -v $tool >/dev/null || { echo "fuzz.sh: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$bin"/fuzz_*; do
    n=${f##*/fuzz_}
    [ "$n" = make_seeds ] || targets+=("$n")
  done
fi

# ---- seeds (remade on every run: they follow the compiler and the library's writers)
seeds=$work/seeds
fx=$work/fixtures
rm -rf "$seeds" "$fx"
mkdir -p "$seeds" "$fx"
export ASAN_OPTIONS=detect_leaks=0  # the instrumented CLI and seed maker
c=$src/tests/integration/symbolize/fixture_c.c
cxx=$src/tests/integration/symbolize/fixture_inline.cpp
spin=$src/tests/integration/perf/fixture_spin.c
gcc -g -gdwarf-4 -O0 -o "$fx/c-dw4-O0" "$c"
gcc -g -gdwarf-5 -O2 -o "$fx/c-dw5-O2" "$c"
g++ -g -gdwarf-5 -O2 -o "$fx/cxx-dw5-O2" "$cxx"
gcc -g -gdwarf-4 -O1 -fno-asynchronous-unwind-tables -o "$fx/c-debug-frame" "$c"
# Packages: llvm-dwp-14 for DWARF 5 (binutils' dwp writes an empty index for it), dwp for DWARF 4.
(cd "$fx" && gcc -g -gdwarf-5 -gsplit-dwarf -O1 -o c-split "$c" && llvm-dwp-14 -o c-split.dwp ./*.dwo)
(cd "$fx" && g++ -g -gdwarf-4 -gsplit-dwarf -O1 -c -o cxx-split4.o "$cxx" && g++ -o cxx-split4 cxx-split4.o &&
  dwp -o cxx-split4.dwp cxx-split4.dwo)
gcc -g -O1 -pthread -o "$fx/spin" "$spin"
cp "$fx/c-dw4-O0" "$fx/dwz-a"
cp "$fx/c-dw5-O2" "$fx/dwz-b"
dwz -m "$fx/dwz-common" "$fx/dwz-a" "$fx/dwz-b"
dwo_c=$(ls "$fx"/*fixture_c.dwo 2>/dev/null | head -1 || true)
[ -n "$dwo_c" ] || dwo_c=$(ls "$fx"/c-split*.dwo | head -1)
# A Go program (the golang fixture, offline, std lib only): plain and PIE (the table renamed).
gosrc=$fx/gosrc
mkdir -p "$gosrc"
cp "$src/tests/integration/golang/fixture_go.go" "$gosrc/"
printf 'module stackprovfixture\n\ngo 1.18\n' > "$gosrc/go.mod"
for v in go-exe go-pie; do
  mode=exe
  [ "$v" = go-pie ] && mode=pie
  (cd "$gosrc" && env GOCACHE="$work/gocache" GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on CGO_ENABLED=0 \
    GOTOOLCHAIN=local HOME="$fx" go build -buildmode="$mode" -o "$fx/$v" .) ||
    { echo "fuzz.sh: go build of the Go fixture failed" >&2; exit 1; }
done
"$bin/fuzz_make_seeds" "$seeds" --self --go "$fx/go-exe" --go "$fx/go-pie" \
  "$fx/c-dw4-O0" "$fx/c-dw5-O2" "$fx/cxx-dw5-O2" "$fx/c-debug-frame" "$fx/spin" \
  --dwo "$dwo_c" "$fx/c-split" --dwo "$fx/cxx-split4.dwo" "$fx/cxx-split4" \
  --alt "$fx/dwz-common" "$fx/dwz-a" --alt "$fx/dwz-common" "$fx/dwz-b" \
  --dwp "$fx/c-split.dwp" --dwp "$fx/cxx-split4.dwp" /usr/bin/true /usr/lib/x86_64-linux-gnu/libz.so.1

# perf.data (perf record, DWARF stacks) and a capture file (stackprov record) of the spinning fixture.
mkdir -p "$seeds/perf_data" "$seeds/core"
perf record -q -e cpu-clock -F 200 --call-graph dwarf,1024 -o "$seeds/perf_data/spin.perf.data" -- "$fx/spin" 0.1 \
  >/dev/null 2>&1 || { echo "fuzz.sh: perf record failed (perf_event_paranoid?)" >&2; exit 1; }
"$cli" record -F 200 -o "$seeds/perf_data/spin.sprovcap" -- "$fx/spin" 0.1 >/dev/null 2>&1 ||
  { echo "fuzz.sh: stackprov record failed" >&2; exit 1; }
# A core of the spinning fixture: private anonymous and ELF header pages only (coredump_filter 0x11).
"$fx/spin" 10 >/dev/null & spid=$!
sleep 0.2
echo 0x11 > /proc/$spid/coredump_filter
gcore -o "$fx/spin.core" $spid >/dev/null 2>&1 || true
kill $spid; wait $spid 2>/dev/null || true
[ -s "$fx/spin.core.$spid" ] || { echo "fuzz.sh: gcore made no core" >&2; exit 1; }
# Each PT_LOAD keeps its last 8 KiB (where a stack's live frames are): a 9 MB core becomes a seed of
# tens of KiB with the same notes (threads, NT_FILE, auxv) and the same segment table.
python3 - "$fx/spin.core.$spid" "$seeds/core/spin.core" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
phoff, = struct.unpack_from("<Q", b, 0x20)
phentsize, phnum = struct.unpack_from("<HH", b, 0x36)
head = phoff + phentsize * phnum
out = bytearray(b[:head])
for i in range(phnum):
    o = phoff + i * phentsize
    typ, flags, off, vaddr, paddr, filesz, memsz, align = struct.unpack_from("<IIQQQQQQ", b, o)
    data = b[off:off + filesz]
    if typ == 1 and filesz > 8192:  # PT_LOAD
        cut = filesz - 8192
        vaddr, paddr, memsz, data = vaddr + cut, paddr + cut, memsz - cut, data[cut:]
    struct.pack_into("<IIQQQQQQ", out, o, typ, flags, len(out), vaddr, paddr, len(data), memsz, align)
    out += data
open(sys.argv[2], "wb").write(out)
EOF

# Symbol bundles, and the provenance formats: a key, a log with 300 entries, its checkpoint,
# an inclusion proof, a consistency proof, a tile fragment, a DSSE envelope.
mkdir -p "$seeds/bundle_file" "$seeds/evidence_note" "$seeds/evidence_envelope" "$seeds/evidence_sigstore" "$seeds/tlog_tiles"
"$cli" bundle build -o "$seeds/bundle_file/c-dw5.bundle" "$fx/c-dw5-O2" >/dev/null
"$cli" bundle build -o "$seeds/bundle_file/spin.bundle" "$fx/spin" >/dev/null
"$cli" keygen -o "$fx/key" --pub "$fx/key.pub" >/dev/null
"$cli" sign --key "$fx/key" -o "$seeds/evidence_envelope/spin.dsse.json" "$fx/spin" >/dev/null
"$cli" log init "$fx/log" --key "$fx/key" >/dev/null
for i in $(seq 1 300); do echo "entry $i" > "$fx/e$i"; done
"$cli" log append "$fx/log" --key "$fx/key" $(for i in $(seq 1 300); do echo "$fx/e$i"; done) >/dev/null
"$cli" log prove "$fx/log" --index 257 -o "$seeds/evidence_note/proof-257" >/dev/null
"$cli" log consistency "$fx/log" --old 7 -o "$seeds/evidence_note/consistency-7" >/dev/null
cp "$fx/log/checkpoint" "$seeds/evidence_note/checkpoint"
"$cli" log fragment "$fx/log" --index 257 -o "$fx/frag" >/dev/null
python3 - "$fx/frag" "$seeds/tlog_tiles/frag-257" <<'EOF'
import struct, sys
frag, out = sys.argv[1], sys.argv[2]
def sec(b): return struct.pack("<I", len(b)) + b
def rd(p):
    try: return open(frag + "/" + p, "rb").read()
    except FileNotFoundError: return b""
# tests/fuzz/tlog_tiles_fuzz.cpp: meta, level-0 tile of the index, level-0 partial, level-1 full, level-1 partial.
blob = sec(struct.pack("<QQ", 257, 300)) + sec(rd("tile/0/001")) + sec(rd("tile/0/001.p/44")) + sec(b"") + sec(rd("tile/1/000.p/1"))
open(out, "wb").write(blob)
EOF
cp "$src"/tests/data/sigstore/*.sigstore.json "$src"/tests/data/sigstore/trusted_root.*.json "$seeds/evidence_sigstore/"
cp "$src"/tests/data/sigstore/*.sigstore.json "$seeds/evidence_envelope/"
cp "$src"/tests/data/bundle/*.bundle "$seeds/bundle_file/"
# A JIT perf map as node writes it (its first and last 300 lines), and mangled names of libstdc++.
mkdir -p "$seeds/perf_map" "$seeds/demangle"
# node writes /tmp/perf-PID.map: 300 generated functions called until optimized give ~3,000 lines.
# node 20's --perf-basic-prof also writes an isolate-*-v8.log into its working directory: it runs in $work.
(cd "$work" && exec node --perf-basic-prof -e 'const fs = []; for (let k = 0; k < 300; k++) fs.push(new Function("x", "return x*" + k + "+1"));
  let s = 0; for (let i = 0; i < 2e5; i++) s += fs[i % 300](i); console.log(s)') >/dev/null & npid=$!
wait $npid || true
rm -f "$work"/isolate-*-v8.log
[ -s "/tmp/perf-$npid.map" ] || { echo "fuzz.sh: node --perf-basic-prof wrote no /tmp/perf-$npid.map" >&2; exit 1; }
{ head -300 "/tmp/perf-$npid.map"; tail -300 "/tmp/perf-$npid.map"; } > "$seeds/perf_map/node.map"
rm -f "/tmp/perf-$npid.map"
i=0
while read -r name; do
  printf '%s' "$name" > "$seeds/demangle/libstdcxx-$i"
  i=$((i + 1))
done < <(nm -D --with-symbol-versions /usr/lib/x86_64-linux-gnu/libstdc++.so.6 | awk '$NF ~ /^_Z/ {print $NF}' | awk 'NR % 25 == 1')

# ---- fuzzing
mkdir -p "$work/corpus" "$work/artifacts"
report=$work/report.txt
: > "$report"
run_one() {
  local t=$1 corpus=$work/corpus/$1 art=$work/artifacts/$1 log=$work/$1.log
  mkdir -p "$corpus" "$art"
  local dirs=()
  for d in "$seeds/$t" "$src/tests/fuzz/corpus/$t" "$src/tests/fuzz/regress/$t"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  local dict=()
  [ -f "$src/tests/fuzz/dict/$t.dict" ] && dict=(-dict="$src/tests/fuzz/dict/$t.dict")
  local rc=0
  if [ "$seconds" -eq 0 ]; then  # SECONDS 0: each seed and crash input once (also a g++ driver build)
    local files=()
    mapfile -t files < <(find "${dirs[@]}" -type f | sort)
    "$bin/fuzz_$t" "${files[@]}" >"$log" 2>&1 || rc=$?
    printf '%-20s ran %s input(s)%s\n' "$t" "${#files[@]}" "$([ $rc -ne 0 ] && echo "  FAILED (exit $rc, $log)")" >> "$report"
    return $rc
  fi
  : > "$work/$t.started"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb="$rss" -timeout=25 -max_len=1048576 \
    -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$corpus" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  local runs cov ft corp
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  corp=$(ls "$corpus" | wc -l)
  # libFuzzer's crash-, leak-, timeout- and oom- reproducers (slow-unit- is only a report): `crashes`
  # those this run wrote (the ledger's column), `open` all in the directory (the exit status: an
  # earlier run's reproducer not yet moved to tests/fuzz/regress/ still fails the run)
  local crashes open
  crashes=$(find "$art" -type f -newer "$work/$t.started" ! -name 'slow-unit-*' | wc -l)
  open=$(ls "$art" | grep -vc '^slow-unit-' || true)
  # CPU time of the fuzzer (user + system of this job's children: `times`, second line, run in
  # this shell, not in a pipe's subshell), which is what a campaign counts: -max_total_time is
  # wall time, and a niced run gets less.
  local cpu
  times > "$work/$t.times"
  cpu=$(tail -1 "$work/$t.times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
  if [ -n "${FUZZ_LEDGER:-}" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$cpu" "${runs:-0}" "${cov:-0}" "${ft:-0}" "$corp" "$crashes" \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$FUZZ_LEDGER"
  fi
  printf '%-20s %4ss  cpu %7ss  execs %10s  cov %6s  ft %7s  corpus %6s  crashes %s%s\n' "$t" "$seconds" "$cpu" "${runs:-0}" \
    "${cov:-0}" "${ft:-0}" "$corp" "$crashes" "$([ $rc -ne 0 ] && echo "  (exit $rc, $log)")$([ "$open" -gt "$crashes" ] && echo "  ($((open - crashes)) earlier reproducer(s) still in $art)")" >> "$report"
  [ $rc -eq 0 ] && [ "$open" -eq 0 ]
}
fail=0
running=0
for t in "${targets[@]}"; do
  [ -x "$bin/fuzz_$t" ] || { echo "fuzz.sh: no target $bin/fuzz_$t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait -n || fail=1
    running=$((running - 1))
  fi
done
while [ $running -gt 0 ]; do
  wait -n || fail=1
  running=$((running - 1))
done
sort "$report"
if [ $fail -ne 0 ]; then
  echo "fuzz.sh: a target crashed: reproducers in $work/artifacts/<target>/ (copy them to tests/fuzz/regress/<target>/)" >&2
  exit 1
fi
