#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`stackprov stack --pid` of a process stopped inside a ucontext coroutine (issue 35; doc/async-stacks.md).

coro_fixture --sleep stops three functions deep in a coroutine made by makecontext (uc_link =
&resumer_ctx) and prints &resumer_ctx and the rip and rsp glibc's swapcontext saved there. Asserted,
from outside (ptrace capture, no registration): the thread's walk ends at __start_context with
stop_reason coroutine_entry and exit status 0 (a coroutine's stack ends there); the entry frame's
"continues_on_return" annotation (JSON) is that context with that pc and sp, its function the one
llvm-symbolizer-14 gives for pc - 1; the text output says the same in its "continues on return" line;
no frame follows the entry (uc_link is an annotation, not a frame)."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_chains  # noqa: E402  (tests/lib: the peers' output parsers)


def main():
    cli, fixture, symbolizer = sys.argv[1:4]
    failures = []

    def check(ok, msg):
        if not ok:
            failures.append(msg)
            print("FAIL:", msg)

    proc = subprocess.Popen([fixture, "--sleep"], stdout=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline().split()
        if len(ready) != 4 or ready[0] != "ready":
            print("FAIL: the fixture printed %r" % ready)
            return 1
        context, rip, rsp = (int(x, 16) for x in ready[1:])
        js = subprocess.run([cli, "stack", "--pid", str(proc.pid), "--json"], capture_output=True, text=True, timeout=60)
        txt = subprocess.run([cli, "stack", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=60)
    finally:
        proc.kill()
        proc.wait()
    print(txt.stdout)
    check(js.returncode == 0 and txt.returncode == 0, "exit status %d/%d (%s)" % (js.returncode, txt.returncode, js.stderr.strip()))
    thread = json.loads(js.stdout)["threads"][0]
    frames = thread["frames"]
    check(thread.get("stop_reason") == "coroutine_entry", "stop_reason %s" % thread.get("stop_reason"))
    last = frames[-1]
    check(last["function"] == "__start_context", "last frame %s, want __start_context" % last["function"])
    note = last.get("continues_on_return")
    check(note is not None, "no continues_on_return on the entry frame")
    check(all("continues_on_return" not in f for f in frames[:-1]), "an annotation on another frame")
    if note is None:
        return 1
    check(int(note["context"], 16) == context, "context %s, uc_link is 0x%x" % (note["context"], context))
    check(int(note.get("pc", "0"), 16) == rip, "pc %s, swapcontext saved rip 0x%x" % (note.get("pc"), rip))
    check(int(note.get("sp", "0"), 16) == rsp, "sp %s, swapcontext saved rsp 0x%x" % (note.get("sp"), rsp))
    try:
        sym = subprocess.run([symbolizer, "--obj=" + note["module"], "--no-inlines", "0x%x" % (int(note["module_offset"], 16) - 1)],
                             capture_output=True, text=True, timeout=60)
    except OSError as e:
        print("FAIL: %s is needed: %s" % (symbolizer, e))
        return 1
    want = llvm_symbolizer_chains(sym.stdout)[0][0][0]
    check(note["function"] == want, "function %s, llvm-symbolizer-14 %s" % (note["function"], want))
    m = re.search(r"continues on return at the context 0x([0-9a-f]+): pc 0x([0-9a-f]+) (\S+)\+0x([0-9a-f]+)", txt.stdout)
    check(m is not None and int(m.group(1), 16) == context and int(m.group(2), 16) == rip and m.group(3) == want,
          "text annotation %s" % (m.group(0) if m else None))
    print("FAILED" if failures else "PASS: the coroutine's stack ends at its entry, annotated with uc_link's saved context")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
