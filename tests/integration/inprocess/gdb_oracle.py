#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# gdb in batch mode as an oracle: stop at probe_capture, `bt`, continue; compare with the fixture's SPROV lines.
"""usage: gdb_oracle.py [--gdb PATH] FIXTURE VARIANT MODE

One process: gdb stops the fixture at probe_capture and prints `bt`; then the
fixture runs on, captures itself at the same probe and prints its stackprov
frames ("SPROV i pc sp=.. method name"). For every gdb frame i >= 1 (gdb stops
at main), stackprov frame i must have the same pc and the same function name.
A gdb that cannot run the fixture (no ptrace) fails the test: we run as root in CI.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import parse_gdb_bt  # noqa: E402  (tests/lib: the peers' output parsers)


def main(argv):
    gdb = "gdb"
    args = argv[1:]
    if args[:1] == ["--gdb"]:
        gdb, args = args[1], args[2:]
    fixture, variant, mode = args
    cmd = [gdb, "-nx", "-batch",
           "-ex", "set pagination off", "-ex", "set confirm off", "-ex", "set width 0",
           "-ex", "break probe_capture", "-ex", "run", "-ex", "bt",
           "-ex", "delete", "-ex", "continue",
           "--args", fixture, variant, mode]
    # LeakSanitizer cannot run under ptrace: an ASan build of the fixture (make test-sanitize)
    # runs under gdb with leak detection off (the same fixture runs without gdb with it on).
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    out = proc.stdout + proc.stderr
    # gdb's `bt`: {frame number: (pc or None, function)}, <signal handler called> left out.
    gdb_frames = {f["index"]: (f["pc"], f["function"]) for frames in parse_gdb_bt(out).values()
                  for f in frames if not f["marker"]}
    sprov = {}
    for line in out.splitlines():
        m = re.match(r"SPROV\s+(\d+) (0x[0-9a-f]+) sp=\S+ (\S+)\s+(.*)$", line)
        if m:
            sprov[int(m.group(1))] = (int(m.group(2), 16), m.group(3), m.group(4))
    if not gdb_frames:
        print(out)
        if "ptrace" in out or "Operation not permitted" in out:
            print("FAIL gdb cannot trace the fixture (ptrace refused: run as root / ptrace_scope 0)")
            return 1
        print("FAIL no backtrace from gdb")
        return 1
    failures = []
    if 0 not in gdb_frames or gdb_frames[0][1] != "probe_capture":
        failures.append(f"gdb frame 0 is {gdb_frames.get(0)}, expected probe_capture")
    if not sprov:
        failures.append("the fixture printed no SPROV frames")
    for i in sorted(gdb_frames):
        pc, name = gdb_frames[i]
        got = sprov.get(i)
        print(f"GDB {i:3} {hex(pc) if pc else '-':>18} {name:24} | "
              f"{hex(got[0]) if got else '-':>18} {got[2] if got else '-'} [{got[1] if got else '-'}]")
        if i == 0:
            continue
        if got is None:
            failures.append(f"frame {i}: stackprov has no frame, gdb has {name} {hex(pc)}")
            continue
        if got[0] != pc:
            failures.append(f"frame {i}: stackprov pc {hex(got[0])}, gdb {hex(pc)}")
        sname = got[2]
        if not (sname == name or sname.startswith(name + ".") or sname.startswith(name + "(")):
            failures.append(f"frame {i}: stackprov name {sname}, gdb {name}")
    last = max(gdb_frames)
    if gdb_frames[last][1] != "main":
        failures.append(f"gdb's outermost frame is {gdb_frames[last][1]}, expected main")
    if "RESULT" not in out:
        failures.append("the fixture did not finish its own checks")
    for f in failures:
        print(f"FAIL [{variant}/{mode} gdb] {f}")
    print(f"RESULT [{variant}/{mode} gdb]", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
