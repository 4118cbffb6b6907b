#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the minidump fixture program once under wine (tests/lib/wine.py: the prefix under the build
directory) for tests/unit/minidump/fixtures.cmake: mdprog.exe MODE writes OUT.dmp (given to it as
a Z: path, wine's drive for the host's root) and its printout goes to OUT.out.

  run_mdprog.py BUILD_DIR MDPROG_EXE MODE OUT_DMP OUT_TXT
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import wine  # noqa: E402


def main(argv):
    build_dir, exe, mode, dmp, out = argv[1:6]
    prefix = wine.prefix(build_dir)
    win_dmp = "Z:" + os.path.abspath(dmp).replace("/", "\\")
    for attempt in (1, 2):
        if os.path.exists(dmp):
            os.unlink(dmp)  # a partial dump of a failed attempt
        try:
            r = wine.run(prefix, [exe, mode, win_dmp], timeout=120)
        except subprocess.TimeoutExpired:
            # Seen once on a loaded machine: the run is killed and made again once.
            sys.stderr.write(f"run_mdprog.py: {exe} {mode} did not end in 120 s (attempt {attempt})\n")
            if attempt == 2:
                raise
            continue
        text = r.stdout.decode(errors="replace").replace("\r\n", "\n")  # msvcrt writes CRLF
        if r.returncode == 0 and "dumped" in text.split():
            break
        sys.stderr.write(f"run_mdprog.py: {exe} {mode} exited {r.returncode} (attempt {attempt}):\n{text}"
                         f"{r.stderr.decode(errors='replace')}")
        if attempt == 2:
            return 1
    with open(out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
