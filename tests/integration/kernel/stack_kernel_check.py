#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack --pid P --kernel` (doc/kernel-stacks.md "stack --kernel") against perf and eu-stack.
# fixture_blocked.c runs four threads that block ~300 ms at a time in known system calls (nanosleep
# through glibc's wrapper, read on a pipe, FUTEX_WAIT through syscall(); main in nanosleep).
# `perf record -k CLOCK_MONOTONIC -g -e sched:sched_switch -p P` runs with its events enabled through
# its control fifo (the ack says when), then `stack --kernel --json` reads the stacks. For each thread:
#  - our kernel frames (sym+off, from /proc/PID/task/TID/stack) equal the kernel call chain perf
#    recorded at the thread's last blocking switch-out (prev_state S) before our run, less the frames
#    the kernel leaves out of /proc's stack: its scheduler and lock functions (in_sched_functions():
#    [__sched_text_start, __sched_text_end) and [__lock_text_start, __lock_text_end), the bounds read
#    from /proc/kallsyms; perf's addresses are checked against them, so the dropped frames are named:
#    __schedule, schedule, do_nanosleep, ...). Both named from kallsyms;
#  - the system call is the one the fixture's source makes (x86_64: 230, 0, 202, 230); the kernel's
#    saved user pc and sp are the captured frame 0's; the state is "read";
#  - the user frames (pc, function) equal `stack --pid P` without --kernel and eu-stack -p's pcs, the
#    fixture's functions are its source's chain, and the first (only) user frame is marked
#    kernel_user_boundary; kernel frames have domain "kernel", method "kernel_stack";
#  - the text output has the same frames.
# Then, as an unprivileged user (setpriv to nobody, the fixture run as nobody too): every thread says
# "kernel: unreadable" naming the permission, the user stacks are still printed, exit status 0. And a
# kernel thread (PF_KTHREAD in its /proc/PID/stat flags): exit 1, one line saying it is one.
# With --btf (a build with libbpf): `stack --kernel --with-btf --json`'s prototype of every kernel frame
# equals the one written from `bpftool btf dump file /sys/kernel/btf/vmlinux` (raw): the FUNC's id,
# its FUNC_PROTO's return type id and parameters (name, type id), and the C text made from them.
# The Python binding (PYTHONPATH: build/python), each capture after every thread blocked anew (a ptrace
# stop restarts a sleep as restart_syscall): `python3 -m stackprov stack --kernel --json` (with --btf also
# --with-btf) and `stackprov.stack(pid, kernel=True, with_btf=...)`'s Thread.kernel and Frame fields
# (domain, function, function_offset, module, prototype, btf_func_id, btf_approximate, flags) get the same
# checks against perf, eu-stack and bpftool; the Python CLI's bad options are refused as the CLI's.
# Needs root, perf (linux-perf), eu-stack (elfutils), setpriv (util-linux), bpftool with --btf. About 5 s.
import argparse
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_eu_stack, perf_script_samples, real_frames  # noqa: E402

# role -> (x86_64 system call number, the fixture's own functions leaf first, as in its source)
KNOWN = {
    "sleeper": (230, ["sleep_leaf", "sleep_outer", "sleeper_thread"]),
    "reader": (0, ["read_leaf", "read_outer", "reader_thread"]),
    "futex": (202, ["futex_leaf", "futex_outer", "futex_thread"]),
    "main": (230, ["main"]),
}
_BTF_TYPE = re.compile(r"^\[(\d+)\] (\w+) '(.*?)'(.*)$")
_BTF_PARAM = re.compile(r"^\t'(.*?)' type_id=(\d+)")
_HEAD = re.compile(r"^\S.*?\s(\d+)\s+(\d+)\.(\d{6}):.*\bprev_pid=(\d+)\b.*\bprev_state=(\S+)")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def kallsyms_ranges():
    """in_sched_functions()'s ranges from /proc/kallsyms (kernel/sched/core.c, kernel/locking)."""
    want = {"__sched_text_start", "__sched_text_end", "__lock_text_start", "__lock_text_end"}
    got = {}
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] in want:
                got[parts[2]] = int(parts[0], 16)
    if len(got) != 4 or 0 in got.values():
        return None
    return [(got["__sched_text_start"], got["__sched_text_end"]), (got["__lock_text_start"], got["__lock_text_end"])]


def bpftool_btf(text):
    """`bpftool btf dump file F` (raw) -> ({id: (kind, name, {key: value}, [(param name, type id)])},
    {FUNC name: its lowest id})."""
    types, funcs, cur = {}, {}, None
    for line in text.splitlines():
        m = _BTF_TYPE.match(line)
        if m:
            attrs = dict(kv.split("=", 1) for kv in m.group(4).split() if "=" in kv)
            cur = types[int(m.group(1))] = (m.group(2), m.group(3), attrs, [])
            if m.group(2) == "FUNC":
                funcs.setdefault(m.group(3), int(m.group(1)))
            continue
        m = _BTF_PARAM.match(line)
        if m and cur is not None and cur[0] == "FUNC_PROTO":
            cur[3].append(("" if m.group(1) == "(anon)" else m.group(1), int(m.group(2))))
    return types, funcs


def btf_type_name(types, tid, depth=0):
    """A type as C writes it before a declarator, written from bpftool's dump: the conventions
    stackprov documents (a pointer to a function "void (*)(...)", an array as a pointer)."""
    if tid == 0:
        return "void"
    kind, name, attrs, _ = types[tid]
    to = int(attrs.get("type_id", "0"))
    if kind in ("INT", "FLOAT", "TYPEDEF"):
        return name
    if kind in ("STRUCT", "UNION"):
        return kind.lower() + " " + name
    if kind in ("ENUM", "ENUM64"):
        return "enum " + name
    if kind == "FWD":
        return attrs.get("fwd_kind", "struct") + " " + name
    if kind == "PTR":
        if to and types[to][0] == "FUNC_PROTO":
            return "void (*)(...)"
        inner = btf_type_name(types, to, depth + 1)
        return inner + "*" if inner.endswith("*") else inner + " *"
    if kind in ("CONST", "VOLATILE"):
        return kind.lower() + " " + btf_type_name(types, to, depth + 1)
    if kind in ("RESTRICT", "TYPE_TAG"):
        return btf_type_name(types, to, depth + 1)
    if kind == "ARRAY":
        return btf_type_name(types, to, depth + 1) + " *"
    return "?"


def btf_prototype(types, fid):
    """(ret_type_id, [(name, type_id)], "RET NAME(ARGS)") of FUNC `fid` from bpftool's dump."""
    _, fname, fattrs, _ = types[fid]
    _, _, pattrs, params = types[int(fattrs["type_id"])]
    ret = int(pattrs["ret_type_id"])
    args = []
    for name, tid in params:
        if tid == 0 and not name:
            args.append("...")
            continue
        ty = btf_type_name(types, tid)
        args.append(ty + ("" if not name or ty.endswith("*") else " ") + name)
    rt = btf_type_name(types, ret)
    return ret, params, rt + ("" if rt.endswith("*") else " ") + fname + "(" + (", ".join(args) or "void") + ")"


def check_btf(kernel_out, bpftool_out, keys=("func_id", "ret_type_id", "params", "prototype", "approximate")):
    """Every kernel frame's "btf" (the `keys` of it: the Python API has no type ids of the return and the
    parameters) against bpftool's dump of /sys/kernel/btf/vmlinux."""
    types, funcs = bpftool_btf(bpftool_out)
    n = with_proto = 0
    for t in json.loads(kernel_out)["threads"]:
        for f in t["frames"]:
            if f.get("domain") != "kernel":
                continue
            n += 1
            name = f["function"]
            base = name.split(".", 1)[0] if "." in name[1:] else name
            fid = funcs.get(name, funcs.get(base))
            b = f.get("btf", "missing")
            if fid is None:
                if b is not None:
                    fail("btf: %s is not a FUNC in bpftool's dump, ours %r" % (name, b))
                continue
            if not isinstance(b, dict):
                fail("btf: %s: bpftool has FUNC [%d], ours %r" % (name, fid, b))
                continue
            ret, params, text = btf_prototype(types, fid)
            want = {"func_id": fid, "ret_type_id": ret, "params": [{"name": p, "type_id": i} for p, i in params],
                    "prototype": text, "approximate": name not in funcs}
            want = {k: want[k] for k in keys}
            got = {k: b.get(k) for k in want}
            if got != want:
                fail("btf: %s: ours %s, bpftool's %s" % (name, got, want))
            with_proto += 1
    if n == 0:
        fail("btf: no kernel frames to compare")
    print("btf: %d kernel frames, %d with a prototype, each = bpftool btf dump's (%s)" % (n, with_proto, ", ".join(keys)))


def perf_switch_outs(text):
    """{tid: [(time_us, state, [(addr, "sym+0xoff"), ...kernel frames leaf first])]} in time order."""
    states = {}
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m and m.group(1) == m.group(4):
            states[(int(m.group(1)), int(m.group(2)) * 1000000 + int(m.group(3)))] = m.group(5)
    out = {}
    for (tid, t_us), (_, frames) in perf_script_samples(text).items():
        kernel = [(a, "%s+0x%x" % (s, o) if o is not None else s) for a, s, o, d in frames if d.startswith("[kernel")]
        out.setdefault(tid, []).append((t_us, states.get((tid, t_us), "?"), kernel))
    for v in out.values():
        v.sort()
    return out


def user_frames(thread):
    return [f for f in real_frames(thread["frames"]) if f.get("domain") != "kernel"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--btf", action="store_true", help="also --with-btf (a build with libbpf) vs bpftool")
    args = ap.parse_args()
    tools = {}
    if args.btf:
        tools["bpftool"] = shutil.which("bpftool")
        if tools["bpftool"] is None:
            print("FAIL: bpftool is not installed (bpftool; make deps installs it)")
            return 1
    for tool, pkg in (("perf", "linux-perf"), ("eu-stack", "elfutils"), ("setpriv", "util-linux")):
        tools[tool] = shutil.which(tool)
        if tools[tool] is None:
            print("FAIL: %s is not installed (%s; make deps installs it)" % (tool, pkg))
            return 1
    if os.geteuid() != 0:
        print("FAIL: needs root (/proc/PID/task/TID/stack needs CAP_SYS_ADMIN; perf record -p)")
        return 1
    ranges = kallsyms_ranges()
    if ranges is None:
        print("FAIL: /proc/kallsyms has no __sched_text_start/_end, __lock_text_start/_end (kptr_restrict?)")
        return 1
    t_begin = time.monotonic()
    work = tempfile.mkdtemp(prefix="stack_kernel.")
    os.chmod(work, 0o755)
    fx = subprocess.Popen([args.fixture], stdout=subprocess.PIPE, text=True)
    perf = None
    try:
        ready = fx.stdout.readline().split()
        if len(ready) != 4 or ready[0] != "ready":
            print("FAIL: the fixture did not start: %r" % ready)
            return 1
        role = {fx.pid: "main", int(ready[1]): "sleeper", int(ready[2]): "reader", int(ready[3]): "futex"}
        ctl, ack, pdata = (os.path.join(work, n) for n in ("ctl", "ack", "perf.data"))
        os.mkfifo(ctl)
        os.mkfifo(ack)
        perf = subprocess.Popen([tools["perf"], "record", "-q", "-D", "-1", "--control", "fifo:%s,%s" % (ctl, ack),
                                 "-k", "CLOCK_MONOTONIC", "-g", "-e", "sched:sched_switch", "-p", str(fx.pid),
                                 "-o", pdata], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with open(ctl, "w") as c, open(ack) as a:  # opens once perf listens
            c.write("enable\n")
            c.flush()
            if a.readline().strip() != "ack":
                print("FAIL: perf did not acknowledge 'enable'")
                return 1
        time.sleep(0.75)  # every thread blocks anew at least twice (300 ms each) with perf recording
        # The --kernel run first: a ptrace stop (every capture, eu-stack's too) moves a sleeping
        # thread from its system call into restart_syscall (219) for the rest of its sleep.
        t_kernel_us, ours_json = kernel_capture([args.stackprov, "stack", "--pid", str(fx.pid), "--kernel", "--json"],
                                                role, 30)
        plain = subprocess.run([args.stackprov, "stack", "--pid", str(fx.pid), "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=30)
        eu = subprocess.run([tools["eu-stack"], "-p", str(fx.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=30)
        text_run = subprocess.run([args.stackprov, "stack", "--pid", str(fx.pid), "--kernel", "--no-lines"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        btf_run = None
        if args.btf:
            btf_run = subprocess.run([args.stackprov, "stack", "--pid", str(fx.pid), "--kernel", "--with-btf", "--json",
                                      "--no-lines"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     timeout=30)
        # The Python binding's two captures, each after every thread has blocked anew since the
        # previous ptrace stop (the threads block 300 ms at a time).
        py_runs = []
        for what, argv in (("python3 -m stackprov stack --kernel", [sys.executable, "-m", "stackprov", "stack", "--pid",
                                                                     str(fx.pid), "--kernel", "--json"] +
                            (["--with-btf"] if args.btf else [])),
                           ("stackprov.stack(kernel=True)", [sys.executable, "-c", PY_API, str(fx.pid),
                                                             "1" if args.btf else "0"])):
            time.sleep(0.7)
            py_runs.append((what,) + kernel_capture(argv, role, 60))
        perf.send_signal(2)
        perr = perf.communicate(timeout=30)[1]
        if perf.returncode not in (0, -2):  # perf re-raises the SIGINT it stopped on
            print("FAIL: perf record exited %d: %s" % (perf.returncode, perr.strip()))
            return 1
        perf_text = subprocess.run([tools["perf"], "script", "-i", pdata, "-F",
                                    "comm,tid,time,event,trace,ip,sym,symoff,dso"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, check=True).stdout
        # Unprivileged: a copy of the fixture run as nobody, stack --kernel as nobody.
        unpriv = run_unprivileged(args, tools, work)
    finally:
        if perf is not None and perf.poll() is None:
            perf.kill()
            perf.wait()
        fx.kill()
        fx.wait()
    if plain.returncode != 0 or ours_json.returncode != 0:
        print("FAIL: stack exited %d / --kernel %d: %s %s" % (plain.returncode, ours_json.returncode,
                                                               plain.stderr.strip(), ours_json.stderr.strip()))
        return 1
    compare(role, ranges, perf_text, plain.stdout, ours_json.stdout, eu.stdout, text_run.stdout, t_kernel_us)
    for what, t_us, run in py_runs:
        if run.returncode != 0:
            fail("%s exited %d: %s" % (what, run.returncode, run.stderr.strip()))
            continue
        print("%s:" % what)
        compare(role, ranges, perf_text, plain.stdout, run.stdout, eu.stdout, text_run.stdout, t_us)
        if args.btf:
            dump = subprocess.run([tools["bpftool"], "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout
            if what.startswith("stackprov.stack"):
                check_btf(run.stdout, dump, ("func_id", "prototype", "approximate"))
            else:
                check_btf(run.stdout, dump)
    check_python_usage()
    if btf_run is not None:
        if btf_run.returncode != 0:
            fail("stack --kernel --with-btf exited %d: %s" % (btf_run.returncode, btf_run.stderr.strip()))
        else:
            dump = subprocess.run([tools["bpftool"], "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout
            check_btf(btf_run.stdout, dump)
    failures.extend(unpriv)
    check_kernel_thread(args)
    shutil.rmtree(work, ignore_errors=True)
    print("ran %.1f s" % (time.monotonic() - t_begin))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("PASS")
    return 0


# stackprov.stack(pid, kernel=True, with_btf=...) written in `stack --json`'s shape from the API's own
# fields (Thread.kernel, Frame.domain/function/function_offset/module/prototype/btf_*), so that compare()
# and check_btf() check them as they check the CLI's JSON.
PY_API = r"""
import json, sys
import stackprov
btf = sys.argv[2] == "1"
threads = []
for t in stackprov.stack(int(sys.argv[1]), kernel=True, with_btf=btf):
    frames = []
    for f in t.frames:
        o = {"pc": hex(f.pc), "sp": hex(f.sp), "function": f.function, "method": f.method, "domain": f.domain,
             "module": f.module, "flags": f.flags}
        if f.domain == "kernel":
            o["function_offset"] = hex(f.function_offset)
            if btf:
                o["btf"] = None if f.prototype is None else {
                    "func_id": f.btf_func_id, "prototype": f.prototype, "approximate": f.btf_approximate}
        frames.append(o)
    k = t.kernel
    threads.append({"tid": t.tid, "frames": frames, "kernel": None if k is None else {
        "state": k.state, "syscall": k.syscall, "user_sp": hex(k.user_sp), "user_pc": hex(k.user_pc),
        "reason": k.reason}})
print(json.dumps({"threads": threads}))
"""


def kernel_capture(argv, role, timeout):
    """(start time in us, CompletedProcess) of a `stack --kernel --json` capture of the fixture in which no
    thread of `role` was on a CPU. A thread caught running (the fixture's main thread between two sleeps,
    or a woken thread waiting for a CPU on a loaded machine) has no kernel stack to read, and stackprov
    says so (state 'running'): that is the right answer for that moment, not the one this test compares.
    Such a capture is taken again after 0.7 s (every thread has blocked anew since the ptrace stop, which
    moved a sleeper into restart_syscall), at most 5 times; the last one is returned either way."""
    for attempt in range(5):
        if attempt:
            time.sleep(0.7)
        t_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        try:
            threads = json.loads(run.stdout)["threads"] if run.returncode == 0 else []
        except (ValueError, KeyError, TypeError):
            break
        running = [t["tid"] for t in threads if t.get("tid") in role and (t.get("kernel") or {}).get("state") == "running"]
        if not running:
            break
        print("capture %d: thread(s) %s on a CPU; capturing again" % (attempt + 1, running))
    return t_us, run


def check_python_usage():
    """`python3 -m stackprov stack`'s --kernel/--with-btf misuse: exit 2, the CLI's message."""
    for argv, want in ((["--pid", "1", "--with-btf"], "--with-btf is only valid with --kernel"),
                       (["--core", "/nonexistent.core", "--kernel"], "--kernel is only valid with --pid (a live process)")):
        r = subprocess.run([sys.executable, "-m", "stackprov", "stack"] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        if r.returncode != 2 or want not in r.stderr:
            fail("python3 -m stackprov stack %s: exit %d, %r; want 2 and %r" % (" ".join(argv), r.returncode,
                                                                              r.stderr.strip(), want))


def compare(role, ranges, perf_text, plain_out, kernel_out, eu_out, text_out, t_kernel_us):
    ours = {t["tid"]: t for t in json.loads(kernel_out)["threads"]}
    plain = {t["tid"]: t for t in json.loads(plain_out)["threads"]}
    eu = parse_eu_stack(eu_out)
    text = parse_eu_stack(text_out)
    switches = perf_switch_outs(perf_text)
    all_own = sum((c for _, c in KNOWN.values()), [])
    kernel_frames = 0
    for tid, r in sorted(role.items()):
        t = ours.get(tid)
        if t is None:
            fail("%s thread %d: not in stack --kernel's output" % (r, tid))
            continue
        k = t.get("kernel") or {}
        nr, chain = KNOWN[r]
        if k.get("state") != "read":
            fail("%s thread %d: kernel state %r (%s), want read" % (r, tid, k.get("state"), k.get("reason")))
            continue
        if k.get("syscall") != nr:
            fail("%s thread %d: system call %r, the fixture makes %d" % (r, tid, k.get("syscall"), nr))
        kf = [f for f in t["frames"] if f.get("domain") == "kernel"]
        if not kf or t["frames"][:len(kf)] != kf:
            fail("%s thread %d: the kernel frames are not one segment at the top: %s" % (r, tid, t["frames"][:3]))
            continue
        if any(f["method"] != "kernel_stack" or f["pc"] != "0x0" or f["module"] != "[kernel.kallsyms]" for f in kf):
            fail("%s thread %d: a kernel frame without method kernel_stack, pc 0, [kernel.kallsyms]: %s" % (r, tid, kf))
        names = ["%s+%s" % (f["function"], f["function_offset"]) for f in kf]
        # perf's last blocking switch-out of the thread before our --kernel run started: the one /proc
        # showed (a thread that blocked anew meanwhile blocked in the same call, with the same chain;
        # the run's own ptrace stop and the restart after it come later).
        before = [s for s in switches.get(tid, []) if s[0] < t_kernel_us and s[1] in ("S", "D")]
        if not before:
            fail("%s thread %d: perf recorded no blocking switch-out of it" % (r, tid))
            continue
        pk = before[-1][2]
        kept = [s for a, s in pk if not any(lo <= a < hi for lo, hi in ranges)]
        dropped = [s for a, s in pk if any(lo <= a < hi for lo, hi in ranges)]
        if kept != names:
            fail("%s thread %d: kernel frames %s; perf's at %d us less the scheduler's %s: %s" %
                 (r, tid, names, before[-1][0], dropped, kept))
        kernel_frames += len(names)
        user = [f for f in real_frames(t["frames"]) if f.get("domain") != "kernel"]
        flags = [f.get("flags", []) for f in user]
        if not user or "kernel_user_boundary" not in flags[0] or any("kernel_user_boundary" in fl for fl in flags[1:]):
            fail("%s thread %d: the first user frame (only) must be kernel_user_boundary: %s" % (r, tid, flags[:3]))
        if user and (int(k["user_pc"], 16) != int(user[0]["pc"], 16) or int(k["user_sp"], 16) != int(user[0]["sp"], 16)):
            fail("%s thread %d: saved user pc/sp %s/%s, captured frame 0 %s/%s" %
                 (r, tid, k["user_pc"], k["user_sp"], user[0]["pc"], user[0]["sp"]))
        own = [f["function"] for f in user if f["function"] in all_own]
        if own != chain:
            fail("%s thread %d: the fixture's frames %s, its source's chain %s" % (r, tid, own, chain))
        mine = [(int(f["pc"], 16), f["function"]) for f in user]
        theirs = [(int(f["pc"], 16), f["function"]) for f in real_frames(plain.get(tid, {}).get("frames", []))]
        if mine != theirs:
            fail("%s thread %d: user frames %s, stack without --kernel %s" % (r, tid, mine, theirs))
        if [p for p, _ in mine] != [p for p, _, _ in eu.get(tid, [])]:
            fail("%s thread %d: user pcs %s, eu-stack's %s" % (r, tid, [hex(p) for p, _ in mine],
                                                            [hex(p) for p, _, _ in eu.get(tid, [])]))
        # The text run came after other captures: a sleep may have been restarted (restart_syscall), so
        # only its layout is compared: kernel frames at pc 0 in [kernel.kallsyms], then the same user pcs.
        tx = text.get(tid, [])
        nk = sum(1 for p, _, m in tx if p == 0 and m == "[kernel.kallsyms] [kernel_stack]")
        if nk == 0 or [p for p, _, _ in tx[nk:]] != [p for p, _ in mine]:
            fail("%s thread %d: text output %s, JSON's user pcs %s" % (r, tid, tx[:nk + 2], [hex(p) for p, _ in mine]))
        print("%s thread %d: %d kernel frames = perf's less %s; %d user frames = stack's = eu-stack's" %
              (r, tid, len(names), [s.split("+")[0] for s in dropped], len(mine)))
    print("compared %d kernel frames of %d threads" % (kernel_frames, len(role)))


def kernel_thread_pid():
    """The lowest pid whose /proc/PID/stat flags have PF_KTHREAD (0x00200000), or None."""
    for name in sorted((n for n in os.listdir("/proc") if n.isdigit()), key=int):
        try:
            with open("/proc/%s/stat" % name) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(rest) > 6 and int(rest[6]) & 0x00200000:
            return int(name)
    return None


def check_kernel_thread(args):
    """stack --kernel of a kernel thread: exit 1, one line saying it is a kernel thread."""
    pid = kernel_thread_pid()
    if pid is None:
        fail("kernel thread: none visible in /proc (a pid namespace without kernel threads?)")
        return
    out = subprocess.run([args.stackprov, "stack", "--pid", str(pid), "--kernel"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=30)
    if out.returncode != 1 or "is a kernel thread" not in out.stderr or out.stderr.count("\n") != 1:
        fail("kernel thread %d: exit %d, stderr %r (want 1 and one line saying it is a kernel thread)" %
             (pid, out.returncode, out.stderr))
    else:
        print("kernel thread %d: %s" % (pid, out.stderr.strip()))


def run_unprivileged(args, tools, work):
    """stack --kernel as nobody on a fixture of nobody's: each thread 'kernel: unreadable' naming the
    permission; the user stacks printed; exit 0."""
    errs = []
    bins = []
    for src in (args.fixture, args.stackprov):
        dst = os.path.join(work, os.path.basename(src))
        shutil.copy(src, dst)
        os.chmod(dst, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        bins.append(dst)
    nobody = [tools["setpriv"], "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    fx = subprocess.Popen(nobody + [bins[0]], stdout=subprocess.PIPE, text=True)
    try:
        ready = fx.stdout.readline().split()
        if len(ready) != 4:
            return ["unprivileged fixture did not start: %r" % ready]
        out = subprocess.run(nobody + [bins[1], "stack", "--pid", str(fx.pid), "--kernel", "--no-lines"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30, cwd=work)
    finally:
        fx.kill()
        fx.wait()
    if out.returncode != 0:
        return ["unprivileged stack --kernel exited %d: %s" % (out.returncode, out.stderr.strip())]
    heads = re.findall(r"^TID (\d+).*:\nkernel: unreadable: (.*)$", out.stdout, re.M)
    threads = re.findall(r"^TID (\d+)", out.stdout, re.M)
    if len(threads) != 4 or len(heads) != 4:
        errs.append("unprivileged: %d threads, %d with 'kernel: unreadable': %s" % (len(threads), len(heads),
                                                                                out.stdout[:400]))
    for tid, why in heads:
        if "needs root" not in why or "/stack" not in why:
            errs.append("unprivileged: thread %s: reason %r does not name the stack file and root" % (tid, why))
    if "[kernel_stack]" in out.stdout or "kernel_user_boundary" in out.stdout:
        errs.append("unprivileged: kernel frames printed although unreadable")
    if out.stdout.count("sleep_leaf") != 1 or out.stdout.count("futex_outer") != 1:
        errs.append("unprivileged: the user stacks are not all printed")
    for e in errs:
        print("FAIL: " + e)
    if not errs:
        print("unprivileged: 4 threads, each 'kernel: unreadable: %s'" % heads[0][1])
    return errs


if __name__ == "__main__":
    sys.exit(main())
