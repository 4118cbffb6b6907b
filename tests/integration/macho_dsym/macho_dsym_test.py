#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mach-O with a dSYM (issue 34, doc/macos.md): `stackprov symbolize --obj FAT` on the host slice
of unit_macho's fat fixture, whose dSYM lies beside it, equals `llvm-symbolizer-16 --obj=FAT` at
every byte of __text (function, file:line:column, inline chain; default and JSON output). The
addresses and the section come from llvm-objdump-16, not from lib/macho."""
import argparse
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fat", required=True)
    ap.add_argument("--arch", default="x86_64")
    a = ap.parse_args()
    hdr = subprocess.run(["llvm-objdump-16", "--macho", "--section-headers", "--arch=" + a.arch, a.fat],
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    m = re.search(r"__text\s+([0-9a-f]+)\s+([0-9a-f]+)", hdr)
    if not m:
        fail("no __text in llvm-objdump-16's section headers:\n" + hdr)
    size, vma = int(m.group(1), 16), int(m.group(2), 16)
    addrs = "".join(f"0x{x:x}\n" for x in range(vma, vma + size)).encode()
    for style in ([], ["--output-style=JSON"]):
        theirs = subprocess.run(["llvm-symbolizer-16", "--obj=" + a.fat, "--default-arch=" + a.arch] + style,
                                input=addrs, stdout=subprocess.PIPE, check=True).stdout.decode()
        ours = subprocess.run([a.stackprov, "symbolize", "--obj", a.fat] + style, input=addrs,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if ours.returncode != 0:
            fail(f"stackprov symbolize exited {ours.returncode}: {ours.stderr.decode()[-500:]}")
        t, o = theirs.splitlines(), ours.stdout.decode().splitlines()
        if t != o:
            for i, (x, y) in enumerate(zip(t, o)):
                if x != y:
                    fail(f"{style or 'default'}: line {i} differs: llvm {x!r} ours {y!r}")
            fail(f"{style or 'default'}: {len(t)} lines from llvm, {len(o)} ours")
        lines = sum(1 for x in t if re.search(r"\.c:[1-9]|\"Line\":[1-9]", x))
        if lines < size // 2:
            fail(f"only {lines} answers with a source line for {size} addresses: the dSYM was not read")
        print(f"{style or 'default'}: {size} addresses of __text identical to llvm-symbolizer-16 ({lines} with source lines)")
    print("PASS")


if __name__ == "__main__":
    main()
