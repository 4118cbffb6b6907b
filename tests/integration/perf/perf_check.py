#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# perf integration test: stackprov perf-import vs perf script on the same perf.data, sample by sample and, for
# folded and pprof output, stack for stack; SVG totals; record; malformed input.
import argparse
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

# perf script's samples (user frames, leaf first), read as every perf test reads them
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_perf_script, perf_addr_delta  # noqa: E402  (tests/lib: the peers' output parsers)
import pprof_text  # noqa: E402  (tests/lib: pprof decoded with protoc)

PY_WORKLOAD = r"""
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def work(seconds):
    end = time.time() + seconds
    while time.time() < end:
        fib(18)
work(float(__import__('sys').argv[1]))
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def script_args():
    """The arguments of the perf check scripts: --stackprov BINARY --source-dir DIR."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--source-dir", required=True)
    return ap.parse_args()


def find_perf():
    """perf's path; None (after saying FAIL, naming the package) when it is not installed."""
    perf = shutil.which("perf")
    if perf is None:
        print("FAIL: perf is not installed (linux-perf; make deps installs it)")
    return perf


def finish(failures, workdir):
    """The verdict of a check script: FAIL with every failure (the work directory kept for a look), or PASS."""
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    print("PASS")
    return 0


def strip_version(name):
    return re.sub(r"@+[A-Za-z0-9_.]+$", "", name) if name else name


def stackprov_frames(obj):
    out = []
    for i, f in enumerate(x for x in obj["frames"] if x["method"] != "kernel"):
        off = int(f["module_offset"], 16)
        exact = i == 0 or f["method"] == "signal"
        start = int(f["symbol_start"], 16) if f.get("symbol_start") else None
        delta = perf_addr_delta(f["module"]) if f["module"] else 0
        out.append(((off if exact else off - 1) - delta, f["function"], f["module"],
                    start - delta if start is not None else None))
    return out


def compare(perf_samples, sp_lines, classes, examples, inexact=None, aliases=None):
    """Sample by sample, frame by frame. `inexact` (optional set) receives the keys of samples
    that differ; `aliases` (optional dict) perf's name -> ours where both name the same symbol
    (the same start address on both sides)."""
    agree = total = 0
    by_key = {}
    for o in sp_lines:
        by_key[(o["tid"], o["time"] // 1000)] = o
    for key, pframes in perf_samples.items():
        total += 1
        o = by_key.get(key)
        if o is None:
            classes["sample missing in stackprov"] += 1
            if inexact is not None:
                inexact.add(key)
            continue
        sframes = stackprov_frames(o)
        ok = True
        for i in range(max(len(pframes), len(sframes))):
            if i >= len(pframes):
                classes["stackprov deeper than perf"] += 1
                ok = False
                break
            if i >= len(sframes):
                classes["perf deeper than stackprov (stop: %s)" % o["stop_reason"]] += 1
                ok = False
                break
            pa, ps, pd, pstart = pframes[i]
            sa, sn, sd, sstart = sframes[i]
            if pd.startswith("/") and pa != sa:
                classes["pc differs"] += 1
                ok = False
            elif strip_version(ps) != strip_version(sn or "[unknown]") and not (ps == "[unknown]" and sn is None):
                if pstart is not None and pstart == sstart:
                    classes["(agrees) other alias of the same symbol"] += 1
                    if aliases is not None:
                        aliases[strip_version(ps)] = strip_version(sn)
                else:
                    classes["function name differs"] += 1
                    ok = False
            if not ok:
                if len(examples) < 5:
                    examples.append("tid %d time %d frame %d: perf %#x %s (%s) vs stackprov %#x %s (%s) [%s]" % (
                        key[0], key[1], i, pa, ps, pd, sa, sn, sd,
                        [f for f in o["frames"] if f["method"] != "kernel"][i]["method"] if i < len(sframes) else "-"))
                break
        if ok:
            agree += 1
        elif inexact is not None:
            inexact.add(key)
        if not ok and os.environ.get("PERF_CHECK_DUMP"):
            print("DIFF", key, "\n  perf:", [(hex(a), n) for a, n, d, st in pframes], "\n  sprov:", [(hex(a), n, f["method"]) for (a, n, d, st), f in zip(sframes, [f for f in o["frames"] if f["method"] != "kernel"])], o["stop_reason"])
    return agree, total


def perf_folded(perf_samples, comms, kernel_names, aliases):
    """perf script's samples as folded stacks, the way `perf-import --format folded` writes them:
    comm;outermost;...;leaf, kernel frames (named from kallsyms by perf) after the user ones with
    the `_[k]` suffix of stackcollapse-perf.pl --kernel, symbol versions dropped, and a name perf
    chose among aliases of one symbol (same start address, checked sample by sample) spelled as
    ours. Returns {key: line} (one line per sample)."""
    out = {}
    for key, frames in perf_samples.items():
        names = [aliases.get(strip_version(sym), strip_version(sym)) if sym != "[unknown]" else "[unknown]"
                 for _, sym, _, _ in frames]
        kernel = [k + "_[k]" for k in kernel_names.get(key, [])]
        out[key] = ";".join([comms.get(key, "[unknown]")] + names[::-1] + kernel[::-1])
    return out


def compare_stacks(what, ours, perf_lines, inexact, name):
    """Stack for stack: every folded line (with its count) of ours equals perf script's, except
    for the samples the per-sample comparison already found to differ."""
    want = collections.Counter(perf_lines.values())
    mine = collections.Counter({strip_folded(k): v for k, v in ours.items()})
    # Lines of inexact samples may differ; everything else must be identical.
    allowed = collections.Counter(perf_lines[k] for k in inexact if k in perf_lines)
    missing = want - mine          # perf's stacks we lack (or have fewer of)
    extra = mine - want            # stacks we have that perf does not
    bad_missing = missing - allowed
    n_extra = sum(extra.values())
    failures = []
    print("%s: %s: %d stacks, %d samples; perf script %d stacks, %d samples; %d samples differ (%d allowed: "
          "found to differ sample by sample)" % (name, what, len(mine), sum(mine.values()), len(want), sum(want.values()),
                                   sum(missing.values()), len(inexact)))
    if bad_missing:
        ex = list(bad_missing.items())[:3]
        failures.append("%s: %s lacks %d of perf script's samples that match frame for frame, e.g. %s" % (
            name, what, sum(bad_missing.values()), ex))
    if n_extra > len(inexact):
        failures.append("%s: %s has %d samples in stacks perf script does not have (> %d inexact), e.g. %s" % (
            name, what, n_extra, len(inexact), list(extra.items())[:3]))
    if sum(mine.values()) != sum(want.values()):
        failures.append("%s: %s total %d, perf script %d samples" % (name, what, sum(mine.values()), sum(want.values())))
    return failures


def strip_folded(line):
    return ";".join(strip_version(n) for n in line.split(";"))


def check_pprof(stackprov, workdir, name, data, perf_lines, inexact):
    """--format pprof decoded with protoc (independently of stackprov): its samples, stack for stack
    (comm label + function names), against perf script's samples; a known leaf and mapping."""
    protoc = shutil.which("protoc")
    out = os.path.join(workdir, name + ".pb.gz")
    r = subprocess.run([stackprov, "perf-import", data, "--format", "pprof", "-o", out, "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        # Includes a stackprov built without Protobuf: make deps installs libprotobuf-dev.
        return ["%s: pprof export failed: %s" % (name, r.stderr.strip())]
    if protoc is None:
        return ["%s: protoc is not installed (protobuf-compiler; make deps installs it)" % name]
    with open(out, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        return ["%s: pprof output is not gzip" % name]
    # Decoded independently of stackprov: gunzip + protoc --decode with the schema file.
    p = pprof_text.decode(out, protoc)
    strings = p.get("string_table", [])
    failures = []
    if not strings or strings[0] != "":
        failures.append("%s: pprof string_table[0] is not empty" % name)
    funcs = {f["id"][0]: strings[f.get("name", [0])[0]] for f in p.get("function", [])}
    maps = {m["id"][0]: strings[m.get("filename", [0])[0]] for m in p.get("mapping", [])}
    stacks = pprof_text.folded_stacks(p)
    samples = p.get("sample", [])
    locs = p.get("location", [])
    spin_maps = [m for m in maps.values() if m.endswith("/spin")]
    print("%s: pprof %d samples, %d locations, %d functions, %d mappings" % (
        name, len(samples), len(locs), len(funcs), len(maps)))
    failures += compare_stacks("pprof", stacks, perf_lines, inexact, name)
    if name == "fixture" and ("d_fn" not in funcs.values() or not spin_maps):
        failures.append("%s: pprof lacks function d_fn or the spin mapping" % name)
    return failures


def check_profile(stackprov, perf, workdir, name, cmd, min_agree):
    data = os.path.join(workdir, name + ".data")
    run([perf, "record", "-q", "-e", "cpu-clock", "-F", "499", "--call-graph", "dwarf,8192", "-o", data, "--"] + cmd)
    script = run([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym,symoff,dso", "--no-inline"]).stdout
    comms, kernel_names = {}, {}
    perf_samples, kernel_keys = parse_perf_script(script, comms, kernel_names)
    js = run([stackprov, "perf-import", data, "--format", "json", "--quiet"]).stdout
    lines = [json.loads(l) for l in js.splitlines() if l.strip()]
    classes, examples, inexact, aliases = collections.Counter(), [], set(), {}
    agree, total = compare(perf_samples, lines, classes, examples, inexact, aliases)
    perf_lines = perf_folded(perf_samples, comms, kernel_names, aliases)
    if aliases:
        print("%s: aliases (perf's name -> ours, same symbol start): %s" % (name, aliases))
    pct = 100.0 * agree / max(total, 1)
    print("%s: %d/%d samples identical to perf script (%.2f%%); %d samples had kernel frames (compared user part)" % (
        name, agree, total, pct, len(kernel_keys)))
    for c, n in classes.most_common():
        print("  difference: %-45s %d" % (c, n))
    for e in examples:
        print("  example: " + e)
    failures = []
    if total < 50:
        failures.append("%s: only %d perf samples" % (name, total))
    if pct < min_agree:
        failures.append("%s: agreement %.2f%% < %.1f%%" % (name, pct, min_agree))
    if len(lines) != total:
        failures.append("%s: stackprov printed %d samples, perf script %d" % (name, len(lines), total))
    # Folded and SVG: totals match the samples and each other.
    # Against perf script --no-inline: ours without inlined frames too (perf_inline_check.py has them).
    folded = run([stackprov, "perf-import", data, "--format", "folded", "--quiet", "--no-inline"]).stdout
    counts = {}
    for l in folded.splitlines():
        stack, _, n = l.rpartition(" ")
        counts[stack] = int(n)
    fold_total = sum(counts.values())
    failures += compare_stacks("folded", counts, perf_lines, inexact, name)
    svg_path = os.path.join(workdir, name + ".svg")
    run([stackprov, "perf-import", data, "--format", "svg", "-o", svg_path, "--quiet", "--no-inline"])
    root = ET.parse(svg_path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    gs = root.findall(ns + "g")
    svg_root = [g for g in gs if g.get("data-d") == "0"]
    depth1 = sum(int(g.get("data-samples")) for g in gs if g.get("data-d") == "1")
    comm_totals = collections.Counter()
    for stack, n in counts.items():
        comm_totals[stack.split(";")[0]] += n
    svg_comm = {g.find(ns + "title").text.rsplit(" (", 1)[0]: int(g.get("data-samples")) for g in gs if g.get("data-d") == "1"}
    print("%s: folded %d lines, %d samples; svg root %s samples, %d frames" % (
        name, len(counts), fold_total, svg_root[0].get("data-samples") if svg_root else "-", len(gs)))
    if fold_total != len(lines):
        failures.append("%s: folded total %d != %d samples" % (name, fold_total, len(lines)))
    if not svg_root or int(svg_root[0].get("data-samples")) != fold_total or depth1 != fold_total:
        failures.append("%s: svg totals do not match folded (%d)" % (name, fold_total))
    if svg_comm != dict(comm_totals):
        failures.append("%s: svg per-comm totals %s != folded %s" % (name, svg_comm, dict(comm_totals)))
    failures += check_pprof(stackprov, workdir, name, data, perf_lines, inexact)
    return failures, data


def record_completeness(stackprov, cap, leaf_names):
    """Samples of a capture file whose walk reaches _start/clone3 through one of leaf_names."""
    js = run([stackprov, "perf-import", cap, "--format", "json", "--quiet"]).stdout
    lines = [json.loads(l) for l in js.splitlines() if l.strip()]
    complete = 0
    for o in lines:
        names = [f["function"] for f in o["frames"]]
        if names and names[-1] in ("_start", "__clone3", "clone3", "__clone") and \
                any(n in leaf_names for n in names if n):
            complete += 1
    return len(lines), 100.0 * complete / max(len(lines), 1)


def check_record_pid(stackprov, workdir, spin):
    """`record -p PID` attached to a running process (not started by stackprov)."""
    cap = os.path.join(workdir, "spin-pid.cap")
    target = subprocess.Popen([spin, "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        rec = run([stackprov, "record", "-F", "499", "--duration", "1", "-p", str(target.pid), "-o", cap])
    finally:
        target.kill()
        target.wait()
    print("record -p: " + rec.stderr.strip())
    n, pct = record_completeness(stackprov, cap, ("c_fn", "d_fn", "b_fn", "a_fn", "spin", "main"))
    print("record -p: %d samples, %.2f%% walked from the leaf to _start/clone3 through the fixture's functions" % (n, pct))
    if n < 50 or pct < 95:
        return ["record -p: %d samples, %.2f%% complete" % (n, pct)]
    return []


def check_record_python(stackprov, workdir, py, script):
    """`stackprov record` of python3.11 itself: walks reach _start through the interpreter loop."""
    cap = os.path.join(workdir, "python.cap")
    rec = run([stackprov, "record", "-F", "499", "-o", cap, "--", py, script, "1.5"])
    print("record python3.11: " + rec.stderr.strip())
    n, pct = record_completeness(stackprov, cap, ("_PyEval_EvalFrameDefault", "Py_RunMain", "Py_BytesMain"))
    print("record python3.11: %d samples, %.2f%% walked from the leaf to _start through the interpreter" % (n, pct))
    if n < 50 or pct < 95:
        return ["record python3.11: %d samples, %.2f%% complete" % (n, pct)]
    return []


def check_record(stackprov, workdir, spin):
    cap = os.path.join(workdir, "spin.cap")
    rec = run([stackprov, "record", "-F", "499", "-o", cap, "--", spin, "1"])
    print("record: " + rec.stderr.strip())
    js = run([stackprov, "perf-import", cap, "--format", "json", "--quiet"]).stdout
    lines = [json.loads(l) for l in js.splitlines() if l.strip()]
    complete = 0
    for o in lines:
        names = [f["function"] for f in o["frames"]]
        if names and names[-1] in ("_start", "__clone3", "clone3", "__clone") and any(n in ("c_fn", "d_fn", "b_fn", "a_fn", "spin", "main") for n in names if n):
            complete += 1
    pct = 100.0 * complete / max(len(lines), 1)
    print("record: %d samples, %.2f%% walked from the leaf to _start/clone3 through the fixture's functions" % (len(lines), pct))
    failures = []
    if len(lines) < 50 or pct < 95:
        failures.append("record: %d samples, %.2f%% complete" % (len(lines), pct))
    if "threads" not in rec.stderr or " 2 threads" not in rec.stderr:
        failures.append("record: expected 2 threads: " + rec.stderr.strip())
    return failures


def check_malformed(stackprov, workdir, data):
    raw = open(data, "rb").read()
    cases = {}
    cases["truncated-header"] = raw[:60]  # a cut in the data section reads (perf_truncated_check.py)
    cases["header-only"] = raw[:104]
    bad = bytearray(raw)
    struct.pack_into("<Q", bad, 48, 1 << 62)  # data.size huge
    cases["huge-data-size"] = bytes(bad)
    bad = bytearray(raw)
    struct.pack_into("<Q", bad, 16, 3)  # attr_size
    cases["wrong-attr-size"] = bytes(bad)
    bad = bytearray(raw)
    data_off = struct.unpack_from("<Q", raw, 40)[0]
    struct.pack_into("<H", bad, data_off + 6, 4)  # first record size < header
    cases["wrong-record-size"] = bytes(bad)
    bad = bytearray(raw)
    bad[0:8] = b"2ELIFREP"
    cases["big-endian"] = bytes(bad)
    failures = []
    for name, content in cases.items():
        p = os.path.join(workdir, "bad-" + name + ".data")
        open(p, "wb").write(content)
        r = subprocess.run([stackprov, "perf-import", p, "--format", "folded", "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        msg = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
        print("malformed %-18s exit %d: %s" % (name, r.returncode, msg))
        if r.returncode != 1 or "perf-import:" not in msg:
            failures.append("malformed %s: exit %d (%s)" % (name, r.returncode, msg))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--min-agree", type=float, default=99.0)
    ap.add_argument("--compare-data", help="only print the %% of samples identical to perf script for this perf.data")
    args = ap.parse_args()
    perf = shutil.which("perf")
    if args.compare_data:
        script = run([perf, "script", "-i", args.compare_data, "-F", "comm,tid,time,ip,sym,symoff,dso", "--no-inline"]).stdout
        js = run([args.stackprov, "perf-import", args.compare_data, "--format", "json", "--quiet"]).stdout
        lines = [json.loads(l) for l in js.splitlines() if l.strip()]
        agree, total = compare(parse_perf_script(script)[0], lines, collections.Counter(), [])
        print("%.2f" % (100.0 * agree / max(total, 1)))
        return 0
    if perf is None:
        print("FAIL: perf is not installed (linux-perf; make deps installs it)")
        return 1
    workdir = tempfile.mkdtemp(prefix="stackprov-perf-")
    spin = os.path.join(workdir, "spin")
    run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o", spin,
         os.path.join(args.source_dir, "fixture_spin.c")])
    probe = subprocess.run([perf, "record", "-q", "-o", os.path.join(workdir, "probe.data"), "--", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        print("FAIL: perf record does not work here (run as root, or lower kernel.perf_event_paranoid): %s" %
              probe.stderr.decode(errors="replace").strip())
        return 1
    failures = []
    f, data = check_profile(args.stackprov, perf, workdir, "fixture", [spin, "1"], args.min_agree)
    failures += f
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        failures.append("%s is not installed (python3.11; make deps installs it)" % py)
    else:
        script = os.path.join(workdir, "work.py")
        open(script, "w").write(PY_WORKLOAD)
        f, _ = check_profile(args.stackprov, perf, workdir, "python3.11", [py, script, "1.5"], args.min_agree)
        failures += f
        failures += check_record_python(args.stackprov, workdir, py, script)
    failures += check_record(args.stackprov, workdir, spin)
    failures += check_record_pid(args.stackprov, workdir, spin)
    failures += check_malformed(args.stackprov, workdir, data)
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
