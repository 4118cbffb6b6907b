#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs, idempotently, the Debian 12 packages stackprov builds, tests and benchmarks with.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libelf-dev libdw-dev elfutils libdebuginfod-dev debuginfod
  zlib1g-dev libzstd-dev liblzma-dev libxxhash-dev
  libiberty-dev libunwind-dev
  libmbedtls-dev libsodium-dev
  catch2
  gdb llvm-14 llvm-14-dev clang-14 lld-14 binutils
  clang-16 lld-16 llvm-16 python3-unicorn
  python3 python3-dev python3-pybind11 python3-pytest
  nlohmann-json3-dev
  python3.11-dev
  python3.11-dbg
  linux-perf
  time
  strace
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu gcc-mips-linux-gnu g++-mips-linux-gnu
  gcc-mipsel-linux-gnu g++-mipsel-linux-gnu qemu-user gdb-multiarch
  dwz libc6-dbg libstdc++6-12-dbg
  python3-cryptography openssl util-linux coreutils
  libprotobuf-dev protobuf-compiler golang-go
  libdwarf-dev
  rustc cargo nodejs
  libsqlite3-dev sqlite3 libpq-dev postgresql
  libdeflate-dev
  libxml2-utils
  libbpf-dev bpftool bpfcc-tools linux-headers-amd64 heaptrack
  gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 binutils-mingw-w64-x86-64 wine wine64 libwine
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
