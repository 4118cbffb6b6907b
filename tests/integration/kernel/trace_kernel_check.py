#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# `trace-capture --with-btf -p P` (doc/traces.md "Kernel segments"): kernel segments in a trace, replayed
# and checked by the gate's platform-id.
# fixture_trace_sleep.c blocks two threads in nanosleep for an hour. The script reads each thread's
# /proc/PID/task/TID/stack and /syscall itself, then runs `trace-capture --with-btf --bundle --sign` at
# once (the sleep does not end in between: both reads see one kernel stack). The stored trace is read
# from the SQLite file with Python's sqlite3 and the SPROVTRD container parsed by this script from the
# format in doc/traces.md:
#  - every thread has a kernel segment whose frames (name, offset, size, module) are the lines the script
#    read from /proc, the system call 230 and the user sp/pc the syscall file gave;
#  - the kernel build-id is the GNU build-id note of /sys/kernel/notes (parsed here), the BTF sha256
#    is hashlib's of /sys/kernel/btf/vmlinux;
#  - each frame's prototype is the one written from `bpftool btf dump file /sys/kernel/btf/vmlinux`
#    (the FUNC's lowest id, the C text by stack_kernel_check.py's formatter; a clone approximate; a
#    name without a FUNC: id 0, no text).
# `trace-replay --seeds 5 --json --key --trusted-root` exits 0, and every seed says its kernel frames
# were re-derived (the running kernel is the trace's) with all of them identical. A copy of the store
# whose trace has its recorded kernel build-id altered (the captured data re-gzipped and re-addressed,
# as a trace of another kernel would be) fails only platform-id (exit 7), naming both ids, and its seeds
# compare the kernel frames as recorded. As nobody (setpriv; the fixture run as nobody too): the capture
# exits 0, says for each thread that no kernel segment is stored and why, and stores a version-1
# container; as root without --with-btf the container is version 1 too (kernel frames are opt-in);
# with --core, --with-btf is a usage error (exit 2). The Python binding (--python-path): `python3 -m stackprov
# trace-capture --with-btf` and `stackprov.trace_capture(pid=P, with_btf=True)`, each after /proc read anew
# (the threads sleep on in restart_syscall, 219, after the first ptrace stop), store segments that equal
# /proc's and bpftool's the same way.
# The replay re-derives: in another copy, one frame's recorded size and another's prototype altered are
# the seeds' two kernel mismatches, each named.
# Needs root, bpftool, setpriv. About 15 s (four replays of 5 seeds, a signed bundle).
import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from stack_kernel_check import bpftool_btf, btf_prototype  # noqa: E402
from kernel_notes import notes_build_id  # noqa: E402  (tests/lib)

_STACK_LINE = re.compile(r"^\[<[0-9a-f]+>\] ([^+\s]+)\+0x([0-9a-f]+)/0x([0-9a-f]+)(?: \[(\S+)(?: \S+)?\])?$")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def read_proc(pid):
    """{tid: ([(name, offset, size, module)], syscall line fields)} read from /proc now."""
    out = {}
    for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
        base = "/proc/%d/task/%d/" % (pid, tid)
        sc = open(base + "syscall").read().split()
        frames = []
        for line in open(base + "stack").read().splitlines():
            m = _STACK_LINE.match(line)
            if not m:
                fail("thread %d: /proc stack line %r does not parse" % (tid, line))
                continue
            frames.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16), m.group(4) or ""))
        out[tid] = (frames, sc)
    return out


def wait_blocked(pid, deadline=5.0, nr="230"):
    """Waits until every thread of pid is in system call `nr` (clock_nanosleep, 230; restart_syscall, 219,
    after a ptrace stop) per its /proc syscall file."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        tids = os.listdir("/proc/%d/task" % pid)
        if len(tids) == 2 and all(open("/proc/%d/task/%s/syscall" % (pid, t)).read().split()[0] == nr
                                  for t in tids):
            return True
        time.sleep(0.01)
    return False


class Reader:
    def __init__(self, data):
        self.d, self.at = data, 0

    def u(self, n):
        v = int.from_bytes(self.d[self.at:self.at + n], "little")
        if self.at + n > len(self.d):
            raise ValueError("truncated at %d" % self.at)
        self.at += n
        return v

    def raw(self, n):
        b = self.d[self.at:self.at + n]
        if len(b) != n:
            raise ValueError("truncated at %d" % self.at)
        self.at += n
        return b

    def s(self):
        return self.raw(self.u(4)).decode()


def parse_container(raw):
    """The SPROVTRD container (doc/traces.md): (version, [tid], kernel dict or None, offset of the id)."""
    r = Reader(raw)
    if r.raw(8) != b"SPROVTRD":
        raise ValueError("magic")
    version = r.u(4)
    tids = []
    for _ in range(r.u(4)):
        tids.append(r.u(8))
        r.raw(r.u(4))
        r.raw(r.u(8))
    sections = {1: 0, 2: 1, 3: None}[version]
    if version == 3:
        sections = r.u(4)
    if sections & 1:
        r.s()
        for _ in range(r.u(4)):
            r.u(16)
            r.s()
    kernel, id_at = None, None
    if sections & 2:
        id_len = r.u(1)
        id_at = r.at
        kernel = {"build_id": r.raw(id_len).hex(), "btf_sha256": r.raw(32).hex(), "segments": {}}
        for _ in range(r.u(4)):
            tid, sysno, sp, pc = r.u(8), struct.unpack("<q", r.raw(8))[0], r.u(8), r.u(8)
            frames = []
            for _ in range(r.u(4)):
                name = r.s()
                size_at = r.at + 8
                off, size = r.u(8), r.u(8)
                module = r.s()
                fid, approx = r.u(4), r.u(1)
                proto_at = r.at + 4
                frames.append({"name": name, "offset": off, "size": size, "module": module, "func_id": fid,
                               "approximate": approx == 1, "prototype": r.s(), "size_at": size_at,
                               "proto_at": proto_at})
            kernel["segments"][tid] = {"syscall": sysno, "sp": sp, "pc": pc, "frames": frames}
    if r.at != len(raw):
        raise ValueError("%d trailing bytes" % (len(raw) - r.at))
    return version, tids, kernel, id_at


def stored(db, trace_id):
    """(raw captured data, its address) of trace_id in SQLite file db, the address checked."""
    c = sqlite3.connect(db)
    try:
        (sha,) = c.execute("SELECT data_sha256 FROM traces WHERE trace_id = ?", (trace_id,)).fetchone()
        size, gz = c.execute("SELECT raw_size, gzip FROM trace_data WHERE sha256 = ?", (sha,)).fetchone()
    finally:
        c.close()
    check(hashlib.sha256(gz).hexdigest() == sha, "trace %s: its data hashes to its address" % trace_id)
    raw = gzip.decompress(gz)
    check(len(raw) == size, "trace %s: its data inflates to raw_size" % trace_id)
    return raw, sha


def altered_copy(store, copy, trace_id, data):
    """A copy of SQLite store `store` at `copy` whose trace has captured data `data` (gzip'd and addressed
    as the store does; the old data row stays). Returns the new address."""
    gz = gzip.compress(bytes(data), mtime=0)
    sha = hashlib.sha256(gz).hexdigest()
    src, dst = sqlite3.connect(store), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.execute("INSERT INTO trace_data(sha256, raw_size, gzip) VALUES (?, ?, ?)", (sha, len(data), gz))
    dst.execute("UPDATE traces SET data_sha256 = ? WHERE trace_id = ?", (sha, trace_id))
    dst.commit()
    dst.close()
    return sha


def capture(args, pid, store, extra, as_user=None, cwd=None):
    cmd = [args.stackprov, "trace-capture", "-p", str(pid), "--store", "sqlite:" + store] + extra
    return subprocess.run((as_user or []) + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60, cwd=cwd)


def check_segments(kernel, proc, bpf, nr=230):
    """The stored segments against /proc as this script read it and against bpftool's BTF dump; `nr` the
    system call the threads block in (restart_syscall, 219, after an earlier capture's ptrace stop)."""
    types, funcs = bpf
    n = with_proto = 0
    check(sorted(kernel["segments"]) == sorted(proc), "segments for threads %s, /proc has %s" %
          (sorted(kernel["segments"]), sorted(proc)))
    for tid, (frames, sc) in sorted(proc.items()):
        seg = kernel["segments"].get(tid)
        if seg is None:
            continue
        got = [(f["name"], f["offset"], f["size"], f["module"]) for f in seg["frames"]]
        check(got == frames, "thread %d: stored kernel frames %s, /proc/PID/task/TID/stack %s" % (tid, got, frames))
        check(seg["syscall"] == int(sc[0]) == nr, "thread %d: system call %d, /proc syscall %s" %
              (tid, seg["syscall"], sc[0]))
        check((seg["sp"], seg["pc"]) == (int(sc[-2], 16), int(sc[-1], 16)),
              "thread %d: user sp/pc %#x/%#x, /proc syscall %s %s" % (tid, seg["sp"], seg["pc"], sc[-2], sc[-1]))
        for f in seg["frames"]:
            n += 1
            name = f["name"]
            base = name.split(".", 1)[0] if "." in name[1:] else name
            fid = funcs.get(name, funcs.get(base))
            if fid is None:
                check(f["func_id"] == 0 and f["prototype"] == "" and not f["approximate"],
                      "thread %d: %s has no FUNC in bpftool's dump, stored %r" % (tid, name, f))
                continue
            want = (fid, btf_prototype(types, fid)[2], name not in funcs)
            have = (f["func_id"], f["prototype"], f["approximate"])
            check(have == want, "thread %d: %s: stored (func id, prototype, approximate) %s, bpftool's %s" %
                  (tid, name, have, want))
            with_proto += 1
    print("kernel segments: %d threads, %d frames = /proc's, %d with a prototype = bpftool's" %
          (len(kernel["segments"]), n, with_proto))
    return n


def show_kernel(args, store, trace_id, kernel, proc, bpf):
    """trace-show: the --json event's "kernel" extension and the text's kernel lines against /proc as
    this script read it and bpftool's BTF dump (check_segments), as `stack --kernel --with-btf` shows
    them: each thread's kernel frames first (#0...), then its user frames from the kernel_user_boundary."""
    p = subprocess.run([args.stackprov, "trace-show", trace_id, "--store", "sqlite:" + store, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if not check(p.returncode == 0, "trace-show --json: exit %d, %s" % (p.returncode, p.stderr.strip())):
        return
    ev = json.loads(p.stdout.splitlines()[0])
    k = ev.get("kernel")
    if not check(k is not None, "trace-show --json: the event has no \"kernel\" field"):
        return
    segs = {}
    for seg in k["segments"]:
        frames = [{"name": f["symbol"], "offset": int(f["offset"], 16), "size": int(f["size"], 16),
                   "module": f["module"], "func_id": f["btf_func_id"], "approximate": f["approximate"],
                   "prototype": f["prototype"]} for f in seg["frames"]]
        segs[seg["tid"]] = {"syscall": seg["syscall"], "sp": int(seg["user_sp"], 16), "pc": int(seg["user_pc"], 16),
                            "frames": frames}
    check(k["build_id"] == kernel["build_id"] and k["btf_sha256"] == kernel["btf_sha256"],
          "trace-show --json: kernel build-id/BTF sha256 %s/%s, the container's %s/%s" %
          (k["build_id"], k["btf_sha256"], kernel["build_id"], kernel["btf_sha256"]))
    print("trace-show --json:", end=" ")
    check_segments({"segments": segs}, proc, bpf)
    t = subprocess.run([args.stackprov, "trace-show", trace_id, "--store", "sqlite:" + store],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if not check(t.returncode == 0, "trace-show: exit %d, %s" % (t.returncode, t.stderr.strip())):
        return
    blocks = re.split(r"^TID ", t.stdout, flags=re.M)[1:]
    shown = 0
    for b in blocks:
        tid = int(b.split()[0])
        frames, sc = proc.get(tid, ([], []))
        lines = [l for l in b.splitlines() if l.startswith("#")]
        want = ["#%-2d 0x%016x %s+0x%x - %s [kernel_stack]" % (i, 0, n, o, "[%s]" % m if m else "[kernel.kallsyms]")
                for i, (n, o, _, m) in enumerate(frames)]
        check(lines[:len(want)] == want, "trace-show: thread %d's first lines %s, /proc's frames %s" %
              (tid, lines[:len(want)], want))
        check(len(lines) > len(want) and lines[len(want)].endswith("kernel_user_boundary]"),
              "trace-show: thread %d's first user frame %r is not marked kernel_user_boundary" %
              (tid, lines[len(want)] if len(lines) > len(want) else None))
        check(("kernel: system call %s, user sp 0x%x pc 0x%x" % (sc[0], int(sc[-2], 16), int(sc[-1], 16))) in b,
              "trace-show: thread %d has no 'kernel: system call %s' line matching /proc's syscall" % (tid, sc[0]))
        shown += len(want)
    check(len(blocks) == len(proc), "trace-show: %d threads, /proc has %d" % (len(blocks), len(proc)))
    print("trace-show: %d kernel frame lines = /proc's, %d threads" % (shown, len(blocks)))


def replay(args, store, trace_id, keys):
    p = subprocess.run([args.stackprov, "trace-replay", "--trace", trace_id, "--store", "sqlite:" + store, "--seeds",
                        "5", "--json"] + keys, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    try:
        return p.returncode, json.loads(p.stdout), p.stderr
    except ValueError:
        return p.returncode, None, p.stdout + p.stderr


def unprivileged(args, tools, work):
    """As nobody on a fixture of nobody's: exit 0, each thread's reason, no kernel section."""
    bins = []
    for src in (args.fixture, args.stackprov):
        dst = os.path.join(work, os.path.basename(src))
        shutil.copy(src, dst)
        os.chmod(dst, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        bins.append(dst)
    home = os.path.join(work, "nobody")
    os.makedirs(home)
    os.chown(home, 65534, 65534)
    nobody = [tools["setpriv"], "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    fx = subprocess.Popen(nobody + [bins[0]], stdout=subprocess.PIPE, text=True)
    try:
        ready = fx.stdout.readline().split()
        if not check(len(ready) == 2 and wait_blocked(fx.pid), "unprivileged fixture did not block: %r" % ready):
            return
        store = os.path.join(home, "traces.db")
        p = subprocess.run(nobody + ["env", "HOME=" + home, bins[1], "trace-capture", "-p", str(fx.pid), "--with-btf",
                                     "--store", "sqlite:" + store], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60, cwd=home)
    finally:
        fx.kill()
        fx.wait()
    if not check(p.returncode == 0, "unprivileged trace-capture --with-btf: exit %d: %s" % (p.returncode, p.stderr)):
        return
    reasons = re.findall(r"thread (\d+): no kernel segment: unreadable: (.*)", p.stderr)
    check(len(reasons) == 2 and all("needs root" in w and "/stack" in w for _, w in reasons),
          "unprivileged: each thread's reason names the stack file and root: %r" % p.stderr)
    check("no kernel segment stored: no thread's kernel stack was read" in p.stderr,
          "unprivileged: the capture says no kernel segment is stored: %r" % p.stderr)
    version, tids, kernel, _ = parse_container(stored(store, p.stdout.strip())[0])
    check(version == 1 and kernel is None and len(tids) == 2,
          "unprivileged: container version %d, kernel %r, %d threads (want 1, none, 2)" % (version, kernel, len(tids)))
    print("unprivileged: exit 0, no kernel segment (%s), version-1 data" % reasons[0][1] if reasons else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--python-path", required=True, help="the Python binding's directory (build/python)")
    args = ap.parse_args()
    tools = {t: shutil.which(t) for t in ("bpftool", "setpriv")}
    for tool, path in tools.items():
        if path is None:
            print("FAIL: %s is not installed (make deps installs it)" % tool)
            return 1
    if os.geteuid() != 0:
        print("FAIL: needs root (/proc/PID/task/TID/stack needs CAP_SYS_ADMIN)")
        return 1
    t_begin = time.monotonic()
    work = tempfile.mkdtemp(prefix="trace_kernel.")
    os.chmod(work, 0o755)
    sp = lambda *a: subprocess.run([args.stackprov] + list(a), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, check=True)
    key, logkey, log = (os.path.join(work, n) for n in ("signer", "logkey", "log"))
    sp("keygen", "--out", key)
    sp("keygen", "--out", logkey)
    sp("log", "init", log, "--key", logkey)
    gate_keys = ["--key", key + ".pub", "--trusted-root", os.path.join(log, "trusted_root.json")]
    store = os.path.join(work, "traces.db")
    # A core has no kernel stack: a usage error naming the option, before anything is read.
    u = subprocess.run([args.stackprov, "trace-capture", "--core", "/nonexistent/core", "--with-btf", "--store",
                        "sqlite:" + store], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check(u.returncode == 2 and "--with-btf is only valid with -p PID or -- CMD" in u.stderr and
          u.stderr.count("\n") == 1, "trace-capture --core --with-btf: exit %d, %r (want 2, one line naming "
          "--with-btf)" % (u.returncode, u.stderr))
    fx = subprocess.Popen([args.fixture], stdout=subprocess.PIPE, text=True)
    try:
        ready = fx.stdout.readline().split()
        if len(ready) != 2 or not wait_blocked(fx.pid):
            print("FAIL: the fixture did not block in nanosleep: %r" % ready)
            return 1
        proc = read_proc(fx.pid)  # this script's answer, then the capture at once
        p = capture(args, fx.pid, store, ["--with-btf", "--bundle", "--bundle-store", os.path.join(work, "bundles"),
                                          "--sign", key, "--log", log, "--log-key", logkey])
        plain = capture(args, fx.pid, store, [])
        # The Python binding's two ways, each after /proc read anew: the captures above stopped the
        # threads, whose sleep goes on in restart_syscall (219) since.
        py_runs = []
        env = dict(os.environ, PYTHONPATH=args.python_path)
        for what, argv in (("python3 -m stackprov trace-capture --with-btf",
                            [sys.executable, "-m", "stackprov", "trace-capture", "-p", str(fx.pid), "--store",
                             "sqlite:" + store, "--with-btf"]),
                           ("stackprov.trace_capture(with_btf=True)",
                            [sys.executable, "-c", "import stackprov, sys; print(stackprov.trace_capture(pid=int("
                             "sys.argv[1]), store='sqlite:' + sys.argv[2], with_btf=True))", str(fx.pid), store])):
            if not wait_blocked(fx.pid, nr="219"):
                fail("%s: the fixture's threads are not in restart_syscall after the captures" % what)
                break
            py_proc = read_proc(fx.pid)
            py_runs.append((what, py_proc, subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                          text=True, timeout=60, env=env)))
    finally:
        fx.kill()
        fx.wait()
    if p.returncode != 0 or plain.returncode != 0:
        print("FAIL: trace-capture --with-btf exited %d (%s); without %d (%s)" % (p.returncode, p.stderr.strip(),
                                                                              plain.returncode, plain.stderr.strip()))
        return 1
    check("no kernel segment" not in p.stderr, "trace-capture --with-btf as root warns: %r" % p.stderr)
    trace_id = p.stdout.strip()
    raw, sha = stored(store, trace_id)
    version, tids, kernel, id_at = parse_container(raw)
    check(version == 3 and kernel is not None, "the trace's container is version %d (want 3 with a kernel section)"
          % version)
    plain_version = parse_container(stored(store, plain.stdout.strip())[0])[0]
    check(plain_version == 1, "without --with-btf the container is version %d (want 1)" % plain_version)
    if kernel is None:
        return 1
    running = notes_build_id()
    check(kernel["build_id"] == running, "kernel build-id %s, /sys/kernel/notes %s" % (kernel["build_id"], running))
    btf_sha = hashlib.sha256(open("/sys/kernel/btf/vmlinux", "rb").read()).hexdigest()
    check(kernel["btf_sha256"] == btf_sha, "BTF sha256 %s, hashlib's %s" % (kernel["btf_sha256"], btf_sha))
    dump = subprocess.run([tools["bpftool"], "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                          stdout=subprocess.PIPE, text=True, check=True).stdout
    bpf = bpftool_btf(dump)
    n_kernel = check_segments(kernel, proc, bpf)
    for what, py_proc, r in py_runs:
        if not check(r.returncode == 0 and "no kernel segment" not in r.stderr, "%s: exit %d: %s" %
                     (what, r.returncode, r.stderr.strip())):
            continue
        v, _, k, _ = parse_container(stored(store, r.stdout.strip())[0])
        if check(v == 3 and k is not None, "%s: the container is version %d (want 3 with a kernel section)" % (what, v)):
            check(k["build_id"] == running and k["btf_sha256"] == btf_sha, "%s: kernel build-id %s, BTF sha256 %s" %
                  (what, k["build_id"], k["btf_sha256"]))
            print("%s:" % what, end=" ")
            check_segments(k, py_proc, bpf, nr=219)
    show_kernel(args, store, trace_id, kernel, proc, bpf)

    # Replay on this kernel: re-derived, every kernel frame identical; the gate passes.
    rc, rep, err = replay(args, store, trace_id, gate_keys)
    if check(rep is not None, "trace-replay --json: %s" % err):
        check(rc == 0 and rep["passed"], "trace-replay: exit %d, checks %s" % (rc, rep["checks"]))
        for s in rep["seeds"]:
            k = s.get("kernel") or {}
            check(k.get("mode") == "re-derived" and k.get("frames") == n_kernel and k.get("identical") == n_kernel
                  and k.get("prototypes_rederived") is True and running in k.get("reason", ""),
                  "seed %d: kernel %s (want re-derived, %d of %d identical, prototypes re-derived)" %
                  (s["seed"], k, n_kernel, n_kernel))
        check("%d kernel frames re-derived" % n_kernel in rep["summary"], "summary %r" % rep["summary"])
        print("replay: %s" % rep["summary"])

    # Re-derivation compares: one frame's recorded size and another's prototype altered (same kernel).
    segs = [kernel["segments"][t] for t in sorted(kernel["segments"])]
    sized = segs[0]["frames"][0]
    typed = next((f for g in segs for f in g["frames"] if f["prototype"] and f is not sized), None)
    bad = bytearray(raw)
    bad[sized["size_at"]:sized["size_at"] + 8] = (sized["size"] + 0x10).to_bytes(8, "little")
    if check(typed is not None, "a second frame with a prototype to alter"):
        at = typed["proto_at"] + typed["prototype"].index("(")
        bad[at:at + 1] = b"["
    altered_copy(store, os.path.join(work, "altered_frames.db"), trace_id, bad)
    rc, rep, err = replay(args, os.path.join(work, "altered_frames.db"), trace_id, gate_keys)
    if check(rep is not None, "trace-replay of the altered frames --json: %s" % err):
        for s in rep["seeds"]:
            k = s.get("kernel") or {}
            ms = " ".join(k.get("mismatches", []))
            check(k.get("mode") == "re-derived" and k.get("identical") == n_kernel - 2 and len(k["mismatches"]) == 2
                  and "%s+0x%x/0x%x" % (sized["name"], sized["offset"], sized["size"] + 0x10) in ms
                  and "has size 0x%x" % sized["size"] in ms and typed["prototype"] in ms,
                  "altered frames: seed %d: kernel %s (want re-derived, %d identical, both named)" %
                  (s["seed"], k, n_kernel - 2))
        print("altered size and prototype: %s" % " | ".join(rep["seeds"][0]["kernel"]["mismatches"]))

    # Another kernel's trace: the recorded build-id altered in a copy of the store.
    other = bytearray(raw)
    other[id_at + len(running) // 2 - 1] ^= 0x01
    other_id = bytes(other[id_at:id_at + len(running) // 2]).hex()
    store2 = os.path.join(work, "other_kernel.db")
    other_sha = altered_copy(store, store2, trace_id, other)
    check(other_sha != sha, "the altered data has another address")
    rc, rep, err = replay(args, store2, trace_id, gate_keys)
    if check(rep is not None, "trace-replay of the altered trace --json: %s" % err):
        failed = [c["name"] for c in rep["checks"] if not c["passed"]]
        detail = " ".join(c["detail"] for c in rep["checks"] if c["name"] == "platform-id")
        check(rc == 7 and failed == ["platform-id"], "altered kernel build-id: exit %d, failed %s (want 7, platform-id)"
              % (rc, failed))
        check(other_id in detail and running in detail,
              "platform-id names both kernel build-ids %s and %s: %r" % (other_id, running, detail))
        for s in rep["seeds"]:
            k = s.get("kernel") or {}
            check(k.get("mode") == "recorded" and k.get("identical") == n_kernel and other_id in k.get("reason", ""),
                  "altered: seed %d: kernel %s (want recorded, naming %s)" % (s["seed"], k, other_id))
        print("altered kernel build-id: exit %d: %s" % (rc, detail))

    unprivileged(args, tools, work)
    shutil.rmtree(work, ignore_errors=True)
    print("ran %.1f s" % (time.monotonic() - t_begin))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
