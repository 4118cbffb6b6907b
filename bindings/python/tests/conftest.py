# SPDX-License-Identifier: Apache-2.0
# Shared fixtures of the binding's tests: the programs come from ctest's environment
# (bindings/python/CMakeLists.txt); a missing program or peer tool fails the test naming it.
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

# The peers' output parsers of every test (tests/lib/peers.py): eu-stack's here, llvm-symbolizer's in test_symbolize
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "lib"))
from peers import parse_eu_stack  # noqa: E402


def pytest_configure(config):
    """The Python processes the tests start (~190 `python3 -m stackprov`, the CPython targets) keep
    their bytecode in a private cache for the session: ctest's PYTHONDONTWRITEBYTECODE=1 keeps
    __pycache__ out of the trees, so each would compile the package's ~170 KB of sources again
    (0.04 of a start's 0.21 CPU-s). The bytecode is what the compiler makes of the same sources."""
    d = tempfile.mkdtemp(prefix="stackprov-pyc-")
    os.chmod(d, 0o755)  # readable by test_errors.py's interpreter run as nobody
    config._stackprov_pyc = d
    os.environ["PYTHONPYCACHEPREFIX"] = d
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_unconfigure(config):
    d = getattr(config, "_stackprov_pyc", None)
    if d:
        shutil.rmtree(d, ignore_errors=True)


def need_env(name):
    v = os.environ.get(name)
    if not v or not os.path.exists(v):
        pytest.fail("%s is not set to an existing file (%r): run the suite through ctest (python_stackprov)"
                    % (name, v))
    return v


def need_tool(name):
    p = shutil.which(name)
    if not p:
        pytest.fail("%s not found in PATH: install it (make deps / scripts/install-deps.sh)" % name)
    return p


def wait_asleep(pid, tries=400):
    """Waits (up to tries x 10 ms) until every thread of `pid` sleeps in the kernel (state S or D)."""
    for _ in range(tries):
        states = []
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, t)) as fh:
                s = fh.read()
            states.append(s[s.rindex(")") + 2])
        if all(c in "SD" for c in states):
            return
        time.sleep(0.01)


class Fixture:
    """tests/integration/stack/fixture_threads.cpp: threads parked in named call chains; prints
    "thread TID ROLE" lines, then "ready"."""

    def __init__(self, exe, mode):
        self.proc = subprocess.Popen([exe, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self.roles = {}
        while True:
            line = self.proc.stdout.readline()
            if not line:
                pytest.fail("fixture %s %s ended before ready: %s" % (exe, mode, self.proc.stderr.read()))
            f = line.split()
            if f == ["ready"]:
                break
            if f and f[0] == "thread":
                self.roles[int(f[1])] = f[2]
        # Every thread asleep in the kernel, so that two captures see the same stacks.
        wait_asleep(self.pid)
        time.sleep(0.05)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def fixture_bench():
    fx = Fixture(need_env("STACKPROV_FIXTURE"), "bench")
    yield fx
    fx.kill()


@pytest.fixture(scope="module")
def fixture_all():
    fx = Fixture(need_env("STACKPROV_FIXTURE"), "all")
    yield fx
    fx.kill()


def eu_stack(pid):
    r = subprocess.run([need_tool("eu-stack"), "-m", "-n", "256", "-p", str(pid)], capture_output=True,
                       text=True, timeout=60)
    if "PID" not in r.stdout:
        pytest.fail("eu-stack -p %d failed (%d): %s" % (pid, r.returncode, r.stderr))
    return parse_eu_stack(r.stdout)


# --help texts of `python3 -m stackprov`: test_cli.py and test_perf.py check the same texts (layout,
# and the commands each lists); each is made once a session.
_HELPS = {}


def python_m_help(*args):
    """`python3 -m stackprov ARGS` (a --help command line) as its own process, once a session."""
    if args not in _HELPS:
        _HELPS[args] = subprocess.run([sys.executable, "-m", "stackprov"] + list(args), capture_output=True,
                                      text=True, timeout=120)
    return _HELPS[args]
