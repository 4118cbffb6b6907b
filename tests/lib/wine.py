# SPDX-License-Identifier: Apache-2.0
"""Running Windows programs under wine for the tests, headless (doc/windows.md).

prefix(build_dir) makes (once) a wine prefix under the build directory and starts a persistent
wineserver for it, so that each later run costs 0.04-0.2 s instead of seconds; run() runs one
program there. A missing wine fails with its name: a skipped test is a failed test.
"""
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

WINE = "wine"
WINESERVER = "wineserver"


def require():
    for tool in (WINE, WINESERVER):
        if shutil.which(tool) is None:
            sys.exit(f"FAIL: {tool} not found (scripts/install-deps.sh installs wine)")


def env_for(prefix_dir):
    env = dict(os.environ)
    env.update({
        "WINEPREFIX": prefix_dir,
        "WINEDEBUG": "-all",
        "WINEDLLOVERRIDES": "mscoree,mshtml=",
        "DISPLAY": "",
        "WINEARCH": "win64",
    })
    return env


def prefix(build_dir):
    """The prefix directory under `build_dir`, created on first use; a wineserver kept for 60 s."""
    require()
    p = os.path.join(os.path.abspath(build_dir), "wine-prefix")
    env = env_for(p)
    # Tests run in parallel (ctest -j): one makes the prefix while the others wait for it.
    lock = os.open(os.path.join(os.path.abspath(build_dir), "wine-prefix.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        _make(p, env)
    finally:
        os.close(lock)
    # Not the test's own stdout: the server outlives the test, and ctest reads that pipe to its end.
    subprocess.run([WINESERVER, "-p60"], env=env, timeout=60, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return p


def _make(p, env):
    if not os.path.exists(os.path.join(p, "system.reg")):
        os.makedirs(p, mode=0o700, exist_ok=True)
        # wineboot -i fails now and then on a new prefix ("Application could not be started ...
        # ShellExecuteEx failed: Internal error", seen once in a fresh build): up to 3 tries, the
        # prefix's server stopped between them; the last one's output is the failure's.
        for attempt in range(1, 4):
            with tempfile.TemporaryFile() as log:  # not a pipe: see run()
                r = subprocess.run(["wineboot", "-i"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, timeout=300)
                log.seek(0)
                if r.returncode == 0:
                    return
                if attempt == 3:
                    sys.exit(f"FAIL: wineboot -i in {p} exited {r.returncode} (3 tries): "
                             f"{log.read().decode(errors='replace')[-2000:]}")
            print(f"wineboot -i in {p} exited {r.returncode}; trying again", file=sys.stderr)
            subprocess.run([WINESERVER, "-k"], env=env, timeout=60, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(prefix_dir, argv, stdin=None, timeout=300):
    """Runs argv (argv[0] a Windows .exe path on this machine) under wine; a CompletedProcess with
    stdout and stderr as bytes. They go through anonymous temporary files, not pipes: wine's helper
    processes (services, explorer) inherit the program's descriptors and outlive it, so a pipe's
    reader would wait for them (a minute, the persistent wineserver's idle time)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        r = subprocess.run([WINE] + list(argv), env=env_for(prefix_dir), input=stdin, stdout=out, stderr=err,
                           timeout=timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(r.args, r.returncode, out.read(), err.read())
