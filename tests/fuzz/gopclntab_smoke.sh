#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ctest fuzz_gopclntab_smoke: builds the golang fixture offline (plain and PIE), cuts gopclntab seeds
# from both with fuzz_make_seeds --go, and runs fuzz_gopclntab over them and over each binary whole
# (flag 8: the input is an ELF file). A missing go fails with its name.
# usage: gopclntab_smoke.sh BIN_DIR SOURCE_DIR WORK_DIR
# STACKPROV_GOCACHE (set by ctest): the build cache shared with integration_go_symbolize, which builds
# the same fixture -buildmode=pie (go 1.19 compiles its -shared std library for the first PIE: ~20 CPU-s).
set -eu
bin=$1 src=$2 work=$3
gocache=${STACKPROV_GOCACHE:-$work/gocache}
command -v go >/dev/null || { echo "missing tool: go (scripts/install-deps.sh installs it)" >&2; exit 1; }
rm -rf "$work/seeds" "$work/src"
mkdir -p "$work/src" "$work/raw"
cp "$src/tests/integration/golang/fixture_go.go" "$work/src/"
printf 'module stackprovfixture\n\ngo 1.18\n' > "$work/src/go.mod"
for mode in exe pie; do
  (cd "$work/src" && env GOCACHE="$gocache" GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on CGO_ENABLED=0 \
    GOTOOLCHAIN=local HOME="$work" go build -buildmode=$mode -o "$work/go-$mode" .)
  # flag 8 then the binary as section 1 (tests/fuzz/fuzz_sections.hpp: u32 length, bytes)
  python3 - "$work/go-$mode" "$work/raw/go-$mode" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(struct.pack("<I", 1) + b"\x08" + struct.pack("<I", len(b)) + b)
PY
done
"$bin/fuzz_make_seeds" "$work/seeds" --go "$work/go-exe" --go "$work/go-pie"
n=$(ls "$work/seeds/gopclntab" | wc -l)
[ "$n" -eq 2 ] || { echo "gopclntab_smoke: fuzz_make_seeds wrote $n gopclntab seed(s), expected 2" >&2; exit 1; }
"$bin/fuzz_gopclntab" "$work/seeds/gopclntab/"* "$work/raw/"*
