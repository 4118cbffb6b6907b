#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack --python` against gdb's py-bt (CPython's own gdb extension), thread by thread.
"""One comparison per invocation (one ctest each):

  runtime_check.py live    the fixture, live: stackprov --pid, then gdb -p on the same process
  runtime_check.py core    the fixture through gcore: stackprov --core and gdb on that core, and the
                           core's threads saved with --save-snapshots, shown with --snapshot
  runtime_check.py crash   fixture_py311_abort.py (os.abort() mid-exception): the kernel's core
                           when kernel.core_pattern writes a file here, and gdb's gcore at the
                           SIGABRT stop: stackprov --core and gdb on each
  runtime_check.py modes   --python=only/off against auto on one capture; bad --python values
  runtime_check.py snapshot the fixture, live: stackprov --pid --save-snapshots DIR and gdb -p on the
                           same stopped state; the fixture is then killed and `stack --snapshot DIR`
                           (JSON and text) is compared with that py-bt: the Python frames kept in the
                           serialized snapshots (section 5) are those of the moment of the capture
  runtime_check.py trace   the fixture, live: trace-capture --bundle and gdb -p on the same stopped
                           state; after the fixture is killed, trace-show (JSON event and text),
                           trace-resolve and trace-replay: the trace's Python frames (unwind method
                           "runtime") equal py-bt's, after resolve too, and every replayed frame,
                           Python ones included, equals the recorded one; each seed's report counts
                           py-bt's frames and threads as its python segment, all identical

  runtime_check.py record  fixture_py311_spin.py (two threads spinning in known chains): `record
                           --python -p PID`, then gdb -p on the process: every sample's Python
                           frames in `perf-import -f json` (file, line, co_name) equal py-bt's for
                           its thread, each group before the _PyEval_EvalFrameDefault activation gdb
                           gives it; the folded output has the chains; a `record` without --python
                           of the same process is a version 3 file without Python frames

Options: --stackprov BIN --gdb BIN --gcore BIN --python311 /usr/bin/python3.11 [--keep]

For every thread the assertions are:
  * the Python frames stackprov prints (file, line, function = co_name), innermost first, equal
    those of gdb's `py-bt` for that LWP (gdb with python3.11-dbg's python3.11-gdb.py);
  * each Python frame is attached to a native _PyEval_EvalFrameDefault frame, and the frames
    each activation runs (counting activations from the innermost) equal what the extension's
    own Frame.is_evalframe()/get_pyop()/is_entry() walk gives per activation in gdb;
  * the fixture's known chains appear (stated expectations: nested calls, a generator,
    sorted(key=lambda), functools.reduce, a ctypes callback, a __del__ from a finally block, a
    coroutine, sleeping inside an except block), by qualified name.
Exit 0 on success, 1 on a mismatch, 2 on a harness problem.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixture_py311.py")
ABORT_FIXTURE = os.path.join(HERE, "fixture_py311_abort.py")
GROUPS = os.path.join(HERE, "gdb_eval_groups.py")
EVAL = "_PyEval_EvalFrameDefault"
SYS_CLOCK_NANOSLEEP = 230  # x86_64

# Stated expectations: qualified names (innermost first, a subsequence) per fixture thread,
# identified by its first distinctive name.
CHAINS = {
    "gen": ["gen", "gen_user", "leaf", "Outer.method.<locals>.<lambda>", "Outer.method", "Outer.method",
            "Outer.method", "Outer.method", "main", "<module>"],
    "deep": ["park", "deep", "reduce_main.<locals>.<lambda>", "reduce_main", "Thread.run"],
    "Finalized.__del__": ["park", "Finalized.__del__", "finalizer_main", "Thread.run"],
    "ctypes_main.<locals>.compare": ["park", "ctypes_main.<locals>.compare", "ctypes_main", "Thread.run"],
    "coro_leaf": ["park", "coro_leaf", "coro_mid", "coroutine_main.<locals>.<lambda>", "coroutine_main",
                  "Thread.run"],
}
# fixture_py311_abort.py's one thread.
ABORT_CHAINS = {"gen": ["gen", "inner", "outer.<locals>.<lambda>", "outer", "<module>"]}

# The reporting helpers of the native stack checks (FAILURES, fail, note, Harness).
sys.path.insert(0, os.path.join(HERE, "..", "stack"))
from stack_check import FAILURES, Harness, fail, note  # noqa: E402


def run(cmd, timeout=25, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def need(path, what):
    if not path or not (os.path.exists(path) or shutil.which(path)):
        raise Harness("%s not found (%s; scripts/install-deps.sh installs it)" % (path, what))


class Fixture:
    """The fixture under /usr/bin/python3.11, parked: every task in clock_nanosleep."""

    def __init__(self, python):
        self.p = subprocess.Popen([python, FIXTURE], stdout=subprocess.PIPE, text=True)
        self.pid = self.p.pid
        if self.p.stdout.readline().strip() != "ready":
            self.close()
            raise Harness("the fixture did not start")
        deadline = time.time() + 10
        while True:
            tasks = os.listdir("/proc/%d/task" % self.pid)
            calls = []
            for t in tasks:
                try:
                    with open("/proc/%d/task/%s/syscall" % (self.pid, t)) as f:
                        calls.append(f.read().split()[0])
                except OSError:
                    calls.append("?")
            if len(tasks) == 5 and all(c == str(SYS_CLOCK_NANOSLEEP) for c in calls):
                break
            if time.time() > deadline:
                self.close()
                raise Harness("the fixture's threads did not all park in clock_nanosleep: %s" % calls)
            time.sleep(0.02)

    def close(self):
        self.p.kill()
        self.p.wait()


def stackprov_json(sp, args):
    r = run([sp, "stack"] + args + ["--json"])
    if r.returncode != 0:
        raise Harness("stackprov stack %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def is_runtime(fr):
    return fr.get("method") == "runtime"


def native_name(fr):
    return fr.get("resolved_function") or fr.get("function") or ""


def gdb_python(gdb, target):
    """py-bt and the per-activation groups for every thread: {lwp: (frames, groups)}."""
    r = run([gdb, "-batch", "-nx"] + target + ["-ex", "thread apply all py-bt", "-ex", "source " + GROUPS])
    out = r.stdout
    if "Traceback (most recent call first)" not in out:
        raise Harness("gdb py-bt printed no traceback (python3.11-dbg installed?): %s" % (out + r.stderr)[-2000:])
    bt, groups = {}, {}
    cur = None
    for line in out.splitlines():
        m = re.match(r"^Thread \d+ \(.*?LWP (\d+)\)", line)
        if m:
            cur = int(m.group(1))
            bt[cur] = []
            continue
        m = re.match(r'^  File "(.*)", line (\S+), in (.*)$', line)
        if m and cur is not None:
            bt[cur].append((m.group(1), m.group(2), m.group(3)))
            continue
        if line.startswith("GROUPS-THREAD "):
            cur = int(line.split()[1])
            groups[cur] = []
        elif line.startswith("GROUPS-EVAL "):
            groups[cur].append((int(line.split()[1]), []))
        elif line.startswith("GROUPS-PY\t"):
            _, f, ln, name = line.split("\t", 3)
            groups[cur][-1][1].append((f, ln, name))
    return bt, {t: [g for g in gs if g[1]] for t, gs in groups.items()}


def ours(thread):
    """(frames, groups) from stackprov's JSON thread: frames (file, line, function); groups by the
    ordinal of the _PyEval_EvalFrameDefault activation (by its symbolized name) they attach to."""
    frames = thread["frames"]
    py = [(f["file"], str(f["line"]) if f["line"] else "?", f["function"]) for f in frames if is_runtime(f)]
    groups = []
    ordinal = -1
    for i, f in enumerate(frames):
        if is_runtime(f):
            continue
        if native_name(f) == EVAL:
            ordinal += 1
            run_here = [(g["file"], str(g["line"]) if g["line"] else "?", g["function"])
                        for g in frames if is_runtime(g) and g["native_index"] == i]
            if run_here:
                groups.append((ordinal, run_here))
    return py, groups


def compare(ctx, doc, gdb_bt, gdb_groups, chains=CHAINS, threads=5):
    checked = 0
    for t in doc["threads"]:
        tid = t["tid"]
        py, groups = ours(t)
        qual = [f["qualname"] for f in t["frames"] if is_runtime(f)]
        if tid not in gdb_bt:
            fail("[%s] thread %d: gdb printed no py-bt for it" % (ctx, tid))
            continue
        if py != gdb_bt[tid]:
            fail("[%s] thread %d: Python frames differ\n  stackprov: %s\n  gdb py-bt: %s" % (ctx, tid, py, gdb_bt[tid]))
        if groups != gdb_groups.get(tid):
            fail("[%s] thread %d: frames per _PyEval_EvalFrameDefault activation differ\n  stackprov: %s\n  gdb:       %s"
                 % (ctx, tid, groups, gdb_groups.get(tid)))
        for k, f in enumerate(t["frames"]):
            if is_runtime(f) and (f["native_index"] < 0 or native_name(t["frames"][f["native_index"]]) != EVAL):
                fail("[%s] thread %d frame %d (%s): attached to native frame %d, not a %s activation"
                     % (ctx, tid, k, f["qualname"], f["native_index"], EVAL))
        key = next((q for q in qual if q in chains), None)
        if key is None:
            fail("[%s] thread %d: none of the fixture's chains among %s" % (ctx, tid, qual))
        else:
            it = iter(qual)
            if not all(any(q == want for q in it) for want in chains[key]):
                fail("[%s] thread %d: expected chain %s (in order) not in %s" % (ctx, tid, chains[key], qual))
            note("[%s] thread %d (%s): %d Python frames in %d activations, as gdb py-bt"
                 % (ctx, tid, key, len(py), len(groups)))
        checked += 1
    if checked != threads:
        fail("[%s] %d threads compared, the fixture has %d" % (ctx, checked, threads))


def mode_live(a):
    fx = Fixture(a.python311)
    try:
        doc = stackprov_json(a.stackprov, ["--pid", str(fx.pid)])
        if not doc.get("runtime", "").startswith("CPython 3.11"):
            fail("[live] runtime is %r, expected 'CPython 3.11...'" % doc.get("runtime"))
        bt, groups = gdb_python(a.gdb, ["-p", str(fx.pid)])
        compare("live", doc, bt, groups)
    finally:
        fx.close()


def mode_core(a, tmp):
    fx = Fixture(a.python311)
    try:
        r = run([a.gcore, "-o", os.path.join(tmp, "core"), str(fx.pid)], timeout=25)
        core = os.path.join(tmp, "core.%d" % fx.pid)
        if r.returncode != 0 or not os.path.exists(core):
            raise Harness("gcore failed: %s" % r.stderr[-500:])
    finally:
        fx.close()
    snaps = os.path.join(tmp, "core-snaps")
    os.makedirs(snaps)
    doc = stackprov_json(a.stackprov, ["--core", core, "--save-snapshots", snaps])
    bt, groups = gdb_python(a.gdb, [a.python311, core])
    compare("core", doc, bt, groups)
    # The core's threads saved as snapshots (section 5 from the core's memory), shown from them.
    compare("core snapshots", stackprov_json(a.stackprov, ["--snapshot", snaps]), bt, groups)


def mode_crash(a, tmp):
    cores = []
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern.startswith("|") or "/" in pattern:
        note("kernel core: none (kernel.core_pattern is %r); gdb's gcore core is checked" % pattern)
    else:
        d = os.path.join(tmp, "kernel")
        os.makedirs(d)

        def limits():
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

        r = subprocess.run([a.python311, ABORT_FIXTURE], cwd=d, preexec_fn=limits, capture_output=True, timeout=25)
        found = [os.path.join(d, f) for f in os.listdir(d) if f.startswith("core")]
        if r.returncode != -signal.SIGABRT or len(found) != 1:
            raise Harness("the abort fixture exited %d, core files %s" % (r.returncode, found))
        cores.append(("kernel core", found[0]))
    core = os.path.join(tmp, "gcore")
    r = run([a.gdb, "-nx", "-batch", "-ex", "set startup-with-shell off", "-ex", "run", "-ex", "gcore " + core,
             "--args", a.python311, ABORT_FIXTURE])
    if not os.path.exists(core):
        raise Harness("gdb wrote no core at the SIGABRT stop: %s" % (r.stdout + r.stderr)[-1500:])
    cores.append(("gcore core", core))
    for label, path in cores:
        doc = stackprov_json(a.stackprov, ["--core", path])
        if doc.get("signal", {}).get("name") != "SIGABRT" and label == "kernel core":
            fail("[%s] signal %r, expected SIGABRT" % (label, doc.get("signal")))
        bt, groups = gdb_python(a.gdb, [a.python311, path])
        compare(label, doc, bt, groups, ABORT_CHAINS, threads=1)


# The fixture's threads by their innermost distinctive frame (CHAINS' keys) and the names
# fixture_py311.py gives them (threading.Thread(name=...); the main thread's is "MainThread").
THREAD_NAMES = {"gen": "MainThread", "deep": "reduce", "Finalized.__del__": "finalizer",
                "ctypes_main.<locals>.compare": "ctypes", "coro_leaf": "coroutine"}


def text_python_frames(out):
    """{tid: [(file, line, qualname)]} from `stack`'s text output: the [runtime] lines per thread."""
    frames, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^TID (\d+) ", line)
        if m:
            cur = int(m.group(1))
            frames[cur] = []
            continue
        m = re.match(r"^#\d+\s+python\s+(.*) - (.*):(\d+) \[runtime\]$", line)
        if m and cur is not None:
            frames[cur].append((m.group(2), m.group(3) if m.group(3) != "0" else "?", m.group(1)))
    return frames


def mode_snapshot(a, tmp):
    snaps = os.path.join(tmp, "snaps")
    os.makedirs(snaps)
    fx = Fixture(a.python311)
    try:
        live = stackprov_json(a.stackprov, ["--pid", str(fx.pid), "--save-snapshots", snaps])
        bt, groups = gdb_python(a.gdb, ["-p", str(fx.pid)])
    finally:
        fx.close()
    if os.path.exists("/proc/%d" % fx.pid):
        raise Harness("the fixture %d still exists after kill" % fx.pid)
    files = sorted(os.listdir(snaps))
    if files != sorted("%d.snap" % t["tid"] for t in live["threads"]):
        fail("[snapshot] --save-snapshots wrote %s for threads %s" % (files, [t["tid"] for t in live["threads"]]))
    doc = stackprov_json(a.stackprov, ["--snapshot", snaps])
    if doc.get("runtime") != live.get("runtime") or not doc.get("runtime", "").startswith("CPython 3.11"):
        fail("[snapshot] runtime %r, the capture's was %r" % (doc.get("runtime"), live.get("runtime")))
    compare("snapshot", doc, bt, groups)
    # And what `stack --pid` showed at capture (the same walk: frames at the same indices).
    by_tid = {t["tid"]: t for t in live["threads"]}
    for t in doc["threads"]:
        key = lambda f: (f["qualname"], f["file"], f["line"], f["native_index"], f["index"], f["entry"],  # noqa: E731
                         f["frame_address"], f["code_address"])
        got = [key(f) for f in t["frames"] if is_runtime(f)]
        want = [key(f) for f in by_tid.get(t["tid"], {"frames": []})["frames"] if is_runtime(f)]
        if got != want:
            fail("[snapshot] thread %d: Python frames differ from the capture's\n  snapshot: %s\n  --pid:    %s"
                 % (t["tid"], got, want))
    for t in doc["threads"]:
        qual = [f["qualname"] for f in t["frames"] if is_runtime(f)]
        key = next((q for q in qual if q in THREAD_NAMES), None)
        if key is not None and t.get("runtime_name") != THREAD_NAMES[key]:
            fail("[snapshot] thread %d (%s): python thread name %r, the fixture names it %r"
                 % (t["tid"], key, t.get("runtime_name"), THREAD_NAMES[key]))
    r = run([a.stackprov, "stack", "--snapshot", snaps])
    if r.returncode != 0:
        raise Harness("stackprov stack --snapshot exited %d: %s" % (r.returncode, r.stderr.strip()))
    text = text_python_frames(r.stdout)
    # Text: per thread, the [runtime] lines' (file, line) are py-bt's, their names the JSON's qualnames.
    for tid, frames in bt.items():
        got = text.get(tid)
        json_thread = next((t for t in doc["threads"] if t["tid"] == tid), None)
        quals = [f["qualname"] for f in json_thread["frames"] if is_runtime(f)] if json_thread else []
        if got is None or [(f, ln) for f, ln, _ in got] != [(f, ln) for f, ln, _ in frames] or \
                [q for _, _, q in got] != quals:
            fail("[snapshot text] thread %d: Python frames %s\n  gdb py-bt: %s" % (tid, got, frames))
    # A single thread's file, and --python=off: no runtime frames.
    main_tid = live["pid"]
    one = stackprov_json(a.stackprov, ["--snapshot", os.path.join(snaps, "%d.snap" % main_tid)])
    if [t["tid"] for t in one["threads"]] != [main_tid]:
        fail("[snapshot] one file gave threads %s" % [t["tid"] for t in one["threads"]])
    else:
        compare("snapshot one file", one, {main_tid: bt.get(main_tid)}, {main_tid: groups.get(main_tid)}, threads=1)
    off = stackprov_json(a.stackprov, ["--snapshot", snaps, "--python=off"])
    if any(is_runtime(f) for t in off["threads"] for f in t["frames"]) or off.get("runtime") != "":
        fail("[snapshot --python=off] runtime frames or runtime %r shown" % off.get("runtime"))
    # The Python binding on the same files: `python3 -m stackprov stack --snapshot` (stackprov.stack_with_info
    # (snapshot=), the library's renderer) against gdb's py-bt too, and the ProcessInfo it gives.
    r = run([sys.executable, "-m", "stackprov", "stack", "--snapshot", snaps, "--json"])
    if r.returncode != 0:
        fail("[binding snapshot] python3 -m stackprov stack --snapshot exited %d: %s" % (r.returncode, r.stderr.strip()))
    else:
        compare("binding snapshot", json.loads(r.stdout), bt, groups)
    r = run([sys.executable, "-c", "import sys, stackprov; i, t = stackprov.stack_with_info(snapshot=sys.argv[1]); "
             "print(i.source, i.pid, i.runtime.startswith('CPython 3.11'), sorted(x.tid for x in t))", snaps])
    want = "snapshot %d True %s" % (live["pid"], sorted(t["tid"] for t in live["threads"]))
    if r.returncode != 0 or r.stdout.strip() != want:
        fail("[binding snapshot] stack_with_info(snapshot=): %r %s (want %r)" % (r.stdout.strip(), r.stderr.strip(), want))
    if not FAILURES:
        note("[snapshot] %d threads from %d snapshot files after the process exited: Python frames as gdb py-bt"
             " (the CLI and the Python binding)" % (len(doc["threads"]), len(files)))


def trace_python_frames(event):
    """{tid: [(file, line, co_name)]} of a trace.capture event's runtime frames (co_name: the
    qualified name's last part), and {tid: [frame]} of all its frames."""
    py, frames = {}, {}
    for f in event["frames"]:
        frames.setdefault(f["tid"], []).append(f)
        if f["unwind"] == "runtime":
            py.setdefault(f["tid"], []).append((f["file"], str(f["line"]) if f["line"] else "?",
                                                f["symbol"].rsplit(".", 1)[-1]))
    return py, frames


def trace_show(a, store, tid_id):
    r = run([a.stackprov, "trace-show", tid_id, "--store", store, "--json"])
    if r.returncode != 0:
        raise Harness("trace-show exited %d: %s" % (r.returncode, r.stderr.strip()))
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return lines[0], lines[1:]


def mode_trace(a, tmp):
    store = "sqlite:" + os.path.join(tmp, "traces.db")
    fx = Fixture(a.python311)
    try:
        r = run([a.stackprov, "trace-capture", "-p", str(fx.pid), "--bundle", "--bundle-store",
                 os.path.join(tmp, "bundles"), "--store", store], timeout=120)
        if r.returncode != 0:
            raise Harness("trace-capture exited %d: %s" % (r.returncode, r.stderr.strip()))
        trace_id = r.stdout.strip()
        bt, _ = gdb_python(a.gdb, ["-p", str(fx.pid)])
    finally:
        fx.close()

    def check(ctx, event):
        py, frames = trace_python_frames(event)
        if set(py) != set(bt):
            fail("[%s] threads with Python frames %s, gdb py-bt's %s" % (ctx, sorted(py), sorted(bt)))
        for tid, want in bt.items():
            if py.get(tid) != want:
                fail("[%s] thread %d: Python frames differ\n  trace:     %s\n  gdb py-bt: %s" % (ctx, tid, py.get(tid), want))
            # Each Python frame sits right before its _PyEval_EvalFrameDefault activation (or ends the thread).
            fr = frames.get(tid, [])
            for k, f in enumerate(fr):
                if f["unwind"] != "runtime":
                    continue
                after = next((g for g in fr[k + 1:] if g["unwind"] != "runtime"), None)
                if after is not None and after["symbol"] != EVAL:
                    fail("[%s] thread %d frame %d (%s) precedes %s, not a %s activation"
                         % (ctx, tid, k, f["symbol"], after["symbol"], EVAL))
        return sum(len(v) for v in py.values())

    event, _ = trace_show(a, store, trace_id)
    n = check("trace-show", event)
    r = run([a.stackprov, "trace-show", trace_id, "--store", store])
    text = text_python_frames(r.stdout)
    for tid, want in bt.items():
        if [(f, ln) for f, ln, _ in text.get(tid, [])] != [(f, ln) for f, ln, _ in want]:
            fail("[trace-show text] thread %d: Python frames %s\n  gdb py-bt: %s" % (tid, text.get(tid), want))
    r = run([a.stackprov, "trace-resolve", "--trace", trace_id, "--store", store], timeout=120)
    if r.returncode != 0:
        raise Harness("trace-resolve exited %d: %s" % (r.returncode, r.stderr.strip()))
    check("trace-resolve", trace_show(a, store, trace_id)[0])
    # The gate also asks for a signed bundle (dsse, inclusion): only the comparison is checked here.
    r = run([a.stackprov, "trace-replay", "--trace", trace_id, "--store", store, "--seeds", "3", "--json"], timeout=120)
    replays = trace_show(a, store, trace_id)[1]
    if len(replays) != 3 or any(r.get("replay_success_ratio") != 1.0 for r in replays):
        fail("[trace-replay] replays %s: every frame (Python frames included) must equal the recorded one"
             % [(r.get("seed"), r.get("replay_success_ratio")) for r in replays])
    # The Python segment of each seed: as many frames as gdb's py-bt holds, in as many threads, all identical.
    n_bt = sum(len(v) for v in bt.values())
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        raise Harness("trace-replay --json printed no JSON (exit %d): %s" % (r.returncode, r.stderr.strip()))
    for sd in rep.get("seeds", []):
        got = sd.get("python") or {}
        want = {"mode": "recorded", "threads": len(bt), "frames": n_bt, "identical": n_bt}
        if {k: got.get(k) for k in want} != want:
            fail("[trace-replay] seed %s: python segment %s, want %s (gdb py-bt's frames and threads)"
                 % (sd.get("seed"), {k: got.get(k) for k in want}, want))
    if len(rep.get("seeds", [])) != 3 or ", %d python frames recorded)" % n_bt not in rep.get("summary", ""):
        fail("[trace-replay] %d seeds, summary %r: want 3 and '%d python frames recorded'"
             % (len(rep.get("seeds", [])), rep.get("summary"), n_bt))
    if not FAILURES:
        note("[trace] %d Python frames in %d threads as gdb py-bt, after trace-resolve too; 3 replays identical,"
             " each counting them as its python segment" % (n, len(bt)))


SPIN_FIXTURE = os.path.join(HERE, "fixture_py311_spin.py")
# co_name per frame, innermost first (py-bt prints co_name).
SPIN_CHAINS = {"leaf": ["leaf", "middle", "outer", "<module>"],
               "key_leaf": ["key_leaf", "<lambda>", "sort_main", "run", "_bootstrap_inner", "_bootstrap"]}


def json_python_groups(frames):
    """A perf-import JSON sample's Python frames (file, line, co_name), innermost first, and the
    groups by the ordinal of the _PyEval_EvalFrameDefault frame that follows them."""
    py = [(f["file"], str(f["line"]) if f["line"] else "?", f["function"]) for f in frames if f["method"] == "runtime"]
    groups, run_here, ordinal, stray = [], [], -1, []
    for f in frames:
        if f["method"] == "runtime":
            run_here.append((f["file"], str(f["line"]) if f["line"] else "?", f["function"]))
            continue
        if f.get("function") == EVAL:
            ordinal += 1
            if run_here:
                groups.append((ordinal, run_here))
        elif run_here:
            stray.append(f.get("function"))
        run_here = []
    return py, groups, stray, run_here


def mode_record(a, tmp):
    cap, plain = os.path.join(tmp, "py.cap"), os.path.join(tmp, "plain.cap")
    p = subprocess.Popen([a.python311, SPIN_FIXTURE], stdout=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "ready":
            raise Harness("the spinning fixture did not start")
        time.sleep(0.3)  # both threads in their loops
        # 32 KiB of stack: sorted()'s merge state alone is ~2 KiB, so 8 KiB does not reach the outer activations.
        r = run([a.stackprov, "record", "--python", "-F", "299", "--duration", "1.2", "--stack-size", "32768",
                 "-p", str(p.pid), "-o", cap])
        if r.returncode != 0:
            raise Harness("record --python exited %d: %s" % (r.returncode, r.stderr.strip()))
        summary = r.stderr.strip().splitlines()[-1]
        note("[record] " + summary)
        r = run([a.stackprov, "record", "-F", "99", "--duration", "0.3", "-p", str(p.pid), "-o", plain])
        if r.returncode != 0:
            raise Harness("record exited %d: %s" % (r.returncode, r.stderr.strip()))
        bt, groups = gdb_python(a.gdb, ["-p", str(p.pid)])
    finally:
        p.kill()
        p.wait()
    with open(cap, "rb") as f:
        head = f.read(12)
    with open(plain, "rb") as f:
        head_plain = f.read(12)
    if head[8:12] != (4).to_bytes(4, "little") or head_plain[8:12] != (3).to_bytes(4, "little"):
        fail("[record] capture file versions %r (--python) and %r (without): expected 4 and 3" % (head[8:12], head_plain[8:12]))
    r = run([a.stackprov, "perf-import", "-f", "json", cap], timeout=60)
    if r.returncode != 0:
        raise Harness("perf-import exited %d: %s" % (r.returncode, r.stderr.strip()))
    import_summary = [l for l in r.stderr.splitlines() if "python:" in l]
    per_tid, equal, with_py = {}, {}, {}
    for line in r.stdout.splitlines():
        s = json.loads(line)
        tid = s["tid"]
        per_tid[tid] = per_tid.get(tid, 0) + 1
        py, grp, stray, tail = json_python_groups(s["frames"])
        if not py:
            continue
        with_py[tid] = with_py.get(tid, 0) + 1
        if tid not in bt:
            fail("[record] a sample of thread %d has Python frames, gdb printed no py-bt for it" % tid)
            continue
        ok = py == bt[tid] and grp == groups.get(tid) and not stray and not tail
        equal[tid] = equal.get(tid, 0) + ok
        if not ok and equal.get(("shown", tid)) is None:
            equal[("shown", tid)] = True
            fail("[record] thread %d sample at %d: Python frames or their activations differ from gdb's\n"
                 "  perf-import: %s %s (before non-eval frames: %s, after the last native frame: %s)\n"
                 "  gdb py-bt:   %s %s" % (tid, s["time"], py, grp, stray, tail, bt[tid], groups.get(tid)))
    spinning = [t for t in bt if any(f[2] in ("leaf", "key_leaf") for f in bt[t])]
    if len(spinning) != 2:
        fail("[record] gdb py-bt shows %d spinning threads, the fixture has 2: %s" % (len(spinning), bt))
    for tid in spinning:
        n, k = per_tid.get(tid, 0), with_py.get(tid, 0)
        # Each thread holds the GIL about half the time, and CI runs two tests at once: ~30-180 samples.
        if n < 30 or k < 0.9 * n:
            fail("[record] thread %d: %d samples, %d with Python frames (at least 30 and 90%% expected)" % (tid, n, k))
        key = "leaf" if any(f[2] == "leaf" for f in bt[tid]) else "key_leaf"
        names = [f[2] for f in bt[tid]]
        if names != SPIN_CHAINS[key]:
            fail("[record] thread %d: gdb py-bt %s, the fixture's chain is %s" % (tid, names, SPIN_CHAINS[key]))
        if equal.get(tid, 0) != k:
            fail("[record] thread %d: %d of %d samples with Python frames differ from gdb's" % (tid, k - equal.get(tid, 0), k))
        note("[record] thread %d (%s): %d samples, %d with Python frames, %d of them equal to gdb py-bt and its "
             "activations" % (tid, key, n, k, equal.get(tid, 0)))
    if not import_summary:
        fail("[record] perf-import printed no python summary line")
    else:
        note("[record] " + import_summary[0])
    # Folded: root first, each activation's frames after it, py-spy's "qualname (file:line)" (the
    # main thread's chain runs in one activation: its four frames are adjacent).
    r = run([a.stackprov, "perf-import", cap], timeout=60)
    main_tid = next((t for t in spinning if bt[t][0][2] == "leaf"), None)
    if main_tid is not None:
        chain = ";".join("%s (%s:%s)" % (n, f, ln) for f, ln, n in reversed(bt[main_tid]))
        lines = [l for l in r.stdout.splitlines() if chain + ";" in l or l.rsplit(" ", 1)[0].endswith(chain)]
        if not lines:
            fail("[record] no folded line has the main thread's chain %s" % chain)
        elif any(";%s;" % EVAL not in l.split(chain)[0] + ";" for l in lines):
            fail("[record] a folded line has the chain without a %s before it" % EVAL)
    r = run([a.stackprov, "perf-import", "-f", "json", plain], timeout=60)
    if any(f["method"] == "runtime" for line in r.stdout.splitlines() for f in json.loads(line)["frames"]):
        fail("[record] a record without --python has Python frames")


def mode_modes(a):
    fx = Fixture(a.python311)
    try:
        auto = stackprov_json(a.stackprov, ["--pid", str(fx.pid)])
        only = stackprov_json(a.stackprov, ["--pid", str(fx.pid), "--python=only"])
        off = stackprov_json(a.stackprov, ["--pid", str(fx.pid), "--python", "off"])
    finally:
        fx.close()
    by_tid = {t["tid"]: t for t in auto["threads"]}
    for t in only["threads"]:
        want = [f["qualname"] for f in by_tid[t["tid"]]["frames"] if is_runtime(f)]
        got = [f["qualname"] for f in t["frames"]]
        if not all(is_runtime(f) for f in t["frames"]) or got != want:
            fail("[only] thread %d: %s, expected the runtime frames alone %s" % (t["tid"], got, want))
    for t in off["threads"]:
        if any(is_runtime(f) for f in t["frames"]):
            fail("[off] thread %d has runtime frames" % t["tid"])
        natives = [f["pc"] for f in by_tid[t["tid"]]["frames"] if not is_runtime(f)]
        if [f["pc"] for f in t["frames"]] != natives:
            fail("[off] thread %d: native frames differ from --python=auto's" % t["tid"])
    if off.get("runtime") != "":
        fail("[off] runtime is %r, expected \"\"" % off.get("runtime"))
    for bad in ("bogus", "", "ON"):
        r = run([a.stackprov, "stack", "--pid", "1", "--python=" + bad])
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        if r.returncode != 2 or len(lines) != 1 or ("'%s'" % bad) not in lines[0] or "--python" not in lines[0]:
            fail("[--python=%s] exit %d, stderr %r: expected exit 2 and one line naming the value" %
                 (bad, r.returncode, r.stderr))
    h = run([a.stackprov, "stack", "--help"])
    if "--python" not in h.stdout or "runtime" not in h.stdout:
        fail("stack --help does not describe --python")
    note("[modes] only/off/auto agree; bad values rejected")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["live", "core", "crash", "modes", "snapshot", "trace", "record"])
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--gdb", default="gdb")
    ap.add_argument("--gcore", default="gcore")
    ap.add_argument("--python311", default="/usr/bin/python3.11")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sprov-pyrt-")
    try:
        need(a.python311, "Debian's python3.11")
        need(a.gdb, "gdb")
        need("/usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py", "python3.11-dbg's gdb extension")
        if a.mode == "live":
            mode_live(a)
        elif a.mode == "core":
            need(a.gcore, "gcore (gdb)")
            mode_core(a, tmp)
        elif a.mode == "crash":
            mode_crash(a, tmp)
        elif a.mode == "snapshot":
            mode_snapshot(a, tmp)
        elif a.mode == "trace":
            mode_trace(a, tmp)
        elif a.mode == "record":
            mode_record(a, tmp)
        else:
            mode_modes(a)
    except (Harness, subprocess.TimeoutExpired) as e:
        print("HARNESS " + str(e), flush=True)
        return 2
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
