#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# One renderer for every command: the same stopped process through `stack`, `python3 -m stackprov stack`,
# `trace-capture` + `trace-show` (CLI and Python; online, and resolved offline from its bundle), against eu-stack.
"""Usage: render_test.py --stackprov BIN --fixture EXE --python-path DIR --eu-stack BIN --work DIR

The fixture (fixture_render.c, -g -O2) parks threads in named chains: one reads through an
always_inline function (an inline frame), one copies with libc's memcpy without end, every worker
started by clone3. The test starts it, stops it with SIGSTOP while the copier is inside libc's
memcpy (a retry with SIGCONT/SIGSTOP until eu-stack shows a libc frame 0 there), and then reads
the same stopped process with every command:

 1. `stackprov stack --pid P` and `python3 -m stackprov stack -p P` (also with --no-tail-calls
    and --json): byte-identical (the Python CLI prints the library's renderer's text).
 2. Oracle: eu-stack -p P. Every thread of `stack --no-tail-calls` has eu-stack's frames: the
    same pcs and the same function names (eu-stack's choice among aliases and versioned names,
    which is gdb's and perf's: `__memmove_avx512_unaligned_erms`, `__clone3`, `read`), and the
    fixture's chains are there (the reader's inline line, the copier's memcpy frame in libc, the
    workers' clone3 frame).
 3. `trace-capture --pid P` (no bundle) then `trace-show`: each thread block (header, frame lines,
    inline lines, positions; the tail-call frames the capture inferred) is byte-identical to
    `stack`'s block without its "stop:" line, and `trace-show --no-tail-calls`'s to `stack
    --no-tail-calls`'s; `python3 -m stackprov trace-show` prints the same bytes as the CLI (both forms).
 4. `trace-capture --pid P --bundle` then `trace-resolve --offline` (the bundle alone) and
    `trace-show`: the same header, pcs, modules, inline lines and positions as `stack`, and the
    same function+0xOFF for every frame, libc's included (the bundle's symbol names, format 5:
    the naming rule's choice among libc's aliases, `__memmove_avx512_unaligned_erms`, `__clone3`,
    with the symbol's start), and eu-stack's pcs and names (the method is the offline walk's,
    cfi_bundle, by the bundle's rows).

A missing tool fails the test naming it. Exit 0 on success, 1 on a mismatch.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import parse_eu_stack  # noqa: E402  (tests/lib: peers' output)

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)
    return ok


def run(cmd, env=None, timeout=120):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr))
    return r.stdout


def blocks(text):
    """{tid: [lines]} of rendered threads ("TID n ..." up to the next header), "stop:" lines left out."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^TID (\d+)", line)
        if m:
            cur = out.setdefault(int(m.group(1)), [])
        if cur is not None and not line.startswith("stop: ") and not line.startswith("replay "):
            cur.append(line)
    return out


FRAME = re.compile(r"^#(\d+)\s+0x([0-9a-f]+) (\S+) - (\S+) \[([^\]]*)\]$")


def frame_name(line):
    """(pc, function without +0xOFF, module, method) of a rendered frame line, else None."""
    m = FRAME.match(line)
    if not m:
        return None
    return int(m.group(2), 16), re.sub(r"\+0x[0-9a-f]+$", "", m.group(3)), m.group(4), m.group(5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--python-path", required=True)
    ap.add_argument("--eu-stack", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    eu = shutil.which(a.eu_stack)
    if eu is None:
        sys.exit("FAIL: eu-stack not found (%s): the oracle of this test" % a.eu_stack)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    # No user's store or default bundle store: the test's own directory.
    os.environ["XDG_DATA_HOME"] = os.path.join(a.work, "xdg")
    os.environ.pop("STACKPROV_STORE", None)
    penv = dict(os.environ, PYTHONPATH=a.python_path, PYTHONDONTWRITEBYTECODE="1")
    S = a.stackprov
    proc = subprocess.Popen([a.fixture], stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            sys.exit("FAIL: the fixture did not report ready")
        pid = proc.pid
        names = {}
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/comm" % (pid, task)) as f:
                names[int(task)] = f.read().strip()
        copier = [t for t, n in names.items() if n == "rf-copier"]
        reader = [t for t, n in names.items() if n == "rf-reader"]
        if len(names) != 4 or not copier or not reader:
            sys.exit("FAIL: the fixture's threads: %r" % names)
        # Stop it while the copier is in libc's memcpy (eu-stack's frame 0 there is in libc).
        eu_text = ""
        for attempt in range(40):
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.02)
            eu_text = run([eu, "-m", "-p", str(pid)])
            frames = parse_eu_stack(eu_text).get(copier[0], [])
            if frames and "libc.so" in frames[0][2]:
                break
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
        else:
            sys.exit("FAIL: the copier was never stopped inside libc's memcpy in 40 tries")
        eu_threads = parse_eu_stack(eu_text)

        # 1. stack and the Python CLI: byte for byte.
        stack_text = run([S, "stack", "--pid", str(pid)])
        stack_nt = run([S, "stack", "--pid", str(pid), "--no-tail-calls"])
        stack_json = run([S, "stack", "--pid", str(pid), "--json"])
        py = [sys.executable, "-m", "stackprov", "stack", "-p", str(pid)]
        check(run(py, env=penv) == stack_text, "python3 -m stackprov stack == stackprov stack (text)")
        check(run(py + ["--no-tail-calls"], env=penv) == stack_nt,
              "python3 -m stackprov stack --no-tail-calls == stackprov stack --no-tail-calls")
        check(run(py + ["--json"], env=penv) == stack_json, "python3 -m stackprov stack --json == stackprov stack --json")

        # 2. stack against eu-stack: pcs and names per frame.
        st = blocks(stack_nt)
        check(sorted(st) == sorted(eu_threads) == sorted(names), "threads: stack %s, eu-stack %s, /proc %s"
              % (sorted(st), sorted(eu_threads), sorted(names)))
        for tid, lines in sorted(st.items()):
            ours = [frame_name(l) for l in lines if frame_name(l)]
            theirs = eu_threads.get(tid, [])
            check([(p, n) for p, n, _, _ in ours] == [(p, n) for p, n, _ in theirs],
                  "TID %d %s: stack's pcs and names == eu-stack's\n  stack:    %s\n  eu-stack: %s"
                  % (tid, names.get(tid), [n for _, n, _, _ in ours], [n for _, n, _ in theirs]))
            check(lines[0] == 'TID %d "%s":' % (tid, names[tid]), "TID %d: header %r" % (tid, lines[0]))
        cp = [frame_name(l) for l in st[copier[0]] if frame_name(l)]
        check("libc.so" in cp[0][2] and "mem" in cp[0][1] and cp[1][1] == "copier_loop",
              "the copier's frame 0 is libc's memcpy (%s in %s), called by copier_loop" % (cp[0][1], cp[0][2]))
        workers = [t for t in st if t != pid]
        check(all([frame_name(l) for l in st[t] if frame_name(l)][-1][1] == eu_threads[t][-1][1] and
                  "clone3" in eu_threads[t][-1][1] for t in workers),
              "every worker's outermost frame is eu-stack's clone3 name (%s)" % eu_threads[workers[0]][-1][1])
        check(any(l.startswith("    inlined read_message at ") and l.endswith("fixture_render.c:43:10")
                  for l in st[reader[0]]), "the reader's inline line (read_message at fixture_render.c:43)")

        # 3. trace-capture (online) + trace-show: the same blocks, CLI and Python.
        db = "sqlite:" + os.path.join(a.work, "online.db")
        tid_online = run([S, "trace-capture", "--pid", str(pid), "--store", db]).strip()
        show_nt = run([S, "trace-show", tid_online, "--store", db, "--no-tail-calls"])
        check(blocks(show_nt) == st, "trace-show --no-tail-calls (online) thread blocks == stack --no-tail-calls's\n%s" %
              "\n".join("  stack: %r\n  show:  %r" % (x, y) for t in st for x, y in
                        zip(st[t], blocks(show_nt).get(t, [])) if x != y))
        show = run([S, "trace-show", tid_online, "--store", db])
        st_all = blocks(stack_text)
        check(blocks(show) == st_all, "trace-show (online) thread blocks == stack's\n%s" %
              "\n".join("  stack: %r\n  show:  %r" % (x, y) for t in st_all for x, y in
                        zip(st_all[t], blocks(show).get(t, [])) if x != y))
        pshow = run([sys.executable, "-m", "stackprov", "trace-show", tid_online, "--store", db], env=penv)
        check(pshow == show, "python3 -m stackprov trace-show == stackprov trace-show")
        pshow = run([sys.executable, "-m", "stackprov", "trace-show", tid_online, "--store", db, "--no-tail-calls"],
                    env=penv)
        check(pshow == show_nt, "python3 -m stackprov trace-show --no-tail-calls == stackprov trace-show --no-tail-calls")

        # 4. with a bundle, resolved offline from it alone.
        db2 = "sqlite:" + os.path.join(a.work, "offline.db")
        bstore = os.path.join(a.work, "bundles")
        tid_off = run([S, "trace-capture", "--pid", str(pid), "--store", db2, "--bundle", "--bundle-store", bstore]
                      ).strip()
        run([S, "trace-resolve", "--trace", tid_off, "--store", db2, "--offline"])
        off = blocks(run([S, "trace-show", tid_off, "--store", db2, "--no-tail-calls"]))
        check(sorted(off) == sorted(st), "offline: the same threads")
        for tid, lines in sorted(st.items()):
            theirs = off.get(tid, [])
            same_shape = len(theirs) == len(lines) and theirs[:1] == lines[:1]
            ok = same_shape
            for x, y in zip(lines, theirs) if same_shape else ():
                mx, my = FRAME.match(x), FRAME.match(y)
                if mx is None or my is None:
                    ok = ok and x == y  # inline lines and positions
                else:
                    # Every frame (libc's included): pc, function+0xOFF and module; the method is the
                    # offline walk's (cfi_bundle, by the bundle's rows).
                    ok = ok and mx.group(2, 3, 4) == my.group(2, 3, 4)
            check(ok, "TID %d: trace-show after trace-resolve --offline == stack (header, pcs, function+0xOFF and "
                  "modules of every frame, inline lines, positions)\n  stack: %s\n  show:  %s" % (tid, lines, theirs))
            # And against the oracle directly: eu-stack's pcs and names (its choice among libc's aliases).
            ours = [frame_name(l) for l in theirs if frame_name(l)]
            eu_frames = eu_threads.get(tid, [])
            check([(p, n) for p, n, _, _ in ours] == [(p, n) for p, n, _ in eu_frames],
                  "TID %d: offline-resolved names == eu-stack's\n  offline:  %s\n  eu-stack: %s"
                  % (tid, [n for _, n, _, _ in ours], [n for _, n, _ in eu_frames]))
    finally:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    print("FAIL: %d check(s) differ" % len(FAILURES) if FAILURES else "every command rendered the same frames")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
