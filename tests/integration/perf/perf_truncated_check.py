#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Issue 36: a perf.data or capture file cut short. perf-import reads every complete record, exits 0 and says on
# stderr what is lost; its samples are perf script's, sample by sample and frame by frame; a file cut inside its
# header is refused naming the file and the offset.
"""The oracle for a perf.data cut inside its data section is `perf script` on the same bytes up to the last
complete record, with the header's data.size saying so (and no feature sections): perf script 6.1 on the cut
file itself reads past its end, the zeros that fill the last page as records, and stops with "failed to process
type: 0" before printing anything (or, for a dwarf recording, is killed by SIGBUS). Record boundaries are found here from the records' perf_event_header.size,
independently of stackprov."""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_check import find_perf, finish, run, script_args  # noqa: E402
from perf_modes_check import compare  # noqa: E402  (frame for frame, its allowances counted)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import perf_script_samples  # noqa: E402  (tests/lib: the peers' output parsers)

PERF_FIELDS = ["-F", "comm,tid,time,ip,sym,symoff,dso", "--no-inline"]
LOSS = re.compile(r"^stackprov perf-import: warning: (.*): truncated perf\.data: the file ends (\d+) bytes before "
                  r"the end of its data section \((\d+) bytes\); a partial record of (\d+) bytes dropped; (\d+) "
                  r"complete records read \((\d+) samples\); records lost: unknown", re.M)


def layout(raw):
    """(data_off, data_size, [end offset of each record]) of a complete perf.data (tools/perf/util/header.h:
    data {offset, size} at byte 40 of the header; each record starts with perf_event_header {u32 type, u16 misc,
    u16 size})."""
    data_off, data_size = struct.unpack_from("<QQ", raw, 40)
    ends, off = [], data_off
    while off < data_off + data_size:
        size = struct.unpack_from("<H", raw, off + 6)[0]
        assert size >= 8, "record at %#x has size %d" % (off, size)
        off += size
        ends.append(off)
    return data_off, data_size, ends


def perf_samples_of(perf, path):
    r = subprocess.run([perf, "script", "-i", path] + PERF_FIELDS, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return r.returncode, perf_script_samples(r.stdout, one_line=True), r.stderr.strip().splitlines()[:1]


def import_json(sp, path):
    """perf-import -f json --quiet (the loss line is printed even so): (exit, samples, stderr)."""
    r = subprocess.run([sp, "perf-import", path, "-f", "json", "--quiet"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return r.returncode, [json.loads(l) for l in r.stdout.splitlines() if l.strip()], r.stderr


def check_cut(sp, perf, workdir, name, raw, cut, want_mode):
    """perf.data cut at byte `cut` of its data section."""
    data_off, data_size, ends = layout(raw)
    whole = [e for e in ends if e <= cut]
    last = whole[-1] if whole else data_off
    path = os.path.join(workdir, "%s-cut%d.data" % (name, cut))
    with open(path, "wb") as f:
        f.write(raw[:cut])
    # The oracle: the same complete records in a file whose header says where they end.
    fixed = bytearray(raw[:last])
    struct.pack_into("<Q", fixed, 48, last - data_off)
    fixed[72:104] = bytes(32)  # no feature sections: the cut file has none either
    oracle = os.path.join(workdir, "%s-cut%d-oracle.data" % (name, cut))
    with open(oracle, "wb") as f:
        f.write(fixed)
    prc, own, first = perf_samples_of(perf, path)
    orc, want, _ = perf_samples_of(perf, oracle)
    rc, ours, err = import_json(sp, path)
    what = "%s cut at %d of %d (data %d+%d)" % (name, cut, len(raw), data_off, data_size)
    print("%s: perf script on the cut file: exit %d, %d samples %s; on the records before byte %d: exit %d, %d "
          "samples; perf-import exit %d, %d samples" % (what, prc, len(own), first, last, orc, len(want), rc,
                                                          len(ours)))
    failures = []
    if rc != 0 or orc != 0:
        return ["%s: perf-import exit %d, perf script exit %d: %s" % (what, rc, orc, err.strip())]
    m = LOSS.search(err)
    print("  " + (m.group(0) if m else "no loss line: %r" % err))
    expect = (path, data_off + data_size - cut, data_size, cut - last, len(whole))
    if m is None or (m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))) != expect:
        failures.append("%s: stderr lacks the loss line (file, missing, size, partial, records) %s: %r" % (
            what, expect, err.strip()))
    elif int(m.group(6)) != len(ours):
        failures.append("%s: loss line says %s samples, %d printed" % (what, m.group(6), len(ours)))
    keys = {(o["tid"], o["time"] // 1000) for o in ours}
    if len(ours) != len(want) or keys != set(want):
        failures.append("%s: %d samples, perf script %d (%d of perf's missing, %d extra)" % (
            what, len(ours), len(want), len(set(want) - keys), len(keys - set(want))))
    f, st = compare(what, want, ours, want_mode, {})
    failures += f
    if st["samples"] < 50 and cut - data_off > data_size // 4:
        failures.append("%s: only %d samples" % (what, st["samples"]))
    return failures


def check_features_cut(sp, perf, workdir, raw):
    """Cut one byte before the end: inside the feature sections, every record is there."""
    path = os.path.join(workdir, "g-cut-features.data")
    with open(path, "wb") as f:
        f.write(raw[:-1])
    prc, want, _ = perf_samples_of(perf, path)
    rc, ours, err = import_json(sp, path)
    keys = {(o["tid"], o["time"] // 1000) for o in ours}
    line = [l for l in err.splitlines() if "truncated" in l]
    print("features cut at %d: perf script exit %d, %d samples; perf-import exit %d, %d samples; %s" % (
        len(raw) - 1, prc, len(want), rc, len(ours), line))
    if rc != 0 or prc != 0 or keys != set(want) or len(ours) != len(want):
        return ["features cut: perf-import exit %d (%d samples), perf script exit %d (%d samples)" % (
            rc, len(ours), prc, len(want))]
    if not line or not line[0].startswith("stackprov perf-import: warning: %s: truncated perf.data: the data section "
                                          "is complete" % path):
        return ["features cut: no loss line: %r" % err]
    return []


def check_header_cuts(sp, workdir, raw):
    """Cut inside the 104-byte header and inside the attributes: exit 1, one line naming the file and where."""
    attrs_off = struct.unpack_from("<Q", raw, 24)[0]
    failures = []
    for name, cut, want in (("header", 60, "perf.data: the file (60 bytes) ends inside the 104-byte header"),
                            ("attrs", attrs_off + 20, "perf.data: attrs section 0x%x+0x" % attrs_off)):
        path = os.path.join(workdir, "g-cut-%s.data" % name)
        with open(path, "wb") as f:
            f.write(raw[:cut])
        r = subprocess.run([sp, "perf-import", path, "-f", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        print("cut in the %s at %d: exit %d, stdout %d bytes: %s" % (name, cut, r.returncode, len(r.stdout),
                                                                    r.stderr.strip()))
        lines = r.stderr.strip().splitlines()
        if r.returncode != 1 or r.stdout or len(lines) != 1 or \
                not lines[0].startswith("stackprov perf-import: %s: %s" % (path, want)):
            failures.append("cut in the %s: exit %d, %r (want exit 1 and '%s: %s')" % (
                name, r.returncode, r.stderr.strip(), path, want))
    return failures


def check_capture_cut(sp, workdir, spin):
    """A capture file of `stackprov record` cut in the middle: its samples are the whole file's first ones."""
    cap = os.path.join(workdir, "spin.cap")
    run([sp, "record", "-F", "499", "-o", cap, "--", spin, "1"])
    raw = open(cap, "rb").read()
    rc, full, _ = import_json(sp, cap)
    path = cap + ".cut"
    with open(path, "wb") as f:
        f.write(raw[:len(raw) // 2])
    trc, part, err = import_json(sp, path)
    line = [l for l in err.splitlines() if "truncated" in l]
    print("capture cut at %d of %d: exit %d, %d of %d samples; %s" % (len(raw) // 2, len(raw), trc, len(part),
                                                                     len(full), line))
    m = re.match(r"stackprov perf-import: warning: (.*): truncated capture file: no END record; a partial record of "
                 r"(\d+) bytes dropped; (\d+) complete records read \((\d+) samples\); bytes and samples lost: unknown",
                 line[0]) if len(line) == 1 else None
    if rc != 0 or trc != 0 or not 0 < len(part) < len(full) or part != full[:len(part)]:
        return ["capture cut: exit %d, %d samples, not the first of the whole file's %d" % (trc, len(part), len(full))]
    if m is None or m.group(1) != path or int(m.group(4)) != len(part):
        return ["capture cut: loss line %r" % err]
    return []


def main():
    args = script_args()
    perf = find_perf()
    if perf is None:
        return 1
    workdir = tempfile.mkdtemp(prefix="stackprov-perftrunc-")
    spin = os.path.join(workdir, "spin")
    run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", spin,
         os.path.join(args.source_dir, "fixture_spin.c")])
    failures = []
    recordings = (("g", ["-g"], "callchain", (0.5, 0.9, -1)), ("dwarf", ["--call-graph", "dwarf,8192"], "dwarf",
                                                                (0.5,)))
    g_raw = None
    for name, rec_args, mode, cuts in recordings:
        data = os.path.join(workdir, name + ".data")
        r = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999"] + rec_args + ["-o", data, "--",
                                                                                                 spin, "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            print("FAIL: perf record does not work here (run as root, or lower kernel.perf_event_paranoid): %s" %
                  r.stderr.strip())
            return 1
        raw = open(data, "rb").read()
        data_off, data_size, _ = layout(raw)
        for c in cuts:
            cut = data_off + data_size - 1 if c == -1 else data_off + int(data_size * c)
            failures += check_cut(args.stackprov, perf, workdir, name, raw, cut, lambda o, m=mode: m)
        if name == "g":
            g_raw = raw
    failures += check_features_cut(args.stackprov, perf, workdir, g_raw)
    failures += check_header_cuts(args.stackprov, workdir, g_raw)
    failures += check_capture_cut(args.stackprov, workdir, spin)
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
