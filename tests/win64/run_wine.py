#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs one win64 test program under wine (make test-cross ARCH=win64): run_wine.py BUILD_DIR PROGRAM.exe
[ARGS...]. The prefix is tests/lib/wine.py's, under BUILD_DIR, with its persistent wineserver; the
program's stdout and stderr are passed on and its exit status is this script's."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import wine  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: run_wine.py BUILD_DIR PROGRAM.exe [ARGS...]")
    prefix = wine.prefix(sys.argv[1])
    r = wine.run(prefix, sys.argv[2:])
    sys.stdout.buffer.write(r.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(r.stderr)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
