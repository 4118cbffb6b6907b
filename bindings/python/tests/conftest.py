# SPDX-License-Identifier: Apache-2.0
# Shared fixtures of the binding's tests: the programs come from ctest's environment
# (bindings/python/CMakeLists.txt); a missing program or peer tool fails the test naming it.
import json
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


PY311 = "/usr/bin/python3.11"  # Debian's (the python3.11 on PATH may be another build)
SPIN_PY = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "integration",
                                        "python_runtime", "fixture_py311_spin.py"))


def spin_py_chain():
    """tests/integration/python_runtime/fixture_py311_spin.py's main thread chain, innermost first:
    [(co_name, line)] with each line found in the source text (the oracle): leaf's loop, then the
    lines that call leaf, middle and outer. Fails when Debian's python3.11 is missing."""
    if not os.path.exists(PY311):
        pytest.fail("%s not found (make deps installs python3.11)" % PY311)
    lines = open(SPIN_PY).read().splitlines()

    def line_of(text):
        hits = [i + 1 for i, l in enumerate(lines) if l.strip().startswith(text)]
        assert len(hits) == 1, (text, hits)
        return hits[0]
    return [("leaf", line_of("while True: sum(range(n))")), ("middle", line_of("leaf(n)")),
            ("outer", line_of("middle(n)")), ("<module>", line_of("outer(200)"))]


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


# --help texts of `python3 -m stackprov`: test_cli.py checks every command's and subcommand's layout
# (~30 texts), test_perf.py the commands the top one lists; each text is made once a session.
_HELPS = {}

# One interpreter runs stackprov.__main__.main(ARGV) -- what `python3 -m stackprov ARGV` runs once
# its imports are done -- for each ARGV in turn, with stdout and stderr captured per command and the
# exit status an interpreter would give (SystemExit: None 0, an int itself, else printed and 1; an
# uncaught exception: its traceback and 1). Only for --help: those print a fixed text and exit.
_HELP_BATCH = r"""
import contextlib, io, json, sys, traceback
import stackprov.__main__ as m
res = []
for argv in json.loads(sys.argv[1]):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            code = m.main(argv)
        except SystemExit as x:
            code = x.code
        except BaseException:
            traceback.print_exc()
            code = 1
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    res.append([code or 0, o.getvalue(), e.getvalue()])
sys.stdout.write(json.dumps(res))
"""


def python_m_help(*args):
    """`python3 -m stackprov ARGS` (a --help command line) as its own process, once a session."""
    if args not in _HELPS:
        _HELPS[args] = subprocess.run([sys.executable, "-m", "stackprov"] + list(args), capture_output=True,
                                      text=True, timeout=120)
    return _HELPS[args]


def python_m_helps(argvs):
    """The results of `python3 -m stackprov ARGV` for --help command lines: those not made yet this
    session in one interpreter (_HELP_BATCH) instead of one start (~0.2 CPU-s) each."""
    todo = [list(a) for a in argvs if tuple(a) not in _HELPS]
    if todo:
        r = subprocess.run([sys.executable, "-c", _HELP_BATCH, json.dumps(todo)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        for a, (code, out, err) in zip(todo, json.loads(r.stdout)):
            _HELPS[tuple(a)] = subprocess.CompletedProcess([sys.executable, "-m", "stackprov"] + a, code, out, err)
    return [_HELPS[tuple(a)] for a in argvs]
