#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shared library exports only sprov_* symbols (version script + hidden visibility).
set -euo pipefail
lib="$1"
# nm with gcc's LTO plugin named (as tests/lib/toolrun.py nm_command): without --plugin it loads
# every bfd plugin, LLVMgold among them (libLLVM: 0.25 CPU-s a run). The list once, then searched:
# `nm | awk | grep -q` under pipefail fails when grep -q exits before awk's last write (SIGPIPE), as
# soon as the names exceed one awk buffer (4 KiB).
plugin=$(gcc -print-file-name=liblto_plugin.so)
nm=(nm)
if [[ "$plugin" == /* && -e "$plugin" ]]; then nm=(nm --plugin "$plugin"); fi
names=$("${nm[@]}" -D --defined-only "$lib" | awk '{sub(/@.*/,"",$3); print $3}')
bad=$(grep -v '^sprov_' <<<"$names" | grep -v '^STACKPROV_' || true)
count=$(grep -c '^sprov_' <<<"$names" || true)
if [ -n "$bad" ]; then
  echo "non-sprov exports in $lib:"; echo "$bad"; exit 1
fi
if [ "$count" -lt 30 ]; then
  echo "only $count sprov_ exports in $lib"; exit 1
fi
for want in sprov_version sprov_context_new sprov_snapshot_capture_self sprov_unwinder_unwind sprov_symbolizer_frame \
            sprov_async_register_stack sprov_stack_coroutine_link sprov_symbolizer_tail_calls \
            sprov_symbolizer_frame_args sprov_symbolizer_frame_arg; do
  grep -qx "$want" <<<"$names" || { echo "missing export $want"; exit 1; }
done
echo "exports ok: $count sprov_ symbols, nothing else"
