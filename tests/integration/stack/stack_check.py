#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack` against eu-stack (and gdb where eu-stack stops early), frame by frame.
"""Drives one comparison per invocation (one ctest each):

  stack_check.py live   --fixture EXE --variant NAME     every thread of a parked fixture
  stack_check.py core   --fixture EXE --variant NAME     the same fixture through gcore
  stack_check.py python                                  python3.11 in time.sleep
  stack_check.py robust-{exit,sigkill,churn,zombie,vfork,eperm,nosuch} --fixture EXE
  stack_check.py robust-rlimit
  stack_check.py core-{truncated,missing-module,not-elf,other-arch} --fixture EXE
  stack_check.py swapped-module --fixture SWAP_TARGET --swap-libs LIB_A LIB_B
  stack_check.py swapped-module-record --fixture SWAP_TARGET --swap-libs LIB_A LIB_B
  stack_check.py json-bytes --fixture BYTES_TARGET
  stack_check.py cli-errors

Common options: --stackprov BIN, --eu-stack BIN, --gdb BIN, --gcore BIN, --keep (keep temp files).

A live or core comparison asserts, for every thread:
  * stackprov's pc sequence equals eu-stack's over every frame eu-stack printed (pc is the
    unwound value: the return address for caller frames, the interrupted pc above a signal frame);
  * stackprov has at least as many frames; frames past eu-stack's last one must match gdb's;
  * function names agree modulo symbol-version suffixes (@GLIBC_2.34), clone suffixes
    ([clone .cold], .isra.0, .lto_priv.0) and aliases (two names for the same symbol
    address, checked in the module's symbol tables with readelf);
  * the fixture's known call chain for the thread's role appears in order (an oracle of its own);
  * the walk's stop reason is end_of_stack, and the target is left running and untraced.
Every mismatch prints variant, tid, role, frame index, both pcs/names, method and stop reason.
Exit 0 on success, 1 on a mismatch, 2 on a harness problem.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import gdb_frames_script, parse_eu_stack, parse_gdb_frames, real_frames  # noqa: E402  (tests/lib: peers' output)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

# Known chains (innermost first), by the role the fixture prints for each thread.
CHAINS = {
    "join": ["join_leaf", "join_mid", "main"],
    "nanosleep": ["nanosleep_leaf", "nanosleep_mid", "nanosleep_main"],
    "read": ["read_leaf", "read_mid", "read_main"],
    "condwait": ["condwait_leaf", "condwait_mid", "condwait_main"],
    "poll": ["poll_leaf", "poll_mid", "poll_main"],
    "select": ["select_leaf", "select_mid", "select_main"],
    "accept": ["accept_leaf", "accept_mid", "accept_main"],
    "sigwait": ["sigwait_leaf", "sigwait_mid", "sigwait_main"],
    "epoll": ["epoll_leaf", "epoll_mid", "epoll_main"],
    "signal": ["handler_park", "on_sigusr1", "signal_raise", "signal_mid", "signal_main"],
    "altstack": ["handler_park", "on_sigurg", "altstack_raise", "altstack_mid", "altstack_main"],
    "exception": ["fx::Guard::~Guard()", "fx::guarded_mid(int)", "fx::exception_main(void*)"],
    "recursion": ["fx::recurse(int)"] * 201 + ["fx::recursion_main(void*)"],
    "vfork": ["(anonymous namespace)::vfork_main(void*)"],
}
# Roles whose stack contains a signal frame: the frame above it must have method "signal".
SIGNAL_ROLES = {"signal", "altstack"}

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL " + msg, flush=True)


def note(msg):
    print(msg, flush=True)


class Harness(Exception):
    pass


# ------------------------------------------------------------------ names

_VERSION_RE = re.compile(r"@@?[A-Za-z0-9_.]+$")
_CLONE_DEMANGLED_RE = re.compile(r"( \[clone \.[A-Za-z_]+(\.\d+)?\])+$")
_CLONE_RAW_RE = re.compile(r"(\.(cold|isra|part|constprop|lto_priv|localalias|llvm)(\.\d+)?)+$")


def norm_name(name):
    """Drops symbol-version and clone suffixes; '' for unknown."""
    if not name or name == "??":
        return ""
    n = _VERSION_RE.sub("", name.strip())
    n = _CLONE_DEMANGLED_RE.sub("", n)
    n = _CLONE_RAW_RE.sub("", n)
    return n


class SymbolTables:
    """Symbols by module (and its separate debug file) from readelf, for the alias check."""

    def __init__(self):
        self.cache = {}

    def _read(self, path):
        if path in self.cache:
            return self.cache[path]
        syms = []
        if path and os.path.exists(path):
            out = subprocess.run(["readelf", "-sW", "--dyn-syms", path], capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                f = line.split()
                # Num: Value Size Type Bind Vis Ndx Name
                if len(f) >= 8 and f[0].endswith(":") and f[3] in ("FUNC", "IFUNC"):
                    try:
                        syms.append((int(f[1], 16), int(f[2], 0), f[7]))
                    except ValueError:
                        pass
        self.cache[path] = syms
        return syms

    def names_at(self, module, build_id, addr):
        paths = [module]
        if build_id and len(build_id) > 2:
            paths.append("/usr/lib/debug/.build-id/%s/%s.debug" % (build_id[:2], build_id[2:]))
        names = set()
        for p in paths:
            for value, size, name in self._read(p):
                if value <= addr < value + max(size, 1):
                    names.add(norm_name(name))
        return names


SYMTABS = SymbolTables()


def names_agree(eu_name, sp_frame, is_caller):
    a, b = norm_name(eu_name), norm_name(sp_frame.get("function", ""))
    if a == b:
        return True, ""
    if not a or not b:
        return False, "one side unresolved"
    # Aliases: both names cover the looked-up address in the module's symbol tables.
    addr = int(sp_frame["module_offset"], 16) - (1 if is_caller else 0)
    at = SYMTABS.names_at(sp_frame.get("module", ""), sp_frame.get("build_id", ""), addr)
    raw_b = norm_name(sp_frame.get("linkage_name", ""))
    if a in at and (b in at or raw_b in at):
        return True, "alias"
    # A demangled eu-stack name against a raw alias: compare demangled forms is not possible
    # without a demangler; report it.
    return False, "names at 0x%x: %s" % (addr, ", ".join(sorted(at)) or "none")


# ------------------------------------------------------------------ tools


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def eu_stack(args, eu_bin):
    r = run([eu_bin, "-m", "-n", "256"] + args)
    if r.returncode == 2 or "PID" not in r.stdout:
        raise Harness("eu-stack %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return parse_eu_stack(r.stdout), r.stderr


def gdb_frames(gdb_bin, pid=None, core=None, exe=None):
    """gdb's frames per thread (inline frames skipped: they share the pc of their caller; tail-call
    frames too: stackprov_json leaves out its inferred frames)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(gdb_frames_script(tailcall=False))
        script = f.name
    try:
        # gdb ignores SIGTERM while it waits for a stop: the timeout sends SIGKILL.
        cmd = ["timeout", "-s", "KILL", "100", gdb_bin, "-nx", "-batch", "-ex",
               "set debuginfod enabled off"]
        if pid:
            cmd += ["-p", str(pid)]
        else:
            cmd += [exe, core]
        cmd += ["-ex", "source " + script]
        r = run(cmd, timeout=120)
    finally:
        os.unlink(script)
    frames = parse_gdb_frames(r.stdout)
    if frames is None:
        raise Harness("gdb gave no frames: %s" % r.stderr[-2000:])
    return frames


def as_user(cmd, user):
    """`cmd` run as uid and gid `user` without supplementary groups (None: as we are)."""
    return cmd if user is None else ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd


def stackprov(args, bin_, timeout=60, user=None):
    return run(as_user([bin_, "stack"] + args, user), timeout=timeout)


def stackprov_json(args, bin_):
    r = stackprov(args + ["--json"], bin_)
    if r.returncode != 0:
        raise Harness("stackprov stack %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    # The same validity check a user would run.
    v = run([sys.executable, "-m", "json.tool"], input=r.stdout)
    if v.returncode != 0:
        fail("stackprov --json output is not valid JSON: %s" % v.stderr.strip())
        raise Harness("invalid JSON")
    for line in r.stderr.splitlines():
        if not line.startswith("stackprov: warning: "):
            fail("unexpected stderr line from stackprov: %r" % line)
    doc = json.loads(r.stdout)
    # eu-stack (and gdb's frames without its tail-call frames) are compared with the frames on the
    # stack: the inferred tail-call frames are left out (tests/integration/tailcall checks them).
    for t in doc.get("threads", []):
        t["frames"] = real_frames(t["frames"])
    return doc, r.stderr


# ------------------------------------------------------------------ fixture


class Fixture:
    """Starts a fixture, reads its "thread TID ROLE" lines up to "ready"."""

    def __init__(self, exe, mode="all", extra=(), wait_asleep=True):
        # Own session: kill() ends the fixture and any child it forked (vfork, zombie-child).
        self.proc = subprocess.Popen([exe, mode] + list(extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.pid = self.proc.pid
        self.roles = {}
        self.child = None
        deadline = time.time() + 20
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise Harness("fixture %s %s ended before ready: %s" %
                              (exe, mode, self.proc.stderr.read()))
            line = line.strip()
            if line == "ready":
                break
            f = line.split()
            if f[0] == "thread":
                self.roles[int(f[1])] = f[2]
            elif f[0] == "child":
                self.child = int(f[1])
            if time.time() > deadline:
                raise Harness("fixture not ready in time")
        if wait_asleep:
            self.wait_asleep()

    def states(self):
        out = {}
        for t in os.listdir("/proc/%d/task" % self.pid):
            try:
                with open("/proc/%d/task/%s/stat" % (self.pid, t)) as f:
                    s = f.read()
                out[int(t)] = s[s.rindex(")") + 2]
            except (OSError, ValueError):
                pass
        return out

    def wait_asleep(self):
        for _ in range(400):
            if all(s in "SD" for s in self.states().values()):
                time.sleep(0.02)
                return
            time.sleep(0.01)
        raise Harness("fixture threads not asleep: %s" % self.states())

    def check_untraced(self, what):
        """After a capture every thread must run again: no tracer, not stopped."""
        time.sleep(0.05)
        for t, (tracer, state) in self.tracer_states().items():
            if tracer != 0 or state in "tT":
                fail("%s: thread %s left traced/stopped after capture (TracerPid %s, State %s)" %
                     (what, t, tracer, state))

    def tracer_states(self):
        """{tid: (TracerPid, State letter)} from /proc/PID/task/*/status."""
        out = {}
        for t in os.listdir("/proc/%d/task" % self.pid):
            try:
                with open("/proc/%d/task/%s/status" % (self.pid, t)) as f:
                    st = f.read()
            except OSError:
                continue
            out[int(t)] = (int(re.search(r"^TracerPid:\s*(\d+)", st, re.M).group(1)),
                           re.search(r"^State:\s*(\S)", st, re.M).group(1))
        return out

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()


# ------------------------------------------------------------------ comparison


def frame_str(f):
    return "pc=0x%x %s" % (f[0], f[1] or "??")


def sp_str(f):
    return "pc=%s %s [%s]" % (f["pc"], f.get("function") or "??", f.get("method"))


def subsequence(chain, names):
    """True when `chain` appears in `names` in order (not necessarily contiguous)."""
    it = iter(names)
    return all(any(c == n for n in it) for c in chain)


def compare_thread(ctx, tid, role, eu, sp_thread, gdb_lookup, names=True):
    """eu: [(pc, name, module)]; sp_thread: stackprov's JSON thread; gdb_lookup() -> frames."""
    frames = sp_thread["frames"]
    stop = sp_thread["stop_reason"]
    where = "[%s] tid %d (%s)" % (ctx, tid, role or "?")
    ok = True
    for i, e in enumerate(eu):
        if i >= len(frames):
            fail("%s: stackprov stopped after %d frames (stop %s), eu-stack has %d; eu-stack #%d %s"
                 % (where, len(frames), stop, len(eu), i, frame_str(e)))
            return False
        s = frames[i]
        if int(s["pc"], 16) != e[0]:
            fail("%s #%d: pc differs: eu-stack %s, stackprov %s (stop %s)" %
                 (where, i, frame_str(e), sp_str(s), stop))
            return False
        # Caller frames are looked up at pc-1; frame 0 and a frame restored from a signal
        # frame (the interrupted pc) at pc.
        agree, why = names_agree(e[1], s, i > 0 and s.get("method") != "signal")
        if names and not agree:
            fail("%s #%d: function differs at pc 0x%x: eu-stack '%s', stackprov '%s' / '%s' (%s)" %
                 (where, i, e[0], e[1], s.get("function"), s.get("linkage_name"), why))
            ok = False
    if len(frames) > len(eu):
        # eu-stack stopped early: gdb is the oracle for the rest.
        g = gdb_lookup().get(tid)
        if g is None:
            fail("%s: stackprov has %d frames past eu-stack's %d and gdb has no such thread" %
                 (where, len(frames) - len(eu), len(eu)))
            return False
        for i in range(len(eu), len(frames)):
            if i >= len(g) or g[i][0] != int(frames[i]["pc"], 16):
                fail("%s #%d: beyond eu-stack's %d frames: gdb %s, stackprov %s" %
                     (where, i, len(eu), frame_str(g[i]) if i < len(g) else "(none)",
                      sp_str(frames[i])))
                return False
        note("%s: eu-stack stopped at %d frames; stackprov's %d further frames match gdb" %
             (where, len(eu), len(frames) - len(eu)))
    if stop != "end_of_stack":
        fail("%s: stop reason %s (expected end_of_stack) after %d frames; last %s" %
             (where, stop, len(frames), sp_str(frames[-1]) if frames else "-"))
        ok = False
    if frames and frames[0].get("method") != "context":
        fail("%s #0: method %s, expected context" % (where, frames[0].get("method")))
        ok = False
    sp_names = [norm_name(f.get("function", "")) for f in frames]
    chain = CHAINS.get(role)
    if chain and not subsequence(chain, sp_names):
        fail("%s: known chain %s not found in stackprov's names %s" %
             (where, " <- ".join(chain[:6]), sp_names[:12]))
        ok = False
    if role in SIGNAL_ROLES and not any(f.get("method") == "signal" for f in frames):
        fail("%s: no frame with method 'signal' in a thread stopped inside a signal handler" %
             where)
        ok = False
    return ok


def compare_all(ctx, eu_threads, doc, roles, gdb_lookup, expect_tids=None, names=True):
    sp_threads = {t["tid"]: t for t in doc["threads"]}
    tids = sorted(set(eu_threads) | set(sp_threads))
    good = 0
    for tid in tids:
        if tid not in sp_threads:
            fail("[%s] tid %d: in eu-stack's output, missing from stackprov's" % (ctx, tid))
            continue
        if tid not in eu_threads:
            fail("[%s] tid %d: in stackprov's output, missing from eu-stack's" % (ctx, tid))
            continue
        if compare_thread(ctx, tid, roles.get(tid), eu_threads[tid], sp_threads[tid], gdb_lookup,
                          names):
            good += 1
    for tid in (expect_tids or []):
        if tid not in sp_threads:
            fail("[%s] tid %d (%s) missing from stackprov's output" % (ctx, tid, roles.get(tid)))
    note("[%s] %d/%d threads identical to eu-stack (pcs and names), %d frames in all" %
         (ctx, good, len(tids), sum(len(t["frames"]) for t in doc["threads"])))


class LazyGdb:
    def __init__(self, gdb_bin, **kw):
        self.gdb_bin, self.kw, self.frames = gdb_bin, kw, None

    def __call__(self):
        if self.frames is None:
            self.frames = gdb_frames(self.gdb_bin, **self.kw)
        return self.frames


# ------------------------------------------------------------------ modes


def mode_live(a):
    fx = Fixture(a.fixture)
    try:
        t0 = time.time()
        doc, err = stackprov_json(["--pid", str(fx.pid)], a.stackprov)
        t1 = time.time()
        fx.check_untraced("stackprov")
        eu, eu_err = eu_stack(["-p", str(fx.pid)], a.eu_stack)
        t2 = time.time()
        if doc["pid"] != fx.pid:
            fail("pid %d in JSON, expected %d" % (doc["pid"], fx.pid))
        if err.strip():
            fail("stackprov warned on a quiet target: %s" % err.strip())
        compare_all(a.variant, eu, doc, fx.roles, LazyGdb(a.gdb, pid=fx.pid),
                    expect_tids=list(fx.roles))
        # The text form carries the same frames.
        r = stackprov(["--pid", str(fx.pid)], a.stackprov)
        check_text(a.variant, r, doc, "process")
        note("[%s] stackprov %.0f ms, eu-stack %.0f ms" % (a.variant, (t1 - t0) * 1e3,
                                                           (t2 - t1) * 1e3))
    finally:
        fx.kill()


def check_text(ctx, r, doc, kind):
    if r.returncode != 0:
        fail("[%s] text mode exited %d: %s" % (ctx, r.returncode, r.stderr))
        return
    lines = r.stdout.splitlines()
    if not lines or lines[0] != "PID %d - %s" % (doc["pid"], kind):
        fail("[%s] text header %r, expected 'PID %d - %s'" % (ctx, lines[:1], doc["pid"], kind))
    tids = [int(m.group(1)) for m in (re.match(r'^TID (\d+)(?: "[^"]*")?:$', l) for l in lines) if m]
    if sorted(tids) != sorted(t["tid"] for t in doc["threads"]):
        fail("[%s] text mode threads %s differ from JSON's" % (ctx, tids))
    text = parse_eu_stack(r.stdout)
    for t in doc["threads"]:
        pcs = [p for p, _, _ in text.get(t["tid"], [])]
        want = [int(f["pc"], 16) for f in t["frames"]]
        # A live target may have moved between the two captures only if it was not parked.
        if pcs != want:
            fail("[%s] tid %d: text pcs differ from JSON pcs" % (ctx, t["tid"]))
    stops = [l for l in lines if l.startswith("stop: ")]
    if len(stops) != len(doc["threads"]):
        fail("[%s] %d stop lines for %d threads" % (ctx, len(stops), len(doc["threads"])))


def make_core(a, fx, tmp):
    prefix = os.path.join(tmp, "core")
    r = run([a.gcore, "-o", prefix, str(fx.pid)], timeout=120)
    core = "%s.%d" % (prefix, fx.pid)
    if r.returncode != 0 or not os.path.exists(core):
        raise Harness("gcore failed: %s %s" % (r.stdout[-500:], r.stderr[-1500:]))
    return core


def mode_core(a):
    tmp = tempfile.mkdtemp(prefix="stack-core-")
    fx = Fixture(a.fixture)
    try:
        core = make_core(a, fx, tmp)
        roles = dict(fx.roles)
    finally:
        fx.kill()
    try:
        doc, err = stackprov_json(["--core", core, "--exe", a.fixture], a.stackprov)
        eu, _ = eu_stack(["--core", core, "--executable", a.fixture], a.eu_stack)
        if err.strip():
            fail("stackprov warned on a complete core: %s" % err.strip())
        compare_all(a.variant + "/core", eu, doc, roles,
                    LazyGdb(a.gdb, core=core, exe=a.fixture), expect_tids=list(roles))
        r = stackprov(["--core", core, "--exe", a.fixture], a.stackprov)
        check_text(a.variant + "/core", r, doc, "core")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


PY_SCRIPT = r"""
import sys, time
def level_c():
    time.sleep(100000)
def level_b():
    level_c()
def level_a():
    level_b()
print("ready", flush=True)
level_a()
"""


def mode_python(a):
    py = a.python311
    if not os.path.exists(py):
        fail("%s is not installed (python3.11, make deps installs it)" % py)
        return
    p = subprocess.Popen([py, "-c", PY_SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "ready":
            raise Harness("python did not start")
        for _ in range(400):
            with open("/proc/%d/stat" % p.pid) as f:
                s = f.read()
            if s[s.rindex(")") + 2] == "S":
                break
            time.sleep(0.01)
        time.sleep(0.05)
        # Native frames only (--python=off): the comparison is with eu-stack, frame by frame.
        doc, err = stackprov_json(["--pid", str(p.pid), "--python=off"], a.stackprov)
        eu, _ = eu_stack(["-p", str(p.pid)], a.eu_stack)
        compare_all("python3.11", eu, doc, {p.pid: "python"}, LazyGdb(a.gdb, pid=p.pid))
        names = [norm_name(f.get("function", "")) for f in doc["threads"][0]["frames"]]
        # Nested Python calls are nested _PyEval_EvalFrameDefault activations (3.11 inlines
        # pure-Python calls into one activation; time.sleep is a C call out of it).
        for want in ("time_sleep", "_PyEval_EvalFrameDefault", "Py_RunMain", "Py_BytesMain"):
            if want not in names:
                fail("[python3.11] '%s' not among stackprov's names %s" % (want, names))
    finally:
        p.kill()
        p.wait()


def expect_error(ctx, r, must_contain, code=None):
    """A user-facing error: non-zero exit, one line on stderr containing each string."""
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    if r.returncode == 0 or r.returncode < 0:
        fail("[%s] exit status %d, expected a non-zero exit (stderr %r)" %
             (ctx, r.returncode, r.stderr))
        return
    if code is not None and r.returncode != code:
        fail("[%s] exit status %d, expected %d" % (ctx, r.returncode, code))
    errs = [l for l in lines if not l.startswith("stackprov: warning: ")]
    if len(errs) != 1:
        fail("[%s] expected one error line on stderr, got %r" % (ctx, lines))
        return
    for s in must_contain:
        if s.lower() not in errs[0].lower():
            fail("[%s] error line %r does not mention %r" % (ctx, errs[0], s))
    note("[%s] ok: %s" % (ctx, errs[0]))


def mode_cli_errors(a):
    sp = a.stackprov
    cases = [
        (["--pid", "1", "--max-frames", "abc"], ["abc", "--max-frames"]),
        (["--pid", "1", "--max-frames", "0"], ["'0'", "--max-frames"]),
        (["--pid", "1", "--max-frames", "70000"], ["70000"]),
        (["--pid", "-3"], ["-3", "--pid"]),
        (["--pid", "12abc"], ["12abc"]),
        (["--pid", ""], ["--pid"]),
        (["--pid", "1", "--core", "x.core"], ["--pid", "--core"]),
        ([], ["--pid", "--core"]),
        (["--json"], ["--pid", "--core"]),
        (["--pid"], ["--pid"]),
        (["--pid", "1", "--bogus"], ["--bogus"]),
        (["--pid", "1", "--tid", "x"], ["--tid", "'x'"]),
        (["--pid", "1", "--exe", "/bin/true"], ["--exe", "/bin/true"]),
        (["--pid", "1", "--sysroot", "/srv"], ["--sysroot", "/srv"]),
        (["--pid=1", "--pid=2"], ["--pid"]),
    ]
    for args, words in cases:
        r = stackprov(args, sp)
        expect_error("stack %s" % " ".join(args), r, words, code=2)
        if r.stdout:
            fail("[stack %s] printed to stdout: %r" % (" ".join(args), r.stdout))
    # A --store that is not a directory: exit 1 naming it, as the bundle commands say it.
    tmp = tempfile.mkdtemp(prefix="stack-cli-")
    try:
        for store, why in ((os.path.join(tmp, "none"), "does not exist"), (sp, "is not a directory")):
            r = stackprov(["--pid", str(os.getpid()), "--store", store], sp)
            expect_error("stack --store %s" % store, r, ["bundle store '%s' %s" % (store, why)], code=1)
            if r.stdout:
                fail("[stack --store %s] printed to stdout: %r" % (store, r.stdout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    h = stackprov(["--help"], sp)
    if h.returncode != 0:
        fail("--help exited %d" % h.returncode)
    for opt in ("--pid", "--tid", "--core", "--exe", "--sysroot", "--max-frames", "--json",
                "eu-stack", "ptrace", "return address", "stackprov: warning:"):
        if opt not in h.stdout:
            fail("--help does not mention %s" % opt)
    # --help's claims: the default and the limit of --max-frames are the library's.
    if "default 256" not in h.stdout or "65536" not in h.stdout:
        fail("--help does not state --max-frames' default 256 and limit 65536")
    top = run([sp, "--help"])
    if "stack" not in top.stdout:
        fail("'stackprov --help' does not list the stack command")


def mode_robust_nosuch(a):
    # A pid that surely does not exist: one that was just reaped.
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    r = stackprov(["--pid", str(p.pid)], a.stackprov)
    expect_error("no such process", r, [str(p.pid), "no such process"])


def mode_robust_eperm(a):
    # stackprov as nobody against a root-owned target: the kernel says EPERM.
    if os.getuid() != 0:
        fail("[permission denied] needs root to run stackprov as an unprivileged user (tests run as root)")
        return
    tmp = tempfile.mkdtemp(prefix="stack-eperm-")
    os.chmod(tmp, 0o755)
    binary = os.path.join(tmp, "stackprov")
    shutil.copy(a.stackprov, binary)
    os.chmod(binary, 0o755)
    fx = Fixture(a.fixture, "bench")
    try:
        r = stackprov(["--pid", str(fx.pid)], binary, user=65534)
        expect_error("permission denied", r, [str(fx.pid)])
        low = r.stderr.lower()
        if "permission" not in low and "not permitted" not in low:
            fail("[permission denied] message does not say permission: %r" % r.stderr)
        if "ptrace_scope" not in r.stderr and "CAP_SYS_PTRACE" not in r.stderr:
            fail("[permission denied] no ptrace_scope / CAP_SYS_PTRACE hint: %r" % r.stderr)
        fx.check_untraced("eperm")
    finally:
        fx.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def mode_robust_exit(a):
    # The target exits while stackprov attaches, at staggered delays: each run either captures
    # (valid JSON) or fails with a one-line error naming the pid; never a crash or a hang.
    outcomes = {"captured": 0, "error": 0}
    for delay_ms in (0, 2, 5, 10, 20, 40):
        fx = Fixture(a.fixture, "exit-soon", [str(delay_ms)], wait_asleep=False)
        try:
            r = stackprov(["--pid", str(fx.pid), "--json"], a.stackprov, timeout=30)
            if r.returncode == 0:
                v = run([sys.executable, "-m", "json.tool"], input=r.stdout)
                if v.returncode != 0:
                    fail("[exit %d ms] invalid JSON: %s" % (delay_ms, v.stderr))
                    continue
                # What it did capture is this process, and every parked thread it captured
                # shows its known chain down to end_of_stack (the fixture's own oracle).
                doc = json.loads(r.stdout)
                if doc.get("pid") != fx.pid:
                    fail("[exit %d ms] captured pid %s, expected %d" % (delay_ms, doc.get("pid"), fx.pid))
                for t in doc.get("threads", []):
                    role = fx.roles.get(t["tid"])
                    if role not in CHAINS:
                        continue
                    names = [norm_name(f.get("function", "")) for f in t["frames"]]
                    if not subsequence(CHAINS[role], names) or t["stop_reason"] != "end_of_stack":
                        fail("[exit %d ms] tid %d (%s): chain %s not in %s (stop %s)" %
                             (delay_ms, t["tid"], role, CHAINS[role][:5], names[:10], t["stop_reason"]))
                outcomes["captured"] += 1
            else:
                expect_error("exit %d ms" % delay_ms, r, [str(fx.pid)])
                outcomes["error"] += 1
        finally:
            fx.kill()
    note("[exit] %s" % outcomes)


def mode_robust_sigkill(a):
    # `stack --pid` SIGKILLed at random points of its capture (issue 18): 100 kills at a uniform
    # time of the whole run, and 100 kills inside the traced window (from the moment a thread is
    # seen seized, a random delay within that window). Afterwards every thread of the target
    # runs again, none stopped or traced (the kernel detaches a dead tracer's tracees). The
    # traced window lasts ~1 ms, so under load a targeted kill may still arrive after the detach:
    # such misses are retried (up to 300 more attempts) until 50 kills have landed while threads
    # were traced, or the test did not exercise the case and fails.
    fx = Fixture(a.fixture)
    rng = random.Random(18)
    tids = sorted(fx.roles)

    def traced_now():
        # Fast probe of TracerPid over the known threads (the loop below runs at ~10 kHz).
        for t in tids:
            try:
                with open("/proc/%d/task/%d/status" % (fx.pid, t)) as f:
                    st = f.read()
            except OSError:
                continue
            m = re.search(r"^TracerPid:\s*(\d+)", st, re.M)
            if m and m.group(1) != "0":
                return True
        return False

    def wait_released(what):
        # Detach happens as the tracer exits, before wait() returns; allow the woken threads
        # a moment to be scheduled out of the tracing stop.
        deadline = time.time() + 2
        bad = {}
        while time.time() < deadline:
            bad = {t: v for t, v in fx.tracer_states().items() if v[0] != 0 or v[1] in "tT"}
            if not bad:
                return True
            time.sleep(0.01)
        fail("[sigkill %s] threads left traced/stopped 2 s after the tracer died: %s" % (what, bad))
        return False

    try:
        t0 = time.time()
        r = stackprov(["--pid", str(fx.pid), "--json"], a.stackprov)
        full = time.time() - t0
        if r.returncode != 0:
            raise Harness("reference capture exited %d: %s" % (r.returncode, r.stderr))
        fx.check_untraced("[sigkill] reference capture")
        # How long threads stay traced: measured over 5 captures with the fast probe.
        windows = []
        for _ in range(5):
            p = subprocess.Popen([a.stackprov, "stack", "--pid", str(fx.pid), "--json"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            first = last = None
            while p.poll() is None:
                if traced_now():
                    last = time.time()
                    first = first or last
            p.wait()
            if first is not None:
                windows.append(last - first)
            if not wait_released("window"):
                return
        window = max(sorted(windows)[len(windows) // 2] if windows else 0.0, 0.0002)
        uniform_kills = traced_kills = attempts = 0
        targeted_kills = 0
        while uniform_kills < 100 or targeted_kills < 100 or traced_kills < 50:
            if attempts >= 500:
                break
            attempts += 1
            # Alternate the two kinds; once 100 of each are done, only targeted retries remain.
            targeted = uniform_kills >= 100 or (attempts % 2 == 0 and targeted_kills < 100)
            p = subprocess.Popen([a.stackprov, "stack", "--pid", str(fx.pid), "--json"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not targeted:  # anywhere in the run: start-up, attach, copy, detach, symbolize
                time.sleep(rng.uniform(0, full))
                uniform_kills += 1
            else:  # inside the traced window: from the first thread seen seized, 0..window on
                deadline = time.time() + 5 * full
                seen = False
                while time.time() < deadline and p.poll() is None:
                    if traced_now():
                        seen = True
                        break
                if seen:
                    delay = rng.uniform(0, window)
                    end = time.time() + delay
                    while time.time() < end:
                        pass
                    targeted_kills += 1
            landed = traced_now()
            p.kill()
            p.wait()
            if landed:
                traced_kills += 1
            if not wait_released(attempts):
                return
        note("[sigkill] capture takes %.0f ms, threads traced ~%.2f ms; %d kills (%d uniform, %d "
             "targeted), %d while threads were traced" %
             (full * 1e3, window * 1e3, attempts, uniform_kills, targeted_kills, traced_kills))
        if traced_kills < 50:
            fail("[sigkill] only %d of %d kills landed while threads were traced" % (traced_kills, attempts))
        # Still the same, whole process: a capture after the kills sees every thread.
        doc, _ = stackprov_json(["--pid", str(fx.pid)], a.stackprov)
        if sorted(t["tid"] for t in doc["threads"]) != sorted(fx.roles):
            fail("[sigkill] capture after the kills has threads %s, expected %s" %
                 (sorted(t["tid"] for t in doc["threads"]), sorted(fx.roles)))
    finally:
        fx.kill()


def mode_robust_rlimit(a):
    # Capture and symbolize of a large process (node, ~100 MB binary) under a small RLIMIT_AS
    # (issue 18), over a range of limits: each run exits 0 with whole stacks, or 1 with its last
    # stderr line saying "out of memory"; never a signal or another status. Unlimited: exit 0.
    node = shutil.which("node")
    if not node:
        fail("[rlimit] node not found (make deps installs nodejs)")
        return
    target = subprocess.Popen([node, "-e", "setInterval(() => {}, 1000)"], start_new_session=True)
    try:
        time.sleep(0.5)
        r = stackprov(["--pid", str(target.pid)], a.stackprov)
        if r.returncode != 0:
            fail("[rlimit] unlimited capture of node exited %d: %s" % (r.returncode, r.stderr))
        outcomes = {"whole": 0, "out of memory": 0}
        for mb in range(40, 281, 8):  # below ~32 MB the dynamic loader itself fails (exit 127)
            r = run(["prlimit", "--as=%d" % (mb << 20), a.stackprov, "stack", "--pid", str(target.pid)], timeout=60)
            last = (r.stderr.strip().splitlines() or [""])[-1]
            if r.returncode == 0:
                outcomes["whole"] += 1
            elif r.returncode == 1 and "out of memory" in last and str(target.pid) in last:
                outcomes["out of memory"] += 1
            else:
                fail("[rlimit %d MB] exit %d, last line %r (expected 0, or 1 saying out of memory)" %
                     (mb, r.returncode, last))
        note("[rlimit] %s over limits 40..280 MB" % outcomes)
        if outcomes["out of memory"] == 0:
            fail("[rlimit] no limit made the capture run out of memory: the test did not exercise it")
    finally:
        target.kill()
        target.wait()


def mode_robust_churn(a):
    # Threads are created and exit throughout the capture: the parked ones must all be there
    # and exact; the comings and goings are warnings at most.
    fx = Fixture(a.fixture, "churn", wait_asleep=False)
    try:
        time.sleep(0.1)
        for attempt in range(3):
            r = stackprov(["--pid", str(fx.pid), "--json"], a.stackprov)
            if r.returncode not in (0, 1) or not r.stdout.startswith("{"):
                fail("[churn] exit %d: %s" % (r.returncode, r.stderr))
                return
            doc = json.loads(r.stdout)
            sp = {t["tid"]: t for t in doc["threads"]}
            # A thread caught while being created (the parent side of glibc's clone3 has no
            # CFI) stops short: exit 1 with the one line saying so (stack --help).
            short = [t["tid"] for t in doc["threads"] if t["stop_reason"] not in ("end_of_stack", "max_frames")]
            errs = [l for l in r.stderr.splitlines() if not l.startswith("stackprov: warning: ")]
            if r.returncode != (1 if short else 0) or len(errs) != (1 if short else 0) or \
                    (short and "the stacks are not whole" not in errs[0]):
                fail("[churn] exit %d with threads %s stopped short; stderr %r" % (r.returncode, short, r.stderr))
            for tid, role in fx.roles.items():
                if role == "churn":
                    continue
                if tid not in sp:
                    fail("[churn] parked thread %d (%s) missing" % (tid, role))
                    continue
                names = [norm_name(f.get("function", "")) for f in sp[tid]["frames"]]
                if not subsequence(CHAINS[role], names):
                    fail("[churn] thread %d (%s): chain %s not in %s" %
                         (tid, role, CHAINS[role][:5], names[:10]))
                if sp[tid]["stop_reason"] != "end_of_stack":
                    fail("[churn] thread %d (%s): stop %s" % (tid, role, sp[tid]["stop_reason"]))
            note("[churn] run %d: %d threads, %d warning line(s)" %
                 (attempt, len(sp), len(r.stderr.splitlines())))
        fx.check_untraced("churn")
    finally:
        fx.kill()


def mode_robust_zombie(a):
    fx = Fixture(a.fixture, "zombie-child", wait_asleep=False)
    try:
        for _ in range(200):
            with open("/proc/%d/stat" % fx.child) as f:
                s = f.read()
            if s[s.rindex(")") + 2] == "Z":
                break
            time.sleep(0.01)
        else:
            raise Harness("child %d did not become a zombie" % fx.child)
        r = stackprov(["--pid", str(fx.child)], a.stackprov)
        expect_error("zombie", r, [str(fx.child)])
        # Its parent is an ordinary target.
        fx.wait_asleep()
        doc, _ = stackprov_json(["--pid", str(fx.pid)], a.stackprov)
        eu, _ = eu_stack(["-p", str(fx.pid)], a.eu_stack)
        compare_all("zombie-parent", eu, doc, fx.roles, LazyGdb(a.gdb, pid=fx.pid))
    finally:
        fx.kill()


def mode_robust_vfork(a):
    # A thread inside vfork() (the child sleeps, so the parent thread waits in the kernel, state
    # D, and cannot stop for a tracer until the vfork ends). eu-stack 0.188 and gdb 13 both hang
    # on such a process, so there is no peer here: stackprov must finish in bounded time, leave
    # every thread running and untraced, name the vfork thread in a warning, and give the other
    # threads their known chains ending in end_of_stack.
    fx = Fixture(a.fixture, "vfork", wait_asleep=False)
    try:
        fx.wait_asleep()
        t0 = time.time()
        r = stackprov(["--pid", str(fx.pid), "--json"], a.stackprov, timeout=30)
        took = time.time() - t0
        fx.check_untraced("vfork")
        if r.returncode != 0:
            fail("[vfork] exit %d: %s" % (r.returncode, r.stderr))
            return
        doc = json.loads(r.stdout)
        sp = {t["tid"]: t for t in doc["threads"]}
        vt = [t for t, role in fx.roles.items() if role == "vfork"][0]
        warned = [l for l in r.stderr.splitlines() if str(vt) in l]
        if vt not in sp and not warned:
            fail("[vfork] thread %d neither captured nor named in a warning: %r" % (vt, r.stderr))
        for tid, role in fx.roles.items():
            if tid == vt and tid not in sp:
                continue
            frames = sp.get(tid, {"frames": []})["frames"]
            names = [norm_name(f.get("function", "")) for f in frames]
            if not subsequence(CHAINS[role], names):
                fail("[vfork] thread %d (%s): chain %s not in %s" %
                     (tid, role, CHAINS[role], names))
        note("[vfork] %.1f s, %d threads captured; warnings: %s" %
             (took, len(sp), " | ".join(r.stderr.splitlines())))
    finally:
        fx.kill()


def mode_core_truncated(a):
    tmp = tempfile.mkdtemp(prefix="stack-trunc-")
    fx = Fixture(a.fixture)
    try:
        core = make_core(a, fx, tmp)
    finally:
        fx.kill()
    try:
        size = os.path.getsize(core)
        full_eu, _ = eu_stack(["--core", core, "--executable", a.fixture], a.eu_stack)
        for keep in (size // 2, 4096, 40):
            cut = os.path.join(tmp, "cut-%d.core" % keep)
            with open(core, "rb") as src, open(cut, "wb") as dst:
                dst.write(src.read(keep))
            r = stackprov(["--core", cut, "--exe", a.fixture, "--json"], a.stackprov)
            if r.returncode < 0:
                fail("[truncated %d] stackprov died with signal %d" % (keep, -r.returncode))
            elif r.returncode == 0:
                # Accepted only with a warning naming what is missing, and valid JSON.
                v = run([sys.executable, "-m", "json.tool"], input=r.stdout)
                if v.returncode != 0:
                    fail("[truncated %d] invalid JSON" % keep)
                if "stackprov: warning: " not in r.stderr:
                    fail("[truncated %d of %d bytes] accepted without a warning" % (keep, size))
                else:
                    note("[truncated %d] accepted with: %s" % (keep, r.stderr.strip()[:300]))
                # Whatever it could still read is true: every frame printed for a thread equals
                # eu-stack's frame at that index on the complete core (nothing made up).
                if v.returncode == 0:
                    for t in json.loads(r.stdout).get("threads", []):
                        ref = full_eu.get(t["tid"])
                        if ref is None:
                            fail("[truncated %d] tid %d is not a thread of the complete core" % (keep, t["tid"]))
                            continue
                        pcs = [int(f["pc"], 16) for f in t["frames"]]
                        n = min(len(pcs), len(ref))
                        if pcs[:n] != [e[0] for e in ref[:n]]:
                            fail("[truncated %d] tid %d: pcs %s differ from eu-stack on the complete core %s" %
                                 (keep, t["tid"], [hex(x) for x in pcs[:n]], [hex(e[0]) for e in ref[:n]]))
            else:
                expect_error("truncated %d" % keep, r, [cut])
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def mode_core_missing_module(a):
    # Run a private copy of the fixture, dump it, delete the copy: the core names a module
    # that no longer exists, and the warning must name it.
    tmp = tempfile.mkdtemp(prefix="stack-missing-")
    exe = os.path.join(tmp, "fixture-copy")
    shutil.copy(a.fixture, exe)
    os.chmod(exe, 0o755)
    fx = Fixture(exe)
    try:
        core = make_core(a, fx, tmp)
    finally:
        fx.kill()
    try:
        os.unlink(exe)
        r = stackprov(["--core", core, "--json"], a.stackprov)
        if r.returncode < 0:
            fail("[missing module] stackprov died with signal %d" % -r.returncode)
        elif r.returncode in (0, 1) and r.stdout.startswith("{"):
            # The stacks are printed; walks that stop in the missing module make them not whole:
            # exit 1 with one line saying so (stack --help), else 0.
            short = [t["tid"] for t in json.loads(r.stdout)["threads"]
                     if t["stop_reason"] not in ("end_of_stack", "max_frames")]
            errs = [l for l in r.stderr.splitlines() if not l.startswith("stackprov: warning: ")]
            if r.returncode != (1 if short else 0) or len(errs) != (1 if short else 0) or \
                    (short and "the stacks are not whole" not in errs[0]):
                fail("[missing module] exit %d with threads %s stopped short; stderr %r" %
                     (r.returncode, short, r.stderr))
            warns = [l for l in r.stderr.splitlines() if l.startswith("stackprov: warning: ")]
            if not any(exe in w for w in warns):
                fail("[missing module] no warning naming %s: %r" % (exe, r.stderr))
            else:
                note("[missing module] ok: %s" % [w for w in warns if exe in w][0])
            doc = json.loads(r.stdout)
            for t in doc["threads"]:  # eu-stack shows only the frames on the stack
                t["frames"] = real_frames(t["frames"])
            # libc frames stay exact: every thread's frames up to the first one in the missing
            # executable equal eu-stack's on the same core (pc and name), and frame 0 is there.
            eu, _ = eu_stack(["--core", core], a.eu_stack)
            if sorted(t["tid"] for t in doc["threads"]) != sorted(eu):
                fail("[missing module] threads %s, eu-stack %s" %
                     (sorted(t["tid"] for t in doc["threads"]), sorted(eu)))
            checked = 0
            for t in doc["threads"]:
                ref = eu.get(t["tid"], [])
                for i, f in enumerate(t["frames"]):
                    if f.get("module", "") == exe or os.path.basename(f.get("module", "")) == "fixture-copy":
                        break
                    if i >= len(ref):
                        fail("[missing module] tid %d #%d: eu-stack has no frame here, stackprov %s" %
                             (t["tid"], i, sp_str(f)))
                        break
                    if int(f["pc"], 16) != ref[i][0]:
                        fail("[missing module] tid %d #%d: pc %s, eu-stack 0x%x" % (t["tid"], i, f["pc"], ref[i][0]))
                        break
                    agree, why = names_agree(ref[i][1], f, i > 0 and f.get("method") != "signal")
                    if not agree:
                        fail("[missing module] tid %d #%d: %s, eu-stack %s (%s)" %
                             (t["tid"], i, f.get("function"), ref[i][1], why))
                    checked += 1
                if not t["frames"]:
                    fail("[missing module] tid %d: no frames" % t["tid"])
            if checked < len(doc["threads"]):
                fail("[missing module] only %d library frames compared over %d threads" %
                     (checked, len(doc["threads"])))
            note("[missing module] %d library frames equal eu-stack's" % checked)
        else:
            expect_error("missing module", r, [exe])
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def mode_core_not_elf(a):
    tmp = tempfile.mkdtemp(prefix="stack-notelf-")
    try:
        txt = os.path.join(tmp, "notes.txt")
        with open(txt, "w") as f:
            f.write("this is not an ELF file\n" * 10)
        r = stackprov(["--core", txt], a.stackprov)
        expect_error("not ELF", r, [txt])
        # An ELF file that is not a core (the fixture executable itself).
        r = stackprov(["--core", a.fixture], a.stackprov)
        expect_error("ELF but not a core", r, [a.fixture])
        r = stackprov(["--core", os.path.join(tmp, "absent.core")], a.stackprov)
        expect_error("absent core", r, [os.path.join(tmp, "absent.core")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mode_core_other_arch(a):
    # A real core whose ELF header says aarch64 (e_machine = 183): "core for another
    # architecture" must be said, not a crash or x86-64 garbage.
    tmp = tempfile.mkdtemp(prefix="stack-arch-")
    fx = Fixture(a.fixture, "bench")
    try:
        core = make_core(a, fx, tmp)
    finally:
        fx.kill()
    try:
        with open(core, "r+b") as f:
            f.seek(18)
            f.write((183).to_bytes(2, "little"))
        r = stackprov(["--core", core], a.stackprov)
        expect_error("other arch", r, [core])
        low = r.stderr.lower()
        if "arch" not in low and "aarch64" not in low and "arm64" not in low:
            fail("[other arch] message does not mention the architecture: %r" % r.stderr)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def build_id_of(path):
    """The GNU build-id of `path` as readelf prints it (the oracle for a module's identity)."""
    r = run(["readelf", "-n", path])
    m = re.search(r"Build ID:\s*([0-9a-f]+)", r.stdout)
    if not m:
        raise Harness("readelf -n %s: no build-id: %s" % (path, r.stderr))
    return m.group(1)


def symbols_of(path):
    """Function names defined in `path` (readelf -sW), for "no frame is named by the other file"."""
    r = run(["readelf", "-sW", path])
    return {f[7] for f in (l.split() for l in r.stdout.splitlines()) if len(f) >= 8 and f[3] == "FUNC"}


def dyn_symbols_of(path):
    """Function names in `path`'s dynamic symbol table (readelf --dyn-syms -W): what an image rebuilt
    from a process's memory, which holds no .symtab, can name."""
    r = run(["readelf", "--dyn-syms", "-W", path])
    return {f[7].split("@")[0] for f in (l.split() for l in r.stdout.splitlines())
            if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND"}


def check_trace_bundle(case, binary, pid, user, tmp, id_a, id_b):
    """swapped-module: `trace-capture --bundle` of the target as the unprivileged user. The bundle is
    built from module files: the file at the library's path is B (or none), not the module the
    process maps (A), so the library is not in the bundle, with a warning; B's build-id is never
    there (oracle: `bundle inspect --json` of the bundle the summary names)."""
    db = os.path.join(tmp, "traces-%s.db" % case)
    bstore = os.path.join(tmp, "bstore-%s" % case)
    r = run(as_user([binary, "trace-capture", "-p", str(pid), "--store", "sqlite:" + db, "--bundle",
                     "--bundle-store", bstore], user), timeout=120)
    if r.returncode != 0:
        fail("[%s] trace-capture exited %d: %s" % (case, r.returncode, r.stderr.strip()))
        return
    m = re.search(r"bundle (sha256:[0-9a-f]{64})", r.stderr)
    if not m:
        fail("[%s] trace-capture names no bundle: %r" % (case, r.stderr))
        return
    said = ("is another build (build-id %s)" % id_b) if case.startswith("replaced") else "is missing"
    if not any("libswap-" in l and id_a in l and said in l and "not in the bundle" in l for l in r.stderr.splitlines()):
        fail("[%s] trace-capture does not say the library (build-id %s) is not in the bundle (%s): %r" %
             (case, id_a, said, r.stderr))
    # The store belongs to the user who made it: another user's store is refused (root included,
    # doc/bundles.md "Store"), so its owner inspects it.
    r = run(as_user([binary, "bundle", "inspect", m.group(1), "--store", bstore, "--json"], user), timeout=60)
    if r.returncode != 0:
        fail("[%s] bundle inspect exited %d: %s" % (case, r.returncode, r.stderr.strip()))
        return
    ids = [mod["id"] for mod in json.loads(r.stdout)["modules"] if mod.get("id_kind") == "elf-build-id"]
    if not ids or id_b in ids or id_a in ids:
        fail("[%s] the trace's bundle holds build-ids %s (the library: A %s, B %s)" % (case, ids, id_a, id_b))
    else:
        note("[%s] trace bundle: %d modules, not the library; %s" % (case, len(ids), said))


def check_as_modules(case, tool, pid, lib, user, id_a, id_b):
    """swapped-module: the fast path's address space of `pid` (as_modules prints "start end path
    build-id" per module and the address space's warnings on stderr)."""
    r = run(as_user([tool, str(pid)], user), timeout=30)
    if r.returncode != 0:
        fail("[%s] as_modules exited %d: %s" % (case, r.returncode, r.stderr.strip()))
        return
    mods = [l.split(" ") for l in r.stdout.splitlines()]
    ids = [m[3] if len(m) > 3 else "" for m in mods if len(m) > 2 and m[2] == lib]
    if id_b in ids:
        fail("[%s] the address space describes %s by the file now at the path (build-id %s)" % (case, lib, id_b))
    if not ids or any(i != id_a for i in ids):
        fail("[%s] the address space lists %s with build-ids %s, not the mapped file's %s; warnings %r" %
             (case, lib, ids, id_a, r.stderr))
    else:
        note("[%s] address space: %s with build-id %s" % (case, os.path.basename(lib), id_a[:8]))
    if user is not None:
        warn = [l for l in r.stderr.splitlines() if os.path.basename(lib) in l]
        if not any("read from the process's memory" in l and id_a in l for l in warn):
            fail("[%s] the address space does not say the build-id was read from memory: %r" % (case, r.stderr))


def mode_swapped_module(a):
    """A library's file replaced (rename over it) or deleted while the target maps the original.
    The maps line's device and inode say which file is mapped; the path now names another or none.
    Expected, with the oracles readelf (build-ids, B's function names) and the target's source
    (its chain):
      * root: every frame in the library is described by the mapped file A, read through
        /proc/PID/map_files: A's build-id, the chain swap_leaf < swap_mid < swap_enter < main,
        end_of_stack; no frame carries B's build-id or a name only B defines;
      * an unprivileged user (no CAP_SYS_ADMIN: map_files is closed to it) after a replace or a
        delete: the module is described by A's build-id read from the target's memory (the mapped
        ELF header and note), with a warning naming the path (and both inodes after a replace);
        without a bundle, A's image rebuilt from its read-only segments in that memory: the walk
        reaches the end of the stack, the library's frames carry A's build-id and only names
        from A's .dynsym (readelf --dyn-syms); with a store holding the bundle of A (`bundle
        build --store`), the whole chain as root, through A's bundle (end_of_stack), with the
        same pcs as from memory and the same names where A's .dynsym has them;
      * never a frame with B's build-id or a name only B defines.
    The fast path's address space of the same process (--as-modules: sprov_address_space_new with
    its pid) lists the library with A's build-id in every case (as the unprivileged user with the
    same warning); never with B's build-id."""
    if not a.swap_libs or not a.as_modules:
        raise Harness("swapped-module needs --swap-libs and --as-modules")
    sw = SwapSetup(a, "stack-swap-")
    tmp, binary, store, id_a, id_b, only_b, chain = sw.tmp, sw.binary, sw.store, sw.id_a, sw.id_b, sw.only_b, sw.chain
    try:
        as_modules = os.path.join(tmp, "as_modules")
        shutil.copy(a.as_modules, as_modules)
        os.chmod(as_modules, 0o755)
        for case, user in SWAP_CASES:
            path = os.path.join(tmp, "libswap-%s.so" % case)
            proc = sw.start(case, user, path)
            try:
                r = stackprov(["--pid", str(proc.pid), "--json"], binary, user=user)
                if r.returncode != 0:
                    fail("[%s] stackprov exited %d: %s" % (case, r.returncode, r.stderr.strip()))
                    continue
                doc = json.loads(r.stdout)
                main = main_thread(doc, proc.pid)
                frames = main["frames"]
                desc = ["%s %s [%s]" % (f.get("function") or "??", os.path.basename(f.get("module") or ""),
                                        (f.get("build_id") or "")[:8]) for f in frames]
                for f in frames:
                    if f.get("build_id") == id_b:
                        fail("[%s] frame %d is described by the file now at the path (build-id %s): %s" %
                             (case, f["index"], id_b, desc))
                    if norm_name(f.get("function") or "") in only_b:
                        fail("[%s] frame %d is named %s, a function only the replacement defines: %s" %
                             (case, f["index"], f.get("function"), desc))
                in_lib = [f for f in frames if "libswap-" in (f.get("module") or "")]
                stop = main["stop_reason"]
                if user is None:
                    names = [norm_name(f.get("function") or "") for f in frames]
                    if not subsequence(chain, names) or stop != "end_of_stack":
                        fail("[%s] chain %s not in %s (stop %s)" % (case, chain, desc, stop))
                    if len(in_lib) < 3 or any(f.get("build_id") != id_a for f in in_lib):
                        fail("[%s] the library's frames do not all carry the mapped file's build-id %s: %s" %
                             (case, id_a, desc))
                    note("[%s] %s" % (case, " < ".join(desc)))
                else:
                    warn = [l for l in r.stderr.splitlines() if "libswap-" in l]
                    said = ("not the one mapped" if case.startswith("replaced") else "cannot be opened")
                    if not any(said in l and "read from the process's memory" in l and id_a in l and
                               "from its .eh_frame and .dynsym there" in l for l in warn):
                        fail("[%s] no warning says the module is described by build-id %s and its tables read from "
                             "memory: %r" % (case, id_a, r.stderr))
                    # No file and no bundle: A's image rebuilt from its read-only segments in the
                    # target's memory (kept in the capture) unwinds the library to the end of the
                    # stack and names its frames from A's .dynsym (readelf --dyn-syms of A: the
                    # oracle; the library's static functions are not there, so unnamed).
                    a_dyn = dyn_symbols_of(sw.lib_a)
                    mem_frames = frames
                    if stop != "end_of_stack":
                        fail("[%s] from memory: stop %s, not the end of the stack: %s" % (case, stop, desc))
                    if (len(in_lib) < 3 or any(f.get("build_id") != id_a for f in in_lib) or
                            any(f.get("function") and norm_name(f["function"]) not in a_dyn for f in in_lib)):
                        fail("[%s] from memory: the library's frames are not A's (build-id %s, names from A's "
                             ".dynsym %s): %s" % (case, id_a, sorted(a_dyn & set(chain)), desc))
                    note("[%s] from memory: %s; stop %s; %s" % (case, " < ".join(desc), stop, warn[0] if warn else ""))
                    # With the bundle of A (built from A's file: its DWARF CFI and names, another path
                    # than the memory image): the whole chain; and the same frames, pc for pc, as
                    # from memory, each library frame named alike where A's .dynsym has the name.
                    r = stackprov(["--pid", str(proc.pid), "--json", "--store", store], binary, user=user)
                    if r.returncode != 0:
                        fail("[%s] with --store: stackprov exited %d: %s" % (case, r.returncode, r.stderr.strip()))
                    else:
                        t = main_thread(json.loads(r.stdout), proc.pid)
                        frames = t["frames"]
                        # No module file: the bundle names the frames (resolved_function; `function` is the
                        # file's symbol table).
                        names = [norm_name(f.get("function") or f.get("resolved_function") or "") for f in frames]
                        desc = ["%s %s [%s]" % (n or "??", os.path.basename(f.get("module") or ""),
                                                (f.get("build_id") or "")[:8]) for n, f in zip(names, frames)]
                        in_lib = [f for f in frames if "libswap-" in (f.get("module") or "")]
                        if not subsequence(chain, names) or t["stop_reason"] != "end_of_stack":
                            fail("[%s] with --store: chain %s not in %s (stop %s)" % (case, chain, desc, t["stop_reason"]))
                        if len(in_lib) < 3 or any(f.get("build_id") != id_a for f in in_lib):
                            fail("[%s] with --store: the library's frames are not all A's: %s" % (case, desc))
                        if any(norm_name(n) in only_b or f.get("build_id") == id_b for n, f in zip(names, frames)):
                            fail("[%s] with --store: a frame from B: %s" % (case, desc))
                        note("[%s] with --store: %s" % (case, " < ".join(desc)))
                        if [f["pc"] for f in mem_frames] != [f["pc"] for f in frames]:
                            fail("[%s] from memory, pcs %s; through A's bundle, %s" %
                                 (case, [f["pc"] for f in mem_frames], [f["pc"] for f in frames]))
                        # The frames A's rules derive (cfi_bundle through the bundle) are derived
                        # from A's .eh_frame in memory, not by a frame-pointer or scan guess.
                        mm, bm = [f.get("method") for f in mem_frames], [f.get("method") for f in frames]
                        if "cfi_bundle" not in bm or any(b == "cfi_bundle" and m != "cfi_eh_frame" for m, b in zip(mm, bm)):
                            fail("[%s] methods from memory %s; through the bundle %s" % (case, mm, bm))
                        for fm, n, f in zip(mem_frames, names, frames):
                            if "libswap-" not in (f.get("module") or ""):
                                continue
                            want = n if n in a_dyn else ""
                            if norm_name(fm.get("function") or "") != want:
                                fail("[%s] from memory, frame %s is named %r; A's bundle names it %r, which A's "
                                     ".dynsym %s" % (case, f["pc"], fm.get("function"), n,
                                                     "has" if want else "does not have"))
                if user is not None:
                    check_trace_bundle(case, binary, proc.pid, user, tmp, id_a, id_b)
                check_as_modules(case, as_modules, proc.pid, path, user, id_a, id_b)
            finally:
                proc.stdin.close()
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for case, user in SWAP_CASES:
            if case.startswith("replaced"):
                check_as_refresh(sw, as_modules, case + "-refresh", user)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def read_listing(proc, what):
    """as_modules --refresh: the lines up to "--" -> [(start, end, path, build-id)]."""
    mods = []
    while True:
        line = proc.stdout.readline()
        if not line:
            raise Harness("%s: as_modules ended: %s" % (what, proc.stderr.read()))
        if line.strip() == "--":
            return mods
        f = line.rstrip("\n").split(" ")
        mods.append((int(f[0], 16), int(f[1], 16), f[2], f[3] if len(f) > 3 else ""))


def check_as_refresh(sw, tool, case, user):
    """swapped-module: one address space across a refresh (sprov_address_space_refresh). It is
    made while A is at the path; the file is replaced by B; the target then dlopens B through
    another spelling of the path, so the process maps both files under one path. After the
    refresh, by the oracles /proc/PID/maps (each mapping's inode) and readelf (the build-ids): the
    mappings of A's inode are listed with A's build-id, those of B's inode with B's, B read from
    the path (no warning names B's build-id: not described from memory, as the unprivileged user
    would have to if the path's file were not opened again)."""
    path = os.path.join(sw.tmp, "libswap-%s.so" % case)
    st = {}

    def open_as(proc):
        st["inode_a"] = os.stat(path).st_ino
        st["as"] = subprocess.Popen(as_user([tool, str(proc.pid), "--refresh"], user), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        st["before"] = read_listing(st["as"], case)

    try:
        proc = sw.start(case, user, path, before_swap=open_as)
    except BaseException:
        if st.get("as") is not None:
            st["as"].kill()
            st["as"].wait()
        raise
    asp = st.get("as")
    try:
        inode_b = os.stat(path).st_ino
        proc.stdin.write("load %s/./%s\n" % (os.path.dirname(path), os.path.basename(path)))
        proc.stdin.flush()
        said = proc.stdout.readline().strip()
        if said != "loaded":
            raise Harness("[%s] the target did not load B: %r" % (case, said))
        with open("/proc/%d/maps" % proc.pid) as f:
            maps = [l.split() for l in f]
        by_start = {int(m[0].split("-")[0], 16): int(m[4]) for m in maps if len(m) >= 6 and m[5] == path}
        asp.stdin.write("\n")
        asp.stdin.flush()
        after = read_listing(asp, case)
        asp.stdin.close()
        asp.wait(timeout=30)
        warnings = asp.stderr.read()
        before = [m for m in st["before"] if m[2] == path]
        if not before or any(m[3] != sw.id_a for m in before):
            fail("[%s] before the swap the address space lists %s, not A's build-id %s" % (case, before, sw.id_a))
        want = {st["inode_a"]: sw.id_a, inode_b: sw.id_b}
        listed = [(m[0], by_start.get(m[0]), m[3]) for m in after if m[2] == path]
        seen = {by_start.get(m[0]) for m in after if m[2] == path}
        if st["inode_a"] not in seen or inode_b not in seen:
            fail("[%s] after the refresh the address space lists %s's mappings of inodes %s, not both %d (A) and "
                 "%d (B); maps: %s" % (case, path, sorted(i for i in seen if i), st["inode_a"], inode_b, by_start))
        wrong = [(hex(s), i, b) for s, i, b in listed if want.get(i) != b]
        if wrong:
            fail("[%s] after the refresh, mappings listed with another build-id than their file's "
                 "(start, inode, build-id): %s; A: inode %d %s, B: inode %d %s; warnings %r" %
                 (case, wrong, st["inode_a"], sw.id_a, inode_b, sw.id_b, warnings))
        else:
            note("[%s] after the refresh: %s" % (case, ", ".join("%x inode %s -> %s" % (s, i, b[:8]) for s, i, b in listed)))
        # B is the file at the path: it is read from there, never described from memory or map_files.
        if "described by build-id %s" % sw.id_b in warnings:
            fail("[%s] the mapping of the file at the path (B, %s) was not read from it: %r" % (case, sw.id_b, warnings))
    finally:
        if asp is not None and asp.poll() is None:
            asp.kill()
            asp.wait()
        proc.stdin.close()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main_thread(doc, pid):
    """The thread of `stack --json` output whose tid is the process's pid (threads are listed by
    tid, and a later thread's tid may be the lower one after pids wrap)."""
    for t in doc["threads"]:
        if t.get("tid") == pid:
            return t
    raise Harness("no thread %d in %s" % (pid, [t.get("tid") for t in doc["threads"]]))


# The swapped-module cases: (name, user to run the target and stackprov as; None: root).
SWAP_CASES = (("replaced", None), ("deleted", None), ("replaced-unprivileged", 65534), ("deleted-unprivileged", 65534))


class SwapSetup:
    """The swapped-module modes' files: a temp dir open to the unprivileged user holding the target
    and stackprov, a bundle store with the bundle of library A; the oracles' answers (readelf's
    build-ids of A and B, the functions only B defines, the target's chain)."""

    def __init__(self, a, prefix):
        if not a.swap_libs:
            raise Harness("this mode needs --swap-libs")
        self.lib_a, self.lib_b = a.swap_libs
        self.id_a, self.id_b = build_id_of(self.lib_a), build_id_of(self.lib_b)
        if self.id_a == self.id_b:
            raise Harness("the two libraries have one build-id %s" % self.id_a)
        self.only_b = symbols_of(self.lib_b) - symbols_of(self.lib_a)
        self.chain = ["swap_leaf", "swap_mid", "swap_enter", "main"]
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.tmp, 0o777)
        self.target = os.path.join(self.tmp, "swap_target")
        self.binary = os.path.join(self.tmp, "stackprov")
        shutil.copy(a.fixture, self.target)
        shutil.copy(a.stackprov, self.binary)
        for f in (self.target, self.binary):
            os.chmod(f, 0o755)
        self.store = os.path.join(self.tmp, "store")
        r = run([self.binary, "bundle", "build", "--store", self.store, self.lib_a], timeout=60)
        if r.returncode != 0:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise Harness("bundle build %s: %s" % (self.lib_a, r.stderr))
        for d, _, files in os.walk(self.store):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)

    def start(self, case, user, path, env=None, before_swap=None):
        """Starts the target on a copy of A at `path` (as `user`), waits until it is parked in the
        library, calls before_swap(proc) if given, then replaces the file with B (rename over it)
        or deletes it, as `case` says. The target's stdin is a pipe ("load PATH" lines)."""
        shutil.copy(self.lib_a, path)
        os.chmod(path, 0o755)
        proc = subprocess.Popen(as_user([self.target, path], user), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
        try:
            if proc.stdout.readline().strip() != "ready":
                raise Harness("swap_target %s: %s" % (case, proc.stderr.read()))
            time.sleep(0.05)
            if before_swap is not None:
                before_swap(proc)
            if case.startswith("replaced"):
                shutil.copy(self.lib_b, path + ".new")
                os.chmod(path + ".new", 0o755)
                os.rename(path + ".new", path)
                if build_id_of(path) != self.id_b:
                    raise Harness("%s does not hold B after the rename" % path)
            else:
                os.unlink(path)
        except BaseException:
            proc.stdin.close()
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return proc


def mode_swapped_module_record(a):
    """`stackprov record -p` of a process whose library's file was replaced (rename over it) or
    deleted after it was mapped, then `perf-import` of the capture without and with a bundle store.
    The target spins in the library (SWAP_SPIN) so that cpu-clock samples land there. Expected,
    with the oracles readelf (A's and B's build-ids, the names only B defines) and the target's
    source (its chain swap_leaf < swap_mid < swap_enter < main):
      * the recording describes the library by the mapped file A: as root read through
        /proc/PID/map_files (no warning about the library); as the unprivileged user by A's build-id read from the target's
        memory, which `record` says in a warning naming A's build-id;
      * perf-import without a store never names a frame with a function only B defines; after a
        replace it warns that the file at the path has B's build-id where the recording has A's;
      * perf-import --store (holding the bundle of A): every sample taken in the library has the
        whole chain, named from A's bundle, and ends at the end of the stack."""
    sw = SwapSetup(a, "stack-swap-record-")
    env = dict(os.environ, SWAP_SPIN="1")
    try:
        for case, user in SWAP_CASES:
            path = os.path.join(sw.tmp, "libswap-%s.so" % case)
            cap = os.path.join(sw.tmp, "%s.cap" % case)
            proc = sw.start(case, user, path, env=env)
            try:
                r = run(as_user([sw.binary, "record", "-p", str(proc.pid), "--duration", "0.5", "-o", cap], user),
                        timeout=60)
            finally:
                proc.stdin.close()
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if r.returncode != 0:
                with open("/proc/sys/kernel/perf_event_paranoid") as f:
                    paranoid = f.read().strip()
                fail("[%s] record exited %d (kernel.perf_event_paranoid %s; as an unprivileged user it must be "
                     "2 or less): %s" % (case, r.returncode, paranoid, r.stderr.strip()))
                continue
            warn = [l for l in r.stderr.splitlines() if "libswap-" in l]
            from_memory = [l for l in warn if "read from the process's memory" in l]
            if user is not None and not any(sw.id_a in l for l in from_memory):
                fail("[%s] record does not say the module's build-id %s was read from memory: %r" %
                     (case, sw.id_a, r.stderr))
            if user is None and warn:
                # Root reads the mapped file through /proc/PID/map_files: nothing to warn about.
                fail("[%s] record as root warns about the library (map_files should have served it): %r" %
                     (case, warn))
            if any(sw.id_b in l for l in warn):
                fail("[%s] record describes the module by B (%s): %r" % (case, sw.id_b, warn))
            for store in (None, sw.store):
                with_store = ["--store", store] if store else []
                r = run([sw.binary, "perf-import", "-f", "json"] + with_store + [cap], timeout=60)
                what = "perf-import" + (" --store" if store else "")
                if r.returncode != 0:
                    fail("[%s] %s exited %d: %s" % (case, what, r.returncode, r.stderr.strip()))
                    continue
                samples = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
                in_lib = [s for s in samples if s["frames"] and "libswap-" in (s["frames"][0].get("module") or "")]
                if len(in_lib) < 10:
                    fail("[%s] %s: %d of %d samples in the library; the target spins there" %
                         (case, what, len(in_lib), len(samples)))
                    continue
                named_b = [f["function"] for s in samples for f in s["frames"] if norm_name(f.get("function") or "") in sw.only_b]
                if named_b:
                    fail("[%s] %s: frames named by B's functions %s" % (case, what, sorted(set(named_b))))
                if store is None:
                    if case.startswith("replaced") and not any("not the module's %s" % sw.id_a in l and sw.id_b in l
                                                               for l in r.stderr.splitlines()):
                        fail("[%s] %s does not warn that the file at the path is B (%s), not A (%s): %r" %
                             (case, what, sw.id_b, sw.id_a, r.stderr))
                    continue
                bad = [s for s in in_lib if not subsequence(sw.chain, [norm_name(f.get("function") or "")
                                                                       for f in s["frames"]]) or s["stop_reason"] != "end_of_stack"]
                if bad:
                    fail("[%s] %s: %d of %d samples in the library lack the chain %s or its end, e.g. %s (stop %s)" %
                         (case, what, len(bad), len(in_lib), sw.chain,
                          [f.get("function") for f in bad[0]["frames"]], bad[0]["stop_reason"]))
                else:
                    note("[%s] %s: %d samples in the library, each %s" %
                         (case, what, len(in_lib), " < ".join(f.get("function") or "??" for f in in_lib[0]["frames"])))
    finally:
        if not a.keep:
            shutil.rmtree(sw.tmp, ignore_errors=True)


def mode_json_bytes(a):
    """A symbol and a thread name that are not UTF-8 ("park_\\xff\\xfe", "bad\\xff\\xfename").
    JSON text is UTF-8 (RFC 8259 8.1): `stack --json` must be valid JSON with each byte that is not
    part of a well-formed sequence as U+FFFD, so the oracles are the raw bytes nm and
    /proc/PID/task/TID/comm give, decoded with Python's errors="replace". A trace of it goes
    through capture (with a bundle), resolve and replay: every seed identical, no internal error."""
    proc = subprocess.Popen([a.fixture], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    tmp = tempfile.mkdtemp(prefix="stack-bytes-")
    try:
        if proc.stdout.readline().strip() != b"ready":
            raise Harness("bytes_target: %r" % proc.stderr.read())
        nm = subprocess.run(nm_command() + [a.fixture], capture_output=True).stdout
        raw_sym = next((l.split()[-1] for l in nm.splitlines() if l.split()[-1].startswith(b"park_")), None)
        if raw_sym is None or raw_sym.isascii():
            raise Harness("nm shows no non-UTF-8 park_ symbol: %r" % raw_sym)
        with open("/proc/%d/task/%d/comm" % (proc.pid, proc.pid), "rb") as f:
            raw_comm = f.read().rstrip(b"\n")
        r = subprocess.run([a.stackprov, "stack", "--pid", str(proc.pid), "--json"], capture_output=True, timeout=60)
        if r.returncode != 0:
            fail("stack --json exited %d: %r" % (r.returncode, r.stderr))
            return
        try:
            doc = json.loads(r.stdout.decode("utf-8"))  # strict: invalid UTF-8 raises
        except (UnicodeDecodeError, ValueError) as e:
            fail("stack --json output is not UTF-8 JSON: %s" % e)
            return
        t = doc["threads"][0]
        want_sym, want_comm = raw_sym.decode("utf-8", "replace"), raw_comm.decode("utf-8", "replace")
        names = [f.get("function") for f in t["frames"]]
        if want_sym not in names:
            fail("no frame named %r (nm's %r with U+FFFD): %r" % (want_sym, raw_sym, names))
        if t.get("name") != want_comm:
            fail("thread name %r, expected %r (comm %r with U+FFFD)" % (t.get("name"), want_comm, raw_comm))
        note("stack --json: %r in %r" % (want_sym, want_comm))
        # Through a trace store: capture (with a bundle), resolve, replay.
        store = "sqlite:" + os.path.join(tmp, "t.db")
        r = subprocess.run([a.stackprov, "trace-capture", "-p", str(proc.pid), "--store", store, "--bundle",
                            "--bundle-store", os.path.join(tmp, "bundles")], capture_output=True, timeout=120)
        if r.returncode != 0:
            fail("trace-capture exited %d: %r" % (r.returncode, r.stderr))
            return
        tid = r.stdout.decode().split()[0]
        r = subprocess.run([a.stackprov, "trace-resolve", "--trace", tid, "--store", store, "--json"],
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            fail("trace-resolve exited %d: %r" % (r.returncode, r.stderr))
        r = subprocess.run([a.stackprov, "trace-replay", "--trace", tid, "--store", store, "--seeds", "5", "--json"],
                           capture_output=True, timeout=300)
        if b"internal error" in r.stderr:
            fail("trace-replay: %r" % r.stderr)
        try:
            rep = json.loads(r.stdout.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            fail("trace-replay --json output is not UTF-8 JSON (exit %d, %r): %s" % (r.returncode, r.stderr, e))
            return
        seeds = rep.get("seeds", [])
        if len(seeds) != 5 or any(s["identical"] != s["frames"] or s["frames"] == 0 for s in seeds):
            fail("trace-replay: not every seed identical: %r" % [(s["identical"], s["frames"], s.get("error"))
                                                                 for s in seeds])
        note("trace-replay: %s" % rep.get("summary"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


MODES = {
    "live": mode_live,
    "core": mode_core,
    "python": mode_python,
    "cli-errors": mode_cli_errors,
    "robust-nosuch": mode_robust_nosuch,
    "robust-eperm": mode_robust_eperm,
    "robust-exit": mode_robust_exit,
    "robust-sigkill": mode_robust_sigkill,
    "robust-rlimit": mode_robust_rlimit,
    "robust-churn": mode_robust_churn,
    "robust-zombie": mode_robust_zombie,
    "robust-vfork": mode_robust_vfork,
    "core-truncated": mode_core_truncated,
    "core-missing-module": mode_core_missing_module,
    "core-not-elf": mode_core_not_elf,
    "core-other-arch": mode_core_other_arch,
    "swapped-module": mode_swapped_module,
    "swapped-module-record": mode_swapped_module_record,
    "json-bytes": mode_json_bytes,
}



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=sorted(MODES))
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture")
    ap.add_argument("--variant", default="")
    ap.add_argument("--eu-stack", default=shutil.which("eu-stack") or "/usr/bin/eu-stack")
    ap.add_argument("--gdb", default=shutil.which("gdb") or "/usr/bin/gdb")
    ap.add_argument("--gcore", default=shutil.which("gcore") or "/usr/bin/gcore")
    ap.add_argument("--python311", default="/usr/bin/python3.11")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--swap-libs", nargs=2, metavar=("LIB_A", "LIB_B"))
    ap.add_argument("--as-modules", help="swapped-module: the address-space listing tool (as_modules)")
    a = ap.parse_args()
    a.variant = a.variant or (os.path.basename(a.fixture) if a.fixture else a.mode)
    # Every peer is installed by make deps: a missing one fails the test with its name.
    missing = [t for t in (a.eu_stack, a.gdb, a.gcore, "readelf", "setpriv", "timeout")
               if not shutil.which(t)]
    if missing:
        print("FAIL required program(s) not found: %s (make deps installs them)" % ", ".join(missing))
        return 1
    try:
        MODES[a.mode](a)
    except Harness as e:
        print("HARNESS ERROR: %s" % e, flush=True)
        return 2
    except subprocess.TimeoutExpired as e:
        print("HARNESS ERROR: timed out: %s" % e, flush=True)
        return 2
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
