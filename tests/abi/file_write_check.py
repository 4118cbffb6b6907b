#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One way to create files (issue 31, attack 5: a symlink planted at PATH.tmp or DIR/lock redirected
root's writes): every file that lib/ and bindings/ create goes through lib/core/atomic_file.cpp
(AtomicFile: mkostemp + rename; open_lock_file: O_NOFOLLOW), or the C ABI over it
(sprov_file_write, sprov_output_file_*). This check fails, naming file and line, on any other
write-mode fopen/fdopen/freopen, open/openat/creat with O_CREAT, O_WRONLY or O_RDWR, std::ofstream,
Python open(..., "w"/"a"/"x") or mkstemp-family call in lib/ or bindings/ outside that file.
A write to an fd AtomicFile made (fdopen(dup(fd), "wb")) is the one listed exception."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HELPER = os.path.normpath("lib/core/atomic_file.cpp")
# fdopen of an fd that sprov_output_file / AtomicFile created: the streaming writers.
ALLOWED = {
    (os.path.normpath("lib/perf/recorder.cpp"), 'FILE* f = fd >= 0 ? fdopen(fd, "wb") : nullptr;'),
    (os.path.normpath("bindings/cli/cmd_perf.cpp"), 'if (fd < 0 || (f_ = fdopen(fd, "wb")) == nullptr) {'),
    # perf-import's spool: a memfd (memfd_create), a file in no directory.
    (os.path.normpath("bindings/cli/cmd_perf.cpp"), 'if (fd < 0 || (f_ = fdopen(fd, "w+b")) == nullptr) {'),
}
C_PATTERNS = [
    (re.compile(r'\b(fopen|fdopen|freopen|popen)\s*\([^;]*"[wa+][^"]*"'), "write-mode stdio open"),
    (re.compile(r'\b(fopen|fdopen|freopen)\s*\([^;]*"r\+'), "read-write stdio open"),
    (re.compile(r'\b(open|openat|open64|openat2)\s*\([^;]*\bO_(CREAT|WRONLY|RDWR|TRUNC|APPEND)\b'), "open for writing"),
    (re.compile(r'\bcreat\s*\('), "creat"),
    (re.compile(r'\bstd::ofstream\b|\bstd::fstream\b'), "fstream for writing"),
    (re.compile(r'\bmk(o?s?temp|ostemps?|stemps?)\s*\('), "temp file outside AtomicFile"),
]
PY_PATTERNS = [
    (re.compile(r'\bopen\s*\([^)]*["\'][wax][bt+]?["\']'), "Python open for writing"),
    (re.compile(r'\b(mkstemp|NamedTemporaryFile|mktemp)\s*\('), "Python temp file"),
]


def main():
    bad = []
    for top in ("lib", "bindings"):
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "tests"]  # test programs write their fixtures
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.normpath(os.path.relpath(path, ROOT))
                if rel == HELPER:
                    continue
                if name.endswith((".cpp", ".hpp", ".c", ".h")):
                    pats = C_PATTERNS
                elif name.endswith(".py"):
                    pats = PY_PATTERNS
                else:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("//")[0] if not name.endswith(".py") else line.split("#")[0]
                        for pat, what in pats:
                            if pat.search(code) and (rel, line.strip()) not in ALLOWED:
                                bad.append("%s:%d: %s: %s" % (rel, n, what, line.strip()))
    # The checker must see what it forbids: the helper itself uses mkostemp and O_CREAT.
    helper = open(os.path.join(ROOT, HELPER)).read()
    if not (C_PATTERNS[5][0].search(helper) and C_PATTERNS[2][0].search(helper)):
        bad.append("%s: the patterns no longer match the helper's own mkostemp/O_CREAT" % HELPER)
    for b in bad:
        print(b)
    print("file_write_check: %d offending line(s)" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
