#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The "input type x malformation -> what the user sees" table of doc/hardening.md, regenerated:
# each row damages a real file (the seeds of scripts/fuzz.sh) one way and runs the CLI command
# that reads that input, printing the exit status and the last stderr line as a Markdown row.
#
# usage: scripts/hardening-table.sh BUILD_DIR     (a g++ build with stackprov and fuzz_targets built)
# Every row expects exit 1 with one line saying why, except: symbolize answers "??" and exits 0
# with the reason on stderr (llvm-symbolizer's convention, its --help), and a bundle whose bytes
# still parse is accepted (the format has no checksum: its identity is the sha256 digest, which
# signatures and the store check), and a perf.data or capture file cut after its header, read up to
# its last complete record (exit 0, the line saying what is lost; issue 36). Paths in messages are
# shortened to the file's base name.
# Exit status: 0 the table was printed and every row exited as expected; 1 a row exited otherwise
# (marked in the table); 2 usage.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/hardening-table.sh BUILD_DIR" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
sp=$build/bin/stackprov
seeds=$build/fuzz/seeds
fx=$build/fuzz/fixtures
[ -d "$seeds" ] || "$src/scripts/fuzz.sh" "$build" 0 >/dev/null || exit 1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
bad=0

# row EXPECTED INPUT MALFORMATION command...: the command's exit status and last stderr line;
# a status other than EXPECTED marks the row (and the script's status).
row() {
  local expect=$1 input=$2 what=$3
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  local last
  last=$(printf '%s\n' "$err" | grep -v '^stackprov: warning: ' | tail -n1 | sed "s|$t/||g; s|$build/||g; s|$src/||g; s/|/\\\\|/g" | cut -c1-170)
  local mark=""
  if [ "$rc" -ne "$expect" ]; then
    bad=1
    mark=" **(expected $expect)**"
  fi
  printf '| %s | %s | %s%s | %s |\n' "$input" "$what" "$rc" "$mark" "$last"
}
cut_at() { head -c "$2" "$1" > "$3"; }
flip() {  # flip(file, offset, out): one byte inverted
  cp "$1" "$3"
  printf "$(printf '\\x%02x' $(( 0xff ^ $(od -An -tu1 -j "$2" -N1 "$1") )))" |
    dd of="$3" bs=1 seek="$2" conv=notrunc status=none
}
put_u64() {  # put_u64(file, offset, value) little-endian
  python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); f.write(struct.pack('<Q', int(sys.argv[3])))" "$@"
}

elf=$fx/c-dw5-O2
core=$seeds/core/spin.core
perf=$seeds/perf_data/spin.perf.data
cap=$seeds/perf_data/spin.sprovcap
bundle=$seeds/bundle_file/c-dw5.bundle
sig=$src/tests/data/sigstore/01-valid-dsse-rekorv1.sigstore.json
root=$src/tests/data/sigstore/trusted_root.public-good.json
proof=$seeds/evidence_note/proof-257
: > "$t/empty"
echo "hello, not a binary" > "$t/text"

echo "| input | malformation | exit | last line on stderr |"
echo "|---|---|---|---|"
sym() { "$sp" symbolize --obj "$1" 0x1139; }
# symbolize prints an unresolved address as ?? and exits 0; its error for a bad file is on stderr.
row 0 "ELF (symbolize --obj)" "empty file" sym "$t/empty"
row 0 "ELF" "text file" sym "$t/text"
cut_at "$elf" 64 "$t/elf-hdr"; row 0 "ELF" "ELF header only (64 bytes)" sym "$t/elf-hdr"
cut_at "$elf" 9000 "$t/elf-half"; row 0 "ELF" "truncated in the middle" sym "$t/elf-half"
cp "$elf" "$t/elf-shoff"; put_u64 "$t/elf-shoff" 40 $((1 << 40)); row 0 "ELF" "e_shoff past the end" sym "$t/elf-shoff"

stk() { "$sp" stack --core "$1"; }
row 1 "core (stack --core)" "empty file" stk "$t/empty"
row 1 "core" "text file" stk "$t/text"
row 1 "core" "an executable, not a core" stk "$elf"
cut_at "$core" 64 "$t/core-hdr"; row 1 "core" "ELF header only" stk "$t/core-hdr"
cut_at "$core" 4096 "$t/core-4k"; row 1 "core" "truncated after the notes' start" stk "$t/core-4k"
cut_at "$core" 60000 "$t/core-half"; row 1 "core" "truncated in the memory segments" stk "$t/core-half"

imp() { "$sp" perf-import "$1" --format folded; }
impq() { "$sp" perf-import "$1" --format folded --quiet; }  # a file cut short: the loss line stays
row 1 "perf.data (perf-import)" "empty file" imp "$t/empty"
row 1 "perf.data" "text file" imp "$t/text"
cut_at "$perf" 100 "$t/perf-hdr"; row 1 "perf.data" "truncated header" imp "$t/perf-hdr"
cut_at "$perf" 7404 "$t/perf-half"; row 0 "perf.data" "cut in the data section (read up to the cut)" impq "$t/perf-half"
cp "$perf" "$t/perf-size"; put_u64 "$t/perf-size" 40 $((1 << 50)); row 1 "perf.data" "data size past the end" imp "$t/perf-size"
cut_at "$cap" 20 "$t/cap-hdr"; row 1 "capture file (SPROVCAP)" "truncated header" imp "$t/cap-hdr"
cut_at "$cap" $(( $(stat -c %s "$cap") / 2 )) "$t/cap-half"; row 0 "capture file" "cut in a record (no END; read up to the cut)" impq "$t/cap-half"

ins() { "$sp" bundle inspect "$1"; }
row 1 "symbol bundle (bundle inspect)" "empty file" ins "$t/empty"
row 1 "symbol bundle" "text file" ins "$t/text"
cut_at "$bundle" 200 "$t/b-cut"; row 1 "symbol bundle" "truncated" ins "$t/b-cut"
flip "$bundle" 700 "$t/b-flip"; row 0 "symbol bundle" "one byte flipped in a name (still parses)" ins "$t/b-flip"

vs() { "$sp" verify-sigstore "$1" --trusted-root "$root"; }
row 1 "Sigstore bundle (verify-sigstore)" "empty file" vs "$t/empty"
echo '{}' > "$t/s-empty"; row 1 "Sigstore bundle" "{} (no fields)" vs "$t/s-empty"
cut_at "$sig" 3000 "$t/s-cut"; row 1 "Sigstore bundle" "JSON cut in the middle" vs "$t/s-cut"
row 1 "Sigstore bundle" "payload hash mismatch (test vector 03)" vs "$src/tests/data/sigstore/03-invalid-dsse-payloadhash-mismatch.sigstore.json"
row 1 "Sigstore bundle" "checkpoint signature (test vector 04)" vs "$src/tests/data/sigstore/04-invalid-checkpoint-signature.sigstore.json"
row 1 "Sigstore bundle" "inclusion proof hash (test vector 05)" vs "$src/tests/data/sigstore/05-invalid-inclusion-proof-hash.sigstore.json"
row 1 "trusted root" "text file" "$sp" verify-sigstore "$sig" --trusted-root "$t/text"

vp() { "$sp" log verify-proof --proof "$1" --entry "$fx/e258" --log-key "$fx/log/log.pub" --origin stackprov.local/log; }
row 1 "tlog-proof@v1 (log verify-proof)" "empty file" vp "$t/empty"
cut_at "$proof" 40 "$t/p-cut"; row 1 "tlog-proof@v1" "cut after the index line" vp "$t/p-cut"
sed 's/^index 257$/index 258/' "$proof" > "$t/p-index"; row 1 "tlog-proof@v1" "another index" vp "$t/p-index"
sed '3s/^./A/' "$proof" > "$t/p-hash"; row 1 "tlog-proof@v1" "a proof hash changed" vp "$t/p-hash"
sed '3s/=$/!/' "$proof" > "$t/p-b64"; row 1 "tlog-proof@v1" "bad base64 in a hash" vp "$t/p-b64"
sed 's/^300$/301/' "$proof" > "$t/p-size"; row 1 "checkpoint (in the proof)" "tree size changed (signature)" vp "$t/p-size"
exit $bad
