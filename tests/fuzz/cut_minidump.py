#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cuts a fuzz seed from a minidump (tests/fuzz/corpus/minidump/): the same streams, smaller. The
header, SystemInfo, MiscInfo, ThreadList (each stack cut to its first STACK bytes, contexts whole),
ModuleList (names and CodeView/misc records), Exception (its context), MemoryList and Memory64List (the
first RANGES ranges, each cut to BYTES bytes) are rewritten at new offsets; other streams are dropped.

  cut_minidump.py IN.dmp OUT.dmp [--stack 512] [--ranges 8] [--bytes 64]
"""
import struct
import sys


def main(argv):
    src, dst = argv[1], argv[2]
    opts = dict(stack=512, ranges=8, bytes=64)
    for i in range(3, len(argv), 2):
        opts[argv[i].lstrip("-")] = int(argv[i + 1])
    data = open(src, "rb").read()
    sig, ver, n, dir_rva, csum, ts, flags = struct.unpack_from("<IIIIIIQ", data, 0)
    streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(n)]
    out = bytearray(32)
    keep = [s for s in streams if s[0] in (3, 4, 5, 6, 7, 9, 15)]
    dir_at = len(out)
    out += bytes(12 * len(keep))

    def put(b):
        while len(out) % 4:
            out.append(0)
        at = len(out)
        out.extend(b)
        return at

    def blob(size, rva):
        return data[rva:rva + size]

    entries = []
    for typ, size, rva in keep:
        body = bytearray(blob(size, rva))
        if typ == 3:  # ThreadList
            count = struct.unpack_from("<I", body, 0)[0]
            for t in range(count):
                o = 4 + 48 * t
                ssize, srva = struct.unpack_from("<II", body, o + 32)
                ssize = min(ssize, opts["stack"])
                struct.pack_into("<II", body, o + 32, ssize, put(blob(ssize, srva)) if ssize else 0)
                csize, crva = struct.unpack_from("<II", body, o + 40)
                struct.pack_into("<II", body, o + 40, csize, put(blob(csize, crva)) if csize else 0)
        elif typ == 4:  # ModuleList
            count = struct.unpack_from("<I", body, 0)[0]
            for m in range(count):
                o = 4 + 108 * m
                name_rva = struct.unpack_from("<I", body, o + 20)[0]
                nlen = struct.unpack_from("<I", data, name_rva)[0]
                struct.pack_into("<I", body, o + 20, put(data[name_rva:name_rva + 4 + nlen + 2]))
                for at in (76, 84):
                    rsize, rrva = struct.unpack_from("<II", body, o + at)
                    struct.pack_into("<II", body, o + at, rsize, put(blob(rsize, rrva)) if rsize else 0)
        elif typ == 5:  # MemoryList
            count = min(struct.unpack_from("<I", body, 0)[0], opts["ranges"])
            new = bytearray(struct.pack("<I", count))
            for r in range(count):
                start, rsize, rrva = struct.unpack_from("<QII", body, 4 + 16 * r)
                rsize = min(rsize, opts["bytes"])
                new += struct.pack("<QII", start, rsize, put(blob(rsize, rrva)))
            body = new
        elif typ == 9:  # Memory64List: the kept ranges' bytes follow each other from BaseRva on
            count, base = struct.unpack_from("<QQ", body, 0)
            count = min(count, opts["ranges"])
            descs, chunks, off = [], [], base
            for r in range(count):
                start, rsize = struct.unpack_from("<QQ", body, 16 + 16 * r)
                keep_size = min(rsize, opts["bytes"])
                descs.append((start, keep_size))
                chunks.append(data[off:off + keep_size])
                off += rsize
            new_base = put(b"".join(chunks))
            body = bytearray(struct.pack("<QQ", count, new_base))
            for start, rsize in descs:
                body += struct.pack("<QQ", start, rsize)
        elif typ == 6:  # Exception
            csize, crva = struct.unpack_from("<II", body, 160)
            struct.pack_into("<II", body, 160, csize, put(blob(csize, crva)) if csize else 0)
        elif typ == 7:  # SystemInfo: the CSD version string
            csd = struct.unpack_from("<I", body, 24)[0]
            if csd:
                slen = struct.unpack_from("<I", data, csd)[0]
                struct.pack_into("<I", body, 24, put(data[csd:csd + 4 + slen + 2]))
        entries.append((typ, len(body), put(bytes(body))))
    struct.pack_into("<IIIIIIQ", out, 0, sig, ver, len(entries), dir_at, 0, ts, flags)
    for i, (typ, size, rva) in enumerate(entries):
        struct.pack_into("<III", out, dir_at + 12 * i, typ, size, rva)
    open(dst, "wb").write(bytes(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
