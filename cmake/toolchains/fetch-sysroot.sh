#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unpacks the target's -dev packages (the library's dependencies) into a private sysroot for
# the cross build: fetch-sysroot.sh <debian-arch> <dir>. Uses `apt-get download` + `dpkg -x`,
# so nothing is installed on the host (installing :arm64/:mipsel packages would force host
# upgrades, and bookworm-security has no mipsel, so Multi-Arch: same versions cannot match).
# Enables the foreign dpkg architecture (+ apt-get update) for `apt-get download` when needed;
# only `make cross` runs this, never the host build.
# Debian 12 has no big-endian mips port: `mips` fails here (reported, exit 2).
set -euo pipefail
shopt -s nullglob
arch=$1
dir=$2
stamp="$dir/.stamp"
[ -f "$stamp" ] && exit 0
if [ "$arch" = mips ]; then
  echo "fetch-sysroot: Debian 12 has no big-endian mips port; no target libraries for mips32" >&2
  exit 2
fi
if ! dpkg --print-foreign-architectures | grep -x "$arch" >/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO dpkg --add-architecture "$arch"
  $SUDO apt-get update -qq
fi
PKGS="libelf1 libelf-dev libdw1 libdw-dev zlib1g zlib1g-dev libzstd1 libzstd-dev liblzma5
  liblzma-dev libbz2-1.0 libbz2-dev libsodium23 libsodium-dev libmbedcrypto7 libmbedx509-1
  libmbedtls14 libmbedtls-dev libiberty-dev libxxhash0 libxxhash-dev"
list=()
for p in $PKGS; do list+=("$p:$arch"); done
mkdir -p "$dir/debs"
(cd "$dir/debs" && apt-get download -qq "${list[@]}" 2>&1 | grep -v "unsandboxed" >&2 || true)
n=0
for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$dir"; n=$((n + 1)); done
if [ "$n" -lt 21 ]; then
  echo "fetch-sysroot: only $n of 21 packages for $arch could be downloaded" >&2
  exit 2
fi
touch "$stamp"
