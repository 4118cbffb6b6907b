#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Go stacks: `stackprov stack --pid/--core` of a stripped Go fixture vs the Go runtime's own goroutine tracebacks
# (SIGQUIT dump of the live process, GOTRACEBACK=crash dump of a crash whose core gdb writes).
"""The fixture (fixture_go.go, built -ldflags='-s -w': no DWARF, no CFI, no .symtab) runs goroutines
blocked in known places (channel, mutex, sleep, a thread-locked busy loop) and the main goroutine
asleep. Go binaries have no .eh_frame: every caller frame is found by the frame-pointer rung and
named by the gopclntab resolver (inline chains included).

1. Live: `stackprov stack --pid --json`, then SIGQUIT (GOTRACEBACK=system): the runtime prints every
   goroutine. Each OS thread whose stack ends in runtime.goexit runs (or last ran) a goroutine: its
   frames from the first main.* function outward (inlined calls expanded, innermost first) must be a
   suffix of one goroutine's traceback; the thread-locked spinner (main.spinLoop <- main.spinner) and
   the main goroutine (main.sleepForever <- main.main <- runtime.main) must both be found.
2. Core: the fixture dereferences nil under GOTRACEBACK=crash; the runtime prints every goroutine and
   raises SIGABRT, where gdb writes the core (gcore; independent of kernel.core_pattern). The crashing
   thread's stack from runtime.sigpanic outward must equal goroutine 1's traceback from there
   (runtime.sigpanic, main.main, runtime.main, runtime.goexit), and every other thread as in 1.
A missing tool (go, gdb) fails naming it."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from go_symbolize import build_one, need  # noqa: E402


def go_traces(text):
    """{goroutine id: [function, ...]} from a runtime traceback (innermost first, 'created by' dropped)."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^goroutine (\d+) \[", line)
        if m:
            cur = out.setdefault(int(m.group(1)), [])
            continue
        if cur is None or not line or line.startswith("\t") or line.startswith("created by"):
            if not line:
                cur = None
            continue
        m = re.match(r"^(\S.*)\(([^()]*)\)$", line)
        if m:
            name = m.group(1)
            cur.append("runtime.gopanic" if name == "panic" else name)  # the runtime prints gopanic as "panic"
    return out


def go_trace_lines(text):
    """{goroutine id: [(function, file basename, line), ...]} from a runtime traceback, innermost first:
    each frame's "\tFILE:LINE +0x.." line after its function line."""
    out, cur, fn = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^goroutine (\d+) \[", line)
        if m:
            cur, fn = out.setdefault(int(m.group(1)), []), None
            continue
        if not line:
            cur = None
            continue
        if cur is None or line.startswith("created by"):
            fn = None
            continue
        m = re.match(r"^(\S.*)\(([^()]*)\)$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"^\t(\S+):(\d+)( |$)", line)
        if m and fn is not None:
            cur.append((fn, os.path.basename(m.group(1)), int(m.group(2))))
            fn = None
    return out


def trace_show_frames(stackprov, work, core, exe):
    """{tid: [(function, file basename, line), ...]} of a trace captured from `core` (trace-show --json:
    each frame's inlined functions, innermost first, then the physical one)."""
    db = os.path.join(work, "go-trace.db")
    if os.path.exists(db):
        os.unlink(db)
    r = subprocess.run([stackprov, "trace-capture", "--core", core, "--exe", exe, "--store", "sqlite:" + db],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit("trace-capture --core: exit %d: %s" % (r.returncode, r.stderr))
    tid = r.stdout.strip()
    r = subprocess.run([stackprov, "trace-show", tid, "--store", "sqlite:" + db, "--json"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        sys.exit("trace-show: exit %d: %s" % (r.returncode, r.stderr))
    out = {}
    for f in json.loads(r.stdout)["frames"]:  # in thread order, innermost frame first
        rows = out.setdefault(f["tid"], [])
        chain = f.get("inline", [])  # outermost first, each at its own position; the physical
        for i in reversed(range(len(chain))):  # frame's line is the outermost call site
            rows.append((chain[i]["function"], os.path.basename(chain[i]["file"]), chain[i]["line"]))
        rows.append((f.get("symbol") or "", os.path.basename(f.get("file") or ""), f.get("line") or 0))
    return out


def our_threads(js):
    """{tid: [function, ...]} from `stack --json`: inlined functions first, then the physical one."""
    out = {}
    for t in js["threads"]:
        names = []
        for f in t["frames"]:
            names += [i["function"] for i in f.get("inlined", [])]
            names.append(f.get("resolved_function") or f.get("function") or "??")
        out[t["tid"]] = names
    return out


def user_part(names):
    for i, n in enumerate(names):
        if n.startswith("main."):
            return names[i:]
    return None


def check_threads(ours, traces, label, bad, must):
    found = set()
    for tid, names in ours.items():
        if not names or names[-1] != "runtime.goexit":
            continue  # a scheduler (g0) stack: no goroutine below it
        part = user_part(names)
        if part is None:
            continue
        match = [g for g, tr in traces.items() if len(tr) >= len(part) and tr[-len(part):] == part]
        if not match and "main.spinLoop" in part:
            # The spinner runs on between our capture and the runtime's dump: its innermost frames
            # may differ. From main.spinLoop outward it must match, and what is inside it must be
            # the fixture's own call nesting (spinLoop -> outerCompute -> mixTwice -> addSquare).
            k = part.index("main.spinLoop")
            nesting = ["main.addSquare", "main.mixTwice", "main.outerCompute"]
            if part[:k] == nesting[len(nesting) - k:] if k <= len(nesting) else False:
                match = [g for g, tr in traces.items() if "main.spinLoop" in tr and
                         tr[tr.index("main.spinLoop"):] == part[k:]]
        if not match:
            bad.append("%s thread %d: %s is no goroutine's traceback suffix; goroutines:\n    %s" %
                       (label, tid, part, "\n    ".join(str(t) for t in traces.values())))
            continue
        print("%s thread %d = goroutine %d: %s" % (label, tid, match[0], " <- ".join(part)))
        found.add(part[0] if part[0] != "main.addSquare" else "main.spinLoop")
        for m in must:
            if m in part:
                found.add(m)
    for m in must:
        if m not in found:
            bad.append("%s: no thread running %s matched the runtime's traceback" % (label, m))


def stack_json(stackprov, args):
    r = subprocess.run([stackprov, "stack", "--json"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    if r.returncode not in (0, 1):
        sys.exit("stackprov stack %s: exit %d: %s" % (args, r.returncode, r.stderr))
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    fx = build_one(args.work, "fx_stripped", ["-ldflags=-s -w"])
    bad = []

    # 1. Live process vs its SIGQUIT dump. Under load the runtime's dump may hold no stack for the
    # spinner ("goroutine running on other thread; stack unavailable": it was on CPU when the dump
    # ran); the whole live step is then run again, up to 3 times (the count is printed).
    env = dict(os.environ, GOTRACEBACK="system")
    err_path = os.path.join(args.work, "sigquit.txt")
    diag = []
    for run in range(1, 4):
        with open(err_path, "w") as err:
            p = subprocess.Popen([fx], stdout=subprocess.PIPE, stderr=err, text=True, env=env)
            try:
                for line in p.stdout:
                    if line.strip() == "READY":
                        break
                time.sleep(0.3)
                # The spinner is stopped wherever it runs; at some instructions (async preemption
                # points, runtime assembly without CFI or pcsp) its walk ends short of runtime.goexit.
                # The main goroutine sleeps on a locked thread (fixture_go.go), whose stack runs
                # through runtime.mcall into it. Capture again (up to 8 times) until both walks are
                # whole; the count is printed and doc/runtime-frames.md names the limit. The captures
                # are spaced (0.25 s more each time, ~7 s in all): a state that lasts (a loaded machine
                # that has not let the main goroutine park yet) gets time to pass.
                for attempt in range(1, 9):
                    if attempt > 1:
                        time.sleep(0.25 * (attempt - 1))
                    js = stack_json(args.stackprov, ["--pid", str(p.pid)])
                    walks = our_threads(js).values()
                    if all(any(f in n and n[-1:] == ["runtime.goexit"] for n in walks)
                           for f in ("main.spinLoop", "main.sleepForever")):
                        break
                else:  # no capture had both whole: what each thread was doing, for the report below
                    for tid in sorted(os.listdir("/proc/%d/task" % p.pid)):
                        d = "/proc/%d/task/%s/" % (p.pid, tid)
                        try:
                            state = open(d + "stat").read().rsplit(")", 1)[1].split()[0]
                            diag.append("thread %s: state %s, wchan %s, syscall %s" % (
                                tid, state, open(d + "wchan").read(), open(d + "syscall").read().split()[0]))
                        except OSError as e:
                            diag.append("thread %s: %s" % (tid, e))
                print("live: spinner and main goroutine walked whole on capture %d" % attempt)
                p.send_signal(signal.SIGQUIT)
                p.wait(timeout=30)
            finally:
                # Any failure above (a capture that raised, a wait that timed out) must not leave the
                # spinner running after the test: it spins on a core until killed.
                if p.poll() is None:
                    p.kill()
                    p.wait()
        traces = go_traces(open(err_path).read())
        if any("main.spinLoop" in tr for tr in traces.values()):
            break
        print("live run %d: the runtime's dump has no stack for the spinner; running again" % run)
    if len(traces) < 5:
        bad.append("SIGQUIT dump has %d goroutines (want >= 5): %s" % (len(traces), err_path))
    n_bad = len(bad)
    check_threads(our_threads(js), traces, "live", bad, ["main.spinLoop", "main.sleepForever"])
    if len(bad) > n_bad:  # every thread's walk of the last capture, to see where a walk ended
        for t in js["threads"]:
            bad.append("live capture %d: thread %d (%s), stop %s: %s" % (
                attempt, t["tid"], t.get("name", ""), t.get("stop_reason", ""),
                " <- ".join("%s@%s/%s" % (f.get("resolved_function") or f.get("function") or "??", f.get("pc", ""),
                                          f.get("method", "")) for f in t["frames"])))
        bad += ["live, after the last capture: " + d for d in diag]

    # 2. GOTRACEBACK=crash core (written by gdb at the runtime's SIGABRT) vs the crash traceback.
    gdb = need("gdb")
    core = os.path.join(args.work, "go.core")
    if os.path.exists(core):
        os.unlink(core)
    # The runtime stops every goroutine before its crash dump; one it could not stop in time (the
    # spinner, on CPU, under load) is printed as "goroutine running on other thread; stack
    # unavailable": no independent answer for its thread. The core step is then run again, up to 3
    # times (the count is printed), as the live step above.
    for run in range(1, 4):
        if os.path.exists(core):
            os.unlink(core)
        r = subprocess.run([gdb, "-q", "-batch", "-nx", "-ex", "handle SIGSEGV nostop noprint pass",
                            "-ex", "handle SIGURG nostop noprint pass", "-ex", "handle SIGPIPE nostop noprint pass",
                            "-ex", "handle SIGABRT stop print nopass", "-ex", "run", "-ex", "gcore " + core,
                            "--args", fx, "crash"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, GOTRACEBACK="crash"))
        if not os.path.exists(core):
            sys.exit("gdb wrote no core: %s" % r.stdout[-2000:])
        if "stack unavailable" not in r.stderr:
            break
        print("core run %d: the runtime's crash dump has a goroutine without its stack; running again" % run)
    try:
        traces = go_traces(r.stderr)
        js = stack_json(args.stackprov, ["--core", core, "--exe", fx])
        trace_frames = trace_show_frames(args.stackprov, args.work, core, fx)
    finally:
        os.unlink(core)
    ours = our_threads(js)
    crash_tid = js["threads"][0]["tid"] if js.get("threads") else None
    want = traces.get(1, [])
    want = want[want.index("runtime.sigpanic"):] if "runtime.sigpanic" in want else []
    got = ours.get(crash_tid, [])
    got = got[got.index("runtime.sigpanic"):] if "runtime.sigpanic" in got else got
    if not want or got != want:
        bad.append("core: crashing thread %s from runtime.sigpanic: ours %s, runtime's %s" % (crash_tid, got, want))
    else:
        print("core thread %d = goroutine 1: %s" % (crash_tid, " <- ".join(got)))
    # 3. The same core as a trace (trace-capture --core, trace-show --json): the crashing thread's
    # main.* frames carry the file:line the runtime's traceback prints for goroutine 1 (the
    # gopclntab resolver gives lines in traces as in `stack`: the one rule of
    # sprov_resolver_gives_lines; before it, trace frames named by gopclntab had none).
    want_lines = [fl for fl in go_trace_lines(r.stderr).get(1, []) if fl[0].startswith("main.")]
    got_lines = [fl for fl in trace_frames.get(crash_tid, []) if fl[0].startswith("main.")]
    if not want_lines or got_lines != want_lines:
        bad.append("trace: crashing thread's main.* frames: ours %s, runtime's %s" % (got_lines, want_lines))
    else:
        print("trace thread %d: %s" % (crash_tid, ", ".join("%s %s:%d" % fl for fl in got_lines)))
    # The spinner was preempted by the crash (switched out through runtime.mcall onto the main thread's g0
    # stack, below which no frame pointer leads back up to it): only the threads that do end in goexit count.
    check_threads(ours, traces, "core", bad, ["main.main"])
    if bad:
        for b in bad:
            print("MISMATCH " + b)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
