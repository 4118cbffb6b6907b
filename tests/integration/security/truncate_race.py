#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Attack 4 of doc/hardening.md as real processes: the owner of a module file (another user,
uid 65534) truncates it while a root stackprov has it mapped. Before, 17 of 60 `symbolize --obj`
runs and 3 of 40 root `stack --pid` runs died of SIGBUS (exit 135). Now no run may die of a signal;
every run either answers exactly as llvm-symbolizer-14 does on the intact file (the independent
answer) or fails with exit 1 and a message naming the file. The library is generated here: 1,500
functions with DWARF in it (no separate debug file), so a truncation takes the bytes being read.

usage: truncate_race.py --stackprov BIN --work DIR"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

NOBODY = 65534
FUNCS = 1500
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def need(tool):
    path = shutil.which(tool)
    if path is None:
        print("FAIL %s not found (make deps installs it)" % tool)
        sys.exit(1)
    return path


def build(work):
    """libbig.so (-g, FUNCS functions) and app, which calls into it and sleeps there."""
    src = os.path.join(work, "big.c")
    with open(src, "w") as f:
        f.write("#include <unistd.h>\n")
        for i in range(FUNCS):
            f.write("__attribute__((noinline)) int big_%d(volatile int x) { x = x * %d + 1; return x; }\n" % (i, i + 3))
        f.write("__attribute__((noinline)) int big_sleep(void) { for (;;) pause(); return big_7(1); }\n")
    lib = os.path.join(work, "libbig.so")
    subprocess.run(["gcc", "-g", "-O1", "-shared", "-fPIC", "-o", lib, src], check=True, timeout=120)
    app_src = os.path.join(work, "app.c")
    with open(app_src, "w") as f:
        f.write("#include <stdio.h>\nint big_sleep(void);\n"
                "int main(void) { puts(\"ready\"); fflush(stdout); return big_sleep(); }\n")
    app = os.path.join(work, "app")
    subprocess.run(["gcc", "-g", "-O1", "-o", app, app_src, "-L" + work, "-lbig"], check=True, timeout=60)
    return lib, app


def function_addresses(lib):
    out = subprocess.run(nm_command() + ["--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return sorted("0x" + l.split()[0].lstrip("0") for l in out.splitlines()
                  if len(l.split()) == 3 and l.split()[1] in "tT" and l.split()[2].startswith("big_"))


def owned_dir(work, name):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    os.chown(d, NOBODY, NOBODY)
    return d


def fresh_copy(pristine, d):
    p = os.path.join(d, "libbig.so")
    if os.path.exists(p):
        os.unlink(p)
    shutil.copy(pristine, p)
    os.chown(p, NOBODY, NOBODY)
    return p


def truncate_as_owner(path):
    return subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                             "truncate", "-s", "4096", path])


def symbolize_race(sp, lib, addrs, oracle, work, rnd):
    d = owned_dir(work, "sym")
    died = answered = refused = 0
    for run in range(60):
        victim = fresh_copy(lib, d)
        p = subprocess.Popen([sp, "symbolize", "--obj", victim], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        feed = "\n".join(addrs) + "\n"
        time.sleep(rnd.uniform(0, 0.03))
        t = truncate_as_owner(victim)
        try:
            out, err = p.communicate(feed, timeout=60)
        except BrokenPipeError:
            out, err = p.communicate(timeout=60)
        t.wait(timeout=30)
        if p.returncode < 0:
            died += 1
            check(False, "symbolize run %d died of signal %d" % (run, -p.returncode))
        elif p.returncode == 0 and out == oracle:
            answered += 1
        elif p.returncode == 0:
            # As llvm-symbolizer with a file it cannot read: an input it cannot answer is "??" with
            # the reason on stderr, naming the file. Every other answer is llvm-symbolizer's.
            got, want = out.split("\n\n"), oracle.split("\n\n")
            bad = [i for i, g in enumerate(got) if g != want[i] and g.strip() != "??\n??:0:0"]
            unknown = sum(1 for g in got if g.strip() == "??\n??:0:0")
            check(len(got) == len(want) and not bad and (unknown == 0 or victim in err),
                  "symbolize run %d: %d answers as llvm-symbolizer, %d '??' with the reason naming the file (%s)" %
                  (run, len(got) - unknown - len(bad), unknown, err.strip()[:160]))
            refused += 1
        else:
            check(p.returncode == 1 and victim in err, "symbolize run %d: exit %d names the file (%s)" %
                  (run, p.returncode, err.strip()[:200]))
            refused += 1
    check(died == 0, "60 symbolize --obj runs with the file truncated by its owner: none killed by a signal "
          "(%d answered as llvm-symbolizer, %d refused or partly refused)" % (answered, refused))


def stack_race(sp, lib, app, work, rnd):
    d = owned_dir(work, "stack")
    died = 0
    for run in range(40):
        victim = fresh_copy(lib, d)
        target = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                                   "env", "LD_LIBRARY_PATH=" + d, app], stdout=subprocess.PIPE, text=True)
        try:
            check(target.stdout.readline() == "ready\n", "stack run %d: target ready" % run) if run == 0 else \
                target.stdout.readline()
            p = subprocess.Popen([sp, "stack", "-p", str(target.pid)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            time.sleep(rnd.uniform(0, 0.02))
            t = truncate_as_owner(victim)
            out, err = p.communicate(timeout=60)
            t.wait(timeout=30)
            if p.returncode < 0:
                died += 1
                check(False, "stack run %d died of signal %d" % (run, -p.returncode))
            elif p.returncode == 0:
                # The sleeping thread's innermost frames are in libc; the walk either continued through
                # big_sleep (file read before the truncation) or stopped there with a reason.
                check("TID %d" % target.pid in out, "stack run %d prints the target's thread" % run) if run == 0 \
                    else None
        finally:
            target.kill()
            target.wait()
    check(died == 0, "40 root stack --pid runs with the library truncated by its owner: none killed by a signal")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    for t in ("gcc", "nm", "setpriv", "truncate", "llvm-symbolizer-14"):
        need(t)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.chmod(a.work, 0o755)
    lib, app = build(a.work)
    addrs = function_addresses(lib)
    check(len(addrs) == FUNCS + 1, "nm lists the %d generated functions" % (FUNCS + 1))
    oracle = subprocess.run(["llvm-symbolizer-14", "--obj=" + lib], input="\n".join(addrs) + "\n",
                            capture_output=True, text=True, timeout=120).stdout
    want = subprocess.run([a.stackprov, "symbolize", "--obj", lib], input="\n".join(addrs) + "\n",
                          capture_output=True, text=True, timeout=120)
    check(want.returncode == 0 and want.stdout == oracle, "the intact file: symbolize equals llvm-symbolizer-14")
    rnd = random.Random(31)
    symbolize_race(a.stackprov, lib, addrs, oracle, a.work, rnd)
    stack_race(a.stackprov, lib, app, a.work, rnd)
    print("truncate_race: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
