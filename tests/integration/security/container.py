# SPDX-License-Identifier: Apache-2.0
"""A minimal "container" for integration tests: real Linux namespaces, no runtime.

A container here is a process started as

    unshare -m -p -f --propagation private <launcher> ROOT /prog ARGS...

where <launcher> is container_init (container_init.c beside this file, built static):
it makes ROOT the root of the new mount namespace with pivot_root, mounts a fresh /proc
for the new pid namespace, detaches the old root and execs /prog. ROOT is either a plain
directory (build_root) or an overlayfs mount whose lower layer is such a directory
(Overlay). The workload (the process after exec, pid 1 of the new pid namespace) is the
child of the unshare process; Container.workload_pid is its pid on the host.

Everything runs with timeouts; Container and Overlay clean up after themselves (kill the
processes, unmount) in their stop()/unmount() methods and as context managers.

Python 3.11, standard library only. Needs root (namespaces, mounts, pivot_root).
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHER_SOURCE = HERE / "container_init.c"
UNSHARE = "/usr/bin/unshare"

DEFAULT_TIMEOUT = 60.0


class ContainerError(RuntimeError):
    """A container could not be built, started or stopped."""


def run(cmd, timeout: float = DEFAULT_TIMEOUT, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run CMD (a list) with a timeout, capturing text stdout/stderr.

    Raises ContainerError when CHECK and the exit status is not 0 (stderr in the message),
    subprocess.TimeoutExpired (the child killed) when it runs longer than TIMEOUT seconds.
    """
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("text", True)
    proc = subprocess.run([str(c) for c in cmd], timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise ContainerError(
            f"{' '.join(str(c) for c in cmd)}: exit {proc.returncode}: {(proc.stderr or '').strip()[-2000:]}")
    return proc


def compile_launcher(host_tmp: Path, source: Path = LAUNCHER_SOURCE) -> Path:
    """Compile container_init.c (static, -O2) into the host directory HOST_TMP.

    The launcher runs before pivot_root only, so it is never copied into a root.
    Returns the path of the binary.
    """
    host_tmp.mkdir(parents=True, exist_ok=True)
    out = host_tmp / "container_init"
    run(["gcc", "-static", "-O2", "-Wall", "-o", out, source], timeout=60)
    return out


_DEPS: dict[tuple, list[Path]] = {}


def shared_library_deps(program: Path) -> list[Path]:
    """The host files `ldd PROGRAM` names (the dynamic loader included).

    Libraries ldd reports as "not found" (the container's own libraries, which exist
    only under the root) are left out; the caller copies those itself. One ldd per
    program file (path, inode, size and mtime): a test builds many roots for few programs.
    """
    st = os.stat(program)
    key = (str(program), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DEPS:
        _DEPS[key] = _ldd_deps(program)
    return list(_DEPS[key])


def _ldd_deps(program: Path) -> list[Path]:
    """shared_library_deps() without the cache."""
    out = run(["ldd", program], timeout=30).stdout
    deps: list[Path] = []
    for line in out.splitlines():
        line = line.strip()
        if "not found" in line or line.startswith("linux-vdso") or line.startswith("linux-gate"):
            continue
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"(/\S+)", line)
        if m:
            deps.append(Path(m.group(1)))
    return deps


def _copy_into(root: Path, inside: str, source: Path, mode: int | None = None) -> Path:
    """Copy SOURCE (following symlinks) to ROOT/INSIDE, creating parent directories."""
    dest = root / inside.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    os.chmod(dest, mode if mode is not None else (os.stat(source).st_mode & 0o7777))
    return dest


def build_root(root: Path, program: Path, program_inside: str = "/app",
               files: dict[str, Path] | None = None, skip_deps: tuple[str, ...] = ()) -> Path:
    """Lay out a container root directory at ROOT (created; must not exist yet).

    Copies PROGRAM to ROOT/PROGRAM_INSIDE, every library `ldd PROGRAM` finds on the host
    (dynamic loader and libc) at the same absolute path under ROOT -- except those whose
    basename is in SKIP_DEPS --, each of FILES (inside path -> host source: the container's
    own libraries), and creates the directories /proc, /tmp and /oldroot.
    """
    if root.exists():
        raise ContainerError(f"{root}: already exists")
    root.mkdir(parents=True, mode=0o755)
    for dep in shared_library_deps(program):
        if dep.name in skip_deps:
            continue
        _copy_into(root, str(dep), dep)
    _copy_into(root, program_inside, program, 0o755)
    for inside, source in (files or {}).items():
        _copy_into(root, inside, source, 0o755)
    for d in ("proc", "tmp", "oldroot"):
        (root / d).mkdir(exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    return root


def is_mountpoint(path: Path) -> bool:
    """Whether PATH is a mount point in the current mount namespace (/proc/self/mountinfo)."""
    target = str(Path(path).resolve())
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and fields[4].replace("\\040", " ") == target:
                return True
    return False


def children(pid: int) -> list[int]:
    """The pids of PID's children: /proc/PID/task/*/children, else a scan of /proc for their ppid."""
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    kids += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        return []
    if kids:
        return kids
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(entry))
    return kids


class Overlay:
    """An overlayfs mount: LOWER read-only, upper and work directories under WORKSPACE.

    mount() mounts it on WORKSPACE/merged and returns that path; unmount() undoes it
    (lazily when the mount is still busy) and removes the upper/work directories.
    """

    def __init__(self, lower: Path, workspace: Path):
        """Remember LOWER (the built root) and WORKSPACE (a directory of the test's)."""
        self.lower = Path(lower)
        self.workspace = Path(workspace)
        self.upper = self.workspace / "upper"
        self.work = self.workspace / "work"
        self.merged = self.workspace / "merged"
        self.mounted = False

    def mount(self) -> Path:
        """Mount the overlay on WORKSPACE/merged and return that path."""
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True, exist_ok=True)
        opts = f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}"
        run(["mount", "-t", "overlay", "overlay", "-o", opts, self.merged], timeout=20)
        self.mounted = True
        return self.merged

    def unmount(self) -> None:
        """Unmount the overlay (lazily if busy) and remove upper, work and merged."""
        if self.mounted or is_mountpoint(self.merged):
            proc = run(["umount", self.merged], timeout=20, check=False)
            if proc.returncode != 0 and is_mountpoint(self.merged):
                run(["umount", "-l", self.merged], timeout=20, check=False)
            self.mounted = False
        if not is_mountpoint(self.merged):
            for d in (self.merged, self.upper, self.work):
                shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> "Overlay":
        """Mount on entry."""
        self.mount()
        return self

    def __exit__(self, *exc) -> None:
        """Unmount on exit, whatever happened."""
        self.unmount()


class Container:
    """One container: `unshare -m -p -f --propagation private LAUNCHER ROOT PROG ARGS...`.

    start() starts it; wait_ready() waits until the workload prints READY_LINE on its
    stdout (a pipe) and returns its host pid; stop() kills it and reaps unshare. The
    workload's stderr goes to LOG (a host file) for diagnostics. ENV is the workload's
    whole environment (execv inherits it through unshare and the launcher).
    """

    def __init__(self, launcher: Path, root: Path, prog: str, args: list[str] | tuple = (),
                 env: dict[str, str] | None = None, log: Path | None = None):
        """Remember what to start; nothing runs until start()."""
        self.launcher = Path(launcher)
        self.root = Path(root)
        self.prog = prog
        self.args = [str(a) for a in args]
        self.env = env if env is not None else {"PATH": "/"}
        self.log = Path(log) if log else None
        self.proc: subprocess.Popen | None = None
        self._pid: int | None = None
        self._buf = b""
        self._log_file = None

    @property
    def argv(self) -> list[str]:
        """The host command line that starts the container."""
        return [UNSHARE, "-m", "-p", "-f", "--propagation", "private", str(self.launcher),
                str(self.root), self.prog, *self.args]

    def start(self) -> None:
        """Start the unshare process (the workload's stdout is a pipe to us)."""
        if self.proc is not None:
            raise ContainerError("already started")
        self._log_file = open(self.log, "wb") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._log_file, env=self.env, start_new_session=True)

    def _stderr_tail(self) -> str:
        """The last lines of the container's log, for error messages."""
        if not self.log:
            return ""
        try:
            return self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def read_line(self, deadline: float) -> str:
        """The workload's next stdout line, waiting at most until DEADLINE (time.monotonic)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ContainerError(f"no line from the workload in time; log: {self._stderr_tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise ContainerError(
                    f"workload stdout closed (exit {self.proc.poll()}); log: {self._stderr_tail()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def wait_ready(self, ready_line: str = "ready", timeout: float = 10.0) -> int:
        """Wait until the workload prints READY_LINE; return its host pid."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.read_line(deadline)
            if line.strip() == ready_line:
                break
        return self.workload_pid(deadline=deadline)

    def workload_pid(self, deadline: float | None = None) -> int:
        """The host pid of the workload: the child of the unshare process."""
        if self._pid is not None:
            return self._pid
        assert self.proc is not None
        deadline = deadline if deadline is not None else time.monotonic() + 5.0
        while True:
            kids = children(self.proc.pid)
            if len(kids) == 1:
                self._pid = kids[0]
                return self._pid
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise ContainerError(f"no single child of unshare {self.proc.pid}: {kids}")
            time.sleep(0.01)

    def stop(self, timeout: float = 10.0) -> None:
        """Kill the workload (SIGKILL; the pid namespace dies with it) and reap unshare."""
        if self.proc is None:
            return
        try:
            pids = [self._pid] if self._pid else children(self.proc.pid)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        finally:
            if self.proc.stdout:
                self.proc.stdout.close()
            if self._log_file not in (None, subprocess.DEVNULL):
                self._log_file.close()
            self.proc = None

    def __enter__(self) -> "Container":
        """Start on entry."""
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        """Stop on exit, whatever happened."""
        self.stop()
