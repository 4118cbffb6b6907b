#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# perf.data as people record it: `perf record -g`, plain `perf record` and `--call-graph dwarf` recordings
# of real test programs imported by stackprov perf-import and compared with `perf script` on the same file,
# sample by sample and frame by frame: user and kernel frame names (kernel names from /proc/kallsyms as perf
# names them), the mode said per sample (JSON) and on stderr, `_[k]` kernel frames in folded output against
# perf script folded as stackcollapse-perf --kernel folds it, and the kernel build-id check (the recording's
# against `perf buildid-list -k` of the running kernel; a recording of another kernel is not named).
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_check import find_perf, finish, perf_addr_delta, run, script_args, strip_version  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import perf_script_samples  # noqa: E402  (tests/lib: the peers' output parsers)

KERNEL_DSO = re.compile(r"^\[(kernel\.kallsyms|[A-Za-z0-9_]+)\]$")


def is_kernel_dso(dso):
    return dso == "[kernel.kallsyms]" or (KERNEL_DSO.match(dso) is not None and dso not in ("[vdso]", "[unknown]",
                                                                                           "[vsyscall]", "[stack]"))


def compare(name, perf_samples, ours, want_mode, notes):
    """Frame for frame. Returns (failures, stats). Allowed, and counted: an alias of the same symbol
    (same start address), and a return address that is exactly a symbol's start (perf names the
    symbol at the address, stackprov the caller's at address - 1)."""
    by_key = {(o["tid"], o["time"] // 1000): o for o in ours}
    st = collections.Counter()
    examples = []
    for key, (comm, pframes) in perf_samples.items():
        o = by_key.get(key)
        st["samples"] += 1
        if o is None:
            st["missing in stackprov"] += 1
            continue
        if o["mode"] != want_mode(o):
            st["mode %s, expected %s" % (o["mode"], want_mode(o))] += 1
        frames = o["frames"]
        if len(frames) != len(pframes):
            st["frame count differs"] += 1
            if len(examples) < 5:
                examples.append("%s: %d frames vs perf %d: %s | %s" % (key, len(frames), len(pframes),
                                [f["function"] for f in frames], [p[1] for p in pframes]))
            continue
        ok = True
        for i, ((addr, sym, off, dso), f) in enumerate(zip(pframes, frames)):
            kernel = is_kernel_dso(dso)
            st["kernel frames" if kernel else "user frames"] += 1
            if kernel != (f["method"] == "kernel"):
                st["kernel/user differs"] += 1
                ok = False
                break
            mine = f["function"] or "[unknown]"
            if kernel and f["function"]:
                st["kernel frames named"] += 1
            if strip_version(mine) == strip_version(sym):
                continue
            start = addr - off if off is not None else None
            mine_start = int(f["symbol_start"], 16) if f.get("symbol_start") else None
            if not kernel and f["module"] and mine_start is not None:
                mine_start -= perf_addr_delta(f["module"])
                # callchain mode prints module-relative addresses, the plain mode absolute ones
                if start is not None and start > 1 << 40:
                    start -= int(f["pc"], 16) - int(f["module_offset"], 16)
            if start is not None and mine_start is not None and start == mine_start:
                st["(agrees) alias of the same symbol"] += 1
                notes.setdefault("aliases", set()).add((sym, mine))
                continue
            if i > 0 and off == 0:
                st["(agrees) return address at a symbol start: perf names it by the address, stackprov by "
                   "address - 1"] += 1
                continue
            st["%s name differs" % ("kernel" if kernel else "user")] += 1
            if len(examples) < 5:
                examples.append("%s frame %d: perf %#x %s+%s (%s) vs stackprov %s %s (%s, %s)" % (
                    key, i, addr, sym, off, dso, f["pc"], mine, f["module"], f["method"]))
            ok = False
            break
        st["identical"] += ok
    failures = []
    print("%s: %s" % (name, dict(st)))
    for e in examples:
        print("  example: " + e)
    bad = sum(n for k, n in st.items() if k.startswith(("missing", "mode ", "frame count", "kernel/user", "kernel name",
                                                          "user name")))
    if st["samples"] < 50:
        failures.append("%s: only %d perf samples" % (name, st["samples"]))
    if bad > st["samples"] * 0.01:
        failures.append("%s: %d of %d samples differ from perf script" % (name, bad, st["samples"]))
    if st["kernel name differs"]:
        failures.append("%s: %d kernel frames named otherwise than perf script" % (name, st["kernel name differs"]))
    return failures, st


def perf_folded(perf_samples, aliases):
    """perf script's samples folded as stackcollapse-perf.pl --kernel folds them: comm;root;...;leaf with
    kernel frames suffixed _[k]; symbol versions dropped, perf's alias spelled as ours."""
    out = collections.Counter()
    for comm, frames in perf_samples.values():
        names = []
        for addr, sym, off, dso in frames:
            n = aliases.get(strip_version(sym), strip_version(sym))
            names.append(n + "_[k]" if is_kernel_dso(dso) else n)
        out[";".join([comm] + names[::-1])] += 1
    return out


def check_recording(sp, perf, workdir, name, record_args, cmd, want_mode, summary_mode):
    data = os.path.join(workdir, name + ".data")
    run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999"] + record_args + ["-o", data, "--"] + cmd)
    script = run([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym,symoff,dso", "--no-inline"]).stdout
    # {(tid, time_us): (comm, [(addr, sym, symoff, dso)...])}, leaf first, kernel frames included; samples
    # without a callchain too (the one-line form)
    perf_samples = perf_script_samples(script, one_line=True)
    r = run([sp, "perf-import", data, "--format", "json"])
    ours = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    notes = {}
    failures, st = compare(name, perf_samples, ours, want_mode, notes)
    # The mode is said on stderr: every sample counted under the expected one.
    m = re.search(r"user frames: (\d+) unwound from copied stacks \(dwarf\), (\d+) from call chains \(callchain\), "
                  r"(\d+) ip only", r.stderr)
    counts = dict(zip(("dwarf", "callchain", "ip"), map(int, m.groups()))) if m else {}
    modes = collections.Counter(o["mode"] for o in ours)
    print("%s: stderr modes %s, JSON modes %s" % (name, counts, dict(modes)))
    if counts != {k: modes.get(k, 0) for k in ("dwarf", "callchain", "ip")}:
        failures.append("%s: stderr modes %s differ from JSON %s" % (name, counts, dict(modes)))
    if modes.get(summary_mode, 0) < 0.95 * len(ours):
        failures.append("%s: %s of %d samples in mode %s" % (name, modes.get(summary_mode, 0), len(ours), summary_mode))
    # Folded: kernel frames marked _[k], stack for stack as perf script's.
    folded = run([sp, "perf-import", data, "--format", "folded", "--quiet", "--no-inline"]).stdout  # as perf's
    mine = collections.Counter()
    for l in folded.splitlines():
        stack, _, n = l.rpartition(" ")
        mine[";".join(strip_version(x) for x in stack.split(";"))] += int(n)
    aliases = {strip_version(a): strip_version(b) for a, b in notes.get("aliases", set())}
    want = perf_folded(perf_samples, aliases)
    differ = sum((want - mine).values())
    marked = sum(n for s, n in mine.items() if "_[k]" in s)
    print("%s: folded %d samples (%d with _[k] frames); perf script folded %d; %d samples differ" % (
        name, sum(mine.values()), marked, sum(want.values()), differ))
    allowed = st["missing in stackprov"] + st["frame count differs"] + st["user name differs"] + \
        st["(agrees) return address at a symbol start: perf names it by the address, stackprov by address - 1"]
    if differ > allowed:
        failures.append("%s: folded output differs from perf script's in %d samples (> %d found frame by frame)" % (
            name, differ, allowed))
    return failures, st, data


def patch_kernel_build_id(src, dst, kid):
    """A copy of `src` whose recorded kernel build-id bytes are changed (as if recorded on another kernel)."""
    raw = bytearray(open(src, "rb").read())
    needle = bytes.fromhex(kid)
    at = raw.find(needle)
    if at < 0:
        return False
    raw[at] ^= 0xff
    open(dst, "wb").write(bytes(raw))
    return True


def check_kernel_identity(sp, perf, workdir, data, cap):
    """The running kernel's build-id (perf buildid-list -k) is what the recordings hold and what stackprov
    names kernel frames with; a recording of another kernel gets a warning and no kernel names."""
    failures = []
    running = run([perf, "buildid-list", "-k"]).stdout.strip()
    listed = run([perf, "buildid-list", "-i", data]).stdout
    rec = [l.split()[0] for l in listed.splitlines() if l.endswith("[kernel.kallsyms]")]
    print("kernel: running build-id %s (perf buildid-list -k); perf.data holds %s" % (running, rec))
    if rec != [running]:
        failures.append("kernel: perf.data's kernel build-id %s is not the running kernel's %s" % (rec, running))
    for what, path in (("perf.data", data), ("capture", cap)):
        js = [json.loads(l) for l in run([sp, "perf-import", path, "-f", "json", "-q"]).stdout.splitlines()]
        kframes = [f for o in js for f in o["frames"] if f["method"] == "kernel"]
        ids = {f.get("build_id") for f in kframes}
        named = sum(1 for f in kframes if f["function"])
        print("kernel %s: %d kernel frames, %d named, build-ids %s" % (what, len(kframes), named, ids))
        if not kframes or named < 0.99 * len(kframes) or ids != {running}:
            failures.append("kernel %s: %d kernel frames, %d named, build-ids %s (want %s)" % (
                what, len(kframes), named, ids, running))
        other = os.path.join(workdir, "other-kernel-" + os.path.basename(path))
        if not patch_kernel_build_id(path, other, running):
            failures.append("kernel %s: the running kernel's build-id is not in the file" % what)
            continue
        r = run([sp, "perf-import", other, "-f", "folded"])
        kernel_names = collections.Counter(n for l in r.stdout.splitlines() for n in l.rpartition(" ")[0].split(";")
                                           if n.endswith("_[k]"))
        warn = [l for l in r.stderr.splitlines() if "kernel frames left unnamed" in l]
        print("kernel %s from another kernel: %s; kernel frames %s" % (what, warn, dict(kernel_names)))
        if not warn or running not in warn[0] or set(kernel_names) != {"[unknown]_[k]"}:
            failures.append("kernel %s recorded on another kernel: warning %s, kernel names %s" % (
                what, warn, dict(kernel_names)))
    return failures


def main():
    args = script_args()
    perf = find_perf()
    if perf is None:
        return 1
    workdir = tempfile.mkdtemp(prefix="stackprov-perfmodes-")
    spin = os.path.join(workdir, "spin")
    sysprog = os.path.join(workdir, "sys")
    for out, src in ((spin, "fixture_spin.c"), (sysprog, "fixture_sys.c")):
        run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", out, os.path.join(args.source_dir, src)])
    probe = subprocess.run([perf, "record", "-q", "-g", "-o", os.path.join(workdir, "probe.data"), "--", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        print("FAIL: perf record does not work here (kernel.perf_event_paranoid is %s): %s" % (
            open("/proc/sys/kernel/perf_event_paranoid").read().strip(), probe.stderr.decode(errors="replace")))
        return 1
    failures = []
    cases = [
        ("spin -g", ["-g"], [spin, "1"], lambda o: "callchain", "callchain"),
        ("sys -g", ["-g"], [sysprog, "1"], lambda o: "callchain", "callchain"),
        ("spin plain", [], [spin, "1"], lambda o: "ip", "ip"),
        ("sys plain", [], [sysprog, "1"], lambda o: "ip", "ip"),
        ("sys dwarf", ["--call-graph", "dwarf,16384"], [sysprog, "1"], lambda o: "dwarf", "dwarf"),
    ]
    kernel_total = named_total = 0
    sys_g = None
    for name, rec_args, cmd, want_mode, summary_mode in cases:
        f, st, data = check_recording(args.stackprov, perf, workdir, name.replace(" ", "-"), rec_args, cmd, want_mode,
                                      summary_mode)
        failures += f
        if name.startswith("sys"):
            kernel_total += st["kernel frames"]
            named_total += st["kernel frames named"]
        if name == "sys -g":
            sys_g = data
    print("kernel frames in the sys recordings: %d, named by stackprov: %d" % (kernel_total, named_total))
    if kernel_total < 500 or named_total < 0.99 * kernel_total:
        failures.append("kernel frames: %d named of %d (want >= 99%% of >= 500)" % (named_total, kernel_total))
    cap = os.path.join(workdir, "sys.cap")
    run([args.stackprov, "record", "-F", "999", "-o", cap, "--", sysprog, "1"])
    failures += check_kernel_identity(args.stackprov, perf, workdir, sys_g, cap)
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
