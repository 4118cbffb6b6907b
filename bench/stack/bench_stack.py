#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Wall time of `stackprov stack --pid` vs `eu-stack -m -p` vs gdb `thread apply all bt`, same targets, outputs compared.
"""Targets: the fixture with 5 and with 16 threads (main + nanosleep chains, -O2 no fp, PIE) and
python3.11 blocked in time.sleep inside nested functions. Each tool is run --runs times per target (gdb a
third as often: it takes seconds); every run must exit 0. Reports median and minimum wall times
and the ratios peer/stackprov (> 1: stackprov is faster), writes JSON. The goals (issue 37; issue 15
asked 2x with lines), per target: stackprov --no-lines >= 5x faster than eu-stack -m, stackprov
(lines) >= 3x faster than eu-stack -m -i -s; timings are reported, not asserted.

The outputs of the timed runs are kept and compared; any difference fails the benchmark:
  * stackprov stack --no-lines  vs  eu-stack -m: the same threads; per thread, frame by frame,
    the same pc, module and function (symbol versions and clone suffixes dropped; two names of
    one address, both in the module's symbol tables, count as equal and are reported as aliases);
    the same number of frames, or, where eu-stack stops early, stackprov's further frames must be
    gdb's (same pc, same name) in the gdb runs of the same targets;
  * stackprov stack (lines)  vs  eu-stack -m -i -s: the same physical frames (pc), the same inline
    chain (eu-stack prints inlined functions as frames sharing their caller's pc; innermost first)
    by name, and the same file:line:column (file by basename) for every inlined and physical frame;
  * every run of a tool prints the same as its first run (the targets sleep)."""
import argparse
import collections
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

PY_SCRIPT = r"""
import time
def level_c():
    time.sleep(100000)
def level_b():
    level_c()
def level_a():
    level_b()
print("ready", flush=True)
level_a()
"""

TARGET_RATIO = 5.0  # stackprov stack --no-lines vs eu-stack -m -p (issues 15 and 37)
TARGET_RATIO_LINES = 3.0  # stackprov stack vs eu-stack -m -i -s (issue 37; issue 15: 2x)


def wait_asleep(pid, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        states = []
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                s = f.read()
            states.append(s[s.rindex(")") + 2])
        if all(c in "SD" for c in states):
            time.sleep(0.05)
            return len(states)
        time.sleep(0.01)
    raise SystemExit("bench/stack: target %d not asleep" % pid)


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("bench/stack: %s ended before ready" % cmd)
        if line.strip() == "ready":
            break
    return p, wait_asleep(p.pid)


def time_runs(cmd, runs):
    """Timed runs; each run's stdout is kept (read through a pipe, the same for every tool)."""
    times, outputs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit("bench/stack: FAIL: %s exited %d: %s" %
                             (" ".join(cmd), r.returncode, r.stderr.decode()[-500:]))
        times.append(dt)
        outputs.append(r.stdout.decode(errors="replace"))
    return ({"runs": runs, "median_ms": statistics.median(times) * 1e3,
             "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3}, outputs)


# ------------------------------------------------------------------ output comparison

_VERSION_RE = re.compile(r"@@?[A-Za-z0-9_.]+$")
_CLONE_RE = re.compile(r"(\.(cold|isra|part|constprop|lto_priv|localalias|llvm)(\.\d+)?)+$")


def norm_name(name):
    if not name or name == "??":
        return ""
    return _CLONE_RE.sub("", _VERSION_RE.sub("", name.strip()))


def parse_stacks(text, ours):
    """eu-stack -m [-i -s] or stackprov stack text -> {tid: {"frames": [...], "stop": str}}.
    A frame: {"pc", "name", "module", "method", "locs": [loc...]}; ours also "inlined": [(name, loc)].
    A loc is "basename:line[:column]"."""
    threads, cur, frame = {}, None, None
    for line in text.splitlines():
        m = re.match(r'^TID (\d+)(?: ".*")?:$', line)  # stackprov names the thread: TID 12 "comm":
        if m:
            cur = threads.setdefault(int(m.group(1)), {"frames": [], "stop": ""})
            frame = None
            continue
        if cur is None:
            continue
        if line.startswith("stop: "):
            cur["stop"] = line[6:].strip()
            continue
        m = re.match(r"^#(\d+)\s+0x([0-9a-f]+)\s*(.*)$", line)
        if m:
            rest, method = m.group(3), ""
            if ours:
                if re.search(r" \[[^]]*\binferred\]$", rest):
                    # A tail-call frame inferred from DWARF call sites: eu-stack shows only the
                    # frames on the stack, so the comparison leaves it out.
                    frame = None
                    continue
                mm = re.match(r"^(.*) \[(\w+)\]$", rest)
                if mm:
                    rest, method = mm.group(1), mm.group(2)
            name, module = rest, ""
            if " - " in rest or rest.startswith("- "):
                name, module = (" " + rest).rsplit(" - ", 1)
            name = name.strip()
            if ours:
                name = re.sub(r"\+0x[0-9a-f]+$", "", name)
            frame = {"pc": int(m.group(2), 16), "name": "" if name == "??" else name,
                     "module": module.strip(), "method": method, "locs": [], "inlined": []}
            cur["frames"].append(frame)
            continue
        if frame is None or not line.startswith("    "):
            continue
        t = line.strip()
        mi = re.match(r"^inlined (.*) at (.*)$", t)
        if mi:
            frame["inlined"].append((mi.group(1), loc_key(mi.group(2))))
        else:
            frame["locs"].append(loc_key(t))
    return threads


def loc_key(loc):
    m = re.match(r"^(.*?):(\d+)(?::(\d+))?$", loc.strip())
    if not m:
        return loc.strip()
    col = m.group(3) if m.group(3) and m.group(3) != "0" else ""
    return "%s:%s%s" % (os.path.basename(m.group(1)), m.group(2), ":" + col if col else "")


def parse_gdb_bt(text):
    """gdb `thread apply all bt` -> {tid: [(pc or None, name)]}."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^Thread \d+ \(.*?LWP (\d+)\)", line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        m = re.match(r"^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+)", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16) if m.group(1) else None, m.group(2)))
    return threads


class Modules:
    """Module-relative addresses of a live target and the FUNC symbols of a module (readelf), for aliases."""

    def __init__(self, pid):
        self.bases, self.syms = {}, {}
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                p = line.split()
                if len(p) >= 6 and p[5].startswith("/"):
                    lo, off = int(p[0].split("-")[0], 16), int(p[2], 16)
                    if p[5] not in self.bases or lo - off < self.bases[p[5]]:
                        self.bases[p[5]] = lo - off

    def offset(self, module, pc):
        r = subprocess.run(["readelf", "-hW", module], capture_output=True, text=True).stdout
        if "EXEC (Executable file)" in r:
            return pc
        return pc - self.bases.get(module, 0)

    def names_at(self, module, addr):
        if module not in self.syms:
            syms = []
            paths = [module]
            bid = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(["readelf", "-nW", module],
                            capture_output=True, text=True).stdout)
            if bid:
                paths.append("/usr/lib/debug/.build-id/%s/%s.debug" % (bid.group(1)[:2], bid.group(1)[2:]))
            for path in paths:
                if not os.path.exists(path):
                    continue
                out = subprocess.run(["readelf", "-sW", "--dyn-syms", path], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    f = line.split()
                    if len(f) >= 8 and f[0].endswith(":") and f[3] in ("FUNC", "IFUNC"):
                        try:
                            syms.append((int(f[1], 16), int(f[2], 0), f[7]))
                        except ValueError:
                            pass
            self.syms[module] = syms
        return {norm_name(n) for v, sz, n in self.syms[module] if v <= addr < v + max(sz, 1)}


def same_name(a, b, module, pc, is_caller, mods, notes):
    na, nb = norm_name(a), norm_name(b)
    if na == nb:
        return True
    if not na or not nb or not module.startswith("/"):
        return False
    at = mods.names_at(module, mods.offset(module, pc) - (1 if is_caller else 0))
    if na in at and nb in at:
        notes["aliases"] += 1
        return True
    return False


def compare_no_lines(ours, eu, gdb, mods, notes):
    """stackprov --no-lines vs eu-stack -m; gdb for frames past eu-stack's last one."""
    errs = []
    if set(ours) != set(eu):
        return ["threads differ: only stackprov %s, only eu-stack %s" %
                (sorted(set(ours) - set(eu)), sorted(set(eu) - set(ours)))]
    for tid in sorted(eu):
        sf, ef = ours[tid]["frames"], eu[tid]["frames"]
        if len(sf) < len(ef):
            errs.append("tid %d: stackprov %d frames (stop %s), eu-stack %d" % (tid, len(sf), ours[tid]["stop"], len(ef)))
        for i, (s, e) in enumerate(zip(sf, ef)):
            if s["pc"] != e["pc"] or s["module"] != e["module"]:
                errs.append("tid %d #%d: stackprov 0x%x %s, eu-stack 0x%x %s" % (tid, i, s["pc"], s["module"],
                                                                                  e["pc"], e["module"]))
                break
            if not same_name(s["name"], e["name"], s["module"], s["pc"], i > 0, mods, notes):
                errs.append("tid %d #%d 0x%x: stackprov '%s', eu-stack '%s'" % (tid, i, s["pc"], s["name"], e["name"]))
                break
        if len(sf) > len(ef):
            # eu-stack stopped early: gdb's physical frames (inline frames have no pc of their own) decide.
            g = [f for f in gdb.get(tid, []) if f[0] is not None]
            notes["frames past eu-stack"] += len(sf) - len(ef)
            for i in range(len(ef), len(sf)):
                s = sf[i]
                hit = [f for f in g if f[0] == s["pc"]]
                if not hit or not same_name(s["name"], hit[0][1], s["module"], s["pc"], True, mods, notes):
                    errs.append("tid %d #%d 0x%x %s: past eu-stack's %d frames and not in gdb's backtrace" %
                                (tid, i, s["pc"], s["name"], len(ef)))
                    break
    return errs


def llvm_chain(module, offset):
    """llvm-symbolizer-14 --inlines at a module offset: [(name, loc)], innermost first."""
    r = subprocess.run(["llvm-symbolizer-14", "--inlines", "--obj=" + module, "0x%x" % offset],
                       capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    return [(norm_name(lines[i]), loc_key(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]


def compare_lines(ours, eu, mods, notes):
    """stackprov (lines) vs eu-stack -m -i -s: physical pcs, inline chains and source locations.
    Where eu-stack's chain differs, llvm-symbolizer-14 at the same address (pc - 1 for a caller)
    is the arbiter: stackprov must then equal it (counted as "eu-stack differs, llvm-symbolizer
    agrees")."""
    errs = []
    if set(ours) != set(eu):
        return ["threads differ: only stackprov %s, only eu-stack %s" %
                (sorted(set(ours) - set(eu)), sorted(set(eu) - set(ours)))]
    for tid in sorted(eu):
        # eu-stack -i: the frames of one pc are the inlined functions (innermost first), then the physical one.
        groups = []
        for f in eu[tid]["frames"]:
            if groups and groups[-1][-1]["pc"] == f["pc"]:
                groups[-1].append(f)
            else:
                groups.append([f])
        sf = ours[tid]["frames"]
        for i, grp in enumerate(groups):
            if i >= len(sf):
                errs.append("tid %d: stackprov %d physical frames, eu-stack %d" % (tid, len(sf), len(groups)))
                break
            s = sf[i]
            want_inl = [(norm_name(f["name"]), f["locs"][0] if f["locs"] else "") for f in grp[:-1]]
            have_inl = [(norm_name(n), l) for n, l in s["inlined"]]
            want_loc = grp[-1]["locs"][0] if grp[-1]["locs"] else ""
            have_loc = s["locs"][0] if s["locs"] else ""
            if s["pc"] == grp[0]["pc"] and (want_inl != have_inl or want_loc != have_loc) and \
                    s["module"].startswith("/"):
                llvm = llvm_chain(s["module"], mods.offset(s["module"], s["pc"]) - (1 if i > 0 else 0))
                if llvm and [l for n, l in llvm] == [l for n, l in have_inl] + [have_loc] and \
                        [n for n, l in llvm[:-1]] == [n for n, l in have_inl]:
                    notes["eu-stack -i differs, llvm-symbolizer agrees"] += 1
                    continue
            if s["pc"] != grp[0]["pc"] or want_inl != have_inl or want_loc != have_loc:
                errs.append("tid %d #%d 0x%x: eu-stack inlined %s at %s; stackprov 0x%x inlined %s at %s" %
                            (tid, i, grp[0]["pc"], want_inl, want_loc or "-", s["pc"], have_inl, have_loc or "-"))
                break
    return errs


def compare_runs(tool, outputs):
    for k, out in enumerate(outputs[1:], 1):
        if out != outputs[0]:
            return ["%s: timed run %d printed something else than run 0 (the target sleeps)" % (tool, k)]
    return []


def bench_target(name, proc, threads, a):
    pid = str(proc.pid)
    tools = {
        # Like for like: pc, function name and module per frame (eu-stack -m), then with
        # source lines and inline frames on both sides. Native frames only (--python=off): eu-stack
        # prints no Python frames.
        "stackprov": [a.stackprov, "stack", "--no-lines", "--python=off", "--pid", pid],
        "eu-stack": [a.eu_stack, "-m", "-p", pid],
        "stackprov+lines": [a.stackprov, "stack", "--python=off", "--pid", pid],
        "eu-stack -i -s": [a.eu_stack, "-m", "-i", "-s", "-p", pid],
        "gdb": ["timeout", "-s", "KILL", "200", a.gdb, "-nx", "-batch", "-ex",
                "set debuginfod enabled off", "-p", pid, "-ex", "thread apply all bt"],
    }
    # One warm-up run each (page cache, debug files), not counted.
    for cmd in tools.values():
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    res = {"threads": threads, "tools": {}}
    outs = {}
    for tool, cmd in tools.items():
        runs = a.runs if tool != "gdb" else max(1, a.runs // 3)
        res["tools"][tool], outs[tool] = time_runs(cmd, runs)

    # The answers of the timed runs.
    errs = []
    for tool in ("stackprov", "eu-stack", "stackprov+lines", "eu-stack -i -s"):
        errs += compare_runs(tool, outs[tool])
    mods = Modules(proc.pid)
    notes = collections.Counter()
    gdb = {}
    for out in outs["gdb"]:
        for tid, frames in parse_gdb_bt(out).items():
            gdb.setdefault(tid, frames)
    sp_plain = parse_stacks(outs["stackprov"][0], True)
    eu_plain = parse_stacks(outs["eu-stack"][0], False)
    errs += ["[names] " + e for e in compare_no_lines(sp_plain, eu_plain, gdb, mods, notes)]
    errs += ["[lines] " + e for e in compare_lines(parse_stacks(outs["stackprov+lines"][0], True),
                                                  parse_stacks(outs["eu-stack -i -s"][0], False), mods, notes)]
    bad_stop = {tid: t["stop"] for tid, t in sp_plain.items() if t["stop"] != "end_of_stack"}
    if bad_stop:
        errs.append("stop reasons other than end_of_stack: %s" % bad_stop)
    frames = sum(len(t["frames"]) for t in eu_plain.values())
    res["compared"] = {"threads": len(eu_plain), "eu_stack_frames": frames,
                       "runs_compared": {t: len(o) for t, o in outs.items() if t != "gdb"},
                       "aliases_accepted": notes["aliases"],
                       "frames_past_eu_stack_checked_with_gdb": notes["frames past eu-stack"],
                       "inline_chains_where_eu_stack_differs_and_llvm_symbolizer_agrees":
                           notes["eu-stack -i differs, llvm-symbolizer agrees"],
                       "differences": errs, "identical": not errs}

    sp = res["tools"]["stackprov"]["median_ms"]
    res["ratio_eu_stack_over_stackprov"] = res["tools"]["eu-stack"]["median_ms"] / sp
    res["ratio_gdb_over_stackprov"] = res["tools"]["gdb"]["median_ms"] / sp
    res["ratio_eu_stack_lines_over_stackprov_lines"] = (res["tools"]["eu-stack -i -s"]["median_ms"] /
                                                       res["tools"]["stackprov+lines"]["median_ms"])
    print("%-22s %2d threads  stackprov %7.1f ms  eu-stack -m %7.1f ms (x%.2f)  gdb %8.1f ms (x%.1f)" %
          (name, threads, sp, res["tools"]["eu-stack"]["median_ms"],
           res["ratio_eu_stack_over_stackprov"], res["tools"]["gdb"]["median_ms"],
           res["ratio_gdb_over_stackprov"]), flush=True)
    print("  %s with source lines and inline frames: stackprov %.1f ms, eu-stack -m -i -s %.1f ms (x%.2f)" %
          (name, res["tools"]["stackprov+lines"]["median_ms"], res["tools"]["eu-stack -i -s"]["median_ms"],
           res["ratio_eu_stack_lines_over_stackprov_lines"]), flush=True)
    print("  outputs of the timed runs: %d threads, %d eu-stack frames; %s (aliases accepted: %d, frames past "
          "eu-stack checked with gdb: %d, inline chains where eu-stack -i differs and llvm-symbolizer-14 agrees "
          "with stackprov: %d)" % (len(eu_plain), frames, "identical" if not errs else "%d DIFFERENCES" % len(errs),
                                   notes["aliases"], notes["frames past eu-stack"],
                                   notes["eu-stack -i differs, llvm-symbolizer agrees"]), flush=True)
    for e in errs[:20]:
        print("    FAIL " + e, flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--eu-stack", default=shutil.which("eu-stack") or "/usr/bin/eu-stack")
    ap.add_argument("--gdb", default=shutil.which("gdb") or "/usr/bin/gdb")
    ap.add_argument("--python311", default="/usr/bin/python3.11")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    for tool in (a.stackprov, a.eu_stack, a.gdb):
        if not os.path.exists(tool):
            raise SystemExit("bench/stack: FAIL: %s not found" % tool)

    results = {"benchmark": "stack", "unit": "ms wall time per invocation (median of runs)",
               "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
               "targets": {}}
    print("bench/stack: median wall time per invocation, ratio = peer / stackprov")
    targets = [("fixture-5-threads", [a.fixture, "bench", "5"]), ("fixture-16-threads", [a.fixture, "bench", "16"])]
    if not os.path.exists(a.python311):
        raise SystemExit("bench/stack: FAIL: %s not found (python3.11)" % a.python311)
    targets.append(("python3.11-sleep", [a.python311, "-c", PY_SCRIPT]))
    for name, cmd in targets:
        proc, threads = start(cmd)
        try:
            results["targets"][name] = bench_target(name, proc, threads, a)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    # Issue 37's goals, per target: >= 5x eu-stack -p without lines, >= 3x eu-stack -i -s with lines.
    results["goal"] = {}
    for name, t in results["targets"].items():
        plain, lines = t["ratio_eu_stack_over_stackprov"], t["ratio_eu_stack_lines_over_stackprov_lines"]
        results["goal"][name] = {
            "no_lines_vs_eu_stack": {"want": ">= %.0fx" % TARGET_RATIO, "measured": round(plain, 2),
                                     "met": plain >= TARGET_RATIO},
            "lines_vs_eu_stack_i_s": {"want": ">= %.0fx" % TARGET_RATIO_LINES, "measured": round(lines, 2),
                                      "met": lines >= TARGET_RATIO_LINES}}
        print("goal %-20s no lines >= %.0fx eu-stack: %s (x%.2f); lines >= %.0fx eu-stack -i -s: %s (x%.2f)" % (
            name, TARGET_RATIO, "met" if plain >= TARGET_RATIO else "NOT met", plain,
            TARGET_RATIO_LINES, "met" if lines >= TARGET_RATIO_LINES else "NOT met", lines))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print("bench/stack: wrote %s" % a.out)
    failed = [n for n, t in results["targets"].items() if not t["compared"]["identical"]]
    if failed:
        print("bench/stack: FAIL: outputs differ from eu-stack's on %s" % ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
