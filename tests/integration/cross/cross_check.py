#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds arm64/mips/mipsel fixtures, aborts them (abort, SIGSEGV in a handler, a call through NULL; on
# aarch64 also inside a makecontext coroutine, doc/async-stacks.md) under
# qemu-user (target core files), unwinds the cores with
# `stackprov stack --core` on the host and compares every frame (pc, name) and the stop with gdb-multiarch.
import argparse
import glob
import json
import os
import re
import resource
import shutil
import select
import time
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_gdb_bt, parse_gdb_info_symbol  # noqa: E402  (tests/lib: the peers' output parsers)

VARIANTS = [
    # name, compiler prefix, qemu, sysroot
    ("aarch64", "aarch64-linux-gnu-", "qemu-aarch64", "/usr/aarch64-linux-gnu"),
    ("mips", "mips-linux-gnu-", "qemu-mips", "/usr/mips-linux-gnu"),
    ("mipsel", "mipsel-linux-gnu-", "qemu-mipsel", "/usr/mipsel-linux-gnu"),
]

# build name -> (compiler flags, expected method of some fixture frame or None)
BUILDS = {
    "O1": (["-g", "-O1", "-no-pie"], None),
    "O2nofp": (["-g", "-O2", "-fomit-frame-pointer", "-no-pie"], None),
    "pie": (["-g", "-O1", "-fPIE", "-pie"], None),
    "static": (["-g", "-O1", "-static"], None),
    # mips only: no CFI at all in the fixture, so its frames come from prologue analysis.
    "nocfi": (["-g0", "-O1", "-no-pie", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"], "prologue"),
}
# The fixture's own frames, innermost first, exactly (no frame of the fixture may be missing
# or added between them).
CHAIN = ["c_fn", "b_fn", "a_fn", "main"]
# Every walk must end as on x86_64: at _start, with end_of_stack.
WANT_STOP = "end_of_stack"


def core_limit():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def make_core(qemu, sysroot, exe, mode, workdir):
    for f in glob.glob(os.path.join(workdir, "qemu_*.core")) + glob.glob(os.path.join(workdir, "core*")):
        os.unlink(f)
    subprocess.run([qemu, "-L", sysroot, exe, mode], cwd=workdir, preexec_fn=core_limit,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    cores = glob.glob(os.path.join(workdir, "qemu_*.core"))
    for f in glob.glob(os.path.join(workdir, "core*")):
        os.unlink(f)  # qemu itself, re-raising the signal on the host
    return cores[0] if cores else None


def ours(cli, core, exe, sysroot):
    """stackprov's frames of the core's (only) thread: dicts from --json, and the stop reason."""
    p = subprocess.run([cli, "stack", "--core", core, "--exe", exe, "--sysroot", sysroot, "--json"],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        return [], "exit %d" % p.returncode, out
    doc = json.loads(p.stdout)
    if len(doc["threads"]) != 1:
        return [], "%d threads" % len(doc["threads"]), out
    t = doc["threads"][0]
    frames = [{"pc": int(f["pc"], 16), "name": (f.get("function") or "??").split("+")[0],
               "method": f["method"], "module": f.get("module", ""),
               "offset": int(f["module_offset"], 16) if f.get("module_offset") else None}
              for f in t["frames"]]
    return frames, t["stop_reason"], out


def gdb(core, exe, sysroot):
    """gdb-multiarch's `bt` with backtrace past-main, so that it prints the frames down to _start.
    gdb 13 spins after the frames it printed on aarch64 cores interrupted by a signal (unwinding
    through qemu's sigtramp page): keep what it printed before the timeout, and say so."""
    # gdb flushes each frame line as it prints it: once it has been silent for 8 s after printing
    # (it spins, as above) or after 30 s in all, it is stopped and what it printed is kept (the
    # check below still wants every fixture frame from it). The spinning runs took three 30-s
    # timeouts of this test's ~100 s before.
    p = subprocess.Popen(["gdb-multiarch", "-batch", "-nx", "-ex", "set sysroot " + sysroot,
                          "-ex", "set print frame-arguments none", "-ex", "set backtrace limit 64",
                          "-ex", "set backtrace past-main on", "-ex", "set debuginfod enabled off",
                          "-ex", "bt", exe, core], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    chunks, start, last, timed_out = [], time.monotonic(), time.monotonic(), False
    while True:
        now = time.monotonic()
        if now - start > 30 or (chunks and now - last > 8):
            timed_out = True
            p.kill()
            break
        ready, _, _ = select.select([p.stdout], [], [], 0.2)
        if ready:
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                break
            chunks.append(data)
            last = time.monotonic()
    p.wait()
    p.stdout.close()
    text = b"".join(chunks).decode(errors="replace")
    if timed_out:
        text += "\n[gdb timed out]\n"
    frames, seen = [], set()
    for f in [f for frames in parse_gdb_bt(text).values() for f in frames]:
        if f["index"] in seen:
            continue
        seen.add(f["index"])
        frames.append((None, "<signal>") if f["marker"] else (f["pc"], f["function"]))
    return frames, text


_SYMVALS = {}


def symbol_values(path):
    """{name: {values}} of the file's .symtab and .dynsym (readelf), for the alias check."""
    if path not in _SYMVALS:
        vals = {}
        if path and os.path.exists(path):
            out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
            for line in out.splitlines():
                f = line.split()
                if len(f) >= 8 and f[0].endswith(":") and f[6] != "UND":
                    try:
                        vals.setdefault(re.sub(r"@.*$", "", f[7]), set()).add(int(f[1], 16))
                    except ValueError:
                        pass
        _SYMVALS[path] = vals
    return _SYMVALS[path]


def module_file(f, sysroot):
    path = f["module"]
    if path and not os.path.exists(path) and os.path.exists(sysroot + path):
        path = sysroot + path
    return path


def same_symbol(path, a, b):
    """Both names are symbols of the module at one address (e.g. __start and _ftext)."""
    v = symbol_values(path)
    return bool(v.get(a, set()) & v.get(b, set()))


def compare(mine, ref, sysroot):
    """Every frame gdb printed against ours at the same index: pc and name (or an alias of it)."""
    errs = []
    if len(mine) < len(ref):
        errs.append("stackprov has %d frames, gdb %d" % (len(mine), len(ref)))
    for i, (gpc, gname) in enumerate(ref[:len(mine)]):
        f = mine[i]
        if gpc is not None and gpc != f["pc"]:
            errs.append("#%d pc 0x%x, gdb 0x%x" % (i, f["pc"], gpc))
        if gname == "<signal>":
            continue
        if gname == "??":
            continue  # gdb has no name: the pc comparison above is the check
        if gname != f["name"] and not same_symbol(module_file(f, sysroot), gname, f["name"]):
            errs.append("#%d %s, gdb %s" % (i, f["name"], gname))
    return errs


_SYM = {}


def gdb_symbol(path, offset):
    """The function gdb-multiarch names at link-time address `offset` of the file alone (no core)."""
    key = (path, offset)
    if key not in _SYM:
        p = subprocess.run(["gdb-multiarch", "-batch", "-nx", "-ex", "set debuginfod enabled off",
                            "-ex", "info symbol 0x%x" % offset, path], capture_output=True, text=True, timeout=30)
        names = [n for n in parse_gdb_info_symbol(p.stdout) if n != "??"]
        _SYM[key] = names[0] if names else None
    return _SYM[key]


def compare_pie(mine, exe, sysroot):
    """PIE cores (gdb 13 cannot relocate a PIE from a qemu core: the program-header page is not
    dumped): every frame in the executable or a library is named by gdb at its module offset,
    read from the file alone; the module offset of a caller frame is looked up at offset - 1."""
    errs = []
    for i, f in enumerate(mine):
        if f["offset"] is None or not f["module"]:
            continue
        path = module_file(f, sysroot)
        if not os.path.exists(path):
            errs.append("#%d module %s not found" % (i, f["module"]))
            continue
        caller = i > 0 and f["method"] != "signal"
        want = gdb_symbol(path, f["offset"] - (1 if caller else 0))
        if want is not None and want != f["name"] and not same_symbol(path, want, f["name"]):
            errs.append("#%d %s+offset 0x%x: %s, gdb on the file says %s" % (i, f["module"], f["offset"], f["name"], want))
        if want is None and f["name"] in CHAIN:
            errs.append("#%d %s at offset 0x%x: gdb names nothing there" % (i, f["name"], f["offset"]))
    return errs


def chain_errors(mine, mode):
    """The known chain, contiguous and in order: the fixture's frames, innermost first."""
    names = [f["name"] for f in mine]
    want = (["on_segv"] if mode == "signal" else []) + CHAIN
    fixture = [n for n in names if n in want]
    errs = []
    if fixture != want:
        errs.append("fixture frames %s, expected exactly %s" % (fixture, want))
        return errs
    k = names.index("c_fn")
    if names[k:k + len(CHAIN)] != CHAIN:
        errs.append("c_fn..main not contiguous: %s" % names[k:])
    if mode == "signal" and mine[k]["method"] != "signal":
        errs.append("c_fn (interrupted) found by %s, not signal" % mine[k]["method"])
    return errs


def gdb_values(core, exe, sysroot, exprs):
    """gdb-multiarch's `print/x` of each expression in the core, as ints (None when it printed none)."""
    cmd = ["gdb-multiarch", "-batch", "-nx", "-ex", "set sysroot " + sysroot, "-ex", "set debuginfod enabled off"]
    for e in exprs:
        cmd += ["-ex", "print/x " + e]
    p = subprocess.run(cmd + [exe, core], capture_output=True, text=True, timeout=60)
    vals = [int(m.group(1), 16) for m in re.finditer(r"^\$\d+ = (0x[0-9a-f]+)$", p.stdout, re.M)]
    return vals if len(vals) == len(exprs) else [None] * len(exprs)


def coroutine_errors(cli, core, exe, sysroot, mine, stop, ref):
    """The "coroutine" mode (issue 35, doc/async-stacks.md): the chain runs in a makecontext coroutine
    whose uc_link is &g_resumer. The walk ends at glibc's entry trampoline (__startcontext on aarch64)
    with coroutine_entry, every frame's pc equal to gdb's frame at the same index (gdb goes on past the
    entry: only its first frames are compared), and the entry frame carries the uc_link annotation:
    the context &g_resumer with the pc and sp its swapcontext saved, as gdb prints them."""
    errs = []
    if stop != "coroutine_entry":
        errs.append("stop reason %s, expected coroutine_entry" % stop)
    names = [f["name"] for f in mine]
    want = CHAIN[:-1] + ["coro_entry"]
    if "c_fn" not in names or names[names.index("c_fn"):names.index("c_fn") + len(want)] != want:
        errs.append("fixture frames %s, expected %s then the entry" % (names, want))
    elif names.index("c_fn") + len(want) != len(names) - 1:
        errs.append("%d frames after coro_entry, expected 1 (the entry)" % (len(names) - names.index("c_fn") - len(want)))
    for i, f in enumerate(mine):
        if i >= len(ref) or ref[i][0] != f["pc"]:
            errs.append("frame %d: pc 0x%x, gdb %s" % (i, f["pc"], ref[i] if i < len(ref) else "-"))
    p = subprocess.run([cli, "stack", "--core", core, "--exe", exe, "--sysroot", sysroot, "--json"],
                       capture_output=True, text=True, timeout=60)
    frames = json.loads(p.stdout)["threads"][0]["frames"] if p.stdout else []
    note = frames[-1].get("continues_on_return") if frames else None
    ctx, pc, sp = gdb_values(core, exe, sysroot, ["(unsigned long)&g_resumer", "g_resumer.uc_mcontext.pc",
                                                  "g_resumer.uc_mcontext.sp"])
    if note is None:
        errs.append("no continues_on_return on the entry frame")
    elif (int(note["context"], 16), int(note.get("pc", "0"), 16), int(note.get("sp", "0"), 16)) != (ctx, pc, sp):
        errs.append("continues_on_return %s, gdb: context %s pc %s sp %s" % (note, ctx and hex(ctx), pc and hex(pc),
                                                                            sp and hex(sp)))
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", help="comma-separated arches to run (default: all)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # make deps installs every cross compiler, qemu-user and gdb-multiarch: a missing one fails.
    missing = [] if shutil.which("gdb-multiarch") else ["gdb-multiarch"]
    for arch, prefix, qemu, sysroot in VARIANTS:
        missing += [t for t in (prefix + "gcc", qemu) if not shutil.which(t)]
        if not os.path.isdir(sysroot):
            missing.append(sysroot)
    if missing:
        print("FAIL: missing %s (make deps / scripts/install-deps.sh installs them)" % ", ".join(missing))
        return 1
    src = os.path.join(args.source, "fixture_cross.c")
    failures, ran = [], 0
    for arch, prefix, qemu, sysroot in VARIANTS:
        if args.only and arch not in args.only.split(","):
            continue
        cc = shutil.which(prefix + "gcc")
        for build, (flags, want_method) in BUILDS.items():
            if build == "nocfi" and not arch.startswith("mips"):
                continue
            exe = os.path.join(args.work, "fx-%s-%s" % (arch, build))
            subprocess.run([cc] + flags + [src, "-o", exe], check=True)
            modes = ("abort", "signal", "null")
            if arch == "aarch64" and build == "O1":
                modes += ("coroutine",)  # glibc's __startcontext (doc/async-stacks.md)
            for mode in modes:
                name = "%s/%s/%s" % (arch, build, mode)
                core = make_core(qemu, sysroot, exe, mode, args.work)
                if core is None:
                    failures.append(name + ": qemu wrote no core")
                    continue
                kept = os.path.join(args.work, "%s-%s-%s.core" % (arch, build, mode))
                os.replace(core, kept)
                mine, stop, out = ours(args.cli, kept, exe, sysroot)
                # PIE cores are checked against gdb's view of the file alone (compare_pie): gdb's
                # backtrace of the core is not used for them, so it is not run.
                ref, gout = ([], "") if build == "pie" else gdb(kept, exe, sysroot)
                ran += 1
                errs = []
                if mode == "coroutine":
                    errs = coroutine_errors(args.cli, kept, exe, sysroot, mine, stop, ref)
                    print("%-22s %s: %d frames (stop %s), gdb %d frames" % (name, "ok" if not errs else "FAIL", len(mine),
                                                                           stop, len(ref)))
                    if errs:
                        failures.append(name + ": " + "; ".join(errs))
                        print(out)
                        print(gout)
                    continue
                if stop != WANT_STOP:
                    last = mine[-1] if mine else None
                    errs.append("stop reason %s, expected %s (last frame %s [%s])" % (
                        stop, WANT_STOP, last["name"] if last else "-", last["method"] if last else "-"))
                if build == "pie":
                    errs += compare_pie(mine, exe, sysroot)
                else:
                    errs += compare(mine, ref, sysroot)
                    timed_out = "[gdb timed out]" in gout
                    # Past main, gdb goes on to _start: it printed the whole stack unless it hung,
                    # and then ours is exactly as long.
                    if not timed_out and len(mine) != len(ref):
                        errs.append("stackprov %d frames, gdb %d" % (len(mine), len(ref)))
                    if timed_out:
                        name += " (gdb hung after %d frames)" % len(ref)
                    if len(ref) < len(CHAIN):
                        errs.append("gdb gave %d frames" % len(ref))
                errs += chain_errors(mine, mode)
                if mode == "null" and (len(mine) < 2 or mine[0]["pc"] != 0 or
                                       mine[1]["method"] != "bad_pc_return" or mine[1]["name"] != "c_fn"):
                    errs.append("a call through NULL: want frame 0 at pc 0, frame 1 c_fn by bad_pc_return; got %s" %
                                [(hex(f["pc"]), f["name"], f["method"]) for f in mine[:2]])
                if want_method and not any(f["method"] == want_method and f["name"] in CHAIN for f in mine):
                    errs.append("no fixture frame found by %s" % want_method)
                status = "ok" if not errs else "FAIL"
                print("%-22s %s: %d frames (stop %s), %s" % (name, status, len(mine), stop, "gdb %d frames" % len(ref)
                                                             if build != "pie" else "PIE: vs gdb on the file"))
                if errs:
                    failures.append(name + ": " + "; ".join(errs))
                    print(out)
                    print(gout)
    if ran == 0:
        print("FAIL: nothing ran")
        return 1
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
