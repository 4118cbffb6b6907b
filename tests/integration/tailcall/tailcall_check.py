#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack` tail-call frames and `--regs` against gdb on the same stopped process.
"""tailcall_check.py --stackprov BIN --gdb BIN --fixture EXE [--gcore BIN] [--trace]

The fixture (tailcall_fixture.c, -O2 -g) parks one thread under each tail-call shape (single,
chain of two, ambiguous, shared end), one under a chain of frames holding values in callee-saved
registers and one in a signal handler (the frame above the signal frame has every register).
While every thread sleeps in pause(), `stackprov stack --pid --json --regs` (and --no-tail-calls,
and the text form) run, then gdb attaches and prints, per thread, every frame (inline frames
skipped) with its kind and `info registers rip rsp rbp rbx r12 r13 r14 r15` (gdb's Python API,
one gdb run); with --gcore the same through a core of the stopped process (`stack --core`
against gdb on the core). Asserted, for every thread of the process (libc's frames too):
  * the frames are gdb's frames (gdb with `backtrace past-main on`): the same pcs in the same order, a frame is a tail-call frame
    (method tail_call, flag inferred) exactly where gdb's is TAILCALL_FRAME, and in the fixture the
    same function names; the shapes are what the fixture is built for (gdb: hot_b; chain_y,
    chain_x; nothing for the ambiguous one; part_common alone for two chains sharing their end), so a compiler that stops emitting the call sites
    fails the test instead of passing it empty;
  * --regs: in every frame gdb unwound (not its tail-call frames, where stackprov prints none),
    each of those registers gdb knows has stackprov's value, and stackprov knows none that gdb
    prints as <not saved>;
  * --no-tail-calls gives the same frames without the inferred ones; the text form tags them
    "[tail_call, inferred]".
With --trace (issue 36: tail-call frames in traces), the same stopped process is captured with
`trace-capture --pid` (no bundle) and `trace-capture --pid --bundle`:
  * every thread's stored frames are gdb's frames, pc by pc, an inferred frame (unwind
    "tail_call+inferred") exactly where gdb's is TAILCALL_FRAME, the fixture's named as gdb names them;
  * `trace-show` prints each thread as `stack` prints it (the same lines but the "stop:" line),
    `trace-show --no-tail-calls` as `stack --no-tail-calls`;
  * `trace-replay` of the bundled trace compares the unwound frames only: success 1.0 over the
    number of frames without the inferred ones (a replay unwinds offline: no call sites);
  * after `trace-resolve --offline` (the bundle alone) the inferred frames are still there, at the
    same places.
With --offline (issue 36: tail-call frames from bundles), a copy of the fixture runs, stopped as
above, and gcore dumps it; every module it maps gets a bundle (`bundle build`, `bundle put`), and
the copy is deleted. Then, with no module file:
  * `stack --core CORE --offline --store S --json` gives gdb's frames of that core (gdb run on it
    while the copy existed), pc by pc, tail-call frames at gdb's TAILCALL_FRAMEs, names and shapes
    as above (the bundles' call-site sections: before them, offline had no tail-call frame);
  * a trace captured from the core (`trace-capture --core`: no file of the fixture, so its stored
    frames have none of the fixture's tail-call frames) and resolved with `trace-resolve --offline`
    and the bundles: every thread's frames are gdb's, tail-call frames included.
Exit 0 on success, 1 on a mismatch, 2 on a harness problem (a missing tool included).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import gdb_frame_details_script, parse_gdb_frame_details  # noqa: E402

REGS = ["rip", "rsp", "rbp", "rbx", "r12", "r13", "r14", "r15"]
# The tail-call frames gdb shows per role (innermost first): what the fixture is built for.
SHAPES = {"single": ["hot_b"], "chain": ["chain_y", "chain_x"], "ambiguous": [], "partial": ["part_common"],
          "regs": [], "signal": []}
# The frames around them, innermost first (the leaf, then its real caller).
AROUND = {"single": ("leaf_single", "caller_single"), "chain": ("leaf_chain", "caller_chain"),
          "ambiguous": ("leaf_amb", "caller_amb"), "partial": ("leaf_part", "caller_part")}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


class Harness(Exception):
    pass


# gdb runs with debuginfod off: stackprov is asked without it too (the same local debug files).
ENV = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}


def run(cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)


def start_fixture(exe):
    p = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    roles = {}
    deadline = time.time() + 20
    while True:
        line = p.stdout.readline()
        if not line:
            raise Harness("fixture ended before ready: %s" % p.stderr.read())
        f = line.split()
        if f == ["ready"]:
            break
        if len(f) == 3 and f[0] == "thread":
            roles[int(f[1])] = f[2]
        if time.time() > deadline:
            raise Harness("fixture not ready in time")
    # Every thread asleep (pause, pthread_join) before anyone looks.
    for _ in range(500):
        states = []
        for t in os.listdir("/proc/%d/task" % p.pid):
            try:
                with open("/proc/%d/task/%s/stat" % (p.pid, t)) as fh:
                    s = fh.read()
                states.append(s[s.rindex(")") + 2])
            except (OSError, ValueError):
                pass
        if states and all(s in "SD" for s in states):
            return p, roles
        time.sleep(0.01)
    raise Harness("fixture threads not asleep")


def stack_json(sp, target, extra):
    r = run([sp, "stack"] + target + ["--json", "--python=off"] + extra)
    if r.returncode != 0:
        raise Harness("stackprov stack %s exited %d: %s" % (" ".join(extra), r.returncode, r.stderr))
    return {t["tid"]: t for t in json.loads(r.stdout)["threads"]}


def gdb_frames(gdb, target):
    """`target`: ["-p", PID] or [EXE, CORE]."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(gdb_frame_details_script(regs=REGS))
        script = f.name
    try:
        r = run(["timeout", "-s", "KILL", "100", gdb, "-nx", "-batch", "-ex", "set debuginfod enabled off",
                 "-ex", "set backtrace past-main on"] + target + ["-ex", "source " + script], timeout=120)
    finally:
        os.unlink(script)
    frames = parse_gdb_frame_details(r.stdout)
    if frames is None:
        raise Harness("gdb gave no frames: %s" % r.stderr[-2000:])
    return frames


def blocks(text):
    """{tid: [lines]} of `stack`'s or `trace-show`'s text, "stop:" lines left out."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("TID "):
            cur = out.setdefault(int(line.split()[1].rstrip(":")), [])
        if cur is not None and not line.startswith("stop: "):
            cur.append(line)
    return out


def trace_threads(sp, store, trace_id):
    """trace-show --json's frames by tid, each {"pc", "method", "function", "module"} as `stack --json` names them."""
    r = run([sp, "trace-show", trace_id, "--store", store, "--json"])
    if r.returncode != 0:
        raise Harness("trace-show --json exited %d: %s" % (r.returncode, r.stderr))
    ev = json.loads(r.stdout.splitlines()[0])
    out = {}
    for f in ev["frames"]:
        inferred = f.get("unwind", "").endswith("+inferred")
        if inferred and f.get("unwind") != "tail_call+inferred":
            fail("trace: an inferred frame's unwind is %r, not tail_call+inferred" % f.get("unwind"))
        out.setdefault(f["tid"], []).append({"pc": f["ip"], "method": "tail_call" if inferred else f.get("unwind"),
                                             "flags": ["inferred"] if inferred else [], "function": f.get("symbol"),
                                             "module": f.get("module")})
    return out


def check_traces(sp, pid, theirs, stack_text, stack_nt_text, work, fixture_path, counts):
    """--trace: the captures of the stopped process against gdb's frames and `stack`'s text."""
    db = "sqlite:" + os.path.join(work, "traces.db")
    ENV["XDG_DATA_HOME"] = os.path.join(work, "xdg")  # no user's store or default bundle store
    ENV.pop("STACKPROV_STORE", None)
    ids = []
    for extra in ([], ["--bundle", "--bundle-store", os.path.join(work, "bundles")]):
        r = run([sp, "trace-capture", "--pid", str(pid), "--store", db] + extra, timeout=120)
        if r.returncode != 0:
            raise Harness("trace-capture %s exited %d: %s" % (" ".join(extra), r.returncode, r.stderr))
        ids.append(r.stdout.strip())
    plain, bundled = ids
    stored = trace_threads(sp, db, plain)
    if sorted(stored) != sorted(theirs):
        fail("[trace] threads differ: trace %s, gdb %s" % (sorted(stored), sorted(theirs)))
    for tid in sorted(set(stored) & set(theirs)):
        check_frames("[trace] ", tid, stored[tid], theirs[tid], fixture_path, counts)
    for flags, want, what in (([], stack_text, "stack"), (["--no-tail-calls"], stack_nt_text, "stack --no-tail-calls")):
        r = run([sp, "trace-show", plain, "--store", db] + flags)
        if r.returncode != 0 or blocks(r.stdout) != blocks(want):
            fail("[trace] trace-show %s does not print each thread as %s (exit %d):\n%s" % (
                " ".join(flags), what, r.returncode, "\n".join(
                    "  %s: %r\n  show:  %r" % (what, x, y) for t in blocks(want)
                    for x, y in zip(blocks(want)[t], blocks(r.stdout).get(t, [])) if x != y)))
    # Replay: the unwound frames only, all identical.
    unwound = sum(1 for t in trace_threads(sp, db, bundled).values() for f in t if not f["flags"])
    r = run([sp, "trace-replay", "--trace", bundled, "--store", db, "--seeds", "1", "--json", "--min-coverage", "0"],
            timeout=120)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        raise Harness("trace-replay --json exited %d: %s %s" % (r.returncode, r.stdout[-500:], r.stderr[-1500:]))
    seed = rep["seeds"][0]
    if rep["replay_success_ratio"] != 1 or seed["frames"] != unwound:
        fail("[trace] replay: success %s over %s frames, expected 1 over the %d unwound frames (mismatches %s)" % (
            rep["replay_success_ratio"], seed["frames"], unwound, seed.get("mismatches")))
    # An offline resolve (the bundle alone: no call sites) keeps the recorded inferred frames.
    r = run([sp, "trace-resolve", "--trace", bundled, "--store", db, "--offline"], timeout=120)
    if r.returncode != 0:
        raise Harness("trace-resolve --offline exited %d: %s" % (r.returncode, r.stderr))
    after = trace_threads(sp, db, bundled)
    for tid in sorted(set(after) & set(theirs)):
        check_frames("[trace resolved offline] ", tid, after[tid], theirs[tid], fixture_path, counts)


def check_frames(ctx, tid, ours, theirs, fixture_path, counts):
    """Frames (`stack --json`'s fields pc, method, flags, function, module) against gdb's: pcs, tail-call frames, names."""
    where = "%stid %d" % (ctx, tid)
    o_seq = [(int(f["pc"], 16), f["method"] == "tail_call") for f in ours]
    g_seq = [(f["pc"], f["kind"] == "tailcall") for f in theirs]
    if o_seq != g_seq:
        fail("%s: frames differ from gdb's:\n  gdb:       %s\n  stackprov: %s" % (
            where, ["0x%x%s %s" % (pc, " tail" if t else "", f["name"]) for (pc, t), f in zip(g_seq, theirs)],
            ["0x%x%s %s" % (pc, " tail" if t else "", f.get("function")) for (pc, t), f in zip(o_seq, ours)]))
        return False
    for i, (o, g) in enumerate(zip(ours, theirs)):
        counts["frames"] += 1
        if o["method"] == "tail_call":
            counts["tail"] += 1
            if "inferred" not in o.get("flags", []):
                fail("%s #%d: tail-call frame without the inferred flag: %s" % (where, i, o.get("flags")))
        if o.get("module") == fixture_path and o.get("function") != g["name"]:
            fail("%s #%d: at 0x%x gdb names %r, stackprov %r" % (where, i, g["pc"], g["name"], o.get("function")))
    return True


def check_thread(ctx, tid, role, ours, theirs, fixture_path, counts):
    where = "%stid %d (%s)" % (ctx, tid, role or "main")
    if not check_frames(ctx, tid, ours, theirs, fixture_path, counts):
        return
    for i, (o, g) in enumerate(zip(ours, theirs)):
        if o["method"] == "tail_call":
            if any(v is not None for v in o.get("registers", {}).values()):
                fail("%s #%d: tail-call frame with registers %s" % (where, i, o["registers"]))
            continue  # gdb's registers of its tail-call frames are made up from the frame below
        mine = o.get("registers", {})
        for r in REGS:
            gv, ov = g["regs"].get(r), mine.get(r)
            ov = None if ov is None else int(ov, 16)
            if gv is None and ov is not None:
                fail("%s #%d %s: stackprov says 0x%x, gdb <not saved>" % (where, i, r, ov))
            elif gv is not None and ov != gv:
                fail("%s #%d %s: gdb 0x%x, stackprov %s" % (where, i, r, gv, "unknown" if ov is None else "0x%x" % ov))
            elif gv is not None:
                counts["regs"] += 1
    check_shapes(where, role, ours, fixture_path)


def check_shapes(where, role, ours, fixture_path):
    """The fixture's own tail-call frames (libc's depend on its debug file being installed) and the frames around them."""
    tails = [o["function"] for o in ours if o["method"] == "tail_call" and o.get("module") == fixture_path]
    if role in SHAPES and tails != SHAPES[role]:
        fail("%s: tail-call frames %s, the fixture is built for %s (gdb agreed with stackprov: the "
             "compiler's call-site information is not what the fixture expects)" % (where, tails, SHAPES[role]))
    if role in AROUND:
        names = [o.get("function") for o in ours]
        leaf, caller = AROUND[role]
        if leaf not in names or caller not in names or \
                names.index(caller) != names.index(leaf) + 1 + len(SHAPES[role]):
            fail("%s: expected %s, %s, %s in order: %s" % (where, leaf, SHAPES[role], caller, names))


def mapped_files(pid):
    """The files of `pid`'s executable mappings (the modules a bundle is built for)."""
    out = []
    with open("/proc/%d/maps" % pid) as fh:
        for line in fh:
            f = line.split()
            if len(f) >= 6 and "x" in f[1] and f[5].startswith("/") and f[5] not in out:
                out.append(f[5])
    return out


def check_offline(sp, gdb, gcore, fixture, work):
    """--offline: a copy's core, its modules' bundles, the copy deleted; `stack --core --offline` and
    an offline trace-resolve against gdb on the core. Returns (frames, tail-call frames) compared."""
    counts = {"frames": 0, "tail": 0}
    copy_dir = os.path.join(work, "offline-bin")
    os.makedirs(copy_dir)
    copy = os.path.join(copy_dir, os.path.basename(fixture))
    shutil.copy2(fixture, copy)
    p, roles = start_fixture(copy)
    try:
        files = mapped_files(p.pid)
        r = run([gcore, "-o", os.path.join(work, "offline-core"), str(p.pid)], timeout=120)
        core = os.path.join(work, "offline-core.%d" % p.pid)
        if r.returncode != 0 or not os.path.exists(core):
            raise Harness("gcore failed: %s" % r.stderr[-1500:])
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    theirs = gdb_frames(gdb, [copy, core])
    store = os.path.join(work, "offline-store")
    bundles = []
    for path in files:
        out = os.path.join(work, os.path.basename(path) + ".sbundle")
        r = run([sp, "bundle", "build", path, "--out", out], timeout=300)
        if r.returncode != 0:
            raise Harness("bundle build %s exited %d: %s" % (path, r.returncode, r.stderr))
        r = run([sp, "bundle", "put", "--store", store, out])
        if r.returncode != 0:
            raise Harness("bundle put %s exited %d: %s" % (out, r.returncode, r.stderr))
        bundles.append(out)
    os.unlink(copy)  # from here on, the fixture exists only in its bundle
    copy_path = os.path.realpath(copy_dir) + "/" + os.path.basename(copy)
    # Offline, `function` stays "" and `resolved_function` is the bundle's name (doc/bundles.md).
    offline = stack_json(sp, ["--core", core, "--offline", "--store", store], [])
    for t in offline.values():
        t["frames"] = [dict(f, function=f.get("resolved_function") or f.get("function")) for f in t["frames"]]
    if sorted(offline) != sorted(theirs):
        fail("[offline] threads differ: stackprov %s, gdb %s" % (sorted(offline), sorted(theirs)))
    for tid in sorted(set(offline) & set(theirs)):
        if check_frames("[offline] ", tid, offline[tid]["frames"], theirs[tid], copy_path, counts):
            check_shapes("[offline] tid %d (%s)" % (tid, roles.get(tid) or "main"), roles.get(tid),
                         offline[tid]["frames"], copy_path)
    # The same core as a trace: captured without the fixture's file, resolved from the bundles alone.
    db = "sqlite:" + os.path.join(work, "offline-traces.db")
    r = run([sp, "trace-capture", "--core", core, "--store", db], timeout=120)
    if r.returncode != 0:
        raise Harness("trace-capture --core exited %d: %s" % (r.returncode, r.stderr))
    trace_id = r.stdout.strip()
    cmd = [sp, "trace-resolve", "--trace", trace_id, "--store", db, "--offline"]
    for b in bundles:
        cmd += ["--bundle", b]
    r = run(cmd, timeout=120)
    if r.returncode != 0:
        raise Harness("trace-resolve --offline exited %d: %s" % (r.returncode, r.stderr))
    resolved = trace_threads(sp, db, trace_id)
    if sorted(resolved) != sorted(theirs):
        fail("[offline trace] threads differ: trace %s, gdb %s" % (sorted(resolved), sorted(theirs)))
    for tid in sorted(set(resolved) & set(theirs)):
        if check_frames("[offline trace] ", tid, resolved[tid], theirs[tid], copy_path, counts):
            check_shapes("[offline trace] tid %d (%s)" % (tid, roles.get(tid) or "main"), roles.get(tid),
                         resolved[tid], copy_path)
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--gdb", default="gdb")
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--gcore", default=None, help="also compare through a core file gcore writes")
    ap.add_argument("--trace", action="store_true", help="also trace-capture/show/replay/resolve (issue 36)")
    ap.add_argument("--offline", action="store_true",
                    help="also a core and a trace resolved from bundles alone (needs --gcore)")
    a = ap.parse_args()
    gdb = shutil.which(a.gdb)
    if gdb is None:
        print("HARNESS: gdb not found (%s): the oracle of this test" % a.gdb)
        return 2
    if a.gcore and shutil.which(a.gcore) is None:
        print("HARNESS: gcore not found (%s): it writes the core this test compares through" % a.gcore)
        return 2
    t0 = time.time()
    trace_counts = {"frames": 0, "tail": 0}
    p, roles = start_fixture(a.fixture)
    work = tempfile.mkdtemp(prefix="tailcall-")
    core = None
    try:
        live = ["--pid", str(p.pid)]
        ours = stack_json(a.stackprov, live, ["--regs"])
        plain = stack_json(a.stackprov, live, ["--no-tail-calls"])
        text = run([a.stackprov, "stack", "--python=off"] + live)
        theirs = gdb_frames(gdb, ["-p", str(p.pid)])
        if a.trace:
            text_nt = run([a.stackprov, "stack", "--python=off", "--no-tail-calls"] + live)
            check_traces(a.stackprov, p.pid, theirs, text.stdout, text_nt.stdout, work,
                         os.path.realpath(a.fixture), trace_counts)
        if a.gcore:
            # The same stopped threads through a core file (gcore: gdb's own dump).
            r = run([a.gcore, "-o", os.path.join(work, "core"), str(p.pid)], timeout=120)
            core = os.path.join(work, "core.%d" % p.pid)
            if r.returncode != 0 or not os.path.exists(core):
                raise Harness("gcore failed: %s" % r.stderr[-1500:])
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    fixture_path = os.path.realpath(a.fixture)
    counts = {"frames": 0, "tail": 0, "regs": 0}
    offline_counts = None
    try:
        runs = [("live", ours, theirs)]
        if core:
            runs.append(("core", stack_json(a.stackprov, ["--core", core, "--exe", a.fixture], ["--regs"]),
                         gdb_frames(gdb, [a.fixture, core])))
        if a.offline:
            offline_counts = check_offline(a.stackprov, gdb, a.gcore, a.fixture, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for what, o, g in runs:
        if sorted(o) != sorted(g):
            fail("[%s] threads differ: stackprov %s, gdb %s" % (what, sorted(o), sorted(g)))
        for tid in sorted(set(o) & set(g)):
            check_thread("[%s] " % what, tid, roles.get(tid), o[tid]["frames"], g[tid], fixture_path, counts)
    for tid in sorted(ours):
        real = [f["pc"] for f in ours[tid]["frames"] if "inferred" not in f.get("flags", [])]
        if [f["pc"] for f in plain.get(tid, {"frames": []})["frames"]] != real:
            fail("tid %d: --no-tail-calls frames are not the default frames without the inferred ones" % tid)
        if any("inferred" in f.get("flags", []) for f in plain.get(tid, {"frames": []})["frames"]):
            fail("tid %d: --no-tail-calls shows an inferred frame" % tid)
    tagged = [l for l in text.stdout.splitlines() if l.endswith(" [tail_call, inferred]")]
    live_tail = sum(f["method"] == "tail_call" for t in ours.values() for f in t["frames"])
    if text.returncode != 0 or len(tagged) != live_tail:
        fail("text form: %d lines tagged [tail_call, inferred], %d tail-call frames in JSON (exit %d)" %
             (len(tagged), live_tail, text.returncode))
    for role in SHAPES:
        if role not in roles.values():
            fail("the fixture printed no %s thread" % role)
    if a.trace and trace_counts["tail"] == 0:
        fail("[trace] no tail-call frame stored")
    if offline_counts is not None and offline_counts["tail"] == 0:
        fail("[offline] no tail-call frame from the bundles")
    extra = ""
    if a.trace:
        extra += "; traces: %d stored frames identical to gdb's (%d tail-call frames)" % (
            trace_counts["frames"], trace_counts["tail"])
    if offline_counts is not None:
        extra += "; offline (core and trace from bundles): %d frames identical to gdb's (%d tail-call frames)" % (
            offline_counts["frames"], offline_counts["tail"])
    print("%s: %s: %d threads, %d frames identical to gdb's (%d tail-call frames), %d register values "
          "equal to gdb's info registers%s, %.1f s" % (
              "FAIL" if failures else "PASS", "+".join(w for w, _, _ in runs), len(ours), counts["frames"],
              counts["tail"], counts["regs"], extra, time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Harness as e:
        print("HARNESS: %s" % e)
        sys.exit(2)
