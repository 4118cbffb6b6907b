#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `cmake --install` into a temporary prefix, then C11 consumers of what it installed: a C-only CMake
# project (find_package: the static and the shared target) and plain `cc $(pkg-config ...)` builds
# (shared, and --static against libstackprov.a). Each consumer runs: sprov_version() must be what
# pkg-config --modversion says, and its own stack, captured and unwound, must read
# consumer_leaf, consumer_mid, main (the call chain in consumer.c). Peers: pkg-config, readelf,
# gcc and clang-14 (-std=c11 -pedantic -Werror on the public headers), cmake.
# Usage: install_test.sh SRC_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src="$1"; build="$2"; work="$3"
here="$(cd "$(dirname "$0")" && pwd)"
for tool in cmake pkg-config readelf cc clang-14; do
  command -v "$tool" >/dev/null || { echo "FAIL: required tool '$tool' not found (make deps)"; exit 1; }
done
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in include/stackprov/stackprov.h lib/libstackprov.a lib/pkgconfig/stackprov.pc lib/pkgconfig/stackprov-static.pc \
         lib/cmake/stackprov/stackprovConfig.cmake lib/cmake/stackprov/stackprovTargets.cmake; do
  test -f "$prefix/$f" || fail "$f not installed"
done
test -x "$prefix/bin/stackprov" || fail "bin/stackprov not installed"
"$prefix/bin/trace-verify" --help | grep -q "^usage: stackprov trace-verify" \
  || fail "bin/trace-verify is not the multi-call link"

# The shared library: real file, soname link, development link; SONAME libstackprov.so.<major>.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
version=$(pkg-config --modversion stackprov)
major=${version%%.*}
test -f "$prefix/lib/libstackprov.so.$version" -a ! -L "$prefix/lib/libstackprov.so.$version" \
  || fail "lib/libstackprov.so.$version not installed"
test "$(readlink "$prefix/lib/libstackprov.so.$major")" = "libstackprov.so.$version" || fail "libstackprov.so.$major link"
test "$(readlink "$prefix/lib/libstackprov.so")" = "libstackprov.so.$major" || fail "libstackprov.so link"
soname=$(readelf -d "$prefix/lib/libstackprov.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
test "$soname" = "libstackprov.so.$major" || fail "SONAME is '$soname', expected libstackprov.so.$major"
# Only sprov_* is exported (the version script), as in the build tree.
"$src/tests/abi/check_exports.sh" "$prefix/lib/libstackprov.so.$version" >/dev/null \
  || fail "the installed shared library exports more than sprov_* (tests/abi/check_exports.sh)"

# The public headers are ISO C11 and C99: no warning from either compiler under -pedantic.
for h in "$prefix"/include/stackprov/*.h; do
  for c in cc clang-14; do
    for std in c11 c99; do
      printf '#include <stackprov/%s>\nint main(void) { return 0; }\n' "$(basename "$h")" >"$work/hdr.c"
      "$c" -std=$std -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$work/hdr.c" \
        || fail "$(basename "$h") is not clean under $c -std=$std -pedantic"
    done
  done
done

# Runs a consumer and checks what it printed: the version and the call chain.
check_run() {
  local name="$1"; shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" || { cat "$work/$name.err"; fail "$name exited $?"; }
  grep -qx "version $version" "$work/$name.out" \
    || fail "$name: sprov_version() printed '$(head -1 "$work/$name.out")', pkg-config --modversion says $version"
  sed -n 's/^frame //p' "$work/$name.out" | grep -A2 -x consumer_leaf | tr '\n' ' ' >"$work/$name.chain"
  test "$(cat "$work/$name.chain")" = "consumer_leaf consumer_mid main " \
    || { cat "$work/$name.out"; fail "$name: frames are not consumer_leaf, consumer_mid, main"; }
  echo "ok $name: version $version, chain $(cat "$work/$name.chain")"
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
cflags=(-std=c11 -pedantic -Wall -Wextra -Werror -g -O0 -fno-omit-frame-pointer)

# pkg-config without --static: the shared library.
# shellcheck disable=SC2046
cc "${cflags[@]}" "$here/consumer.c" -o "$work/pc_shared" $(pkg-config --cflags --libs stackprov) \
  || fail "cc \$(pkg-config --cflags --libs stackprov) does not link"
needed "$work/pc_shared" | grep -qx "libstackprov.so.$major" || fail "pc_shared does not need libstackprov.so.$major"
check_run pc_shared env LD_LIBRARY_PATH="$prefix/lib" "$work/pc_shared"

# pkg-config --static: Libs.private must complete libstackprov.a for a C link (the C++ runtime and
# every dependency); but its -lstackprov picks the .so installed beside the archive, so that line
# links the shared library (the linker's choice, checked here so that the .pc file says the truth).
static_libs=$(pkg-config --libs --static stackprov)
# shellcheck disable=SC2086
cc "${cflags[@]}" "$here/consumer.c" -o "$work/pc_static_so" $(pkg-config --cflags stackprov) $static_libs \
  || fail "cc with pkg-config --static stackprov ($static_libs) does not link"
needed "$work/pc_static_so" | grep -qx "libstackprov.so.$major" \
  || fail "pkg-config --static stackprov: -lstackprov did not pick the shared library (the .pc comment is wrong)"
# stackprov-static: the archive by file name and what it needs, with or without --static.
for mode in "" "--static"; do
  # shellcheck disable=SC2046,SC2086
  cc "${cflags[@]}" "$here/consumer.c" -o "$work/pc_static" $(pkg-config --cflags --libs $mode stackprov-static) \
    || fail "cc \$(pkg-config --cflags --libs $mode stackprov-static) does not link"
  if needed "$work/pc_static" | grep -q "^libstackprov"; then fail "pc_static ($mode) needs the shared library"; fi
  check_run "pc_static${mode:+ $mode}" "$work/pc_static"
done

# A C-only CMake project: find_package(stackprov), stackprov::stackprov and stackprov::stackprov_shared.
mkdir -p "$work/cm"
cp "$here/consumer.c" "$work/cm/consumer.c"
cp "$here/consumer_CMakeLists.txt" "$work/cm/CMakeLists.txt"
cmake -S "$work/cm" -B "$work/cm/b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >"$work/cm.log" 2>&1 \
  || { cat "$work/cm.log"; fail "configuring the C-only CMake consumer"; }
if grep -q "^CMAKE_CXX_COMPILER:" "$work/cm/b/CMakeCache.txt"; then fail "the consumer project enabled C++"; fi
cmake --build "$work/cm/b" >>"$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "building the C-only CMake consumer"; }
if needed "$work/cm/b/consumer_static" | grep -q "^libstackprov"; then fail "consumer_static needs the shared library"; fi
needed "$work/cm/b/consumer_shared" | grep -qx "libstackprov.so.$major" \
  || fail "consumer_shared does not need libstackprov.so.$major"
check_run cmake_static "$work/cm/b/consumer_static"
check_run cmake_shared "$work/cm/b/consumer_shared"
echo "install consumers ok: pkg-config (shared, stackprov-static with and without --static) and a C-only find_package project (static, shared)"
