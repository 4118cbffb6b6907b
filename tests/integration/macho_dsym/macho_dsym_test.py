#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mach-O with a dSYM, and without one through the debug map (issue 34, doc/macos.md).

1. `stackprov symbolize --obj FAT` on the host slice of unit_macho's fat fixture, whose dSYM lies
   beside it, equals `llvm-symbolizer-16 --obj=FAT` at every byte of __text (function,
   file:line:column, inline chain; default and JSON output).
2. `stackprov symbolize --obj modes_ARCH` (the same link's image, no dSYM: its DWARF is in the -g
   objects its N_OSO debug map names) equals llvm-symbolizer-16 on the dSYM dsymutil-16 made from
   that same map (the fat file's, per architecture) at every byte of __text. llvm-symbolizer-16
   itself does not read debug maps (it answers "??:0:0" there), so the dSYM is the oracle.
3. A bundle built from modes_ARCH alone, the image then deleted: every byte of __text answered from
   the bundle by UUID as llvm-symbolizer-16 answers with the dSYM (each frame's function, file,
   line and column).
4. A copy of modes_x86_64 whose map gives its first object another mtime (another build of the
   object): that object's functions lose their lines (llvm-symbolizer-16's answer without DWARF,
   the symbol alone), and `--verbose` names the object and both times.
The addresses and the section come from llvm-objdump-16, the mtimes from os.stat, not from lib/macho."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def text_section(path, arch):
    hdr = subprocess.run(["llvm-objdump-16", "--macho", "--section-headers", "--arch=" + arch, path],
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    m = re.search(r"__text\s+([0-9a-f]+)\s+([0-9a-f]+)", hdr)
    if not m:
        fail("no __text in llvm-objdump-16's section headers of %s:\n%s" % (path, hdr))
    return int(m.group(2), 16), int(m.group(1), 16)


def same_as_llvm(label, stackprov, ours_obj, theirs_obj, arch):
    vma, size = text_section(theirs_obj, arch)
    addrs = "".join(f"0x{x:x}\n" for x in range(vma, vma + size)).encode()
    for style in ([], ["--output-style=JSON"]):
        theirs = subprocess.run(["llvm-symbolizer-16", "--obj=" + theirs_obj, "--default-arch=" + arch] + style,
                                input=addrs, stdout=subprocess.PIPE, check=True).stdout.decode()
        ours = subprocess.run([stackprov, "symbolize", "--obj", ours_obj] + style, input=addrs,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if ours.returncode != 0:
            fail(f"{label}: stackprov symbolize exited {ours.returncode}: {ours.stderr.decode()[-500:]}")
        # JSON names the module: the file each was given.
        t = [x.replace(json_str(theirs_obj), "MODULE") for x in theirs.splitlines()]
        o = [x.replace(json_str(ours_obj), "MODULE") for x in ours.stdout.decode().splitlines()]
        if t != o:
            for i, (x, y) in enumerate(zip(t, o)):
                if x != y:
                    fail(f"{label} {style or 'default'}: line {i} differs: llvm {x!r} ours {y!r}")
            fail(f"{label} {style or 'default'}: {len(t)} lines from llvm, {len(o)} ours")
        lines = sum(1 for x in t if re.search(r"\.c:[1-9]|\"Line\":[1-9]", x))
        if lines < size // 2:
            fail(f"{label}: only {lines} answers with a source line for {size} addresses: no DWARF was read")
        print(f"{label} {style or 'default'}: {size} addresses of __text identical to llvm-symbolizer-16 "
              f"({lines} with source lines)")


def bundle_same_as_llvm(stackprov, image, fat, arch):
    """A bundle built from `image` alone (its DWARF through the debug map), the image gone: every
    byte of __text answered from the bundle by UUID as llvm-symbolizer-16 answers with the dSYM
    (function, file, line, column of each frame of the chain: what a bundle carries)."""
    vma, size = text_section(fat, arch)
    addrs = ["0x%x" % x for x in range(vma, vma + size)]
    uuid = subprocess.run(["llvm-dwarfdump-16", "--uuid", image], stdout=subprocess.PIPE, check=True).stdout.decode().split()[1]
    work = tempfile.mkdtemp(prefix="stackprov-macho-map-")
    try:
        copy = os.path.join(work, os.path.basename(image))
        shutil.copy(image, copy)
        bundle = os.path.join(work, "b.sbundle")
        r = subprocess.run([stackprov, "bundle", "build", "-o", bundle, copy], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            fail(f"bundle build {copy} exited {r.returncode}: {r.stderr.decode()[-500:]}")
        os.unlink(copy)
        inp = "".join(a + "\n" for a in addrs).encode()
        ours = subprocess.run([stackprov, "symbolize", "--uuid", uuid, "--bundle", bundle, "--output-style=JSON"],
                              input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if ours.returncode != 0:
            fail(f"symbolize from the bundle exited {ours.returncode}: {ours.stderr.decode()[-500:]}")
        theirs = subprocess.run(["llvm-symbolizer-16", "--obj=" + fat, "--default-arch=" + arch, "--output-style=JSON"],
                                input=inp, stdout=subprocess.PIPE, check=True).stdout.decode()

        def chains(text):  # one JSON object per input line (stdin input), as llvm-symbolizer writes
            return [[(f["FunctionName"], f["FileName"], f["Line"], f["Column"]) for f in json.loads(line)["Symbol"]]
                    for line in text.splitlines() if line.strip()]
        o, t = chains(ours.stdout.decode()), chains(theirs)
        if len(o) != len(t):
            fail(f"bundle {arch}: {len(o)} answers, llvm {len(t)}")
        diff = [(addrs[i], x, y) for i, (x, y) in enumerate(zip(o, t)) if x != y]
        if diff:
            fail(f"bundle {arch}: {len(diff)} of {len(addrs)} addresses differ from llvm-symbolizer-16 with the dSYM, "
                 f"e.g. {diff[:3]}")
        lines = sum(1 for c in o if c and c[-1][2])
        if lines < size // 2:
            fail(f"bundle {arch}: only {lines} answers with a source line: the debug map's DWARF is not in the bundle")
        print(f"bundle {arch}: {size} addresses from a bundle of the image alone (no dSYM, the image deleted) "
              f"identical to llvm-symbolizer-16 with the dSYM ({lines} with source lines)")
    finally:
        shutil.rmtree(work)


def json_str(s):
    return '"ModuleName":"%s"' % s


def first_oso(data):
    """File offset of the first N_OSO nlist_64 entry and its path (LC_SYMTAB, <mach-o/nlist.h>)."""
    ncmds = struct.unpack_from("<I", data, 16)[0]
    at = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == 0x2:  # LC_SYMTAB
            symoff, nsyms, stroff, _strsize = struct.unpack_from("<IIII", data, at + 8)
            for k in range(nsyms):
                e = symoff + 16 * k
                strx, ntype = struct.unpack_from("<IB", data, e)
                if ntype == 0x66:  # N_OSO
                    name = data[stroff + strx:data.index(b"\0", stroff + strx)].decode()
                    return e, name
        at += size
    fail("no N_OSO entry")


def rebuilt_object(stackprov, image):
    data = bytearray(open(image, "rb").read())
    entry, obj = first_oso(data)
    real = int(os.stat(obj).st_mtime)
    fake = real - 86400
    struct.pack_into("<Q", data, entry + 8, fake)
    work = tempfile.mkdtemp(prefix="stackprov-macho-map-")
    try:
        copy = os.path.join(work, "modes_x86_64")
        open(copy, "wb").write(data)
        # The object's functions: llvm-nm-16 of the object, each found in the image by name.
        onm = subprocess.run(["llvm-nm-16", "--defined-only", obj], stdout=subprocess.PIPE, check=True).stdout.decode()
        names = {line.split()[2] for line in onm.splitlines() if len(line.split()) == 3 and line.split()[1] in "tT"}
        inm = subprocess.run(["llvm-nm-16", "--defined-only", image], stdout=subprocess.PIPE, check=True).stdout.decode()
        addrs = [int(line.split()[0], 16) for line in inm.splitlines()
                 if len(line.split()) == 3 and line.split()[2] in names and line.split()[1] in "tT"]
        if len(addrs) < 3:
            fail(f"only {len(addrs)} functions of {obj} found in {image}")
        inp = "".join("0x%x\n" % a for a in addrs).encode()
        ours = subprocess.run([stackprov, "symbolize", "--obj", copy, "--verbose"], input=inp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        theirs = subprocess.run(["llvm-symbolizer-16", "--obj=" + image], input=inp, stdout=subprocess.PIPE,
                                check=True).stdout.decode()
        if ours.returncode != 0:
            fail(f"rebuilt object: stackprov symbolize exited {ours.returncode}: {ours.stderr.decode()[-500:]}")
        if ours.stdout.decode().splitlines() != theirs.splitlines():
            fail("rebuilt object: not the symbol-table answers llvm-symbolizer-16 gives without DWARF:\nours\n%s\nllvm\n%s"
                 % (ours.stdout.decode()[:600], theirs[:600]))
        err = ours.stderr.decode()
        for want in (obj, str(real), str(fake)):
            if want not in err:
                fail(f"rebuilt object: --verbose does not name {want!r}:\n{err[-1500:]}")
        print(f"rebuilt object: {len(addrs)} functions of {os.path.basename(obj)} without lines, "
              f"the mismatch named ({real} against the map's {fake})")
    finally:
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fat", required=True)
    ap.add_argument("--arch", default="x86_64")
    a = ap.parse_args()
    same_as_llvm("dSYM", a.stackprov, a.fat, a.fat, a.arch)
    fix = os.path.dirname(a.fat)
    for arch in ("x86_64", "arm64"):
        image = os.path.join(fix, "modes_" + arch)
        if os.path.exists(image + ".dSYM"):
            fail(f"{image}.dSYM exists: the debug map would not be read")
        same_as_llvm("debug map " + arch, a.stackprov, image, a.fat, arch)
        bundle_same_as_llvm(a.stackprov, image, a.fat, arch)
    rebuilt_object(a.stackprov, os.path.join(fix, "modes_x86_64"))
    print("PASS")


if __name__ == "__main__":
    main()
