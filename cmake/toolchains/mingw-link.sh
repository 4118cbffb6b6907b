#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Links a win64 executable (mingw-gxx-link.cmake) with ld.lld-14 in its MinGW mode: asks the mingw
# g++ given as "$@" for the linker command it would run (`-###`: its collect2 line, where an argument
# with a character the shell would read is double-quoted with " \ $ escaped, so `eval` reads it back
# exactly), drops collect2's
# own name and its LTO plugin arguments (-plugin FILE, -plugin-opt=...: no LTO objects here), and
# runs ld.lld-14 with the rest: the same start files, libraries, search paths and order (`-m i386pep`
# puts lld in MinGW mode). Why (doc/ci-plan.md C24): GNU ld spent 21-24 CPU-s on each test executable
# (~20 MB of COMDAT-heavy objects from clang and libstdc++.a), lld 0.4; the mingw g++ ignores
# -fuse-ld=lld (its collect2 runs the configured x86_64-w64-mingw32-ld). GNU ld also warned
# "duplicate section ... has different size" for libstdc++'s typeinfo COMDATs, which clang pads
# differently from GNU as; lld keeps the first copy without a word.
# Exit status: the linker's; 1 with the driver's output when the driver fails or prints no collect2
# line, or when the line holds a backtick (gcc does not escape it inside its double quotes).
out=$("$@" -### 2>&1) || { printf '%s\n' "$out" >&2; echo "mingw-link.sh: $1 -### failed" >&2; exit 1; }
line=$(printf '%s\n' "$out" | grep -E '^ "?[^ "]*/collect2(\.exe)?"? ' | tail -n 1)
if [ -z "$line" ]; then
  printf '%s\n' "$out" >&2
  echo "mingw-link.sh: no collect2 command in the output of $1 -###" >&2
  exit 1
fi
case $line in
  *'`'*) echo "mingw-link.sh: a backtick in the link command (gcc -### leaves it unescaped, eval would run it): $line" >&2; exit 1 ;;
esac
eval "set -- $line"
shift
skip=0
for a do
  shift
  if [ "$skip" = 1 ]; then
    skip=0
    continue
  fi
  case $a in
    -plugin) skip=1; continue ;;
    -plugin-opt=*) continue ;;
  esac
  set -- "$@" "$a"
done
exec "${MINGW_LINK_LLD:-ld.lld-14}" "$@"
