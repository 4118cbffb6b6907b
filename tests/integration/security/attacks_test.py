#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile-container attacks on a root `stackprov` on the host, as real processes.

Usage: attacks_test.py STACKPROV BUILD_DIR [--keep]

Every attack runs a workload in a real "container" (container.py: unshare -m -p -f,
pivot_root into a root directory the test builds, /proc mounted inside, the old root
detached), in two variants: the root a plain directory, and the root an overlayfs mount
whose lower layer is that directory. Then root on the host runs `stackprov trace-capture
-p <workload's host pid> --bundle` against it, and the test asserts the attack fails
closed while the legitimate result is still there:

1. Store poisoning through a forged build-id. The host indexes its trusted library
   libhostz.so (build-id B) in a bundle store with `bundle build --store S`. The
   container's library libevil.so carries the same build-id B but other code
   (attacker_names_this). The capture's bundle must be stored by content only: the id
   entry ids/linux/elf-build-id/B keeps naming the trusted bundle; `symbolize --obj
   libhostz.so --store S` still answers host_inflate (as llvm-symbolizer-14 does),
   never attacker_names_this; `bundle fsck` warns of the forged identity ("holds another
   file under the same id", exit 1). Legitimate: the capture's bundle holds the
   container's own libevil.so (sha256 of that file) and `trace-show` names the
   container's frame attacker_names_this.
2. Host files through the container's path (confused deputy). The container's library
   is /srv/stackprov-test-R/libsecret.so; the host has a root-only file at that very path
   with the same forged build-id and other code (host_secret_function). The capture
   (under strace, and with inotify watching the host files) must never open the host
   file and must bundle the container's file. Symlink variant: after mapping its library
   the workload replaces the library path with an absolute symlink to a file that exists
   only on the host (/srv/stackprov-test-R/hostonly-secret.so); the capture must not open
   it nor bundle its content (module left out with a warning, or read from the mapping
   and equal to the container's original file).
2c. Hostile debug-info paths. A library of the container names debug files by absolute
   paths that exist only on the host (SRV = /srv/stackprov-test-R), each holding the host's
   version of that debug info with other names at the same offsets (host_only_*):
   (a) dwz: the library's DWARF names its functions through a dwz supplementary file
       (DW_FORM_GNU_strp_alt); its .gnu_debugaltlink is "SRV/host-dwz.debug" NUL with an
       EMPTY build-id (no file there in the container);
   (b) split DWARF: the skeleton's DW_AT_comp_dir is SRV/build (compiled there on the host),
       dwo_name libsplit.dwo; the host's SRV/build/libsplit.dwo has the skeleton's dwo_id;
       the container has no .dwo there, only its own next to the library (/lib/libsplit.dwo);
   (c) debug link: the library (no .symtab, no DWARF) at SRV/libdlink.so in the container has
       .gnu_debuglink libdlink.debug (CRC of the host's file); the host has SRV/libdlink.debug
       and SRV/.debug/libdlink.debug (the library's build-id); the container's own debug file is
       at its /usr/lib/debug/.build-id/xx/yyyy.debug. (No command that reads a target's modules
       takes --debug-file-directory, and the host's real /usr/lib/debug is not written: a host
       lookup there is caught as a failed stat/open of that path.)
   trace-capture -p --bundle (strace -f -y of open/openat/openat2 and the stat family,
   inotify) and stack -p --json (the same) must never open the host files nor look the debug
   paths up in the host's root, and no host_only_* name may appear in their output,
   trace-show, the bundle (export, bytes) or bundle lookup. Legitimate: the container's frames
   are named (its .symtab; (b) and (c): the inline chain from its own .dwo / debug file).
   Also: (c) with the container's build-id path a dangling absolute symlink to the host's
   debug file (a lookup that succeeds, even a stat, resolved it against the host's root).
3. Unbounded work (plain root only). The workload extends its own mapped library to
   4 TiB (sparse, same inode). The capture must end within 5 s wall with a max RSS of at
   most 256 MiB, and its stderr must name the file and its size.

Prints one line per check, "ok ..." or "FAIL ...: evidence"; exit 1 if any check failed,
0 otherwise (2 on a usage error). Needs root, gcc, strace, nm, llvm-symbolizer-14, ldd,
unshare, mount with overlayfs, dwz, objcopy, readelf. Reads only this directory, STACKPROV,
BUILD_DIR and system files; writes under BUILD_DIR (a run directory removed at the end
unless --keep) and a /srv/stackprov-test-<random> directory (removed at the end).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import container as ct  # noqa: E402
sys.path.insert(0, str(HERE.parent.parent / "lib"))
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

# The forged build-ids: B is shared by the host's trusted library and the container's
# libevil.so (attack 1); B2 by the container's libsecret.so and the host's files at the
# same path (attack 2).
BUILD_ID_B = "c0ffee0011223344556677889900aabbccddeeff"
BUILD_ID_B2 = "5ec2e70011223344556677889900aabbccddeeff"

GROW_SIZE = 4 << 40  # attack 3: the library is extended to 4 TiB
WALL_LIMIT_S = 5.0
RSS_LIMIT_KIB = 256 * 1024

LIBVICTIM_C = r"""
/* The host's trusted library (libhostz.so). */
#include <stddef.h>
#include <string.h>

__attribute__((noinline)) unsigned host_inflate(const unsigned char *in, size_t n, unsigned char *out) {
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = (unsigned char)(in[i] ^ 0x5a);
        sum = sum * 31u + out[i];
    }
    return sum;
}

__attribute__((noinline)) unsigned host_deflate(const unsigned char *in, size_t n, unsigned char *out) {
    unsigned sum = 7;
    for (size_t i = 0; i < n; i++) {
        out[n - 1 - i] = (unsigned char)(in[i] + 3);
        sum ^= (unsigned)out[n - 1 - i] << (i % 24);
    }
    memmove(out + 1, out, n - 1); /* one PLT entry, as libevil.so has (pause) */
    return sum;
}
"""

LIBEVIL_C = r"""
/* The container's library: the host library's build-id, other code. The nop sled makes
   attacker_names_this cover the addresses of the host library's functions, so a
   poisoned id entry would answer with this name for them. */
#include <unistd.h>

__attribute__((noinline)) void attacker_names_this(void) {
    volatile int acc = 0;
    __asm__ volatile(".rept 1024\n\tnop\n\t.endr");
    for (;;) {
        acc = acc * 3 + 1;
        pause();
    }
}
"""

HOSTSECRET_C = r"""
/* A host-only file at the container library's path: same forged build-id, other code.
   SECRET_SALT makes each host file's bytes different. */
__attribute__((noinline)) int host_secret_function(int x) {
    int r = 0;
    for (int i = 0; i < x; i++) r += i * SECRET_SALT;
    return r;
}
__attribute__((noinline)) int host_secret_helper(int x) { return host_secret_function(x) + 1; }
"""

APP_C = r"""
/* The container's workload: app MODE [PATH [TARGET]].
   wait:    print "ready", then block in the library (attacker_names_this -> pause).
   symlink: replace PATH (its own mapped library) by an absolute symlink to TARGET first.
   grow:    extend PATH (its own mapped library, same inode) to 4 TiB sparse first.
   The library is mapped by the dynamic loader before main runs. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern void attacker_names_this(void);

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "wait";
    if (strcmp(mode, "symlink") == 0 && argc > 3) {
        if (unlink(argv[2]) != 0 || symlink(argv[3], argv[2]) != 0) { perror("symlink"); return 1; }
    } else if (strcmp(mode, "grow") == 0 && argc > 2) {
        if (truncate(argv[2], (off_t)4 << 40) != 0) { perror("truncate"); return 1; }
    } else if (strcmp(mode, "wait") != 0) {
        fprintf(stderr, "app: bad mode %s\n", mode);
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    attacker_names_this();
    return 0;
}
"""


class Checks:
    """Collects check results and prints them as they come ("ok NAME" / "FAIL NAME: why")."""

    def __init__(self):
        """No check yet."""
        self.passed = 0
        self.failed: list[str] = []

    def check(self, name: str, cond: bool, evidence: str = "") -> bool:
        """Record and print one check; EVIDENCE is printed with a failure."""
        if cond:
            self.passed += 1
            print(f"ok {name}", flush=True)
        else:
            self.failed.append(name)
            ev = evidence.strip().replace("\n", "\n    ")
            print(f"FAIL {name}" + (f": {ev}" if ev else ""), flush=True)
        return cond

    def error(self, name: str, exc: BaseException) -> None:
        """Record a scenario that could not run to its end as a failed check."""
        self.check(name, False, f"{type(exc).__name__}: {exc}")


def sha256_file(path: Path) -> str:
    """The hex sha256 of PATH's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


NM = nm_command()


def symbol_address(lib: Path, name: str) -> int:
    """The st_value of the defined symbol NAME in LIB (from nm)."""
    out = ct.run([*NM, "--defined-only", lib], timeout=20).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise ct.ContainerError(f"{lib}: no symbol {name}")


def symbol_range(lib: Path, name: str) -> tuple[int, int]:
    """[start, end) of the defined symbol NAME in LIB (from nm -S)."""
    out = ct.run([*NM, "-S", "--defined-only", lib], timeout=20).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == name:
            start = int(parts[0], 16)
            return start, start + int(parts[1], 16)
    raise ct.ContainerError(f"{lib}: no sized symbol {name}")


def elf_build_id(path: Path) -> str:
    """The GNU build-id of PATH (readelf -n)."""
    out = ct.run(["readelf", "-n", path], timeout=20).stdout
    m = re.search(r"Build ID:\s*([0-9a-f]+)", out)
    return m.group(1) if m else ""


class Inotify:
    """Watches files for IN_OPEN/IN_ACCESS (inode-based: any path, any namespace)."""

    IN_ACCESS = 0x1
    IN_OPEN = 0x20

    def __init__(self, paths: list[Path]):
        """Start watching PATHS."""
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.names: dict[int, str] = {}
        for p in paths:
            wd = self.libc.inotify_add_watch(self.fd, str(p).encode(), self.IN_OPEN | self.IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {p}")
            self.names[wd] = str(p)

    def drain(self) -> list[str]:
        """The events seen since the last call, as 'PATH: OPEN|ACCESS' strings."""
        events: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            off = 0
            while off + 16 <= len(data):
                wd, mask, _cookie, length = struct.unpack_from("iIII", data, off)
                off += 16 + length
                kinds = [n for b, n in ((self.IN_OPEN, "OPEN"), (self.IN_ACCESS, "ACCESS")) if mask & b]
                events.append(f"{self.names.get(wd, wd)}: {'|'.join(kinds) or hex(mask)}")

    def close(self) -> None:
        """Stop watching."""
        os.close(self.fd)


_STRACE_CALL = re.compile(r"^(open|openat|openat2)\((.*)\)\s+=\s+(-?\d+)(?:<(.*)>)?(.*)$")
_STRACE_STR = r'"((?:[^"\\]|\\.)*)"'


def parse_strace_opens(text: str) -> list[dict]:
    """The open/openat/openat2 calls of an `strace -f -y` log, unfinished/resumed joined.

    Each: {pid, call, dirfd, dirfd_path, path, in_root (openat2 RESOLVE_IN_ROOT/BENEATH),
    ret, ret_path, line}.
    """
    calls: list[dict] = []
    pending: dict[str, str] = {}
    for raw in text.splitlines():
        m = re.match(r"^(\d+)\s+(.*)$", raw)
        pid, rest = (m.group(1), m.group(2)) if m else ("0", raw)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        r = re.match(r"^<\.\.\. \w+ resumed>(.*)$", rest)
        if r:
            rest = pending.pop(pid, "") + r.group(1)
        c = _STRACE_CALL.match(rest)
        if not c:
            continue
        call, args, ret, ret_path = c.group(1), c.group(2), int(c.group(3)), c.group(4)
        dirfd = dirfd_path = None
        if call == "open":
            pm = re.match(_STRACE_STR, args)
        else:
            dm = re.match(r"^([^,<]+)(?:<([^>]*)>)?,\s*" + _STRACE_STR, args)
            pm = None
            if dm:
                dirfd, dirfd_path = dm.group(1).strip(), dm.group(2)
                pm = re.match(r".*?" + _STRACE_STR, args[dm.start(3) - 1:])
        path = pm.group(1) if pm else None
        calls.append({
            "pid": pid, "call": call, "dirfd": dirfd, "dirfd_path": dirfd_path, "path": path,
            "in_root": call == "openat2" and ("RESOLVE_IN_ROOT" in args or "RESOLVE_BENEATH" in args),
            "ret": ret, "ret_path": ret_path, "line": raw,
        })
    return calls


def host_opens(calls: list[dict], targets: list[str], host_only: list[str]) -> list[str]:
    """The strace lines that opened one of TARGETS as a HOST file (successfully).

    strace -y renders an fd of the target's mount namespace by its path inside that
    namespace, so the container's own /srv/.../libsecret.so shows up exactly like the
    host's. A call counts as opening a host file when the path it resolves *from the host's
    root* is a target: an absolute path argument (openat2 with RESOLVE_IN_ROOT/BENEATH
    excepted), or a relative one against AT_FDCWD or a directory fd that was itself opened
    from the host's root (fds opened under /proc/PID/root, in-root or by reopening such an
    fd through /proc/self/fd/N stay the container's). HOST_ONLY paths exist only on the
    host, so any successful call whose result fd is rendered as one of them counts too.
    """
    origin: dict[tuple[str, int], str] = {}  # (pid, fd) -> "host" | "container"
    bad: list[str] = []
    for c in calls:
        if c["ret"] < 0 or c["path"] is None:
            continue
        path = c["path"]
        from_host: str | None = None
        container = False
        if path.startswith("/proc/self/fd/") or re.match(r"^/proc/thread-self/fd/", path):
            try:
                container = origin.get((c["pid"], int(path.rsplit("/", 1)[1]))) == "container"
            except ValueError:
                pass
            if not container:
                from_host = c["ret_path"]
        elif re.match(r"^/proc/\d+/(root|cwd|map_files)(/|$)", path):
            container = True
        elif c["in_root"]:
            container = True
        elif path.startswith("/"):
            from_host = path
        else:
            dfd = c["dirfd"]
            if dfd == "AT_FDCWD" or dfd is None:
                from_host = os.path.join(c["dirfd_path"] or "/", path)
            else:
                try:
                    o = origin.get((c["pid"], int(dfd)))
                except ValueError:
                    o = None
                if o == "container":
                    container = True
                else:
                    from_host = os.path.join(c["dirfd_path"] or "", path)
        origin[(c["pid"], c["ret"])] = "container" if container else "host"
        if from_host is not None and os.path.normpath(from_host) in targets:
            bad.append(c["line"])
        elif c["ret_path"] in host_only:
            bad.append(c["line"])
    return bad


class Env:
    """The test's inputs and shared build products."""

    def __init__(self, stackprov: Path, run_dir: Path, srv: Path):
        """STACKPROV the CLI, RUN_DIR this run's directory, SRV the /srv/stackprov-test-* dir."""
        self.stackprov = stackprov
        self.run_dir = run_dir
        self.srv = srv
        self.src = run_dir / "src"
        self.host_lib = run_dir / "host" / "lib" / "libhostz.so"
        self.host_tmp = run_dir / "host" / "tmp"
        self.cbuild = run_dir / "cbuild"
        self.launcher: Path | None = None
        self.libevil = self.cbuild / "libevil.so"
        self.app_evil = self.cbuild / "app_evil"
        self.libsecret = self.cbuild / "libsecret.so"
        self.app_secret = self.cbuild / "app_secret"
        self.secret_path = str(srv / "libsecret.so")  # the same path inside and outside
        self.host_secret = srv / "libsecret.so"
        self.host_only = srv / "hostonly-secret.so"
        self.libs2c: dict = {}  # attack 2c: kind -> Lib2c (build_2c)

    def sp(self, *args, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
        """Run stackprov ARGS (no check of the exit status)."""
        return ct.run([self.stackprov, *args], timeout=timeout, check=False, env=env)


def build_everything(e: Env) -> None:
    """Write the C sources and compile the launcher, the libraries and the programs."""
    e.src.mkdir(parents=True)
    for name, text in (("libvictim.c", LIBVICTIM_C), ("libevil.c", LIBEVIL_C),
                       ("hostsecret.c", HOSTSECRET_C), ("app.c", APP_C)):
        (e.src / name).write_text(text)
    e.host_lib.parent.mkdir(parents=True)
    e.cbuild.mkdir(parents=True)
    e.launcher = ct.compile_launcher(e.host_tmp)
    gcc = ["gcc", "-g", "-O1", "-shared", "-fPIC"]
    ct.run([*gcc, f"-Wl,--build-id=0x{BUILD_ID_B}", "-o", e.host_lib, e.src / "libvictim.c"], timeout=60)
    ct.run([*gcc, f"-Wl,--build-id=0x{BUILD_ID_B}", "-Wl,-soname,libevil.so", "-o", e.libevil,
            e.src / "libevil.c"], timeout=60)
    ct.run([*gcc, f"-Wl,--build-id=0x{BUILD_ID_B2}", "-Wl,-soname,libsecret.so", "-o", e.libsecret,
            e.src / "libevil.c"], timeout=60)
    ct.run(["gcc", "-g", "-O1", "-o", e.app_evil, e.src / "app.c", f"-L{e.cbuild}", "-levil",
            "-Wl,-rpath,/lib"], timeout=60)
    ct.run(["gcc", "-g", "-O1", "-o", e.app_secret, e.src / "app.c", f"-L{e.cbuild}", "-lsecret",
            f"-Wl,-rpath,{e.srv}"], timeout=60)
    # The host-only files: root's, mode 0600, the forged build-id B2, other code.
    e.srv.mkdir(mode=0o700)
    (e.srv / ".owner-pid").write_text(str(os.getpid()))
    for salt, dest in ((0x5EC2E7, e.host_secret), (0x0571E5, e.host_only)):
        ct.run([*gcc, f"-DSECRET_SALT={salt:#x}", f"-Wl,--build-id=0x{BUILD_ID_B2}", "-o", dest,
                e.src / "hostsecret.c"], timeout=60)
        os.chown(dest, 0, 0)
        os.chmod(dest, 0o600)
    e.libs2c = build_2c(e)


def check_setup(e: Env, ck: Checks) -> None:
    """The forged identities are in place (else the attacks would prove nothing)."""
    ids = {p: elf_build_id(p) for p in (e.host_lib, e.libevil)}
    ck.check("setup: libhostz.so and libevil.so share build-id B", set(ids.values()) == {BUILD_ID_B}, str(ids))
    ids2 = {p: elf_build_id(p) for p in (e.libsecret, e.host_secret, e.host_only)}
    ck.check("setup: libsecret.so and the host files share build-id B2", set(ids2.values()) == {BUILD_ID_B2},
             str(ids2))
    shas = {sha256_file(p) for p in (e.libsecret, e.host_secret, e.host_only)}
    ck.check("setup: the container's libsecret.so differs from the host files", len(shas) == 3)
    addr = symbol_address(e.host_lib, "host_inflate")
    lo, hi = symbol_range(e.libevil, "attacker_names_this")
    ck.check("setup: attacker_names_this covers host_inflate's address (a poisoned entry would answer it)",
             lo <= addr < hi, f"host_inflate {addr:#x}, attacker_names_this [{lo:#x},{hi:#x})")
    check_strace_classifier(ck)
    check_setup_2c(e, ck, e.libs2c)


def host_opens_missed(logs: list[str], targets: list[str], host_only: list[str]) -> list[str]:
    """The LOGS whose last line host_opens() does not flag (it should flag each)."""
    missed = []
    for log in logs:
        bad = host_opens(parse_strace_opens(log), targets, host_only)
        if not bad or bad[-1] != log.splitlines()[-1]:
            missed.append(log)
    return missed


def check_strace_classifier(ck: Checks) -> None:
    """host_opens() flags host opens and only them, on lines shaped like strace 6.1's."""
    t, h = "/srv/stackprov-test-x/libsecret.so", "/srv/stackprov-test-x/hostonly-secret.so"
    host_logs = [  # each log's last line opens a host file
        f'1  openat(AT_FDCWD</w>, "{t}", O_RDONLY|O_CLOEXEC) = 5<{t}>',
        f'1  open("{t}", O_RDONLY) = 5<{t}>',
        f'1  openat2(AT_FDCWD</w>, "{t}", {{flags=O_RDONLY|O_PATH, resolve=RESOLVE_NO_MAGICLINKS}}, 24) = 5<{t}>',
        '1  openat(AT_FDCWD</srv/stackprov-test-x>, "libsecret.so", O_RDONLY) = 5</srv/stackprov-test-x/libsecret.so>',
        f'1  openat(AT_FDCWD</w>, "/proc/9/root{t}", O_RDONLY) = 5<{h}>',
        f'1  openat(AT_FDCWD</w>, "/srv", O_RDONLY|O_DIRECTORY) = 4</srv>\n'
        f'1  openat(4</srv>, "stackprov-test-x/libsecret.so", O_RDONLY) = 5<{t}>',
        f'1  openat(AT_FDCWD</w>, "{t}", O_RDONLY <unfinished ...>\n'
        f'2  openat(AT_FDCWD</w>, "/etc/passwd", O_RDONLY) = 6</etc/passwd>\n'
        f'1  <... openat resumed>) = 5<{t}>',
    ]
    container_lines = [
        '1  openat(AT_FDCWD</w>, "/proc/9/root", O_RDONLY|O_PATH|O_DIRECTORY) = 7</>',
        f'1  openat2(7</>, "{t[1:]}", {{flags=O_RDONLY|O_CLOEXEC|O_PATH, '
        f'resolve=RESOLVE_NO_MAGICLINKS|RESOLVE_IN_ROOT}}, 24) = 8<{t}>',
        f'1  openat(AT_FDCWD</w>, "/proc/self/fd/8", O_RDONLY|O_NOCTTY|O_CLOEXEC) = 6<{t}>',
        f'1  openat(7</>, "{t[1:]}", O_RDONLY) = 5<{t}>',
        f'1  openat(AT_FDCWD</w>, "/proc/9/map_files/7f00-7f01", O_RDONLY|O_PATH) = 7<{t}>(deleted)',
        f'1  openat(AT_FDCWD</w>, "{t}", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)',
    ]
    missed = host_opens_missed(host_logs, [t, h], [h])
    ck.check("setup: the strace classifier flags every host open", not missed, "\n".join(missed))
    wrong = host_opens(parse_strace_opens("\n".join(container_lines)), [t, h], [h])
    ck.check("setup: the strace classifier flags no open of the container's file", not wrong, "\n".join(wrong))


def capture_summary_bundle(stderr: str) -> str | None:
    """The bundle digest (hex) from trace-capture's stderr summary, or None."""
    m = re.search(r"bundle sha256:([0-9a-f]{64})", stderr)
    return m.group(1) if m else None


def inspect_modules(e: Env, digest: str, store: Path) -> tuple[list[dict], str]:
    """The modules of bundle sha256:DIGEST in STORE (bundle inspect --json), and the raw output."""
    p = e.sp("bundle", "inspect", f"sha256:{digest}", "--store", store, "--json", timeout=30)
    if p.returncode != 0:
        return [], p.stdout + p.stderr
    return json.loads(p.stdout).get("modules", []), p.stdout


def start_container(e: Env, stack, root: Path, variant: str, work: Path, prog_args: list[str],
                    log: Path) -> tuple[ct.Container, int]:
    """Start the container on ROOT (an overlay of it for VARIANT 'overlay'); return it and its pid.

    Registers the overlay and the container on STACK (a list, cleaned up in reverse).
    """
    croot = root
    if variant == "overlay":
        ov = ct.Overlay(root, work / "ovl")
        stack.append(ov.unmount)
        croot = ov.mount()
    c = ct.Container(e.launcher, croot, "/app", prog_args, env={"PATH": "/"}, log=log)
    stack.append(c.stop)
    c.start()
    pid = c.wait_ready(timeout=10)
    return c, pid


def unwind(stack: list) -> None:
    """Run the cleanup callables of STACK in reverse order, each even if another fails."""
    while stack:
        fn = stack.pop()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - cleanup must go on
            print(f"# cleanup: {exc}", file=sys.stderr)


def attack1(e: Env, ck: Checks, variant: str, work: Path) -> None:
    """Store poisoning through a forged build-id (see the module docstring, 1)."""
    t = f"{variant}/attack1-poison"
    store = work / "store1"
    p = e.sp("bundle", "build", "--store", store, e.host_lib, timeout=60)
    m = re.search(r"sha256:([0-9a-f]{64})", p.stdout)
    if not ck.check(f"{t}: host indexes libhostz.so (bundle build --store)", p.returncode == 0 and m is not None,
                    p.stdout + p.stderr):
        return
    trusted = m.group(1)
    id_entry = store / "ids" / "linux" / "elf-build-id" / BUILD_ID_B
    entry_before = id_entry.read_bytes()
    ck.check(f"{t}: id entry names the trusted bundle", entry_before == f"sha256:{trusted}\n".encode(),
             repr(entry_before))

    root = ct.build_root(work / "root1", e.app_evil, files={"/lib/libevil.so": e.libevil})
    container_sha = sha256_file(root / "lib" / "libevil.so")
    host_sha = sha256_file(e.host_lib)
    stack: list = []
    try:
        _c, pid = start_container(e, stack, root, variant, work, ["wait"], work / "container1.log")
        db = work / "t1.db"
        cap = e.sp("trace-capture", "-p", str(pid), "--store", f"sqlite:{db}", "--bundle",
                   "--bundle-store", store, timeout=60)
    finally:
        unwind(stack)
    (work / "cap1.err").write_text(cap.stderr)
    digest = capture_summary_bundle(cap.stderr)
    ck.check(f"{t}: trace-capture exits 0 and names its bundle", cap.returncode == 0 and digest is not None,
             f"exit {cap.returncode}; stderr: {cap.stderr}")
    trace_id = cap.stdout.strip().splitlines()[-1] if cap.stdout.strip() else ""

    entry_after = id_entry.read_bytes() if id_entry.exists() else b"<missing>"
    ck.check(f"{t}: id entry {BUILD_ID_B} unchanged (still the trusted bundle)", entry_after == entry_before,
             f"before {entry_before!r}, after {entry_after!r}")

    addr = symbol_address(e.host_lib, "host_inflate")
    sym = e.sp("symbolize", "--obj", e.host_lib, "--store", store, f"{addr:#x}", timeout=30)
    llvm = ct.run(["llvm-symbolizer-14", f"--obj={e.host_lib}", f"{addr:#x}"], timeout=30, check=False)
    name = sym.stdout.splitlines()[0] if sym.stdout.strip() else ""
    llvm_name = llvm.stdout.splitlines()[0] if llvm.stdout.strip() else ""
    ck.check(f"{t}: symbolize --obj libhostz.so --store S {addr:#x} = host_inflate = llvm-symbolizer-14",
             sym.returncode == 0 and name == "host_inflate" == llvm_name,
             f"stackprov {sym.stdout!r} (exit {sym.returncode}, {sym.stderr.strip()}); llvm {llvm.stdout!r}")
    ck.check(f"{t}: symbolize never answers attacker_names_this", "attacker_names_this" not in sym.stdout,
             sym.stdout)
    prov = e.sp("symbolize", "--obj", e.host_lib, "--store", store, "--output-style=JSON", "--provenance",
                f"{addr:#x}", timeout=30)
    try:
        pj = json.loads(prov.stdout)[0]
    except (ValueError, IndexError, KeyError):
        pj = {}
    ck.check(f"{t}: symbolize answers from the trusted bundle (--provenance)",
             pj.get("Resolver") == "bundle" and pj.get("Bundle") == f"sha256:{trusted}",
             prov.stdout + prov.stderr)

    fsck = e.sp("bundle", "fsck", "--store", store, timeout=60)
    # A warning (stderr), not an error: two builds of one file (stripped and not) share a build-id
    # too; the store's id entry itself is intact (checked above).
    ck.check(f"{t}: bundle fsck reports the forged identity (a warning naming both bundles)",
             fsck.returncode == 0 and any("holds another file under the same id" in ln and "warning" in ln
                                          for ln in fsck.stderr.splitlines()),
             f"exit {fsck.returncode}; stdout: {fsck.stdout}; stderr: {fsck.stderr}")

    if digest is None:
        return
    ck.check(f"{t}: the capture's bundle is not the trusted one", digest != trusted, digest)
    ctl = e.sp("symbolize", "--build-id", BUILD_ID_B, "--store", store, "--bundle", f"sha256:{digest}",
               f"{addr:#x}", timeout=30)
    ck.check(f"{t}: control: the capture's bundle itself answers attacker_names_this at {addr:#x} "
             "(only the id entry keeps it from the host's lookups)",
             ctl.stdout.splitlines()[:1] == ["attacker_names_this"], ctl.stdout + ctl.stderr)
    blob = store / "blobs" / "sha256" / digest[:2] / digest
    ck.check(f"{t}: the capture's bundle is in the store by content", blob.is_file() and sha256_file(blob) == digest,
             str(blob))
    mods, raw = inspect_modules(e, digest, store)
    mb = [mo for mo in mods if mo.get("id") == BUILD_ID_B]
    ck.check(f"{t}: the capture's bundle holds the container's own libevil.so (sha256_file)",
             len(mb) == 1 and mb[0].get("sha256_file") == container_sha and container_sha != host_sha,
             f"container {container_sha}, host {host_sha}; inspect: {raw[:1500]}")
    show = e.sp("trace-show", trace_id, "--store", f"sqlite:{db}", timeout=30)
    frame = [ln for ln in show.stdout.splitlines() if "attacker_names_this" in ln]
    ck.check(f"{t}: trace-show names the container frame attacker_names_this (libevil.so)",
             show.returncode == 0 and any("libevil.so" in ln for ln in frame), show.stdout + show.stderr)
    ck.check(f"{t}: trace-show never names host_inflate/host_deflate",
             "host_inflate" not in show.stdout and "host_deflate" not in show.stdout, show.stdout)
    res = e.sp("trace-resolve", "--trace", trace_id, "--store", f"sqlite:{db}", "--offline", timeout=60)
    show2 = e.sp("trace-show", trace_id, "--store", f"sqlite:{db}", timeout=30)
    ck.check(f"{t}: trace-resolve --offline keeps naming attacker_names_this",
             res.returncode == 0 and "attacker_names_this" in show2.stdout and "host_inflate" not in show2.stdout,
             f"resolve exit {res.returncode}: {res.stdout}{res.stderr}; show: {show2.stdout}")


def strace_capture(e: Env, pid: int, db: Path, store: Path, strace_out: Path) -> subprocess.CompletedProcess:
    """trace-capture -p PID --bundle under strace -f -y (open, openat, openat2) into STRACE_OUT."""
    return ct.run(["strace", "-f", "-y", "-e", "trace=openat,openat2,open", "-o", strace_out,
                   e.stackprov, "trace-capture", "-p", str(pid), "--store", f"sqlite:{db}", "--bundle",
                   "--bundle-store", store], timeout=120, check=False)


def bundle_names(e: Env, digest: str, store: Path) -> str:
    """Every function name of bundle sha256:DIGEST (export --format symbol-index-json), as text."""
    p = e.sp("bundle", "export", f"sha256:{digest}", "--store", store, "--format", "symbol-index-json",
             timeout=60)
    return p.stdout + p.stderr


def attack2(e: Env, ck: Checks, variant: str, work: Path, symlink: bool) -> None:
    """Host files through the container's path (see the module docstring, 2)."""
    t = f"{variant}/attack2-{'symlink' if symlink else 'samepath'}"
    tag = "2s" if symlink else "2"
    store = work / f"store{tag}"
    root = ct.build_root(work / f"root{tag}", e.app_secret, files={e.secret_path: e.libsecret},
                         skip_deps=("libsecret.so",))
    container_sha = sha256_file(root / e.secret_path.lstrip("/"))
    host_shas = {sha256_file(e.host_secret), sha256_file(e.host_only)}
    ck.check(f"{t}: the host-only target does not exist in the container root",
             not (root / str(e.host_only).lstrip("/")).exists())
    args = ["symlink", e.secret_path, str(e.host_only)] if symlink else ["wait"]
    watch: Inotify | None = None
    stack: list = []
    strace_out = work / f"strace{tag}.txt"
    try:
        _c, pid = start_container(e, stack, root, variant, work, args, work / f"container{tag}.log")
        if symlink:
            link = os.readlink(f"/proc/{pid}/root{e.secret_path}")
            ck.check(f"{t}: the container replaced its library path by a symlink to the host-only path",
                     link == str(e.host_only), link)
        maps = Path(f"/proc/{pid}/maps").read_text()
        ck.check(f"{t}: the workload maps {e.secret_path}", e.secret_path in maps, maps[-800:])
        watch = Inotify([e.host_secret, e.host_only])
        cap = strace_capture(e, pid, work / f"t{tag}.db", store, strace_out)
        events = watch.drain()
    finally:
        unwind(stack)
        if watch:
            watch.close()
    (work / f"cap{tag}.err").write_text(cap.stderr)
    digest = capture_summary_bundle(cap.stderr)
    ck.check(f"{t}: trace-capture exits 0 and names its bundle", cap.returncode == 0 and digest is not None,
             f"exit {cap.returncode}; stderr: {cap.stderr}")
    text = strace_out.read_text(errors="replace") if strace_out.exists() else ""
    calls = parse_strace_opens(text)
    ck.check(f"{t}: strace saw the capture's opens", len(calls) > 0, text[-500:])
    bad = host_opens(calls, [str(e.host_secret), str(e.host_only)], [str(e.host_only)])
    ck.check(f"{t}: strace: no host file ({e.srv}/...) opened from the host's root", not bad, "\n".join(bad[:10]))
    naive = [c["line"] for c in calls if c["ret"] >= 0 and str(e.srv) in c["line"]]
    print(f"# {t}: {len(naive)} successful open lines mention {e.srv}: strace -y renders the container's own "
          "file by its path in the target's mount namespace, so only the path resolution tells them apart",
          flush=True)
    ck.check(f"{t}: inotify: the host files were never opened nor read", not events, "; ".join(events[:10]))
    if digest is None:
        return
    mods, raw = inspect_modules(e, digest, store)
    mb = [mo for mo in mods if mo.get("id") == BUILD_ID_B2]
    ck.check(f"{t}: no module of the bundle is a host file (sha256_file)",
             not any(mo.get("sha256_file") in host_shas for mo in mods), raw[:1500])
    if symlink:
        warned = re.search(r"warning:.*libsecret\.so", cap.stderr) is not None
        via_map_files = any(c["ret"] >= 0 and re.match(r"^/proc/\d+/map_files/", c["path"] or "") for c in calls)
        left_out = len(mb) == 0 and warned
        from_mapping = len(mb) == 1 and mb[0].get("sha256_file") == container_sha and via_map_files
        ck.check(f"{t}: libsecret.so is left out with a warning, or read through /proc/PID/map_files "
                 "and is the container's original file", left_out or from_mapping,
                 f"modules with B2: {mb}; container {container_sha}; map_files opened: {via_map_files}; "
                 f"stderr: {cap.stderr}")
        print(f"# {t}: " + ("left out with a warning" if left_out else
                           "bundled from /proc/PID/map_files (the mapping), the container's original file"
                           if from_mapping else "neither"), flush=True)
    else:
        ck.check(f"{t}: the bundle's libsecret.so is the container's file (sha256_file)",
                 len(mb) == 1 and mb[0].get("sha256_file") == container_sha,
                 f"container {container_sha}, host {sorted(host_shas)}; inspect: {raw[:1500]}")
    names = bundle_names(e, digest, store)
    ck.check(f"{t}: host_secret_function nowhere in the bundle (export)",
             "host_secret_function" not in names and "host_secret_helper" not in names,
             re.findall(r'.{0,80}host_secret.{0,80}', names)[:3].__str__())
    blob = store / "blobs" / "sha256" / digest[:2] / digest
    ck.check(f"{t}: host_secret_function nowhere in the bundle's bytes",
             blob.is_file() and b"host_secret" not in blob.read_bytes(), str(blob))
    insp = e.sp("bundle", "inspect", f"sha256:{digest}", "--store", store, timeout=30)
    ck.check(f"{t}: host_secret_function nowhere in bundle inspect", "host_secret" not in insp.stdout,
             insp.stdout)
    if mb:
        addr = symbol_address(e.host_secret, "host_secret_function")
        look = e.sp("bundle", "lookup", f"sha256:{digest}", "--store", store, "--build-id", BUILD_ID_B2,
                    f"{addr:#x}", timeout=30)
        ck.check(f"{t}: bundle lookup of host_secret_function's address is not host_secret_function",
                 look.returncode == 0 and "host_secret" not in look.stdout, look.stdout + look.stderr)
        if not symlink:
            caddr = symbol_address(e.libsecret, "attacker_names_this")
            look2 = e.sp("bundle", "lookup", f"sha256:{digest}", "--store", store, "--build-id", BUILD_ID_B2,
                         f"{caddr:#x}", timeout=30)
            ck.check(f"{t}: bundle lookup names the container's attacker_names_this",
                     look2.stdout.splitlines()[:1] == ["attacker_names_this"], look2.stdout + look2.stderr)


# ---------------------------------------------------------------------------------------------
# Attack 2c: hostile debug-info paths. A library of the container names debug files by paths
# (.gnu_debugaltlink, a split-DWARF skeleton's comp_dir + dwo_name, .gnu_debuglink); the host
# holds files at those paths. They are the target's paths: never opened from the host's root.

LIB2C_C = r"""
/* Attack 2c: the container's library PFX. Its function names live in debug info that the
   library finds through a path (dwz file, .dwo, debug link); the host's file at that path
   carries other names (host_only_PFX_*) at the same places. pause() is called inside the
   inlined function, so the library frame's return address has an inline chain. */
#include <unistd.h>

static inline __attribute__((always_inline)) int PFX_ctr_inline_fn(volatile int *acc, int x) {
    for (int i = 0; i < x; i++) *acc += i;
    pause();
    return *acc;
}

static __attribute__((noinline)) int PFX_ctr_static_fn(void) {
    volatile int acc = 0;
    return PFX_ctr_inline_fn(&acc, 5);
}

__attribute__((noinline)) void PFX_ctr_visible_fn(void) {
    for (;;)
        if (PFX_ctr_static_fn() == 0x7fffffff) break;
}
"""

APP2C_C = r"""
/* Attack 2c's workload: print "ready", then block in the library (ENTRY -> ... -> pause). */
#include <stdio.h>

extern void ENTRY(void);

int main(void) {
    printf("ready\n");
    fflush(stdout);
    ENTRY();
    return 0;
}
"""

KINDS_2C = ("dwz", "splitdwarf", "debuglink")
PFX_2C = {"dwz": "dwz", "splitdwarf": "split", "debuglink": "dlink"}


def names_2c(kind: str) -> dict[str, str]:
    """The container's function names of KIND's library -> the host file's names (same lengths)."""
    p = PFX_2C[kind]
    m = {f"{p}_ctr_visible_fn": f"host_only_{p}_name", f"{p}_ctr_static_fn": f"host_only_{p}_sta",
         f"{p}_ctr_inline_fn": f"host_only_{p}_inl"}
    assert all(len(a) == len(b) for a, b in m.items()), m
    return m


def patch_names(src: Path, dest: Path, mapping: dict[str, str]) -> None:
    """Copy SRC to DEST with every container name of MAPPING replaced by the host's (same length).

    Offsets, sizes, build-id and dwo_id stay those of SRC: the host file is what the container's
    library would read through its path, with names only the host carries.
    """
    data = src.read_bytes()
    for old, new in mapping.items():
        if old.encode() not in data:
            raise ct.ContainerError(f"{src}: no {old} to patch")
        data = data.replace(old.encode(), new.encode())
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    os.chown(dest, 0, 0)
    os.chmod(dest, 0o600)


class Lib2c:
    """One 2c library: its build file, path in the container, host-only files and names."""

    def __init__(self, kind: str, lib: Path, inside: str, app: Path, host_only: list[Path],
                 host_lookups: list[str], extra_files: dict[str, Path]):
        """KIND, the library LIB (built), its path INSIDE the container, the program APP, the
        HOST_ONLY files (the host's debug files at the paths it names), HOST_LOOKUPS (host paths
        that must not even be tried), EXTRA_FILES (the container's own files: inside -> source)."""
        self.kind = kind
        self.lib = lib
        self.inside = inside
        self.app = app
        self.host_only = host_only
        self.host_lookups = host_lookups
        self.extra_files = extra_files
        self.names = names_2c(kind)
        self.build_id = ""
        # The inlined function the container's own debug info names in the frame (None: none there).
        self.inline_control: str | None = None


def build_2c(e: Env) -> dict[str, Lib2c]:
    """Build the three 2c libraries, their programs and the host-only debug files (under e.srv)."""
    gcc = ["gcc", "-g", "-O1", "-shared", "-fPIC"]
    (e.src / "app2c.c").write_text(APP2C_C)
    libs: dict[str, Lib2c] = {}
    for kind in KINDS_2C:
        p = PFX_2C[kind]
        (e.src / f"lib{p}.c").write_text(LIB2C_C.replace("PFX", p))

    # (a) dwz: the library's names moved to a supplementary file (dwz -m over it and a twin);
    # its .gnu_debugaltlink replaced by the host-only path + NUL (no build-id). The host's file at
    # that path is the supplementary file with the host's names.
    lib = e.cbuild / "libdwz.so"
    alt_host = e.srv / "host-dwz.debug"
    ct.run([*gcc, "-Wl,-soname,libdwz.so", "-o", lib, e.src / "libdwz.c"], timeout=60)
    twin = e.cbuild / "libdwz-twin.so"
    shutil.copyfile(lib, twin)
    common = e.cbuild / "dwz-common.debug"
    ct.run(["dwz", "-m", common, "-M", alt_host, lib, twin], timeout=60)
    ct.run(["objcopy", "--remove-section", ".gnu_debugaltlink", lib], timeout=30)
    link = e.cbuild / "altlink-nobuildid.bin"
    link.write_bytes(str(alt_host).encode() + b"\0")
    ct.run(["objcopy", "--add-section", f".gnu_debugaltlink={link}", "--set-section-flags",
            ".gnu_debugaltlink=readonly", lib], timeout=30)
    patch_names(common, alt_host, names_2c("dwz"))
    libs["dwz"] = Lib2c("dwz", lib, "/lib/libdwz.so", e.cbuild / "app_dwz", [alt_host], [str(alt_host)], {})

    # (b) split DWARF: compiled in SRV/build, a directory only the host has; the skeleton names
    # comp_dir SRV/build and dwo_name libsplit.dwo. The host's .dwo there has the host's names
    # (same dwo_id); the container has no .dwo at that path, only the build's own next to its
    # library (/lib/libsplit.dwo, the container's names: the control).
    bdir = e.srv / "build"
    bdir.mkdir(mode=0o700)
    ct.run(["gcc", "-c", "-g", "-O1", "-fPIC", "-gsplit-dwarf", "-o", "libsplit.o", e.src / "libsplit.c"],
           timeout=60, cwd=bdir)
    lib = e.cbuild / "libsplit.so"
    ct.run(["gcc", "-shared", "-Wl,-soname,libsplit.so", "-o", lib, bdir / "libsplit.o"], timeout=60)
    (bdir / "libsplit.o").unlink()
    dwo = bdir / "libsplit.dwo"
    ctr_dwo = e.cbuild / "libsplit.ctr.dwo"  # the build's own .dwo (container names), for setup checks
    shutil.move(dwo, ctr_dwo)
    patch_names(ctr_dwo, dwo, names_2c("splitdwarf"))
    libs["splitdwarf"] = Lib2c("splitdwarf", lib, "/lib/libsplit.so", e.cbuild / "app_split", [dwo], [str(dwo)],
                               {"/lib/libsplit.dwo": ctr_dwo})
    libs["splitdwarf"].inline_control = "split_ctr_inline_fn"

    # (c) debug link: the library stripped (no .symtab, no DWARF) with .gnu_debuglink libdlink.debug
    # (the CRC of the host's file) at SRV/libdlink.so in the container. The host has that debug
    # file next to where the container's library is, and in its .debug/ (the host's names, the
    # library's build-id). The container's own debug file is at its /usr/lib/debug/.build-id/.
    full = e.cbuild / "libdlink.full.so"
    ct.run([*gcc, "-Wl,-soname,libdlink.so", "-o", full, e.src / "libdlink.c"], timeout=60)
    ctr_debug = e.cbuild / "libdlink.ctr.debug"
    ct.run(["objcopy", "--only-keep-debug", full, ctr_debug], timeout=30)
    host_dbg = [e.srv / "libdlink.debug", e.srv / ".debug" / "libdlink.debug"]
    for h in host_dbg:
        patch_names(ctr_debug, h, names_2c("debuglink"))
    lib = e.cbuild / "libdlink.so"
    ct.run(["objcopy", "--strip-all", full, lib], timeout=30)
    ct.run(["objcopy", f"--add-gnu-debuglink={host_dbg[0]}", lib], timeout=30)
    bid = elf_build_id(lib)
    inside = str(e.srv / "libdlink.so")
    lookups = [f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug", f"/usr/lib/debug{e.srv}/libdlink.debug",
               *[str(h) for h in host_dbg]]
    libs["debuglink"] = Lib2c("debuglink", lib, inside, e.cbuild / "app_dlink", host_dbg, lookups,
                              {f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug": ctr_debug})
    libs["debuglink"].inline_control = "dlink_ctr_inline_fn"

    for kind, L in libs.items():
        L.build_id = elf_build_id(L.lib)
        ct.run(["gcc", "-g", "-O1", f"-DENTRY={PFX_2C[kind]}_ctr_visible_fn", "-o", L.app, e.src / "app2c.c",
                L.lib, f"-Wl,-rpath,{os.path.dirname(L.inside)}"], timeout=60)
    return libs


def dump_section(path: Path, name: str, out: Path) -> bytes | None:
    """The bytes of section NAME of PATH (objcopy --dump-section), or None when it has none."""
    p = ct.run(["objcopy", "--dump-section", f"{name}={out}", path, out.with_suffix(".scratch")], timeout=30,
               check=False)
    out.with_suffix(".scratch").unlink(missing_ok=True)
    if p.returncode != 0 or not out.exists():
        return None
    data = out.read_bytes()
    out.unlink()
    return data


def check_setup_2c(e: Env, ck: Checks, libs: dict[str, Lib2c]) -> None:
    """The 2c libraries are armed: each path names a host-only file that would name its frames."""
    tmp = e.cbuild / "section.bin"
    L = libs["dwz"]
    alt = dump_section(L.lib, ".gnu_debugaltlink", tmp)
    ck.check("setup/2c-dwz: .gnu_debugaltlink is the host-only path + NUL, an empty build-id",
             alt == str(L.host_only[0]).encode() + b"\0", repr(alt))
    info = ct.run(["readelf", "--debug-dump=info", L.lib], timeout=30, check=False).stdout
    offs = {int(o, 16) for o in re.findall(r"DW_AT_name\s*: \(alt indirect string, offset: (0x[0-9a-f]+)\)", info)}

    def strings_at(path: Path) -> set[str]:
        dump = ct.run(["readelf", "-p", ".debug_str", path], timeout=30, check=False).stdout
        return {m.group(2) for m in re.finditer(r"^\s*\[\s*([0-9a-f]+)\]\s+(.*)$", dump, re.M)
                if int(m.group(1), 16) in offs}

    ctr, host = strings_at(e.cbuild / "dwz-common.debug"), strings_at(L.host_only[0])
    ck.check("setup/2c-dwz: the library's DWARF names its functions only through the dwz file "
             "(DW_AT_name DW_FORM_GNU_strp_alt): the build's dwz file has the container's names there, "
             "the host's file at the link's path the host's",
             not any(n in info for n in L.names) and ctr and ctr <= set(L.names)
             and host == {L.names[n] for n in ctr}, f"offsets {sorted(offs)}: build {ctr}, host {host}")
    alt_strs = ct.run(["readelf", "-p", ".debug_str", L.host_only[0]], timeout=30).stdout
    ck.check("setup/2c-dwz: the inlined function's name (in a partial unit of the dwz file) is the host's "
             "there too", L.names["dwz_ctr_inline_fn"] in alt_strs and "dwz_ctr_inline_fn" not in alt_strs,
             alt_strs)
    L = libs["splitdwarf"]
    info = ct.run(["readelf", "--debug-dump=info", L.lib], timeout=30, check=False).stdout
    dwo = L.host_only[0]
    comp = re.search(r"DW_AT_comp_dir\s*:.*: (\S+)\s*$", info, re.M)
    name = re.search(r"DW_AT_dwo_name\s*:.*: (\S+)\s*$", info, re.M)
    strs = ct.run(["readelf", "-p", ".debug_str.dwo", dwo], timeout=30, check=False).stdout
    ck.check("setup/2c-splitdwarf: the skeleton's comp_dir + dwo_name is the host-only .dwo, whose strings "
             "are the host's names",
             comp is not None and name is not None and Path(comp.group(1)) / name.group(1) == dwo
             and all(n in strs for n in L.names.values()) and not any(n in strs for n in L.names),
             f"comp_dir {comp and comp.group(1)}, dwo_name {name and name.group(1)}; {strs}")
    ids = re.findall(r"DWO ID:\s*(0x[0-9a-f]+)", info)
    ctr_ids = re.findall(r"DWO ID:\s*(0x[0-9a-f]+)",
                         ct.run(["readelf", "--debug-dump=info", e.cbuild / "libsplit.ctr.dwo"], timeout=30).stdout)
    ck.check("setup/2c-splitdwarf: skeleton, host .dwo and the build's .dwo share the dwo_id",
             len(set(ids)) == 1 and ids and ctr_ids == ids[:1], f"{ids} {ctr_ids}")
    L = libs["debuglink"]
    link = dump_section(L.lib, ".gnu_debuglink", tmp) or b""
    crc = struct.unpack("<I", link[-4:])[0] if len(link) >= 8 else None
    host_crcs = {zlib.crc32(h.read_bytes()) for h in L.host_only}
    secs = ct.run(["readelf", "-S", "-W", L.lib], timeout=30).stdout
    ck.check("setup/2c-debuglink: the library has no .symtab nor DWARF, its .gnu_debuglink names "
             "libdlink.debug with the host files' CRC",
             link.startswith(b"libdlink.debug\0") and host_crcs == {crc} and ".symtab" not in secs
             and ".debug_info" not in secs, f"link {link!r}, crc {crc}, host {host_crcs}")
    ids = {str(p): elf_build_id(p) for p in [*L.host_only, *L.extra_files.values()]}
    ck.check("setup/2c-debuglink: the host's debug files and the container's carry the library's build-id",
             set(ids.values()) == {L.build_id}, f"{L.build_id}: {ids}")


LOOKUP_CALLS = ("openat,openat2,open,newfstatat,statx,stat,lstat,access,faccessat,faccessat2,"
                "readlink,readlinkat")
_STRACE_ANY = re.compile(r"^([a-z0-9_]+)\((.*)\)\s+=\s+(-?\d+)(?:<(.*)>)?(.*)$")


def parse_strace_lookups(text: str) -> list[dict]:
    """Every path lookup (LOOKUP_CALLS) of an `strace -f -y` log, unfinished/resumed joined.

    Each: {call, dirfd, dirfd_path, path, in_root, ret, line}. A debug file looked up with
    stat() before it is opened shows here even when it does not exist.
    """
    names = set(LOOKUP_CALLS.split(","))
    out: list[dict] = []
    pending: dict[str, str] = {}
    for raw in text.splitlines():
        m = re.match(r"^(\d+)\s+(.*)$", raw)
        pid, rest = (m.group(1), m.group(2)) if m else ("0", raw)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        r = re.match(r"^<\.\.\. \w+ resumed>(.*)$", rest)
        if r:
            rest = pending.pop(pid, "") + r.group(1)
        c = _STRACE_ANY.match(rest)
        if not c or c.group(1) not in names:
            continue
        call, args = c.group(1), c.group(2)
        dirfd = dirfd_path = path = None
        if call in ("open", "stat", "lstat", "access", "readlink"):
            pm = re.match(_STRACE_STR, args)
            path = pm.group(1) if pm else None
        else:
            dm = re.match(r"^([^,<]+)(?:<([^>]*)>)?,\s*" + _STRACE_STR, args)
            if dm:
                dirfd, dirfd_path, path = dm.group(1).strip(), dm.group(2), dm.group(3)
        out.append({"call": call, "dirfd": dirfd, "dirfd_path": dirfd_path, "path": path,
                    "in_root": call == "openat2" and ("RESOLVE_IN_ROOT" in args or "RESOLVE_BENEATH" in args),
                    "ret": int(c.group(3)), "line": raw})
    return out


def host_lookups(calls: list[dict], paths: list[str]) -> list[str]:
    """The strace lines that looked one of PATHS up from the host's root, failed ones too.

    CALLS from parse_strace_lookups(). Unlike host_opens(), a lookup that found nothing
    (ENOENT) counts, and stat()s do: the host's /usr/lib/debug is not written by this test, so
    a host lookup there shows only as a failed stat or open. A path is from the host's root
    when it is absolute (openat2 in-root excepted) or relative to AT_FDCWD.
    """
    bad = []
    for c in calls:
        path = c["path"]
        if path is None or c["in_root"]:
            continue
        if path.startswith("/"):
            full = path
        elif c["dirfd"] in (None, "AT_FDCWD"):
            full = os.path.join(c["dirfd_path"] or "/", path)
        else:
            continue
        if os.path.normpath(full) in paths:
            bad.append(c["line"])
    return bad


def run_group(cmd: list, timeout: float) -> subprocess.CompletedProcess:
    """Run CMD (text stdout/stderr captured) in a process group of its own; SIGKILL the group on
    a timeout or an interruption (SIGTERM's SystemExit), so that strace's tracee (stackprov)
    never outlives strace and writes into a run directory being removed (strace 6.1 has no
    --kill-on-exit)."""
    p = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def strace_lookups(e: Env, args: list, strace_out: Path) -> subprocess.CompletedProcess:
    """stackprov ARGS under strace -f -y (LOOKUP_CALLS: the opens and the stat family) into STRACE_OUT."""
    return run_group(["strace", "-f", "-y", "-e", f"trace={LOOKUP_CALLS}", "-o", strace_out, e.stackprov, *args],
                     timeout=120)


def strace_stack(e: Env, pid: int, strace_out: Path) -> subprocess.CompletedProcess:
    """stack -p PID --json under strace_lookups() into STRACE_OUT."""
    return strace_lookups(e, ["stack", "-p", str(pid), "--json"], strace_out)


def lib_frames(stack_json: str, lib_name: str) -> list[dict]:
    """The frames of `stack --json` output whose module is LIB_NAME (basename), every thread."""
    try:
        doc = json.loads(stack_json)
    except ValueError:
        return []
    return [f for t in doc.get("threads", []) for f in t.get("frames", [])
            if os.path.basename(f.get("module") or "") == lib_name]


def attack2c(e: Env, ck: Checks, variant: str, work: Path, L: Lib2c) -> None:
    """Hostile debug-info paths (see the module docstring, 2c)."""
    t = f"{variant}/attack2c-{L.kind}"
    tag = f"2c{L.kind}"
    store = work / f"store{tag}"
    lib_name = os.path.basename(L.inside)
    root = ct.build_root(work / f"root{tag}", L.app, files={L.inside: L.lib, **L.extra_files},
                         skip_deps=(lib_name,))
    ck.check(f"{t}: the host-only debug files do not exist in the container root",
             not any((root / str(h).lstrip("/")).exists() for h in L.host_only))
    host_names = list(L.names.values())
    ctr_names = list(L.names.keys())
    watch: Inotify | None = None
    stack: list = []
    cap_strace, stk_strace = work / f"strace{tag}.txt", work / f"strace{tag}-stack.txt"
    db = work / f"t{tag}.db"
    try:
        _c, pid = start_container(e, stack, root, variant, work, [], work / f"container{tag}.log")
        maps = Path(f"/proc/{pid}/maps").read_text()
        ck.check(f"{t}: the workload maps {L.inside}", L.inside in maps, maps[-800:])
        watch = Inotify(L.host_only)
        cap = strace_lookups(e, ["trace-capture", "-p", str(pid), "--store", f"sqlite:{db}", "--bundle",
                                 "--bundle-store", store], cap_strace)
        stk = strace_stack(e, pid, stk_strace)
        events = watch.drain()
    finally:
        unwind(stack)
        if watch:
            watch.close()
    (work / f"cap{tag}.err").write_text(cap.stderr)
    (work / f"stack{tag}.out").write_text(stk.stdout + stk.stderr)
    digest = capture_summary_bundle(cap.stderr)
    ck.check(f"{t}: trace-capture exits 0 and names its bundle", cap.returncode == 0 and digest is not None,
             f"exit {cap.returncode}; stderr: {cap.stderr}")
    trace_id = cap.stdout.strip().splitlines()[-1] if cap.stdout.strip() else ""
    for what, path in (("trace-capture", cap_strace), ("stack -p", stk_strace)):
        text = path.read_text(errors="replace") if path.exists() else ""
        calls = parse_strace_opens(text)
        ck.check(f"{t}: {what}: strace saw the opens", len(calls) > 0, text[-500:])
        bad = host_opens(calls, [str(h) for h in L.host_only], [str(h) for h in L.host_only])
        ck.check(f"{t}: {what}: strace: no host-only debug file opened from the host's root", not bad,
                 "\n".join(bad[:10]))
        tried = host_lookups(parse_strace_lookups(text), L.host_lookups)
        ck.check(f"{t}: {what}: strace: no lookup (open or stat, failed ones too) of the debug paths in the "
                 "host's root",
                 not tried, "\n".join(tried[:10]))
    ck.check(f"{t}: inotify: the host-only debug files were never opened nor read", not events,
             "; ".join(events[:10]))
    if L.kind == "dwz":
        refused = re.search(r"without a build-id", cap.stderr + stk.stderr)
        print(f"# {t}: the dwz link without a build-id is " +
              ("reported on stderr" if refused else "not mentioned on stderr"), flush=True)

    def leaked(text: str) -> list[str]:
        return [n for n in host_names if n in text]

    ck.check(f"{t}: no host-only name in trace-capture's output", not leaked(cap.stdout + cap.stderr),
             str(leaked(cap.stdout + cap.stderr)))
    ck.check(f"{t}: no host-only name in stack -p's output", not leaked(stk.stdout + stk.stderr),
             str(leaked(stk.stdout + stk.stderr)))
    frames = lib_frames(stk.stdout, lib_name)
    visible = ctr_names[0] if L.kind != "debuglink" else ctr_names[1]
    named = {f.get("function") for f in frames} | {f.get("resolved_function") for f in frames}
    # debuglink: the stripped library's static function is named only by the container's own
    # debug file (its /usr/lib/debug/.build-id), looked up in its root.
    ck.check(f"{t}: control: stack -p names the container's frame {visible} ({lib_name})",
             stk.returncode == 0 and visible in named, f"exit {stk.returncode}; frames {frames}; {stk.stderr}")
    show = e.sp("trace-show", trace_id, "--store", f"sqlite:{db}", timeout=30) if trace_id else None
    show_text = (show.stdout + show.stderr) if show else ""
    ck.check(f"{t}: no host-only name in trace-show", show is not None and not leaked(show_text),
             str(leaked(show_text)))
    ck.check(f"{t}: control: trace-show names the container's frame {visible} ({lib_name})",
             show is not None and show.returncode == 0
             and any(visible in ln and lib_name in ln for ln in show.stdout.splitlines()), show_text)
    if L.inline_control:
        # The container's own debug info (its .dwo next to the library, its build-id debug file)
        # is found in its root and names the inlined function of the frame.
        static = ctr_names[1]  # the frame whose return address is in the inlined code
        chains = [[i.get("function") for i in f.get("inlined", [])] for f in frames if f.get("function") == static]
        ck.check(f"{t}: control: stack -p's {static} frame has the inline chain [{L.inline_control}] "
                 "from the container's own debug info", chains == [[L.inline_control]], str(chains))
        ck.check(f"{t}: control: trace-show has 'inlined {L.inline_control}'",
                 f"inlined {L.inline_control} at" in show_text, show_text)
    if digest is None:
        return
    names = bundle_names(e, digest, store)
    ck.check(f"{t}: no host-only name in the bundle (export)", not leaked(names), str(leaked(names)))
    blob = store / "blobs" / "sha256" / digest[:2] / digest
    ck.check(f"{t}: no host-only name in the bundle's bytes",
             blob.is_file() and not leaked(blob.read_bytes().decode("latin-1")), str(blob))
    # The library's innermost frame (the static function, in the inlined code): its return
    # address - 1, as a symbolizer looks it up, so the bundle's inline chain is asked too.
    inner = min(frames, key=lambda f: f.get("index", 0), default=None)
    if not ck.check(f"{t}: stack -p has a frame in {lib_name}", inner is not None, stk.stdout[-1500:]):
        return
    addr = int(inner["module_offset"], 16) - 1
    look = e.sp("bundle", "lookup", f"sha256:{digest}", "--store", store, "--build-id", L.build_id,
                f"{addr:#x}", timeout=30)
    lines = look.stdout.splitlines()
    funcs = []
    for i in range(0, len(lines), 2):  # function, file:line:column, ..., then an empty line
        if not lines[i]:
            break
        funcs.append(lines[i])
    ck.check(f"{t}: bundle lookup of the frame's address names no host-only function",
             look.returncode == 0 and not leaked(look.stdout), look.stdout + look.stderr)
    want = ([L.inline_control] if L.inline_control else []) + [ctr_names[1]]
    ck.check(f"{t}: control: bundle lookup of the frame's address names the container's "
             f"{' in '.join(want)}", funcs[-len(want):] == want and (L.inline_control is None or funcs == want),
             look.stdout + look.stderr)

def finding_2c_stat_escape(e: Env, ck: Checks, variant: str, work: Path, L: Lib2c) -> None:
    """A lookup of a container's debug path must not leave its root, not even through stat().

    The container's /usr/lib/debug/.build-id/xx/yyyy.debug (the debuglink library's build-id) is
    an absolute symlink to the host-only debug file: dangling in the container's root. A lookup
    inside that root finds nothing; stat("/proc/PID/root/usr/lib/...") follows the symlink from
    the caller's (the host's) root and finds the host file. find_debug_file stats inside the
    root (stat_path, RESOLVE_IN_ROOT) since this check found the stat escaping it.
    """
    t = f"{variant}/finding-2c-debuglink-symlink"
    lib_name = os.path.basename(L.inside)
    bid_inside = next(iter(L.extra_files))
    root = ct.build_root(work / "root2cfind", L.app, files={L.inside: L.lib}, skip_deps=(lib_name,))
    link = root / bid_inside.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(str(L.host_only[0]), link)
    stack: list = []
    watch: Inotify | None = None
    out = work / "strace2cfind-stack.txt"
    try:
        _c, pid = start_container(e, stack, root, variant, work, [], work / "container2cfind.log")
        watch = Inotify(L.host_only)
        stk = strace_stack(e, pid, out)
        events = watch.drain()
    finally:
        unwind(stack)
        if watch:
            watch.close()
    text = out.read_text(errors="replace") if out.exists() else ""
    bad = host_opens(parse_strace_opens(text), [str(h) for h in L.host_only], [str(h) for h in L.host_only])
    ck.check(f"{t}: stack -p: strace: no host-only debug file opened", not bad, "\n".join(bad[:10]))
    ck.check(f"{t}: inotify: the host-only debug files were never opened nor read", not events,
             "; ".join(events[:10]))
    want = f"/proc/{pid}/root{bid_inside}"
    escaped = [c["line"] for c in parse_strace_lookups(text) if c["ret"] >= 0 and c["path"] == want]
    ck.check(f"{t}: stack -p: no lookup of {bid_inside} (a dangling symlink in the container's root) "
             "succeeds: one that does resolved it against the host's root", not escaped, "\n".join(escaped[:5]))
    leaked = [n for n in L.names.values() if n in stk.stdout + stk.stderr]
    ck.check(f"{t}: no host-only name in stack -p's output", not leaked, str(leaked))


def run_measured(cmd: list, timeout: float, out: Path, err: Path) -> tuple[int | None, float, int]:
    """Run CMD alone (stdout/stderr to files): (exit status or None if killed at TIMEOUT, wall s, maxrss KiB).

    The rusage is CMD's own (os.wait4 on its pid), not that of other children.
    """
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t0 = time.monotonic()
        p = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
        killed = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                killed = True
                break
            time.sleep(0.01)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    return (None if killed else p.returncode), wall, ru.ru_maxrss


def attack3(e: Env, ck: Checks, variant: str, work: Path) -> None:
    """Unbounded work: the library grown to 4 TiB (see the module docstring, 3)."""
    t = f"{variant}/attack3-4TiB"
    root = ct.build_root(work / "root3", e.app_evil, files={"/lib/libevil.so": e.libevil})
    lib = root / "lib" / "libevil.so"
    ino = os.stat(lib).st_ino
    stack: list = []
    try:
        _c, pid = start_container(e, stack, root, variant, work, ["grow", "/lib/libevil.so"],
                                  work / "container3.log")
        st = os.stat(lib)
        ck.check(f"{t}: the workload grew its mapped library to 4 TiB (same inode)",
                 st.st_size == GROW_SIZE and st.st_ino == ino, f"size {st.st_size}, inode {st.st_ino} vs {ino}")
        cmd = [e.stackprov, "trace-capture", "-p", str(pid), "--store", f"sqlite:{work / 't3.db'}", "--bundle",
               "--bundle-store", work / "store3"]
        # Killed at 3x the limit: a stackprov that hangs (or bloats) fails fast, not after minutes.
        rc, wall, rss = run_measured(cmd, 3 * WALL_LIMIT_S, work / "cap3.out", work / "cap3.err")
    finally:
        unwind(stack)
    err = (work / "cap3.err").read_text(errors="replace")
    ck.check(f"{t}: trace-capture ends (exit 0 or 1) within {WALL_LIMIT_S:.0f} s",
             rc in (0, 1) and wall <= WALL_LIMIT_S, f"exit {rc}, {wall:.2f} s; stderr: {err[-1500:]}")
    ck.check(f"{t}: trace-capture max RSS <= 256 MiB", rss <= RSS_LIMIT_KIB, f"{rss} KiB")
    ck.check(f"{t}: stderr names the file and its size ({GROW_SIZE} bytes, above the limit)",
             re.search(rf"libevil\.so\S* is {GROW_SIZE} bytes, above the limit of", err) is not None, err[-1500:])
    print(f"# {t}: exit {rc}, {wall:.2f} s wall, max RSS {rss} KiB", flush=True)


def kill_containers_under(run_dir: Path) -> None:
    """SIGKILL the containers (unshare and its workload) whose root is under RUN_DIR, and reap nothing.

    For the leftovers of a killed run: their unshare processes are no children of ours.
    """
    prefix = (str(run_dir) + "/").encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0] == ct.UNSHARE.encode() and any(a.startswith(prefix) for a in argv[1:]):
            for pid in ct.children(int(entry)) + [int(entry)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def cleanup_stale(build_dir: Path) -> None:
    """Remove what killed earlier runs left: /srv/stackprov-test-* and overlay mounts under BUILD_DIR.

    Only those whose owning test process (its .owner-pid file) is gone are touched.
    """
    def dead(owner_file: Path) -> bool:
        try:
            os.kill(int(owner_file.read_text().strip()), 0)
            return False
        except (OSError, ValueError):
            return True

    for d in Path("/srv").glob("stackprov-test-*"):
        if dead(d / ".owner-pid"):
            shutil.rmtree(d, ignore_errors=True)
    for run_dir in build_dir.glob("run-*"):
        if not dead(run_dir / ".owner-pid"):
            continue
        kill_containers_under(run_dir)
        with open("/proc/self/mountinfo") as f:
            mounts = [ln.split()[4] for ln in f]
        for mp in sorted((m for m in mounts if m.startswith(str(run_dir) + "/")), reverse=True):
            ct.run(["umount", "-l", mp], timeout=20, check=False)
        shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Parse STACKPROV BUILD_DIR [--keep], run every attack in both variants, print the checks."""
    args = [a for a in argv[1:] if a != "--keep"]
    keep = "--keep" in argv[1:]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    stackprov = Path(args[0]).resolve()
    build_dir = Path(args[1]).resolve()
    if not os.access(stackprov, os.X_OK):
        print(f"{stackprov}: not an executable", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (namespaces, mounts, ptrace of another user's process)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    build_dir.mkdir(parents=True, exist_ok=True)
    cleanup_stale(build_dir)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=build_dir))
    (run_dir / ".owner-pid").write_text(str(os.getpid()))
    srv = Path("/srv") / f"stackprov-test-{secrets.token_hex(6)}"
    ck = Checks()
    t0 = time.monotonic()
    try:
        e = Env(stackprov, run_dir, srv)
        build_everything(e)
        check_setup(e, ck)
        for variant in ("plain", "overlay"):
            work = run_dir / variant
            work.mkdir()
            for name, fn in (("attack1", lambda: attack1(e, ck, variant, work)),
                             ("attack2-samepath", lambda: attack2(e, ck, variant, work, symlink=False)),
                             ("attack2-symlink", lambda: attack2(e, ck, variant, work, symlink=True)),
                             *((f"attack2c-{k}", lambda k=k: attack2c(e, ck, variant, work, e.libs2c[k]))
                               for k in KINDS_2C),
                             ("attack2c-debuglink-symlink",
                              lambda: finding_2c_stat_escape(e, ck, variant, work, e.libs2c["debuglink"]))):
                try:
                    fn()
                except Exception as exc:  # noqa: BLE001 - report and go on with the next scenario
                    ck.error(f"{variant}/{name}: ran to its end", exc)
        work = run_dir / "plain"
        try:
            attack3(e, ck, "plain", work)
        except Exception as exc:  # noqa: BLE001
            ck.error("plain/attack3-4TiB: ran to its end", exc)
    except Exception as exc:  # noqa: BLE001
        ck.error("setup: ran to its end", exc)
    finally:
        shutil.rmtree(srv, ignore_errors=True)
        with open("/proc/self/mountinfo") as f:
            left = [ln.split()[4] for ln in f if ln.split()[4].startswith(str(run_dir) + "/")]
        for mp in sorted(left, reverse=True):
            ct.run(["umount", "-l", mp], timeout=20, check=False)
        if keep:
            print(f"# kept {run_dir}", flush=True)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(f"{ck.passed} passed, {len(ck.failed)} failed ({time.monotonic() - t0:.1f} s)", flush=True)
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
