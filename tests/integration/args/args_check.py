#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack --args` against gdb's `info args` on the same stopped process (and its core).
"""args_check.py --stackprov BIN --gdb BIN --fixture EXE [--gcore BIN] [--python-path DIR]

The fixture (args_fixture.c, -O0 -g or -O2 -g) runs one thread spinning in a function with
arguments (frame 0 in fixture code), one parked in pause() under two frames with arguments and one
under a function of chars and integer extremes. While they run, `stackprov stack --pid --json
--args` looks, then gdb attaches (one batch run) and prints, for every thread and every frame
(inline frames skipped), `info args` and each argument's type (gdb's Python API); with --gcore the
same through a core of the process (`stack --core` against gdb on the core). Asserted, for every
thread, every frame of the fixture and of the libraries (glibc's, when its debug info is installed):
  * the frames are gdb's (same pcs, in order; a spinning frame 0 by function, its pc moves);
  * our arguments are gdb's, by name and in order, and each type we name is gdb's spelling;
  * every value we print equals gdb's (a pointer: gdb's first word, the address; gdb adds the
    string of a char pointer and the symbol of a function pointer), and we print none where gdb
    says <optimized out>; where we say <optimized out>, so does gdb;
  * the fixture's own frames print values of every supported type (so a reader that answers
    "unknown" everywhere fails): counted per type, and the -O0 build must print every argument
    of spin_leaf, park_leaf, park_mid (but by_value, a struct), park_outer and char_args.
With --python-path (the Python binding's build directory), the same process stopped (SIGSTOP, so
that every command reads the same registers), issue 36:
  * `python3 -m stackprov stack --pid P --args` prints the bytes `stackprov stack --pid P --args`
    prints, text and --json;
  * `stackprov.stack(pid=P, args=True)`'s Frame.args pass the same checks against gdb (a value
    None unless status is "value", a type None where unknown, a reason only when unknown), and
    Frame.args is None without args=True; args="yes" raises TypeError naming args.
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

# The -O0 build: every argument of these is in the frame's stack slots (or its red zone: spin_leaf).
O0_ALL = {"spin_leaf": 7, "park_leaf": 3, "park_mid": 7, "park_outer": 6, "char_args": 11}

failures = []
ENV = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
ENV["LC_ALL"] = "C"  # gdb prints chars outside ASCII as octal escapes


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


class Harness(Exception):
    pass


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
    # The parked threads inside pause() (x86-64 system call 34; not still leaving the barrier's
    # futex) and main in pthread_join's futex (202) before anyone looks; the spinning one runs.
    want = {t: "34" for t, r in roles.items() if r != "spin"}
    want[p.pid] = "202"
    for _ in range(1000):
        calls = {}
        for t in want:
            try:
                with open("/proc/%d/task/%d/syscall" % (p.pid, t)) as fh:
                    calls[t] = fh.read().split()[0]
            except (OSError, IndexError):
                pass
        if calls == want:
            return p, roles
        time.sleep(0.01)
    raise Harness("fixture threads not parked: %s, want %s" % (calls, want))


def stack_json(sp, target):
    r = run([sp, "stack"] + target + ["--json", "--python=off", "--args", "--no-tail-calls"])
    if r.returncode != 0:
        raise Harness("stackprov stack --args exited %d: %s" % (r.returncode, r.stderr))
    return {t["tid"]: t for t in json.loads(r.stdout)["threads"]}


def gdb_args(gdb, target):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(gdb_frame_details_script(args=True))
        script = f.name
    try:
        r = run(["timeout", "-s", "KILL", "100", gdb, "-nx", "-batch", "-ex", "set debuginfod enabled off",
                 "-ex", "set backtrace past-main on", "-ex", "set print entry-values no"] + target +
                ["-ex", "source " + script], timeout=120)
    finally:
        os.unlink(script)
    frames = parse_gdb_frame_details(r.stdout)
    if frames is None:
        raise Harness("gdb gave no frames: %s" % r.stderr[-2000:])
    return frames


# stackprov.stack(args=True) as `stack --json --args`'s threads: {tid: {"frames": [...]}}, each frame the
# JSON fields the checks read, from the Python objects (None stays null: the same convention).
_PY_API = r"""
import json, sys
import stackprov
pid = int(sys.argv[1])
out = {}
for t in stackprov.stack(pid=pid, args=True, python="off", tail_calls=False):
    frames = []
    for f in t.frames:
        frames.append({"pc": hex(f.pc), "function": f.function, "module": f.module,
                       "args": [{"name": a.name, "type": a.type, "value": a.value, "status": a.status,
                                 "reason": a.reason} for a in f.args]})
    out[t.tid] = {"frames": frames}
plain = stackprov.stack(pid=pid, python="off", tail_calls=False)
checks = {"args_none_without": all(f.args is None for t in plain for f in t.frames)}
try:
    stackprov.stack(pid=pid, args="yes")
    checks["type_error"] = "no error"
except TypeError as e:
    checks["type_error"] = str(e)
print(json.dumps({"threads": out, "checks": checks}))
"""


def python_checks(sp, pid, python_path):
    """The Python CLI's bytes against the CLI's, and the Python API's arguments: (api threads, checks)."""
    env = dict(ENV, PYTHONPATH=python_path, PYTHONDONTWRITEBYTECODE="1")
    for form in ([], ["--json"]):
        cli = run([sp, "stack", "--pid", str(pid), "--args", "--python=off", "--no-tail-calls"] + form)
        py = subprocess.run([sys.executable, "-m", "stackprov", "stack", "--pid", str(pid), "--args", "--python=off",
                             "--no-tail-calls"] + form, capture_output=True, text=True, timeout=60, env=env)
        what = "stack --args%s" % (" --json" if form else "")
        if cli.returncode != 0 or py.returncode != 0:
            raise Harness("%s: stackprov exited %d, python3 -m stackprov %d: %s %s" % (
                what, cli.returncode, py.returncode, cli.stderr, py.stderr))
        if py.stdout != cli.stdout:
            fail("python3 -m stackprov %s printed other bytes than stackprov %s (%d and %d bytes)" %
                 (what, what, len(py.stdout), len(cli.stdout)))
        if not form and cli.stdout.count("    arg ") == 0:
            fail("stackprov %s printed no argument line" % what)
    r = subprocess.run([sys.executable, "-c", _PY_API, str(pid)], capture_output=True, text=True, timeout=60, env=env)
    if r.returncode != 0:
        raise Harness("stackprov.stack(args=True) failed: %s" % r.stderr[-2000:])
    doc = json.loads(r.stdout)
    return {int(k): v for k, v in doc["threads"].items()}, doc["checks"]


def check_python_api(threads, checks):
    """The Python convention: None for unknown, never "" or 0; TypeError for a wrong type."""
    if not checks["args_none_without"]:
        fail("python: Frame.args is not None without args=True")
    if not checks["type_error"].startswith("stack(): args must be True or False"):
        fail("python: stack(args='yes') did not raise the TypeError naming args: %r" % checks["type_error"])
    for t in threads.values():
        for f in t["frames"]:
            for a in f["args"]:
                if a["status"] not in ("value", "optimized_out", "unknown") or a["type"] == "" or \
                        (a["value"] is None) != (a["status"] != "value") or \
                        (a["reason"] is None) != (a["status"] != "unknown"):
                    fail("python: argument %r breaks the None-for-unknown rule" % (a,))


def check_thread(ctx, tid, role, ours, theirs, fixture, counts):
    where = "%stid %d (%s)" % (ctx, tid, role or "main")
    theirs = [g for g in theirs if g["kind"] != "tailcall"]
    if len(ours) != len(theirs):
        fail("%s: %d frames, gdb %d: %s / %s" % (where, len(ours), len(theirs), [o.get("function") for o in ours],
                                                [g["name"] for g in theirs]))
        return
    for i, (o, g) in enumerate(zip(ours, theirs)):
        spinning = role == "spin" and i == 0
        if not spinning and int(o["pc"], 16) != g["pc"]:
            fail("%s #%d: pc 0x%x, gdb 0x%x" % (where, i, int(o["pc"], 16), g["pc"]))
            continue
        if spinning and o.get("function") != g["name"]:
            fail("%s #0: function %r, gdb %r" % (where, o.get("function"), g["name"]))
            continue
        mine = o.get("args", [])
        if [a["name"] for a in mine] != [a["name"] for a in g["args"]]:
            fail("%s #%d %s: arguments %s, gdb %s" % (where, i, g["name"], [a["name"] for a in mine],
                                                     [a["name"] for a in g["args"]]))
            continue
        own = o.get("module") == fixture
        for a, b in zip(mine, g["args"]):
            what = "%s #%d %s(%s)" % (where, i, g["name"], a["name"])
            counts["args"] += 1
            if a["type"] is not None:
                counts["types"] += 1
                if a["type"] != b["type"]:
                    fail("%s: type %r, gdb %r" % (what, a["type"], b["type"]))
            if a["status"] == "optimized_out":
                counts["optimized_out"] += 1
                if b["value"] != "<optimized out>":
                    fail("%s: stackprov says <optimized out>, gdb %r" % (what, b["value"]))
            elif a["status"] == "value":
                if b["value"] == "<optimized out>":
                    fail("%s: stackprov prints %r where gdb says <optimized out>" % (what, a["value"]))
                    continue
                # A pointer: gdb adds the string (char *) or the symbol (a function) after the address.
                expect = b["value"].split(" ")[0] if a["value"].startswith("0x") else b["value"]
                if a["value"] != expect:
                    fail("%s: stackprov %r, gdb %r" % (what, a["value"], b["value"]))
                else:
                    counts["values"] += 1
                    if own:
                        counts["own"].setdefault(g["name"], 0)
                        counts["own"][g["name"]] += 1
                        counts["kinds"].add(a["type"])
            else:
                counts["unknown"] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--gdb", default="gdb")
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--gcore", default=None, help="also compare through a core file gcore writes")
    ap.add_argument("--o0", action="store_true", help="the -O0 build: every argument of O0_ALL is printed")
    ap.add_argument("--python-path", default=None, help="also the Python binding (its build directory)")
    a = ap.parse_args()
    gdb = shutil.which(a.gdb)
    if gdb is None:
        print("HARNESS: gdb not found (%s): the oracle of this test" % a.gdb)
        return 2
    if a.gcore and shutil.which(a.gcore) is None:
        print("HARNESS: gcore not found (%s): it writes the core this test compares through" % a.gcore)
        return 2
    t0 = time.time()
    p, roles = start_fixture(a.fixture)
    work = tempfile.mkdtemp(prefix="args-")
    core = None
    try:
        live = ["--pid", str(p.pid)]
        ours = stack_json(a.stackprov, live)
        theirs = gdb_args(gdb, ["-p", str(p.pid)])
        if a.gcore:
            r = run([a.gcore, "-o", os.path.join(work, "core"), str(p.pid)], timeout=120)
            core = os.path.join(work, "core.%d" % p.pid)
            if r.returncode != 0 or not os.path.exists(core):
                raise Harness("gcore failed: %s" % r.stderr[-1500:])
        py_api = None
        if a.python_path:
            os.kill(p.pid, signal.SIGSTOP)  # the same registers for every command
            py_api, py_checks = python_checks(a.stackprov, p.pid, a.python_path)
            check_python_api(py_api, py_checks)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    fixture = os.path.realpath(a.fixture)
    try:
        runs = [("live", ours, theirs)]
        if py_api is not None:
            runs.append(("python", py_api, theirs))
        if core:
            runs.append(("core", stack_json(a.stackprov, ["--core", core, "--exe", a.fixture]),
                         gdb_args(gdb, [a.fixture, core])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = []
    for what, o, g in runs:
        counts = {"args": 0, "values": 0, "types": 0, "optimized_out": 0, "unknown": 0, "own": {}, "kinds": set()}
        if sorted(o) != sorted(g):
            fail("[%s] threads differ: stackprov %s, gdb %s" % (what, sorted(o), sorted(g)))
        for tid in sorted(set(o) & set(g)):
            check_thread("[%s] " % what, tid, roles.get(tid), o[tid]["frames"], g[tid], fixture, counts)
        if a.o0:
            for fn, n in O0_ALL.items():
                if counts["own"].get(fn, 0) != n:
                    fail("[%s] -O0: %s: %d argument values equal to gdb's, expected %d" %
                         (what, fn, counts["own"].get(fn, 0), n))
        elif sum(counts["own"].values()) == 0:
            fail("[%s] no argument value of the fixture's own frames printed" % what)
        summary.append("%s: %d args, %d values equal to gdb's (%d in the fixture, types %s), %d types equal, "
                       "%d <optimized out> as gdb, %d unknown" % (
                           what, counts["args"], counts["values"], sum(counts["own"].values()),
                           ",".join(sorted(counts["kinds"])), counts["types"], counts["optimized_out"],
                           counts["unknown"]))
    print("%s: %s; %.1f s" % ("FAIL" if failures else "PASS", "; ".join(summary), time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Harness as e:
        print("HARNESS: %s" % e)
        sys.exit(2)
