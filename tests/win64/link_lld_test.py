#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cmake/toolchains/mingw-link.sh (the win64 build's link wrapper, doc/ci-plan.md C24) against its
contract: it runs the linker command that the g++ driver it is given prints for `-###` (GCC's format:
the collect2 line, an argument double-quoted with " \\ $ escaped when it holds any other character
than letters, digits, _ / - .), minus collect2's own name and the LTO plugin's arguments (-plugin
FILE, -plugin-opt=...), with ld.lld-14 ($MINGW_LINK_LLD here: a stand-in that records its argv), and
exits with that linker's status. A driver that fails, prints no collect2 line or a line with a
backtick makes it exit 1 naming the reason. The real link (lld's output running under wine) is
checked by the win64 tests themselves.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

WRAPPER = os.path.abspath(sys.argv[1])
FAILURES = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def gcc_quote(arg):
    """An argument as GCC's -### prints it (gcc/gcc.cc, execute())."""
    if arg and all(c.isalnum() or c in "_/-." for c in arg):
        return arg
    return '"' + "".join("\\" + c if c in '"\\$' else c for c in arg) + '"'


def script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


with tempfile.TemporaryDirectory(prefix="mingw-link-test.") as tmp:
    # The linker arguments the driver would give collect2: spaces, quotes, a dollar, a backslash,
    # '+', '=' and ',' are all in real link lines' paths and options.
    wanted = ["-m", "i386pep", "-Bstatic", "-o", "bin/a b.exe", "/usr/lib/x/crt2.o",
              "-L/opt/with space/lib", "obj's.obj", 'say"hi".obj', "cost$HOME.obj", "back\\slash.obj",
              "--out-implib", "lib/liba.dll.a", "--major-image-version", "0", "-lstdc++",
              "-Wl,--a=1,b", "-plugin-optional.o"]
    collect2 = ["/usr/lib/gcc/x86_64-w64-mingw32/12-posix/collect2", "-plugin",
                "/usr/lib/gcc/x86_64-w64-mingw32/12-posix/liblto_plugin.so",
                "-plugin-opt=/usr/lib/gcc/x86_64-w64-mingw32/12-posix/lto-wrapper",
                "-plugin-opt=-fresolution=/tmp/cc3WcK5c.res", "-plugin-opt=-pass-through=-lgcc"] + wanted
    line = " " + " ".join(gcc_quote(a) for a in collect2)
    out_file = os.path.join(tmp, "argv.json")
    lld = os.path.join(tmp, "lld")
    with open(lld, "w") as f:
        f.write("#!/usr/bin/python3\nimport json, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\nsys.exit(3)\n"
                % out_file)
    os.chmod(lld, 0o755)
    driver_out = os.path.join(tmp, "driver.txt")
    with open(driver_out, "w") as f:
        f.write("Using built-in specs.\nCOLLECT_GCC=x86_64-w64-mingw32-g++-posix\n" + line + "\n"
                "COLLECT_GCC_OPTIONS='-O0' '-static'\n")
    gxx = os.path.join(tmp, "g++")
    # The stand-in driver prints that output for -### (as the last argument) and fails otherwise.
    script(gxx, 'for a do last=$a; done\n[ "$last" = "-###" ] || { echo "not -###: $*" >&2; exit 9; }\n'
           'cat %s >&2\n' % driver_out)
    env = dict(os.environ, MINGW_LINK_LLD=lld)
    r = subprocess.run(["/bin/sh", WRAPPER, gxx, "-O0", "x.obj", "-o", "bin/a b.exe"], env=env,
                       capture_output=True, text=True)
    got = json.load(open(out_file)) if os.path.exists(out_file) else None
    check(got == wanted, "the linker gets the collect2 arguments but the plugin's, byte for byte "
          "(got %r)" % (got,))
    check(r.returncode == 3, "the linker's exit status passes through (3: got %d, stderr %r)"
          % (r.returncode, r.stderr))

    # A failing driver: its output and exit 1.
    script(gxx, 'echo "x86_64-w64-mingw32-g++-posix: error: nope.obj: No such file" >&2\nexit 1\n')
    r = subprocess.run(["/bin/sh", WRAPPER, gxx, "nope.obj"], env=env, capture_output=True, text=True)
    check(r.returncode == 1 and "nope.obj: No such file" in r.stderr and "-### failed" in r.stderr,
          "a failing driver: exit 1, its message and the wrapper's (%d, %r)" % (r.returncode, r.stderr))

    # No collect2 line.
    script(gxx, 'echo "Using built-in specs." >&2\n')
    r = subprocess.run(["/bin/sh", WRAPPER, gxx], env=env, capture_output=True, text=True)
    check(r.returncode == 1 and "no collect2 command" in r.stderr,
          "no collect2 line: exit 1 naming it (%d, %r)" % (r.returncode, r.stderr))

    # A backtick (gcc does not escape it; eval would run the command inside).
    marker = os.path.join(tmp, "ran")
    with open(driver_out, "w") as f:
        f.write(' /usr/lib/gcc/collect2 "a`touch %s`.obj"\n' % marker)
    script(gxx, 'cat %s >&2\n' % driver_out)
    r = subprocess.run(["/bin/sh", WRAPPER, gxx], env=env, capture_output=True, text=True)
    check(r.returncode == 1 and "backtick" in r.stderr and not os.path.exists(marker),
          "a backtick in the link line: exit 1 naming it, nothing run (%d, %r)" % (r.returncode, r.stderr))

    # The real mingw g++: its collect2 line for a real link, read by the wrapper, gives the linker
    # the start files and libraries the driver chose (crt2.o first, crtend.o last, -lstdc++).
    open(os.path.join(tmp, "a.obj"), "w").close()  # the driver checks that its inputs exist
    os.unlink(out_file)
    r = subprocess.run(["/bin/sh", WRAPPER, "x86_64-w64-mingw32-g++-posix", "-static", "a.obj",
                        "-o", "a.exe"], env=env, capture_output=True, text=True, cwd=tmp)
    got = json.load(open(out_file)) if os.path.exists(out_file) else []
    check(r.returncode == 3 and got[:2] == ["-m", "i386pep"] and got[-1].endswith("/crtend.o")
          and any(a.endswith("/crt2.o") for a in got) and "-lstdc++" in got and "a.obj" in got
          and not any(a.startswith("-plugin") for a in got),
          "the real mingw g++'s link line: i386pep, crt2.o, a.obj, -lstdc++, crtend.o last, no plugin (%d, %r, %r)"
          % (r.returncode, got, r.stderr))

if FAILURES:
    print("FAIL: %d check(s)" % len(FAILURES))
    sys.exit(1)
print("PASS")
