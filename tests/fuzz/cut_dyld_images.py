#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seeds of fuzz_dyld_images (tests/fuzz/corpus/dyld_images/): dyld_all_image_infos and
dyld_image_info[] of a 64-bit process laid out as <mach-o/dyld_images.h> documents them (version 0,
infoArrayCount 4, infoArray 8, dyldImageLoadAddress 32, dyldPath 192; 24-byte entries: header,
path, mod date), in the target's input form: u64 infos_size, then blocks (u64 address, u32 length,
bytes). Run: python3 tests/fuzz/cut_dyld_images.py tests/fuzz/corpus/dyld_images"""
import os
import struct
import sys

INFOS, ARRAY, STRINGS = 0x7FF800010000, 0x600000004000, 0x100003000


def block(addr, data):
    return struct.pack("<QI", addr, len(data)) + data


def seed(version, paths):
    infos = bytearray(200)
    struct.pack_into("<IIQ", infos, 0, version, len(paths), ARRAY)
    struct.pack_into("<Q", infos, 32, 0x200000000)
    struct.pack_into("<Q", infos, 192, STRINGS + 0x800)
    entries = b"".join(struct.pack("<QQQ", 0x100000000 + i * 0x100000, STRINGS + 64 * i, 1700000000)
                       for i in range(len(paths)))
    strings = bytearray(0x900)
    for i, p in enumerate(paths):
        strings[64 * i:64 * i + len(p) + 1] = p.encode() + b"\0"
    strings[0x800:0x800 + 14] = b"/usr/lib/dyld\0"
    return struct.pack("<Q", len(infos)) + block(INFOS, bytes(infos)) + block(ARRAY, entries) + block(STRINGS, bytes(strings))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {"v15_three": seed(15, ["/bin/prog", "/usr/lib/libSystem.B.dylib", "/usr/lib/libc++.1.dylib"]),
             "v14_one": seed(14, ["/bin/prog"]), "v15_empty": seed(15, [])}
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
