#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Cuts a dwarf_args seed from an ELF with DWARF (tests/integration/args/args_fixture.c built -O0/-O2 -g):
# its sections in dwarf_args_fuzz.cpp's order, probes at every function's low pc + 4, made-up registers
# and 256 bytes of memory. usage: cut_args_seed.py ELF OUT
import struct
import subprocess
import sys
import tempfile
import os

SECTIONS = [".debug_info", ".debug_abbrev", ".debug_str", ".debug_str_offsets", ".debug_addr", ".debug_loc",
            ".debug_loclists", ".debug_line_str", ".debug_ranges", ".debug_rnglists"]


def section(elf, name):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "s")
        r = subprocess.run(["objcopy", "--dump-section", "%s=%s" % (name, out), elf, os.path.join(d, "x")],
                           capture_output=True)
        if r.returncode != 0 or not os.path.exists(out):
            return b""
        with open(out, "rb") as f:
            return f.read()


def main():
    elf, out = sys.argv[1], sys.argv[2]
    nm = subprocess.run(["nm", elf], capture_output=True, text=True, check=True).stdout
    pcs = [int(l.split()[0], 16) + 4 for l in nm.splitlines() if len(l.split()) == 3 and l.split()[1] in "tT"]
    blob = b""
    for name in SECTIONS:
        b = section(elf, name)
        blob += struct.pack("<I", len(b)) + b
    probes = b"".join(struct.pack("<Q", pc) for pc in sorted(pcs)[:64])
    regs = b"".join(struct.pack("<Q", 0x7ffd0000 + 8 * i) for i in range(17)) + struct.pack("<Q", 0x7ffd0080)
    mem = struct.pack("<Q", 0x7ffd0000) + bytes(range(256))
    for b in (probes, regs, mem):
        blob += struct.pack("<I", len(b)) + b
    with open(out, "wb") as f:
        f.write(blob)


if __name__ == "__main__":
    main()
