#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds arm64/mips/mipsel fixtures, aborts them (abort, SIGSEGV in a handler, a call through NULL; at
# -O1 also inside a makecontext coroutine, doc/async-stacks.md) under
# qemu-user (target core files), unwinds the cores with
# `stackprov stack --core` on the host and compares every frame (pc, name) and the stop with gdb-multiarch.
# gdb-multiarch runs once per architecture for the backtraces of all its cores (`file`, `core-file`,
# `bt` for each) and once per module file for the PIE cores' `info symbol` queries.
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


# gdb 13 spins without end on an aarch64 signal frame that holds an SVE record when the core has no
# SVE register note (aarch64_linux_sigframe_init does not step over the record then; qemu writes no
# such note), and qemu-aarch64's default cpu ("max") puts one in every signal frame. O1's signal
# core keeps it (stackprov's walk through an SVE signal frame, checked against the frames gdb
# prints before it, the chain and the stop), and so does pie's (gdb's backtrace is not run on PIE
# cores); the other builds' signal cores come from a cpu without SVE, whose signal frames gdb
# unwinds, so that gdb's whole backtrace is compared there.
SVE_SIGNAL_BUILDS = ("O1", "pie")


def qemu_cpu(arch, build, mode):
    """qemu's -cpu for a core: "max" without SVE for the aarch64 signal cores but SVE_SIGNAL_BUILDS'."""
    if arch == "aarch64" and mode == "signal" and build not in SVE_SIGNAL_BUILDS:
        return ["-cpu", "max,sve=off"]
    return []


def make_core(qemu, sysroot, exe, mode, workdir, cpu=()):
    for f in glob.glob(os.path.join(workdir, "qemu_*.core")) + glob.glob(os.path.join(workdir, "core*")):
        os.unlink(f)
    subprocess.run([qemu, "-L", sysroot, *cpu, exe, mode], cwd=workdir, preexec_fn=core_limit,
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
               "offset": int(f["module_offset"], 16) if f.get("module_offset") else None,
               "continues_on_return": f.get("continues_on_return")}
              for f in t["frames"]]
    return frames, t["stop_reason"], out


# Printed by gdb's `echo` before each case of a batched gdb-multiarch run: the text up to the next
# marker is that case's.
MARK = "@@cross-case "
GDB_SETTINGS = ["-ex", "set print frame-arguments none", "-ex", "set backtrace limit 64",
                "-ex", "set backtrace past-main on", "-ex", "set debuginfod enabled off"]


def cpu_seconds(pid):
    """The user + system CPU seconds process PID has used (/proc/PID/stat utime, stime); 0 once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# gdb-multiarch's CPU time without printing anything after which it is taken to spin: one case (load
# a program's symbols, a core, print its backtrace) takes ~0.3 CPU-s.
SPIN_CPU_S = 3.0


def gdb_stream(cmd):
    """Runs gdb-multiarch CMD, reading its stdout as it comes; (text, stopped). gdb flushes each frame
    line as it prints it: once it has been silent for 8 s or SPIN_CPU_S of its CPU time after printing
    (gdb 13 spins after the frames it printed on aarch64 cores whose signal frame holds an SVE record,
    see SVE_SIGNAL_BUILDS) or after 30 s in one case (from its marker on, or from the start), it is
    stopped and what it printed is kept."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    chunks, start, last, stopped, marks = [], time.monotonic(), time.monotonic(), False, 0
    cpu_last = 0.0
    while True:
        now = time.monotonic()
        if now - start > 30 or (chunks and (now - last > 8 or cpu_seconds(p.pid) - cpu_last > SPIN_CPU_S)):
            stopped = True
            p.kill()
            break
        ready, _, _ = select.select([p.stdout], [], [], 0.2)
        if ready:
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                break
            chunks.append(data)
            last, cpu_last = time.monotonic(), cpu_seconds(p.pid)
            n = b"".join(chunks).count(MARK.encode())
            if n != marks:
                marks, start = n, last  # a new case: its own 30 s
    p.wait()
    p.stdout.close()
    return b"".join(chunks).decode(errors="replace"), stopped


def split_cases(text):
    """{case index: its text} of a batched run's output (the lines after each MARK line)."""
    out, cur = {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith(MARK):
            cur = int(line[len(MARK):])
            out[cur] = ""
        elif cur is not None:
            out[cur] += line
    return out


def bt_frames(text):
    """gdb's frames in one case's text: (pc, name), (None, "<signal>") for a signal frame; the frame gdb
    prints when it loads the core is the bt's #0 again (kept once)."""
    frames, seen = [], set()
    for f in [f for frames in parse_gdb_bt(text).values() for f in frames]:
        if f["index"] in seen:
            continue
        seen.add(f["index"])
        frames.append((None, "<signal>") if f["marker"] else (f["pc"], f["function"]))
    return frames


def gdb_backtraces(cases, sysroot):
    """gdb-multiarch's `bt`, with backtrace past-main so that it prints the frames down to _start, of
    each case's core (case["exe"], case["core"]), and `print/x` of case["exprs"] (printed before the
    bt) -> {case name: (frames, text, values)}. One gdb for all the cases (`file` when the program
    changes, `core-file`, the prints, `bt`): what each case prints is what a gdb of its own prints
    (cores and programs are independent). Cases in mode "signal" go last, SVE_SIGNAL_BUILDS' last of
    all: when gdb is stopped in a case (gdb_stream), the text it printed is kept with "[gdb timed out]",
    and the cases after it get a new gdb."""
    order = sorted(cases, key=lambda c: (c["mode"] == "signal", c["build"] in SVE_SIGNAL_BUILDS))
    out = {}
    while order:
        cmd = ["gdb-multiarch", "-batch", "-nx", "-ex", "set sysroot " + sysroot] + GDB_SETTINGS
        exe = None
        for i, c in enumerate(order):
            cmd += ["-ex", "echo \\n%s%d\\n" % (MARK, i)]
            if c["exe"] != exe:
                cmd += ["-ex", "file " + c["exe"]]
                exe = c["exe"]
            cmd += ["-ex", "core-file " + c["core"]]
            for e in c.get("exprs", ()):
                cmd += ["-ex", "print/x " + e]
            cmd += ["-ex", "bt"]
        text, stopped = gdb_stream(cmd)
        per_case = split_cases(text)
        done = max(per_case) + 1 if per_case else len(order)  # no marker at all: gdb did not run
        for i, c in enumerate(order[:done]):
            t = per_case.get(i, "")
            if stopped and i == done - 1:
                t += "\n[gdb timed out]\n"
            vals = [int(m.group(1), 16) for m in re.finditer(r"^\$\d+ = (0x[0-9a-f]+)$", t, re.M)]
            n = len(c.get("exprs", ()))
            out[c["name"]] = (bt_frames(t), t, vals if len(vals) == n else [None] * n)
        order = order[done:]
    return out


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


def pie_lookups(mine, sysroot):
    """(frame index, frame, module file, link-time address gdb is asked about) of every frame of a PIE
    core in a module (the module file None when it is not found); the module offset of a caller frame
    is looked up at offset - 1."""
    for i, f in enumerate(mine):
        if f["offset"] is None or not f["module"]:
            continue
        path = module_file(f, sysroot)
        if not os.path.exists(path):
            yield i, f, None, None
            continue
        caller = i > 0 and f["method"] != "signal"
        yield i, f, path, f["offset"] - (1 if caller else 0)


def gdb_symbols(queries):
    """The function gdb-multiarch names at each link-time address of each file alone (no core), into
    _SYM[(path, address)]: one gdb per file with an `info symbol` per address (each answer depends on
    the file and the address only)."""
    by_path = {}
    for path, addr in queries:
        if (path, addr) not in _SYM:
            by_path.setdefault(path, [])
            if addr not in by_path[path]:
                by_path[path].append(addr)
    for path, addrs in by_path.items():
        cmd = ["gdb-multiarch", "-batch", "-nx", "-ex", "set debuginfod enabled off"]
        for i, addr in enumerate(addrs):
            cmd += ["-ex", "echo \\n%s%d\\n" % (MARK, i), "-ex", "info symbol 0x%x" % addr]
        p = subprocess.run(cmd + [path], capture_output=True, text=True, timeout=30 + len(addrs))
        per_case = split_cases(p.stdout)
        for i, addr in enumerate(addrs):
            names = [n for n in parse_gdb_info_symbol(per_case.get(i, "")) if n != "??"]
            _SYM[(path, addr)] = names[0] if names else None


def compare_pie(mine, sysroot):
    """PIE cores (gdb 13 cannot relocate a PIE from a qemu core: the program-header page is not
    dumped): every frame in the executable or a library is named by gdb at its module offset,
    read from the file alone (pie_lookups, gdb_symbols)."""
    errs = []
    for i, f, path, addr in pie_lookups(mine, sysroot):
        if path is None:
            errs.append("#%d module %s not found" % (i, f["module"]))
            continue
        gdb_symbols([(path, addr)])
        want = _SYM[(path, addr)]
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


# The coroutine core's uc_link context as gdb prints it (gdb_backtraces prints them before the bt):
# its address, the pc and sp its swapcontext saved (mips: sp is gregs[29]).
CORO_EXPRS = {"aarch64": ["(unsigned long)&g_resumer", "g_resumer.uc_mcontext.pc", "g_resumer.uc_mcontext.sp"],
              "mips": ["(unsigned long)&g_resumer", "g_resumer.uc_mcontext.pc", "g_resumer.uc_mcontext.gregs[29]"],
              "mipsel": ["(unsigned long)&g_resumer", "g_resumer.uc_mcontext.pc", "g_resumer.uc_mcontext.gregs[29]"]}


def coroutine_errors(mine, stop, ref, values):
    """The "coroutine" mode (issue 35, doc/async-stacks.md): the chain runs in a makecontext coroutine
    whose uc_link is &g_resumer. The walk ends at glibc's entry trampoline (__startcontext on aarch64,
    __start_context on mips)
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
    note = mine[-1]["continues_on_return"] if mine else None  # `stack --core --json` (ours)
    ctx, pc, sp = values
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
        cases = []  # every core of the arch first, then the peers' answers for all of them at once
        for build, (flags, want_method) in BUILDS.items():
            if build == "nocfi" and not arch.startswith("mips"):
                continue
            exe = os.path.join(args.work, "fx-%s-%s" % (arch, build))
            subprocess.run([cc] + flags + [src, "-o", exe], check=True)
            modes = ("abort", "signal", "null")
            if build == "O1":
                modes += ("coroutine",)  # glibc's __startcontext / mips __start_context (doc/async-stacks.md)
            for mode in modes:
                name = "%s/%s/%s" % (arch, build, mode)
                core = make_core(qemu, sysroot, exe, mode, args.work, qemu_cpu(arch, build, mode))
                if core is None:
                    failures.append(name + ": qemu wrote no core")
                    continue
                kept = os.path.join(args.work, "%s-%s-%s.core" % (arch, build, mode))
                os.replace(core, kept)
                mine, stop, out = ours(args.cli, kept, exe, sysroot)
                cases.append({"name": name, "build": build, "mode": mode, "exe": exe, "core": kept, "mine": mine,
                              "stop": stop, "out": out, "want_method": want_method,
                              "exprs": CORO_EXPRS[arch] if mode == "coroutine" else ()})
        # PIE cores are checked against gdb's view of the file alone (compare_pie): gdb's backtrace
        # of the core is not used for them, so it is not run.
        refs = gdb_backtraces([c for c in cases if c["build"] != "pie"], sysroot)
        gdb_symbols([(path, addr) for c in cases if c["build"] == "pie"
                     for _, _, path, addr in pie_lookups(c["mine"], sysroot) if path is not None])
        for c in cases:
            name, build, mode, mine, stop, out = c["name"], c["build"], c["mode"], c["mine"], c["stop"], c["out"]
            ref, gout, values = refs.get(name, ([], "", []))
            ran += 1
            errs = []
            if mode == "coroutine":
                errs = coroutine_errors(mine, stop, ref, values)
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
                errs += compare_pie(mine, sysroot)
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
            if c["want_method"] and not any(f["method"] == c["want_method"] and f["name"] in CHAIN for f in mine):
                errs.append("no fixture frame found by %s" % c["want_method"])
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
