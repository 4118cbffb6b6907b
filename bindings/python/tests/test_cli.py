# SPDX-License-Identifier: Apache-2.0
# `python3 -m stackprov stack PID` prints what `stackprov stack --pid PID` prints (the C CLI).
import json
import os
import re
import subprocess
import time
import sys

import pytest
from conftest import need_env, need_tool, python_m_help, python_m_helps
import help_layout  # tests/lib (conftest puts it on the path): the --help layout rule


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
    r = run([sys.executable, "-m", "stackprov", "stack", "--python", "sometimes", "--pid", "1"])
    assert r.returncode == 2 and "'sometimes'" in r.stderr and len(r.stderr.splitlines()) == 1
    r = python_m_help("stack", "--help")
    assert r.returncode == 0 and "Exit status" in r.stdout
    # the last section of --help is the exit status, and every CLI option is offered
    assert r.stdout.rstrip().split("\n\n")[-1].startswith("Exit status:")
    for opt in ("--pid", "--core", "--exe", "--sysroot", "--offline", "--store", "--resolvers", "--tid",
                "--max-frames", "--json", "--no-lines", "--python"):
        assert opt in r.stdout


def same(cli_args, py_args=None, env=None):
    """Runs `stackprov stack ARGS` and `python3 -m stackprov stack ARGS`: (cli, python) results."""
    cli = need_env("STACKPROV_CLI")
    want = subprocess.run([cli, "stack"] + cli_args, capture_output=True, text=True, timeout=120, env=env)
    got = subprocess.run([sys.executable, "-m", "stackprov", "stack"] + (py_args or cli_args), capture_output=True,
                         text=True, timeout=120, env=env)
    return want, got


def test_python_m_stack_json_equals_cli(fixture_all):
    for extra in ([], ["--no-lines"], ["--resolvers", "symtab,dynsym"], ["--max-frames", "4"]):
        want, got = same(["--pid", str(fixture_all.pid), "--json"] + extra)
        assert want.returncode == 0, want.stderr
        assert (got.stdout, got.returncode) == (want.stdout, want.returncode)
        j = json.loads(got.stdout)
        # the fixture's own thread list (independent of both): every announced thread is there
        assert j["pid"] == fixture_all.pid and set(fixture_all.roles) <= {t["tid"] for t in j["threads"]}


@pytest.fixture(scope="module")
def core_of_fixture(fixture_bench, tmp_path_factory):
    """gcore of the parked fixture, and a bundle store holding every module of it (the CLI's
    `bundle build --store` on the files readelf/the core name)."""
    tmp = tmp_path_factory.mktemp("core")
    r = subprocess.run([need_tool("gcore"), "-o", str(tmp / "core"), str(fixture_bench.pid)], capture_output=True,
                       text=True, timeout=120)
    core = "%s.%d" % (tmp / "core", fixture_bench.pid)
    if not os.path.exists(core):
        pytest.fail("gcore failed: %s" % r.stderr)
    with open("/proc/%d/maps" % fixture_bench.pid) as f:
        mods = sorted({ln.split()[5] for ln in f if len(ln.split()) > 5 and ln.split()[5].startswith("/")})
    store = str(tmp / "store")
    r = subprocess.run([need_env("STACKPROV_CLI"), "bundle", "build", "--store", store] + mods, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return core, store


def test_python_m_stack_core_json_equals_cli(core_of_fixture):
    core, store = core_of_fixture
    fx = need_env("STACKPROV_FIXTURE")
    for extra in ([], ["--json"], ["--json", "--no-lines"], ["--json", "--exe", fx], ["--json", "--sysroot", "/"],
                  ["--json", "--offline", "--store", store], ["--offline", "--store", store],
                  ["--json", "--store", store, "--resolvers", "bundle,symtab"]):
        want, got = same(["--core", core] + extra)
        assert want.returncode == 0, (extra, want.stderr)
        assert (got.stdout, got.returncode) == (want.stdout, want.returncode), extra
        if extra == ["--json", "--offline", "--store", store]:
            offline_json = got.stdout
    # offline from bundles: every frame was found through the bundles' unwind rows or the
    # registers (cfi_bundle / context), none through a module file's CFI; tail-call frames are
    # inferred from the bundles' call sites (doc/bundles.md "Call sites"), not unwound
    j = json.loads(offline_json)
    assert {f["method"] for t in j["threads"] for f in t["frames"]} <= {"context", "cfi_bundle", "tail_call"}
    # the default store ($XDG_DATA_HOME/stackprov/store) with --offline, as the CLI
    xdg = os.path.dirname(os.path.dirname(store))
    os.makedirs(os.path.join(xdg, "stackprov"), exist_ok=True)
    link = os.path.join(xdg, "stackprov", "store")
    if not os.path.exists(link):
        os.symlink(store, link)
    env = dict(os.environ, XDG_DATA_HOME=xdg)
    env.pop("STACKPROV_STORE", None)
    want, got = same(["--core", core, "--json", "--offline"], env=env)
    assert want.returncode == 0, want.stderr
    assert (got.stdout, got.returncode) == (want.stdout, want.returncode)


def test_python_m_stack_option_errors_as_cli():
    for args, shown in ((["--offline", "--pid", "1"], "--offline"), (["--pid", "1", "--sysroot", "/x"], "'/x'"),
                        (["--pid", "1", "--exe", "/bin/true"], "'/bin/true'"),
                        (["--core", "c", "--offline", "--exe", "/bin/true"], "'/bin/true'"),
                        (["--core", "c", "--store", ""], "--store"), (["--pid", "1", "--tid", "0"], "'0'")):
        want, got = same(args)
        assert (want.returncode, got.returncode) == (2, 2), args
        assert shown in got.stderr and len(got.stderr.splitlines()) == 1, (args, got.stderr)
    # a core that does not exist: exit 1 naming it, as the CLI
    want, got = same(["--core", "/nonexistent/core.1", "--json"])
    assert (want.returncode, got.returncode) == (1, 1) and "/nonexistent/core.1" in got.stderr
    assert got.stdout == want.stdout == ""


PY311 = "/usr/bin/python3.11"  # Debian's (the python3.11 on PATH may be another build)
PY_SCRIPT = """
import sys, time
def leaf():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    time.sleep(120)
def middle(n):
    return leaf() if n == 0 else middle(n - 1)
sorted([1, 2], key=lambda x: middle(2) if x == 2 else x)
"""


def wait_sleeping(pid, timeout=20):
    """Until the process's main thread is asleep (state S) in a syscall other than write(2)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rpartition(")")[2].split()[0]
        with open("/proc/%d/syscall" % pid) as f:
            nr = f.read().split()[0]
        if state == "S" and nr not in ("running", "1"):
            return
        time.sleep(0.01)
    pytest.fail("pid %d did not go to sleep in %d s" % (pid, timeout))


def test_python_m_stack_python_frames_equal_cli():
    """A CPython 3.11 target: Python frames (method runtime) interleaved, printed as the CLI prints
    them in every --python mode; the functions are the script's own (independent of both)."""
    if not os.path.exists(PY311):
        pytest.fail("%s not found (make deps installs python3.11)" % PY311)
    proc = subprocess.Popen([PY311, "-c", PY_SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        # "ready" is written just before time.sleep: under load the target may still be runnable
        # on its way there, and then two captures could differ. Wait until it sleeps.
        wait_sleeping(proc.pid)
        for extra in ([], ["--json"], ["--python=only"], ["--python=off", "--no-lines"], ["--python=only", "--json"]):
            want, got = same(["--pid", str(proc.pid)] + extra)
            assert want.returncode == 0, (extra, want.stderr)
            assert (got.stdout, got.returncode) == (want.stdout, want.returncode), extra
        j = json.loads(got.stdout)  # the last: --python=only --json
        names = [f["function"] for f in j["threads"][0]["frames"]]
        assert names == ["leaf", "middle", "middle", "middle", "<lambda>", "<module>"], names
        assert all(f["method"] == "runtime" for f in j["threads"][0]["frames"])
        assert j["runtime"].startswith("CPython 3.11")
        import stackprov
        t = stackprov.stack(pid=proc.pid)[0]
        py = [f for f in t.frames if f.runtime == "python"]
        assert [f.function for f in py] == names and py[0].line == 5 and py[-1].line == 8
        assert all(0 <= f.native_index < len(t.frames) for f in py)
        assert all(t.frames[f.native_index].function.startswith("_PyEval_EvalFrameDefault") for f in py)
        assert not [f for f in stackprov.stack(pid=proc.pid, python="off")[0].frames if f.runtime]
    finally:
        proc.kill()
        proc.wait()


def test_python_m_symbolize_equals_llvm_symbolizer(tmp_path):
    """`python3 -m stackprov symbolize --obj` answers as llvm-symbolizer-14 (the independent peer)
    and as `stackprov symbolize --obj`, byte for byte: 400 seeded random addresses of python3.11's
    code plus inputs that are not addresses, from stdin and as arguments, with and without
    inline chains."""
    import random
    llvm = need_tool("llvm-symbolizer-14")
    cli = need_env("STACKPROV_CLI")
    obj = "/usr/bin/python3.11"
    # .text's range from readelf (not from us)
    sec = [l.split() for l in run(["readelf", "-SW", obj]).stdout.splitlines() if " .text " in l][0]
    i = sec.index(".text")
    start, size = int(sec[i + 2], 16), int(sec[i + 4], 16)
    rnd = random.Random(11)
    addrs = ["0x%x" % rnd.randrange(start, start + size) for _ in range(400)] + ["junk", "0x10", "%d" % start]
    stdin = "\n".join(addrs) + "\n"
    for extra in ([], ["--no-inlines"]):
        want = subprocess.run([llvm, "--obj", obj] + extra, input=stdin, capture_output=True, text=True, timeout=300)
        got = subprocess.run([sys.executable, "-m", "stackprov", "symbolize", "--obj", obj] + extra, input=stdin,
                             capture_output=True, text=True, timeout=300)
        ours = subprocess.run([cli, "symbolize", "--obj", obj] + extra, input=stdin, capture_output=True, text=True,
                              timeout=300)
        assert want.returncode == 0 and got.returncode == 0, got.stderr
        assert got.stdout == want.stdout
        assert got.stdout == ours.stdout
    # addresses as arguments: the same answers
    args = run([sys.executable, "-m", "stackprov", "symbolize", "--obj", obj] + addrs[:20])
    first = subprocess.run([llvm, "--obj", obj] + addrs[:20], capture_output=True, text=True, timeout=120)
    assert args.returncode == 0 and args.stdout == first.stdout


def test_python_m_help_usage_options_then_prose():
    """Every command `python3 -m stackprov --help` lists, and every subcommand its usage lines name
    (`bundle build`, `log init`), prints its usage, then its options, then the prose, as the CLI's
    --help does (issue 36; the rule and its terms: tests/lib/help_layout.py, which cli_help applies
    to the CLI). The top --help is a `python3 -m stackprov` process; the commands' and subcommands'
    texts come from one interpreter calling the same main() (conftest.python_m_helps)."""
    top = python_m_help("--help")
    assert top.returncode == 0 and help_layout.problems(top.stdout) == [], top.stdout
    # argparse lists the commands under "<command>", four spaces in, before their summaries.
    cmds = re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", top.stdout, re.M)
    assert len(cmds) >= 10, top.stdout
    checked, subs = [], []
    for cmd, h in zip(cmds, python_m_helps([[cmd, "--help"] for cmd in cmds])):
        assert h.returncode == 0 and help_layout.problems(h.stdout) == [], (cmd, help_layout.problems(h.stdout))
        usage, _ = help_layout.usage_block(h.stdout.split("\n"))
        sub_re = re.compile(r"^(?:usage:)?\s*python3 -m stackprov %s ([a-z][a-z0-9-]*)(?:\s|$)" % re.escape(cmd))
        subs += [(cmd, sub) for sub in sorted({m.group(1) for m in map(sub_re.match, usage) if m})]
    for (cmd, sub), s in zip(subs, python_m_helps([[cmd, sub, "--help"] for cmd, sub in subs])):
        bad = help_layout.problems(s.stdout)
        assert s.returncode == 0 and bad == [], (cmd, sub, bad)
        checked.append(cmd + " " + sub)
    assert checked, "no usage line names a subcommand (bundle build, log init)"
