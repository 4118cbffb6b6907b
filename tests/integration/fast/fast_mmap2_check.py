#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# An address space built from perf MMAP2 records against `perf script --show-mmap-events`.
"""fast_mmap2_check.py --perf PERF --prog EXE --lib LIB --dump FAST_AS_DUMP

Records EXE (which dlopens LIB) with `perf record`, builds stackprov's address space of its pid
from the perf.data file (sprov_address_space_load_perf_data through FAST_AS_DUMP) and compares
its modules with the executable file mappings (and [vdso]) that perf script prints as
PERF_RECORD_MMAP2 events, with mmap's replacement rule applied in event order. Exit 0 when
they are equal (and LIB is among them), 1 on a difference, 2 when a tool is missing or fails.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

MMAP2 = re.compile(r"PERF_RECORD_MMAP2 (\d+)/(\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) [^\]]*\]: "
                   r"([-rwxps]+) (.*)$")


def insert(maps, start, end, off, path):
    """mmap semantics: the new range replaces what it overlaps."""
    out = []
    for (s, e, o, p) in maps:
        if e <= start or s >= end:
            out.append((s, e, o, p))
            continue
        if s < start:
            out.append((s, start, o, p))
        if e > end:
            out.append((end, e, o + (end - s), p))
    if path is not None:
        out.append((start, end, off, path))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--dump", required=True)
    a = ap.parse_args()
    if shutil.which(a.perf) is None:
        print("perf not found: %s (make deps installs it)" % a.perf)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        r = subprocess.run([a.perf, "record", "-q", "-e", "cpu-clock", "-o", data, "--", a.prog, a.lib],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("perf record failed (%d): %s" % (r.returncode, r.stderr.strip()))
            return 2
        r = subprocess.run([a.perf, "script", "-i", data, "--show-mmap-events"], capture_output=True, text=True)
        if r.returncode != 0:
            print("perf script failed (%d): %s" % (r.returncode, r.stderr.strip()))
            return 2
        prog = os.path.realpath(a.prog)
        pid = None
        maps = []
        for line in r.stdout.splitlines():
            m = MMAP2.search(line)
            if not m:
                continue
            p, start, length, off, prot, path = (int(m.group(1)), int(m.group(3), 16), int(m.group(4), 16),
                                                int(m.group(5), 16), m.group(6), m.group(7).strip())
            if pid is None and path == prog:
                pid = p
            if p != pid:
                continue
            code = "x" in prot and (path.startswith("/") or path == "[vdso]")
            maps = insert(maps, start, start + length, off, path if code else None)
        if pid is None:
            print("perf script shows no MMAP2 event of %s" % prog)
            return 1
        expected = [(s, e, o, p.replace(" (deleted)", "")) for (s, e, o, p) in maps]
        d = subprocess.run([a.dump, data, str(pid)], capture_output=True, text=True)
        if d.returncode != 0:
            print("fast_as_dump failed (%d): %s" % (d.returncode, d.stderr.strip()))
            return 1
        lines = d.stdout.splitlines()
        ours = []
        for l in lines[1:]:
            s, e, o, p, idlen = l.split(" ", 4)
            ours.append((int(s, 16), int(e, 16), int(o, 16), p))
            if p != "[vdso]" and int(idlen) == 0:
                print("module %s has no build-id" % p)
                return 1
        ok = ours == expected
        lib = os.path.realpath(a.lib)
        if not any(p == lib for (_, _, _, p) in ours):
            print("the dlopened library %s is not in the address space" % lib)
            ok = False
        if lines[0] != "generation 1":
            print("expected one published generation, got '%s'" % lines[0])
            ok = False
        if not ok:
            print("address space (pid %d) differs from perf script's MMAP2 events:" % pid)
            for (s, e, o, p) in sorted(set(expected) | set(ours)):
                tag = "both" if (s, e, o, p) in expected and (s, e, o, p) in ours else (
                    "perf only" if (s, e, o, p) in expected else "stackprov only")
                print("  %-14s %x-%x @%x %s" % (tag, s, e, o, p))
            return 1
        print("pid %d: %d modules equal perf script's MMAP2 events (incl. %s)" % (pid, len(ours), lib))
        return 0


if __name__ == "__main__":
    sys.exit(main())
