#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds arm64/mips/mipsel fixtures, aborts them under qemu-user (target core files), unwinds the cores with
# `stackprov stack --core` on the host and compares pcs and names with gdb-multiarch on the same cores.
import argparse
import glob
import os
import re
import resource
import shutil
import subprocess
import sys

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
CHAIN = ["c_fn", "b_fn", "a_fn", "main"]

OURS = re.compile(r"^#(\d+)\s+0x([0-9a-f]+) (\S+) - (\S+) \[(\w+)\]")
GDB = re.compile(r"^#(\d+)\s+(?:0x([0-9a-f]+) in )?([^\s(]+) \(")
GDB_SIG = re.compile(r"^#(\d+)\s+<signal handler called>")


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
    p = subprocess.run([cli, "stack", "--core", core, "--exe", exe, "--sysroot", sysroot],
                       capture_output=True, text=True, timeout=60)
    frames, stop = [], None
    for line in p.stdout.splitlines():
        m = OURS.match(line)
        if m:
            name = m.group(3).split("+")[0]
            frames.append((int(m.group(2), 16), name, m.group(5)))
        elif line.startswith("stop:"):
            stop = line.split()[1]
    return frames, stop, p.stdout + p.stderr


def gdb(core, exe, sysroot):
    # gdb 13 spins after the frames it printed on aarch64 cores interrupted by a signal
    # (unwinding through qemu's sigtramp page); keep what it printed before the timeout.
    try:
        p = subprocess.run(["gdb-multiarch", "-batch", "-nx", "-ex", "set sysroot " + sysroot,
                            "-ex", "set print frame-arguments none", "-ex", "set backtrace limit 64",
                            "-ex", "bt", exe, core], capture_output=True, text=True, timeout=15)
        text = p.stdout
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        text += "\n[gdb timed out]\n"
    frames, seen = [], set()
    for line in text.splitlines():
        m = GDB.match(line) or GDB_SIG.match(line)
        if not m or int(m.group(1)) in seen:
            continue
        seen.add(int(m.group(1)))
        if m.re is GDB_SIG:
            frames.append((None, "<signal>"))
        else:
            frames.append((int(m.group(2), 16) if m.group(2) else None, m.group(3)))
    return frames, text


def compare(ours_frames, gdb_frames):
    """Every gdb frame (gdb stops at main) against ours at the same index."""
    errs = []
    if len(ours_frames) < len(gdb_frames):
        errs.append("stackprov has %d frames, gdb %d" % (len(ours_frames), len(gdb_frames)))
    for i, (gpc, gname) in enumerate(gdb_frames[:len(ours_frames)]):
        pc, name, method = ours_frames[i]
        if gpc is not None and gpc != pc:
            errs.append("#%d pc 0x%x, gdb 0x%x" % (i, pc, gpc))
        if gname == "<signal>":
            continue
        if gname != "??" and name != "??" and gname != name:
            errs.append("#%d %s, gdb %s" % (i, name, gname))
        if gname in CHAIN and name != gname:
            errs.append("#%d %s unnamed, gdb %s" % (i, name, gname))
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if not shutil.which("gdb-multiarch"):
        print("SKIP: gdb-multiarch is not installed (scripts/install-deps.sh)")
        return 77
    src = os.path.join(args.source, "fixture_cross.c")
    failures, ran = [], 0
    for arch, prefix, qemu, sysroot in VARIANTS:
        cc = shutil.which(prefix + "gcc")
        if not cc or not shutil.which(qemu) or not os.path.isdir(sysroot):
            print("SKIP %s: %sgcc, %s or %s is missing" % (arch, prefix, qemu, sysroot))
            continue
        for build, (flags, want_method) in BUILDS.items():
            if build == "nocfi" and not arch.startswith("mips"):
                continue
            exe = os.path.join(args.work, "fx-%s-%s" % (arch, build))
            subprocess.run([cc] + flags + [src, "-o", exe], check=True)
            for mode in ("abort", "signal"):
                name = "%s/%s/%s" % (arch, build, mode)
                core = make_core(qemu, sysroot, exe, mode, args.work)
                if core is None:
                    failures.append(name + ": qemu wrote no core")
                    continue
                kept = os.path.join(args.work, "%s-%s-%s.core" % (arch, build, mode))
                os.replace(core, kept)
                mine, stop, out = ours(args.cli, kept, exe, sysroot)
                ref, gout = gdb(kept, exe, sysroot)
                ran += 1
                # gdb 13 cannot relocate a PIE from a qemu core (the program headers page is
                # not dumped): gdb is the oracle for the other builds, the known chain for all.
                errs = compare(mine, ref) if build != "pie" else []
                names = [f[1] for f in mine]
                chain = ["on_segv"] + CHAIN if mode == "signal" else CHAIN
                pos = [names.index(n) if n in names else -1 for n in chain]
                if -1 in pos or pos != sorted(pos):
                    errs.append("known chain %s not in order in %s" % (chain, names))
                if mode == "signal":
                    k = names.index("c_fn") if "c_fn" in names else 0
                    if mine[k][2] != "signal":
                        errs.append("c_fn (interrupted) found by %s, not signal" % mine[k][2])
                if want_method and not any(f[2] == want_method and f[1] in chain for f in mine):
                    errs.append("no fixture frame found by %s" % want_method)
                if len(ref) < 4 and build != "pie":
                    errs.append("gdb gave %d frames" % len(ref))
                if "[gdb timed out]" in gout:
                    name += " (gdb hung after %d frames)" % len(ref)
                status = "ok" if not errs else "FAIL"
                print("%-22s %s: %d frames (stop %s), gdb %d frames" % (name, status, len(mine), stop, len(ref)))
                if errs:
                    failures.append(name + ": " + "; ".join(errs))
                    print(out)
                    print(gout)
    if ran == 0:
        print("SKIP: no cross toolchain")
        return 77
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
