#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The win64 capture path against RtlVirtualUnwind under wine (issue 33, doc/windows.md "The win64
build"). parked_threads.exe (a second process) walks each of its four threads with RtlCaptureContext +
RtlLookupFunctionEntry + RtlVirtualUnwind inside park(), prints every frame's rip and rsp, and parks the
thread in WaitForSingleObject. capture_walk.exe then captures that process from outside
(capture_windows_process: SuspendThread, GetThreadContext, ReadProcessMemory, the module list) and walks
each snapshot with our unwinder over the modules' files. For each thread, our walk must hold a frame
inside park() at the rsp wine's walk found for park, and from there to the end of the stack every frame
equal to wine's, (rip, rsp) for (rip, rsp), as many as wine's; the frames above park (the wait, in wine's
DLLs) are ours alone.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import wine  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def parse_fixture(text):
    pid, park, threads, cur = None, None, {}, None
    for line in text.splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "pid":
            pid = int(w[1])
        elif w[0] == "park":
            park = (int(w[1], 16), int(w[2], 16))
        elif w[0] == "thread":
            cur = []
            threads[int(w[2])] = (int(w[1]), cur)
        elif w[0] == "frame":
            cur.append((int(w[1], 16), int(w[2], 16)))
        elif w[0] == "error":
            fail("parked_threads: " + line)
    return pid, park, threads


def parse_walker(text):
    threads, cur, modules = {}, None, []
    for line in text.splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "module":
            modules.append(line)
        elif w[0] == "thread":
            cur = []
            threads[int(w[1])] = cur
        elif w[0] == "frame":
            cur.append((int(w[1], 16), int(w[2], 16)))
        elif w[0] == "error":
            fail("capture_walk: " + line)
    return modules, threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--walker", required=True)
    a = ap.parse_args()
    prefix = wine.prefix(a.build_dir)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Not pipes: wine's helper processes inherit them (tests/lib/wine.py run()).
        p = subprocess.Popen([wine.WINE, a.fixture], env=wine.env_for(prefix), stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err)
        try:
            deadline = time.monotonic() + 60
            text = ""
            while "ready" not in text:
                if p.poll() is not None:
                    err.seek(0)
                    fail(f"parked_threads exited {p.returncode} before it was ready: {err.read().decode(errors='replace')[-1000:]}")
                if time.monotonic() > deadline:
                    fail("parked_threads did not print 'ready' within 60 s")
                time.sleep(0.05)
                out.seek(0)
                text = out.read().decode(errors="replace")
            pid, park, fixture = parse_fixture(text)
            if pid is None or park is None or len(fixture) != 4:
                fail(f"parked_threads printed pid {pid}, park {park} and {len(fixture)} threads, want 4:\n{text}")
            r = wine.run(prefix, [a.walker, str(pid)], timeout=60)
        finally:
            p.kill()
            p.wait()
    stdout = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        fail(f"capture_walk exited {r.returncode}: {stdout[-1000:]} {r.stderr.decode(errors='replace')[-1000:]}")
    modules, ours = parse_walker(stdout)
    if sorted(ours) != sorted(fixture):
        fail(f"captured threads {sorted(ours)}, parked_threads has {sorted(fixture)}\n{r.stderr.decode(errors='replace')}")
    checked = 0
    for tid, (ident, theirs) in sorted(fixture.items()):
        frames = ours[tid]
        park_sp = theirs[0][1]
        at = [i for i, (pc, sp) in enumerate(frames) if sp == park_sp and park[0] < pc <= park[1]]
        if len(theirs) < 2 or not at:
            fail(f"thread {ident} ({tid}): no frame of ours in park() [{park[0]:x}, {park[1]:x}] at rsp {park_sp:x}\n"
                 f"ours: {[(hex(x), hex(y)) for x, y in frames]}\nwine: {[(hex(x), hex(y)) for x, y in theirs]}\n"
                 + "\n".join(modules) + "\n" + r.stderr.decode(errors="replace"))
        tail = frames[at[0] + 1:]
        if tail != theirs[1:]:
            for k in range(max(len(tail), len(theirs) - 1)):
                o = tail[k] if k < len(tail) else None
                t = theirs[k + 1] if k + 1 < len(theirs) else None
                if o != t:
                    fail(f"thread {ident} ({tid}): caller frame {k + 1} of park: ours {o and (hex(o[0]), hex(o[1]))}, "
                         f"RtlVirtualUnwind's {t and (hex(t[0]), hex(t[1]))} ({len(tail)} frames vs {len(theirs) - 1})\n"
                         + "\n".join(modules))
        checked += len(tail) + 1
    print(f"OK: 4 threads of a second process captured with ReadProcessMemory, {checked} frames equal to "
          f"RtlVirtualUnwind's (rip, rsp), park() found at wine's rsp")


if __name__ == "__main__":
    main()
