#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Checks with readelf that a fixture variant has exactly the unwind sections its test claims.
"""usage: check_sections.py [--readelf PATH] BINARY CHECK...

CHECK is one of
  --eh-frame-hdr=yes|no        PT_GNU_EH_FRAME and .eh_frame_hdr present / both absent
  --debug-frame-only=f1,f2,... each function is covered by a .debug_frame FDE and by no .eh_frame FDE
  --no-cfi=f1,f2,...           each function is covered by no FDE at all
"""
import re
import subprocess
import sys


def run(readelf, *args):
    return subprocess.run([readelf, "-W", *args], check=True, capture_output=True, text=True).stdout


def symbols(readelf, binary):
    out = {}
    for line in run(readelf, "-s", binary).splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND":
            out.setdefault(f[7], (int(f[1], 16), int(f[2], 0)))
    return out


def fdes(readelf, binary):
    """{section name: [(lo, hi), ...]} from readelf --debug-dump=frames."""
    out = {}
    section = None
    for line in run(readelf, "--debug-dump=frames", binary).splitlines():
        m = re.match(r"Contents of the (\.\S+) section", line)
        if m:
            section = m.group(1)
            out.setdefault(section, [])
            continue
        m = re.search(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if m and section:
            out[section].append((int(m.group(1), 16), int(m.group(2), 16)))
    return out


def covered(ranges, addr):
    return any(lo <= addr < hi for lo, hi in ranges)


def main(argv):
    readelf = "readelf"
    args = argv[1:]
    if args[:1] == ["--readelf"]:
        readelf, args = args[1], args[2:]
    binary, checks = args[0], args[1:]
    failures = []
    for check in checks:
        name, _, value = check.partition("=")
        if name == "--eh-frame-hdr":
            phdr = "GNU_EH_FRAME" in run(readelf, "-l", binary)
            shdr = re.search(r"\]\s+\.eh_frame_hdr\s", run(readelf, "-S", binary)) is not None
            has_eh = re.search(r"\]\s+\.eh_frame\s", run(readelf, "-S", binary)) is not None
            want = value == "yes"
            print(f"{binary}: PT_GNU_EH_FRAME={phdr} .eh_frame_hdr={shdr} .eh_frame={has_eh}")
            if phdr != want or shdr != want:
                failures.append(f".eh_frame_hdr presence is {phdr}/{shdr}, expected {want}")
            if not has_eh:
                failures.append("no .eh_frame section")
        elif name in ("--debug-frame-only", "--no-cfi"):
            syms = symbols(readelf, binary)
            tables = fdes(readelf, binary)
            eh = tables.get(".eh_frame", [])
            dbg = tables.get(".debug_frame", [])
            print(f"{binary}: {len(eh)} .eh_frame FDEs, {len(dbg)} .debug_frame FDEs")
            for fn in value.split(","):
                if fn not in syms:
                    failures.append(f"function {fn} not in the symbol table")
                    continue
                addr = syms[fn][0]
                in_eh, in_dbg = covered(eh, addr), covered(dbg, addr)
                print(f"  {fn} @0x{addr:x}: .eh_frame={in_eh} .debug_frame={in_dbg}")
                if in_eh:
                    failures.append(f"{fn} has an .eh_frame FDE")
                if name == "--debug-frame-only" and not in_dbg:
                    failures.append(f"{fn} has no .debug_frame FDE")
                if name == "--no-cfi" and in_dbg:
                    failures.append(f"{fn} has a .debug_frame FDE")
        else:
            print(__doc__)
            return 2
    for f in failures:
        print("FAIL", f)
    print("RESULT", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
