#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Issue 36: a perf.data or capture file cut short. perf-import reads every complete record, exits 0 and says on
# stderr what is lost; its samples are perf script's, sample by sample and frame by frame; a file cut inside its
# header is refused naming the file and the offset; a capture file's loss line counts the records, samples and bytes
# lost (exactly for a finished recording, "at least" for a copy taken while it was written, unknown for version 2).
# Issue 37: a perf.data whose rounds are out of order (perf-import reads a file once, round by round, and starts over
# with the index when a record is older than one handed out): the output of the same records in file order.
"""The oracle for a perf.data cut inside its data section is `perf script` on the same bytes up to the last
complete record, with the header's data.size saying so (and no feature sections): perf script 6.1 on the cut
file itself reads past its end, the zeros that fill the last page as records, and stops with "failed to process
type: 0" before printing anything (or, for a dwarf recording, is killed by SIGBUS). Record boundaries are found here from the records' perf_event_header.size,
independently of stackprov."""
import glob
import json
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time

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


CAPTURE_LOSS = re.compile(r"^stackprov perf-import: warning: (.*): truncated capture file: no END record; a partial "
                          r"record of (\d+) bytes dropped; (\d+) complete records read \((\d+) samples\); (.*)$", re.M)
KNOWN_LOSS = re.compile(r"^lost: (at least )?(\d+) records \((\d+) samples\), (\d+) bytes \(the header's counts, "
                        r"written (when the recording ended|at a flush before the recording ended)\)$")
UNKNOWN_LOSS = "bytes and samples lost: unknown (the END record counts them; "


def capture_layout(raw, version=3):
    """The records of a capture file, by the format of lib/perf/capture_file.hpp, read here apart from stackprov:
    (header size, [(end offset, kind)] of each record up to END, the samples END counts). The header: "SPROVCAP",
    u32 version, u32 flags, u64 sample_regs_user, u32 sample_stack_user, u32 cmdline_len, cmdline, u32 frequency,
    (version 3) u64 records, samples, bytes; each record: u8 kind, u8[3], u32 body_len, body; END is kind 6 with
    a u64 body. None when the file is not a capture file of `version`."""
    if raw[:8] != b"SPROVCAP" or struct.unpack_from("<I", raw, 8)[0] != version:
        return None
    cl = struct.unpack_from("<I", raw, 28)[0]
    off = header = 32 + cl + 4 + (24 if version >= 3 else 0)
    recs, end_samples = [], None
    while off + 8 <= len(raw):
        kind, blen = raw[off], struct.unpack_from("<I", raw, off + 4)[0]
        if off + 8 + blen > len(raw):
            break
        if kind == 6:
            end_samples = struct.unpack_from("<Q", raw, off + 8)[0]
        off += 8 + blen
        recs.append((off, kind))
        if kind == 6:
            break
    return header, recs, end_samples


def capture_loss(sp, path, what):
    """perf-import of a cut capture file: (exit, samples, (complete records, samples) of its loss line, the rest of
    that line after them), or a failure string."""
    rc, part, err = import_json(sp, path)
    m = CAPTURE_LOSS.search(err)
    print("%s: exit %d, %d samples; %s" % (what, rc, len(part), m.group(0) if m else repr(err)))
    if rc != 0 or m is None or m.group(1) != path or int(m.group(4)) != len(part):
        return "%s: exit %d, %d samples, loss line %r" % (what, rc, len(part), err)
    return rc, part, (int(m.group(3)), int(m.group(4))), m.group(5)


def check_capture_cut(sp, workdir, spin):
    """A capture file of `stackprov record` cut at several offsets: its samples are the whole file's first ones and
    the loss line says how many records, samples and bytes are lost (the header counts them since version 3): the
    whole file's records and END's samples (walked here) less those before the cut, its size less the cut. The same
    file as version 2 (no counts: the counts cut out, the version set), cut, says unknown."""
    cap = os.path.join(workdir, "spin.cap")
    run([sp, "record", "-F", "499", "-o", cap, "--", spin, "1"])
    raw = open(cap, "rb").read()
    rc, full, _ = import_json(sp, cap)
    if capture_layout(raw) is None:
        return ["capture: %s is not a version 3 capture file (header %r)" % (cap, raw[:16])]
    header, recs, end_samples = capture_layout(raw)
    if rc != 0 or end_samples != len(full) or recs[-1] != (len(raw), 6):
        return ["capture: exit %d, %d samples, END %s, last record %s of a %d-byte file" % (
            rc, len(full), end_samples, recs[-1:], len(raw))]
    failures = []
    for frac in (0.25, 0.5, 0.9, -1):
        cut = len(raw) - 1 if frac == -1 else header + int((len(raw) - header) * frac)
        path = "%s.cut%d" % (cap, cut)
        with open(path, "wb") as f:
            f.write(raw[:cut])
        what = "capture cut at %d of %d" % (cut, len(raw))
        got = capture_loss(sp, path, what)
        if isinstance(got, str):
            failures.append(got)
            continue
        _, part, read, rest = got
        kept = [k for e, k in recs if e <= cut]
        kept_samples = sum(1 for k in kept if k == 3)
        want = "lost: %d records (%d samples), %d bytes (the header's counts, written when the recording ended)" % (
            len(recs) - len(kept), end_samples - kept_samples, len(raw) - cut)
        if part != full[:len(part)] or read != (len(kept), kept_samples) or rest != want:
            failures.append("%s: %d samples (the whole file's first: %s), %s read, %r (want %d records, %d samples, "
                            "%r)" % (what, len(part), part == full[:len(part)], read, rest, len(kept), kept_samples,
                                     want))
    # Version 2: the same records under a header without counts.
    old = bytearray(raw[:header - 24] + raw[header:])
    struct.pack_into("<I", old, 8, 2)
    if capture_layout(bytes(old), 2)[1] != [(e - 24, k) for e, k in recs]:
        failures.append("capture as version 2: not the same records 24 bytes earlier")
    path = cap + ".v2"
    with open(path, "wb") as f:
        f.write(old)
    orc, ofull, oerr = import_json(sp, path)
    if orc != 0 or ofull != full or oerr.strip():
        failures.append("capture as version 2: exit %d, %d samples of %d, %r" % (orc, len(ofull), len(full), oerr))
    with open(path + ".cut", "wb") as f:
        f.write(old[:len(old) // 2])
    got = capture_loss(sp, path + ".cut", "version-2 capture cut at %d" % (len(old) // 2))
    if isinstance(got, str):
        failures.append(got)
    elif got[3] != UNKNOWN_LOSS + "a version 2 file)":
        failures.append("version-2 capture cut: %r" % got[3])
    return failures


def check_capture_live_copy(sp, workdir, spin):
    """A copy of a capture file taken while `stackprov record` still writes it (its temp file), cut: the header
    counts what the last flush wrote, so the loss line says "at least" -- records, samples and bytes no more than
    the finished file (walked here) holds past the cut, and ending on one of its record boundaries."""
    cap = os.path.join(workdir, "live.cap")
    p = subprocess.Popen([sp, "record", "-F", "499", "-o", cap, "--", spin, "3"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    copy = b""
    try:
        for _ in range(100):
            time.sleep(0.1)
            temps = glob.glob(cap + ".tmp.*")
            if temps and os.path.getsize(temps[0]) > 64 * 1024:
                time.sleep(1)  # past a few flushes
                copy = open(temps[0], "rb").read()
                break
    finally:
        out, err = p.communicate(timeout=60)
    if p.returncode != 0 or not copy:
        return ["live copy: record exit %d, copy of %d bytes: %s" % (p.returncode, len(copy), err.strip())]
    raw = open(cap, "rb").read()
    if capture_layout(raw) is None:
        return ["live copy: %s is not a version 3 capture file (header %r)" % (cap, raw[:16])]
    header, recs, end_samples = capture_layout(raw)
    cut = header + (len(copy) - header) // 2
    path = cap + ".live-cut"
    with open(path, "wb") as f:
        f.write(copy[:cut])
    got = capture_loss(sp, path, "live copy of %d bytes cut at %d (the finished file: %d)" % (len(copy), cut,
                                                                                             len(raw)))
    if isinstance(got, str):
        return [got]
    _, part, read, rest = got
    m = KNOWN_LOSS.match(rest)
    kept = [k for e, k in recs if e <= cut]
    kept_samples = sum(1 for k in kept if k == 3)
    if m is None or not m.group(1) or m.group(5) != "at a flush before the recording ended":
        return ["live copy cut: %r, not an \"at least\" loss" % rest]
    n, s, b = int(m.group(2)), int(m.group(3)), int(m.group(4))
    # the flush's counts, as records and bytes of the finished file
    flushed = [(e, k) for e, k in recs[:len(kept) + n]]
    if read != (len(kept), kept_samples) or not 0 < n < len(recs) - len(kept) or \
            flushed[-1][0] != cut + b or sum(1 for _, k in flushed if k == 3) != kept_samples + s or \
            cut + b > len(copy):
        return ["live copy cut: %s read, %r: not %d records before byte %d of the finished file (%d records, "
                "%d samples, %d bytes)" % (read, rest, len(kept) + n, cut + b, len(recs), end_samples, len(raw))]
    return []


def check_rounds_out_of_order(sp, workdir, raw):
    """The recording's rounds (the records between two FINISHED_ROUND, type 68) with the second and the last but
    one swapped: the same records, so the same samples in time order. perf-import reads it once, meets the moved
    round's old records after newer ones were handed out, and starts over with the index: its output (folded; json
    to a file with -o, to stdout redirected to a file, and to a pipe, where json is read once: spooled into a memfd
    file) is the original file's, byte for byte, and stderr says it started over. The oracle for json is the
    original read with its index: to a pipe with STACKPROV_SPOOL_MAX=0 (no spool, so perf-import reads with the
    index from the start). The original's json to a pipe, read once, is that too,
    and does not start over; the moved file's without a spool is read with the index and does not either; the
    original's with a spool that cannot be written (RLIMIT_FSIZE: a full disk) says so and is read again with
    the index, to the pipe."""
    failures = []
    data_off, data_size, ends = layout(raw)
    rounds, start = [], data_off
    off = data_off
    for end in ends:
        if struct.unpack_from("<I", raw, off)[0] == 68:
            rounds.append(raw[start:end])
            start = end
        off = end
    rounds.append(raw[start:data_off + data_size])
    if len(rounds) < 5:
        return ["rounds out of order: the recording has %d rounds, fewer than 5" % len(rounds)]
    rounds[1], rounds[-2] = rounds[-2], rounds[1]
    moved = raw[:data_off] + b"".join(rounds) + raw[data_off + data_size:]
    assert len(moved) == len(raw)
    orig, shuffled = os.path.join(workdir, "rounds-orig.data"), os.path.join(workdir, "rounds-moved.data")
    open(orig, "wb").write(raw)
    open(shuffled, "wb").write(moved)
    no_spool = dict(os.environ, STACKPROV_SPOOL_MAX="0")
    for fmt in ("folded", "json"):
        want = subprocess.run([sp, "perf-import", orig, "-f", fmt, "--quiet"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=no_spool)
        if want.returncode != 0 or not want.stdout:
            failures.append("rounds out of order: perf-import -f %s of the original failed: %s" % (fmt, want.stderr))
            continue
        ways = [("-o FILE", ["-o", os.path.join(workdir, "rounds." + fmt)], None, None),
                ("stdout to a file", [], os.path.join(workdir, "rounds-stdout." + fmt), None),
                ("a pipe", [], "pipe", None)]
        if fmt == "json":
            ways += [("a pipe, the original", [], "pipe", "original"), ("a pipe without a spool", [], "pipe", "no spool"),
                     ("a pipe, the original, the spool's disk full", [], "pipe", "full"),
                     ("a pipe, the original, past the spool's cap", [], "pipe", "cap")]
        for how, extra, dest, variant in ways:
            src = orig if variant in ("original", "full", "cap") else shuffled
            env = no_spool if variant == "no spool" else None
            if variant == "cap":  # the spool holds at most 64 KiB here (256 MiB by default)
                env = dict(os.environ, STACKPROV_SPOOL_MAX="65536")
            # A full disk under the spool: files this process writes stop at 64 KiB (EFBIG, SIGXFSZ ignored);
            # the pipe is not a file. perf-import then reads the file again with its index, to the pipe.
            full = (lambda: (signal.signal(signal.SIGXFSZ, signal.SIG_IGN),
                             resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)))) if variant == "full" else None
            if dest is None or dest == "pipe":
                r = subprocess.run([sp, "perf-import", src, "-f", fmt] + extra, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env, preexec_fn=full)
                got = r.stdout if dest == "pipe" else open(extra[1], "rb").read()
            else:
                with open(dest, "wb") as f:
                    f.write(b"kept\n")  # written before: kept, the output after it
                    f.flush()
                    r = subprocess.run([sp, "perf-import", shuffled, "-f", fmt] + extra, stdout=f,
                                       stderr=subprocess.PIPE)
                got = open(dest, "rb").read()
                if not got.startswith(b"kept\n"):
                    failures.append("rounds out of order, -f %s to %s: the bytes before the output were lost" %
                                    (fmt, how))
                got = got[5:]
            started_over = b"reading it again with its index" in r.stderr
            if r.returncode != 0 or got != want.stdout:
                failures.append("rounds out of order, -f %s to %s: exit %d, %d bytes, the original's %d bytes%s" %
                                (fmt, how, r.returncode, len(got), len(want.stdout),
                                 "" if got != want.stdout else " (identical)"))
            elif variant == "full" and b"cannot hold the json for the pipe (spool)" not in r.stderr:
                failures.append("rounds out of order, -f %s to %s: did not say the spool failed" % (fmt, how))
            elif variant == "cap" and b"the json passed the 65536 bytes held for a pipe" not in r.stderr:
                failures.append("rounds out of order, -f %s to %s: did not say the spool's cap was passed (%s)" %
                                (fmt, how, r.stderr[-300:]))
            elif started_over != (variant in (None, "full", "cap")):
                failures.append("rounds out of order, -f %s to %s: %s" % (
                    fmt, how, "started over though not read once" if started_over else "did not say it started over"))
            else:
                print("ok: rounds out of order, -f %s to %s: the original's output (%d bytes)%s" %
                      (fmt, how, len(got), ", started over" if started_over else ""))
    return failures


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
        else:
            failures += check_rounds_out_of_order(args.stackprov, workdir, raw)
    failures += check_features_cut(args.stackprov, perf, workdir, g_raw)
    failures += check_header_cuts(args.stackprov, workdir, g_raw)
    failures += check_capture_cut(args.stackprov, workdir, spin)
    failures += check_capture_live_copy(args.stackprov, workdir, spin)
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
