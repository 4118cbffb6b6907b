#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes the golden inputs (issue 32, "behaviour unchanged"): run by hand, once, at the commit before
# a refactor; the results are committed under inputs/ (xz) and golden_test.py --update writes
# expected/ from them. No address in them depends on ASLR: the fixture is a static non-PIE binary,
# and the core, the recording and the serialized snapshots are files, not live processes.
#   tests/golden/make_inputs.sh BUILD_DIR
# The fixture runs at the fixed path /tmp/stackprov-golden/fixture (recorded in the core and the
# recording; the test puts the committed copy under a --sysroot / the core's --exe).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: make_inputs.sh BUILD_DIR}" && pwd)
cli=$build/bin/stackprov
D=/tmp/stackprov-golden
rm -rf "$D"
mkdir -p "$D"
# -fdebug-prefix-map: the DWARF names /golden/fixture.c wherever the clone is.
gcc -O2 -g -static -pthread -fdebug-prefix-map="$here"=/golden -o "$D/fixture" "$here/fixture.c"
# The recording: ~300 samples of the single-threaded spin.
"$cli" record -F 499 --stack-size 4096 -o "$D/fixture.cap" -- "$D/fixture" spin 3000
# The core: the main thread inside the SIGUSR1 handler (through __restore_rt), the worker computing.
"$D/fixture" > "$D/ready" &
pid=$!
for _ in $(seq 100); do grep -q ready "$D/ready" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
gcore -o "$D/fixture.core" "$pid" > /dev/null
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
mv "$D/fixture.core.$pid" "$D/fixture.core"
# One serialized snapshot per thread of the core (sprov_snapshot_serialize, via Python).
PYTHONPATH=$build/python python3 - "$D" <<'PY'
import sys, stackprov
d = sys.argv[1]
ctx = stackprov.Context()
proc = ctx.open_core(d + "/fixture.core", exe=d + "/fixture")
for i, snap in enumerate(proc.threads):
    open(f"{d}/thread{i}.snap", "wb").write(snap.to_bytes())
PY
mkdir -p "$here/inputs"
for f in fixture fixture.core fixture.cap thread0.snap thread1.snap; do
  xz -9 -c "$D/$f" > "$here/inputs/$f.xz"
done
# Addresses for symbolize: every function of fixture.c and a few libc ones, at a few offsets.
nm -n "$D/fixture" | python3 -c '
import re, sys
for line in sys.stdin:
    a, t, name = (line.split() + ["", ""])[:3]
    if t in "tT" and re.match(r"(main|compute|worker|spin|wait_forever|on_usr1|raise|__libc_pause|start_thread|_start)\b", name):
        print("\n".join(hex(int(a, 16) + o) for o in range(0, 48, 7)))
' > "$here/inputs/addresses.txt"
echo "inputs written to $here/inputs; now run golden_test.py --update"
