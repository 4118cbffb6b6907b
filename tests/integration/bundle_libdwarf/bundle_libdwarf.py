#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Bundle builder vs libdwarf: every bundle range inside a libdwarf DIE range of its depth with its name and call site; line rows.
"""Compiles the bundle test's fixtures (gcc C, g++ and clang++-14 C++, -O2 -g; and the C one with
-gdwarf-4 for DW_AT_ranges in .debug_ranges) and takes the system libc.so.6 with its separate debug
file from libc6-dbg (DWARF we did not produce), builds a bundle of each, and reads the same DWARF
with dwarf_facts.c, built on libdwarf (libdwarf-dev; not stackprov's DWARF reader). Checks:

1. DIEs: every bundle range record [start, start+length) at inline depth d lies inside the
   address ranges of libdwarf DW_TAG_subprogram (d = 0) / DW_TAG_inlined_subroutine (d > 0)
   DIEs of nesting depth d whose name (linkage name, else DW_AT_name, through abstract_origin /
   specification) equals the record's function and, for d > 0, whose DW_AT_call_file /
   call_line / call_column equal the record's call site.
2. Line rows: at the address of every libdwarf line-table row (the last row of an address, as
   a lookup sees it; end_sequence rows excluded) the bundle's innermost frame (the deepest
   range there, doc/symbol-index.md) has the row's file, line and column.
3. Coverage: every byte of every libdwarf DIE range of depth d is covered by bundle ranges of
   depth d.
Records outside a gate are counted apart by kind, each still checked by its own rule, and
exceptions.txt explains each kind: depth 0 named by its ELF symbol (nm), symbol-named line rows
in no subprogram, line rows without any function, libdwarf's DWARF 5 initial file register, line
rows outside every compile unit (libdwarf's CU ranges).
The gate is 100% for each; the figures are printed. A missing tool fails with its name."""
import argparse
import bisect
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

TOOLS = ["gcc", "g++", "clang++-14", "nm", "readelf"]


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd[:6]), p.returncode, p.stderr.strip()[:2000]))
    return p.stdout


def libdwarf_facts(tool, binary):
    dies, rows, cus = [], [], []
    for line in run([tool, binary]).splitlines():
        f = line.split("\t")
        if f[0] == "C" and len(f) == 2:
            cus += [tuple(int(x, 16) for x in p.split("-")) for p in f[1].split(",")]
        elif f[0] == "D" and len(f) == 8:
            pieces = sorted(tuple(int(x, 16) for x in p.split("-")) for p in f[7].split(","))
            merged = []
            for lo, hi in pieces:  # adjacent pieces of one DIE form one range
                if merged and lo <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
                else:
                    merged.append((lo, hi))
            dies.append({"depth": int(f[1]), "tag": f[2], "name": f[3], "call": (f[4], int(f[5]), int(f[6])),
                         "ranges": merged})
        elif f[0] == "L" and len(f) == 7:
            rows.append((int(f[1], 16), f[2], int(f[3]), int(f[4]), f[5] == "1", f[6]))
        else:
            fail("dwarf_facts: unexpected line %r" % line)
    if not dies or not rows or not cus:
        fail("dwarf_facts found %d DIEs, %d line rows, %d CU ranges in %s" % (len(dies), len(rows), len(cus), binary))
    return dies, rows, sorted(cus)


def nm_funcs(*files):
    """Text symbols (t, T, w, W, i) of .symtab and .dynsym of `files`: name -> {(address, size)}."""
    syms = {}
    for path in files:
        for opt in ([], ["-D"]):
            p = subprocess.run(nm_command() + ["-S", "--defined-only"] + opt + [path], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            for line in p.stdout.splitlines():
                f = line.split()
                if len(f) == 3 and f[1] in "tTwWi":
                    syms.setdefault(f[2].split("@")[0], set()).add((int(f[0], 16), 0))
                elif len(f) == 4 and f[2] in "tTwWi":
                    syms.setdefault(f[3].split("@")[0], set()).add((int(f[0], 16), int(f[1], 16)))
    return syms


def in_any(spans, lo, hi):
    return any(a <= lo and hi <= b for a, b in spans)


class Pieces:
    """libdwarf DIE ranges of one depth, for "which pieces overlap [lo, hi)" (they may overlap)."""

    def __init__(self, dies):
        self.items = sorted(((lo, hi, d) for d in dies for lo, hi in d["ranges"]), key=lambda x: (x[0], x[1]))
        self.los = [x[0] for x in self.items]
        self.max_hi, m = [], 0
        for x in self.items:
            m = max(m, x[1])
            self.max_hi.append(m)

    def overlapping(self, lo, hi):
        j = bisect.bisect_left(self.los, hi) - 1
        out = []
        while j >= 0 and self.max_hi[j] > lo:
            if self.items[j][1] > lo:
                out.append(self.items[j])
            j -= 1
        return out


class Depth:
    """Bundle ranges of one depth, sorted by start (non-overlapping)."""

    def __init__(self, recs):
        self.recs = sorted(recs, key=lambda r: r["_start"])
        self.starts = [r["_start"] for r in self.recs]

    def at(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.recs[i]["_start"] + self.recs[i]["length"]:
            return self.recs[i]
        return None

    def covers(self, lo, hi):
        a = lo
        while a < hi:
            r = self.at(a)
            if r is None:
                return a
            a = r["_start"] + r["length"]
        return None


def check_fixture(args, name, compile_cmd, report):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    binary = os.path.join(work, name)
    run(compile_cmd + ["-o", binary], cwd=args.fixtures)
    check_binary(args, name, binary, binary, report)


def check_binary(args, name, binary, debug_file, report):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    bundle = os.path.join(work, name + ".sbundle")
    run([args.stackprov, "bundle", "build", binary, "--out", bundle])
    idx = json.loads(run([args.stackprov, "bundle", "export", bundle, "--format", "symbol-index-json"]))
    ranges = idx["modules"][0]["ranges"]
    for r in ranges:
        r["_start"] = int(r["start"], 16)
    maxd = max(r["depth"] for r in ranges)
    depths = [Depth([r for r in ranges if r["depth"] == d]) for d in range(maxd + 1)]
    dies, rows, cus = libdwarf_facts(args.dwarf_facts, debug_file)
    syms = nm_funcs(binary, debug_file)
    by_depth = {}
    for d in dies:
        by_depth.setdefault(d["depth"], []).append(d)
    die_index = {k: Pieces(v) for k, v in by_depth.items()}

    # 1. every bundle range inside the ranges of same-depth DIEs with its name and call site
    def union_covers(pieces, lo, hi):
        a = lo
        for plo, phi in sorted(pieces):
            if plo <= a < phi:
                a = phi
        return a >= hi

    ok = multi = symtab = symtab_no_die = line_only = symtab_only = 0
    bad = []
    row_addrs = sorted(a for a, f, line, col, end, alt in rows if not end)

    def rows_in(lo, hi):
        return bisect.bisect_left(row_addrs, hi) > bisect.bisect_left(row_addrs, lo)

    for r in ranges:
        lo, hi = r["_start"], r["_start"] + r["length"]
        touching = [(d, rlo, rhi) for rlo, rhi, d in die_index[r["depth"]].overlapping(lo, hi)] \
            if r["depth"] in die_index else []
        call = (r.get("call_file", ""), r.get("call_line", 0), r.get("call_column", 0))
        pieces = [(rlo, rhi) for d, rlo, rhi in touching
                  if d["name"] == r["function"] and (r["depth"] == 0 or d["call"] == call)]
        if r.get("symbol_table"):
            # Flagged "from the symbol table" (symbol_index.json): no libdwarf DIE of depth 0 and no
            # line row of a CU there, line/column 0, no directory, an nm text symbol at or before it.
            if not touching and r["line"] == 0 and r["column"] == 0 and "/" not in r["file"] \
                    and not any(in_any(cus, a, a + 1) for a in range(lo, hi) if rows_in(a, a + 1)) \
                    and any(a <= lo for a, _ in syms.get(r["function"], ())):
                symtab_only += 1  # exceptions.txt: symbol-table range, no DIE and no line row there
            elif len(bad) < 10:
                bad.append("range %s+%d flagged symbol_table %s: libdwarf DIEs there %r, line %d column %d file %r"
                           % (r["start"], r["length"], r["function"], [(d["name"], hex(a), hex(b))
                                                                      for d, a, b in touching],
                              r["line"], r["column"], r["file"]))
        elif pieces and union_covers(pieces, lo, hi):
            ok += 1
            multi += len(pieces) > 1  # one range over two adjacent DIEs of one call (exceptions.txt)
        elif r["depth"] == 0 and r["function"] == "" and not touching:
            line_only += 1  # exceptions.txt: line rows outside every subprogram
        elif r["depth"] == 0 and any(rlo <= lo and hi <= rhi and rlo in {a for a, _ in syms.get(r["function"], ())}
                                     for d, rlo, rhi in touching):
            symtab += 1  # exceptions.txt: depth 0 named by its ELF symbol
        elif r["depth"] == 0 and not touching and in_any(cus, lo, hi) and \
                in_any([(a, a + n) for a, n in syms.get(r["function"], ())], lo, hi):
            symtab_no_die += 1  # exceptions.txt: line rows, no subprogram: the symbol containing them
        elif len(bad) < 10:
            bad.append("range %s+%d depth %d %s call %r: libdwarf DIEs there: %r"
                       % (r["start"], r["length"], r["depth"], r["function"], call,
                          [(d["name"], d["call"], hex(a), hex(b)) for d, a, b in touching]))
    die_fig = ("ranges inside libdwarf DIEs of their depth, name and call site: %d/%d (%d across two DIEs of one "
               "call); exceptions.txt: %d depth-0 named by their ELF symbol, %d in no DIE named by the symbol "
               "containing them, %d without a function (no DIE), %d symbol-table ranges (no DIE, no line row)"
               % (ok, len(ranges) - symtab - symtab_no_die - line_only - symtab_only, multi, symtab, symtab_no_die,
                  line_only, symtab_only))

    # 2. line rows: the last row of each address vs the bundle's innermost frame there
    last = {}
    for i, (addr, f, line, col, end, alt) in enumerate(rows):
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        if end:
            continue
        if nxt is not None and nxt[0] == addr:
            continue  # covers no byte: superseded by the next row (or the sequence ends) at the same address
        last[addr] = ((f, line, col), (alt, line, col) if alt else None)
    lrow_ok = initial_file = outside_cu = 0
    for addr, (want, alt_want) in sorted(last.items()):
        inner = None
        for dp in depths:
            r = dp.at(addr)
            if r is None:
                break
            inner = r
        got = (inner["file"], inner["line"], inner["column"]) if inner else None
        if got == want:
            lrow_ok += 1
        elif got is not None and got == alt_want:
            initial_file += 1  # exceptions.txt: libdwarf's initial file register in DWARF 5
        elif (got is None or inner.get("symbol_table")) and not in_any(cus, addr, addr + 1):
            outside_cu += 1  # exceptions.txt: a row outside every compile unit's ranges
        elif len(bad) < 20:
            bad.append("line row 0x%x: libdwarf %r bundle %r" % (addr, want, got))
    row_fig = ("line-row addresses with the bundle's file:line:column: %d/%d; exceptions.txt: %d rows before the "
               "first set_file (file 1, libdwarf says 0), %d outside every CU (no bundle range)"
               % (lrow_ok, len(last) - initial_file - outside_cu, initial_file, outside_cu))

    # 3. coverage: every byte of every DIE range at its depth
    cov_ok = ncov = 0
    for d in dies:
        for lo, hi in d["ranges"]:
            ncov += 1
            hole = depths[d["depth"]].covers(lo, hi) if d["depth"] < len(depths) else lo
            if hole is None:
                cov_ok += 1
            elif len(bad) < 30:
                bad.append("DIE %s depth %d [0x%x, 0x%x): no bundle range of that depth at 0x%x"
                           % (d["name"], d["depth"], lo, hi, hole))
    cov_fig = "DIE ranges covered by bundle ranges of their depth: %d/%d" % (cov_ok, ncov)
    report.append("%s: %d bundle ranges, %d libdwarf DIEs, %d line rows; %s; %s; %s"
                  % (name, len(ranges), len(dies), len(rows), die_fig, row_fig, cov_fig))
    if bad:
        fail("%s: bundle and libdwarf disagree:\n  %s\n%s" % (name, "\n  ".join(bad), report[-1]))


def check_real(args, path, report):
    """A binary we did not build, with its DWARF in /usr/lib/debug/.build-id (libc6-dbg): every
    range, line row and DIE of the whole module, as for the fixtures."""
    if not os.path.exists(path):
        fail("%s is missing" % path)
    notes = run(["readelf", "-n", path])
    bid = next((ln.split(":", 1)[1].strip() for ln in notes.splitlines() if "Build ID:" in ln), None)
    if not bid:
        fail("%s has no build-id (readelf -n)" % path)
    debug = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    if not os.path.exists(debug):
        fail("%s: no debug file %s (libc6-dbg missing? make deps)" % (path, debug))
    check_binary(args, os.path.basename(path), path, debug, report)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--dwarf-facts", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        fail("missing tool(s): %s (make deps)" % ", ".join(missing))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    report = []
    base = ["-O2", "-g", "-Wl,--build-id"]
    check_fixture(args, "fx_c", ["gcc"] + base + ["fixture_a.c", "fixture_b.c"], report)
    check_fixture(args, "fx_c_dwarf4", ["gcc", "-gdwarf-4"] + base + ["fixture_a.c", "fixture_b.c"], report)
    check_fixture(args, "fx_cpp", ["g++", "-std=c++17"] + base + ["fixture.cpp"], report)
    check_fixture(args, "fx_cpp_clang", ["clang++-14", "-std=c++17"] + base + ["fixture.cpp"], report)
    check_real(args, "/usr/lib/x86_64-linux-gnu/libc.so.6", report)
    print("\n".join(report))
    print("bundle vs libdwarf: all DIE, line-row and coverage checks agree")


if __name__ == "__main__":
    main()
