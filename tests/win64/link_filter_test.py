#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cmake/toolchains/mingw-link.sh (the win64 build's link wrapper when clang compiles its C++,
doc/ci-plan.md C21) against its contract: it drops ld's "duplicate section `.rdata$S[S]' has different
size" warning for a member of the mingw GCC's libstdc++.a and nothing else. A stand-in linker prints
that warning, the same warning for objects that are not libstdc++'s and for a text section, an error,
and a line on stdout, then exits 3: all of it but the first line must come through, on the same
streams, with exit status 3.
"""
import os
import subprocess
import sys
import tempfile

DROPPED = ("/usr/lib/gcc/x86_64-w64-mingw32/12-posix/libstdc++.a(bad_alloc.o): duplicate section "
           "`.rdata$_ZTSSt9exception[_ZTSSt9exception]' has different size")
KEPT = [
    # the same warning for an object of ours: two of our own definitions differ, a real problem
    "lib/libstackprov.a(unity_core_cxx.cxx.obj): duplicate section "
    "`.rdata$_ZTSSt9exception[_ZTSSt9exception]' has different size",
    # code, not read-only data
    "/usr/lib/gcc/x86_64-w64-mingw32/12-posix/libstdc++.a(tinfo.o): duplicate section "
    "`.text$_ZNKSt9type_infoeqERKS_[_ZNKSt9type_infoeqERKS_]' has different size",
    # a section whose COMDAT symbol is another one's
    "/usr/lib/gcc/x86_64-w64-mingw32/12-posix/libstdc++.a(bad_alloc.o): duplicate section "
    "`.rdata$_ZTSSt9exception[_ZTSSt9bad_alloc]' has different size",
    "/usr/bin/x86_64-w64-mingw32-ld: a.obj: multiple definition of `f'",
]


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "fake-ld")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho linked\n")
            for line in [DROPPED] + KEPT:
                f.write("printf '%s\\n' '" + line.replace("'", "'\\''") + "' >&2\n")
            f.write("exit 3\n")
        os.chmod(fake, 0o755)
        r = subprocess.run(["/bin/sh", script, fake], capture_output=True, text=True)
    errors = []
    if r.returncode != 3:
        errors.append(f"exit status {r.returncode}, the linker's was 3")
    if r.stdout != "linked\n":
        errors.append(f"stdout {r.stdout!r}, the linker's was 'linked\\n'")
    if r.stderr.splitlines() != KEPT:
        errors.append("stderr:\n" + r.stderr + "expected:\n" + "\n".join(KEPT))
    if errors:
        print("FAIL: " + "\n".join(errors))
        return 1
    print("ok: the libstdc++ padding warning dropped, 4 other lines, stdout and exit status 3 kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
