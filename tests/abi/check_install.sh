#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make install` layout works for consumers: pkg-config and find_package(stackprov).
set -euo pipefail
src="$1"; build="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/stackprov/stackprov.h"
test -f "$tmp/prefix/lib/libstackprov.a"
test -x "$tmp/prefix/bin/stackprov"
"$tmp/prefix/bin/trace-verify" --help | grep -q "trace-verify"
cat > "$tmp/use.c" <<'C'
#include <stackprov/stackprov.h>
#include <stdio.h>
#include <string.h>
int main(void) { return strcmp(sprov_version(), SPROV_VERSION_STRING) != 0; }
C
# pkg-config consumer
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc "$tmp/use.c" -o "$tmp/use_pc" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs --static stackprov)
"$tmp/use_pc"
# CMake consumer
mkdir -p "$tmp/cm"
cp "$tmp/use.c" "$tmp/cm/use.c"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(use C CXX)
find_package(stackprov REQUIRED)
add_executable(use use.c)
set_target_properties(use PROPERTIES LINKER_LANGUAGE CXX)
target_link_libraries(use PRIVATE stackprov::stackprov)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/b" >/dev/null
"$tmp/cm/b/use"
echo "install consumers ok (pkg-config and find_package)"
