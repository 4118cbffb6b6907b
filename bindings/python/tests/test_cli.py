# SPDX-License-Identifier: Apache-2.0
# `python3 -m stackprov stack PID` prints what `stackprov stack --pid PID` prints (the C CLI).
import os
import subprocess
import sys

from conftest import need_env


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_python_m_stack_equals_cli(fixture_all):
    cli = need_env("STACKPROV_CLI")
    want = run([cli, "stack", "--pid", str(fixture_all.pid)])
    got = run([sys.executable, "-m", "stackprov", "stack", str(fixture_all.pid)])
    assert want.stdout.startswith("PID %d - process\n" % fixture_all.pid)
    assert got.stdout == want.stdout
    assert got.returncode == want.returncode
    # the fixture's roles, as it announced them (not our output): each thread is listed
    for tid in fixture_all.roles:
        assert "TID %d " % tid in got.stdout


def test_python_m_stack_options_equal_cli(fixture_bench):
    cli = need_env("STACKPROV_CLI")
    args = ["--tid", str(fixture_bench.pid), "--max-frames", "3", "--no-lines"]
    want = run([cli, "stack", "--pid", str(fixture_bench.pid)] + args)
    got = run([sys.executable, "-m", "stackprov", "stack", "-p", str(fixture_bench.pid)] + args)
    assert (got.stdout, got.returncode) == (want.stdout, want.returncode)
    assert got.stdout.count("\n#") == 3


def test_python_m_stack_errors():
    # no such process: exit 1, one line naming the pid
    r = run([sys.executable, "-m", "stackprov", "stack", "2147483647"])
    assert r.returncode == 1 and "2147483647" in r.stderr and len(r.stderr.splitlines()) == 1
    # bad options: exit 2, one line naming the value
    r = run([sys.executable, "-m", "stackprov", "stack", "--pid", "abc"])
    assert r.returncode == 2 and "'abc'" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run([sys.executable, "-m", "stackprov", "stack", "--max-frames", "70000", "--pid", "1"])
    assert r.returncode == 2 and "70000" in r.stderr
    r = run([sys.executable, "-m", "stackprov", "stack", "--help"])
    assert r.returncode == 0 and "Exit status" in r.stdout
