#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Attack 5 of doc/hardening.md as real processes: another user plants names that a root stackprov
writes to. Before, the CLI wrote "PATH.tmp" with fopen("wb") (a symlink there redirected root's
write to any file) and the transparency log opened DIR/lock with O_CREAT and no O_NOFOLLOW, then
waited on flock forever. Now: the planted symlink's target is untouched (sha256 before and after),
the output is a regular file with the expected bytes, the lock symlink is refused naming it, and
a lock held by someone else ends in an error naming the lock (within the 10 s bound).

usage: writes_test.py --stackprov BIN --fixture ELF --work DIR"""
import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time

NOBODY = 65534
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cmd, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def plant(path, target):
    """A symlink at `path` to `target`, made by another user (uid 65534) in a shared directory."""
    subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "ln", "-s",
                    target, path], check=True, timeout=30)


PROTECTED = "/proc/sys/fs/protected_symlinks"


def main():
    """With fs.protected_symlinks=0 for the run (restored after): the kernel's own guard for
    sticky directories is off, as on systems that disable it, so only stackprov's care counts."""
    with open(PROTECTED) as f:
        saved = f.read().strip()
    with open(PROTECTED, "w") as f:
        f.write("0")
    try:
        return attacks()
    finally:
        with open(PROTECTED, "w") as f:
            f.write(saved)


def attacks():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    sp = a.stackprov
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    shared = os.path.join(a.work, "shared")  # a sticky world-writable directory, as /tmp
    os.makedirs(shared)
    os.chmod(shared, 0o1777)
    victim = os.path.join(a.work, "victim")  # root's file the attacker wants overwritten
    with open(victim, "w") as f:
        f.write("precious\n")
    before = sha(victim)

    # bundle build -o: the old writer followed a symlink at OUT.tmp.
    out = os.path.join(shared, "fixture.sbundle")
    plant(out + ".tmp", victim)
    r = run([sp, "bundle", "build", "-o", out, a.fixture])
    check(r.returncode == 0, "bundle build -o with a planted OUT.tmp symlink succeeds (%s)" % r.stderr.strip())
    check(sha(victim) == before, "bundle build -o: the planted OUT.tmp symlink's target is untouched")
    digest = r.stdout.strip()
    check(os.path.isfile(out) and not os.path.islink(out) and "sha256:" + sha(out) == digest,
          "bundle build -o: OUT is a regular file whose sha256 (hashlib) is the printed digest")

    # bundle export -o: a symlink at OUT itself is replaced, not followed.
    exp = os.path.join(shared, "index.json")
    plant(exp, victim)
    plant(exp + ".tmp", victim)
    r = run([sp, "bundle", "export", out, "--format", "symbol-index-json", "-o", exp])
    check(r.returncode == 0, "bundle export -o over planted symlinks succeeds (%s)" % r.stderr.strip())
    check(sha(victim) == before and not os.path.islink(exp) and open(exp).read().startswith("{"),
          "bundle export -o: victim untouched, OUT a regular file holding the JSON")

    # The transparency log's lock: a planted symlink is refused, its target never created.
    key = os.path.join(a.work, "log.key")
    check(run([sp, "keygen", "--out", key]).returncode == 0, "keygen")
    log = os.path.join(shared, "log")
    check(run([sp, "log", "init", log, "--key", key]).returncode == 0, "log init")
    os.chmod(log, 0o1777)  # a log directory others can write to
    entry = os.path.join(a.work, "entry.txt")
    with open(entry, "w") as f:
        f.write("entry\n")
    created = os.path.join(a.work, "created-by-root")
    if os.path.lexists(os.path.join(log, "lock")):
        os.unlink(os.path.join(log, "lock"))
    plant(os.path.join(log, "lock"), created)
    r = run([sp, "log", "append", log, entry])
    check(r.returncode == 1 and "is a symbolic link" in r.stderr and os.path.join(log, "lock") in r.stderr,
          "log append refuses a planted DIR/lock symlink, naming it (%s)" % r.stderr.strip())
    check(not os.path.exists(created), "the lock symlink's target was not created")
    os.unlink(os.path.join(log, "lock"))

    # A lock held by someone else: an error naming the lock after the bound, not a wait forever.
    lock = os.path.join(log, "lock")
    holder = open(lock, "w")
    fcntl.flock(holder, fcntl.LOCK_EX)
    t0 = time.monotonic()
    r = run([sp, "log", "append", log, entry], timeout=60)
    waited = time.monotonic() - t0
    check(r.returncode == 1 and "is locked by another process" in r.stderr and lock in r.stderr,
          "log append with the lock held elsewhere fails naming the lock (%s)" % r.stderr.strip())
    check(9 <= waited <= 30, "it gave up after the bound (%.1f s)" % waited)
    fcntl.flock(holder, fcntl.LOCK_UN)
    holder.close()
    r = run([sp, "log", "append", log, entry])
    check(r.returncode == 0 and r.stdout.startswith("0 "), "log append once the lock is free (%s)" % r.stdout.strip())
    check(sha(victim) == before, "the victim file is unchanged at the end")
    print("writes_test: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
