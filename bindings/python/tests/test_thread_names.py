# SPDX-License-Identifier: Apache-2.0
# Python thread names (issue 36 "Thread names"): a CPython 3.11 program names its threads in Python
# (threading.Thread(name=...), a subclass, a later rename, a Thread whose __dict__ was materialised,
# quotes and non-ASCII) and prints {native_id: name} as threading.enumerate() sees them: the oracle.
# stackprov.stack(), `stackprov stack` (text and JSON) and `python3 -m stackprov stack` must show the
# same names per OS thread id; a thread threading never saw (_thread.start_new_thread) has none.
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import need_env, wait_asleep

PROGRAM = r'''
import _thread, json, sys, threading
ev = threading.Event()
def park():
    ev.wait()
ts = [threading.Thread(target=park, name=n) for n in ("worker-1", 'io "loop"', "na\u00efve-\u00fc")]
class Sub(threading.Thread):
    def run(self):
        ev.wait()
ts.append(Sub())
ts.append(threading.Thread(target=park, name="before"))
for t in ts:
    t.start()
ts[-1].name = "renamed"
vars(ts[0])["extra"] = 1          # a materialised __dict__
raw = []
lock = threading.Lock()
lock.acquire()
def raw_thread():
    raw.append(threading.get_native_id())
    lock.acquire()
_thread.start_new_thread(raw_thread, ())
while not raw:
    pass
print(json.dumps({"threads": {str(t.native_id): t.name for t in threading.enumerate()}, "raw": raw[0]}), flush=True)
ev.wait(60)
'''


PY311 = "/usr/bin/python3.11"


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    if not os.path.exists(PY311):
        pytest.fail("%s is not installed (python3.11; make deps installs it)" % PY311)
    script = tmp_path_factory.mktemp("names") / "named.py"
    script.write_text(PROGRAM)
    p = subprocess.Popen([PY311, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    line = p.stdout.readline()
    if not line:
        p.kill()
        pytest.fail("the program ended early: " + p.stderr.read())
    said = json.loads(line)
    wait_asleep(p.pid)  # every thread in the futex before the capture
    yield p.pid, {int(k): v for k, v in said["threads"].items()}, said["raw"]
    p.kill()
    p.wait()


def test_stack_runtime_names_are_the_programs(named):
    import stackprov
    pid, want, raw = named
    assert len(want) == 6 and set(want.values()) >= {"MainThread", "worker-1", 'io "loop"', "na\u00efve-\u00fc",
                                                       "renamed"}
    threads = stackprov.stack(pid=pid, lines=False)
    got = {t.tid: t.runtime_name for t in threads}
    assert {tid: got.get(tid) for tid in want} == want
    assert got[raw] is None                    # threading never saw it
    assert all(t.name.startswith("python3") for t in threads)  # the OS name stays what it is
    off = stackprov.stack(pid=pid, lines=False, python="off")
    assert all(t.runtime_name is None for t in off)


def cli(args):
    return subprocess.run([need_env("STACKPROV_CLI")] + args, capture_output=True, text=True, timeout=60)


def test_cli_stack_shows_runtime_names(named):
    pid, want, raw = named
    doc = json.loads(cli(["stack", "-p", str(pid), "--json", "--no-lines"]).stdout)
    got = {t["tid"]: t.get("runtime_name") for t in doc["threads"]}
    assert {tid: got.get(tid) for tid in want} == want and got[raw] is None
    text = cli(["stack", "-p", str(pid), "--no-lines"]).stdout
    heads = {}
    for m in re.finditer(r'^TID (\d+) "[^"]*"(?: \(python thread "((?:[^"\\]|\\.)*)"\))?:$', text, re.M):
        heads[int(m.group(1))] = json.loads('"%s"' % m.group(2)) if m.group(2) is not None else None
    assert {tid: heads.get(tid) for tid in want} == want and heads[raw] is None
    assert "(python thread" not in cli(["stack", "-p", str(pid), "--no-lines", "--python", "off"]).stdout


def test_python_m_stack_headers_equal_cli(named):
    pid, want, raw = named
    heads = lambda out: [l for l in out.splitlines() if l.startswith("TID ")]
    c = cli(["stack", "-p", str(pid), "--no-lines"])
    p = subprocess.run([sys.executable, "-m", "stackprov", "stack", "-p", str(pid), "--no-lines"],
                       capture_output=True, text=True, timeout=60)
    assert heads(p.stdout) == heads(c.stdout) and len(heads(c.stdout)) == 7
    cj = json.loads(cli(["stack", "-p", str(pid), "--json", "--no-lines"]).stdout)
    pj = json.loads(subprocess.run([sys.executable, "-m", "stackprov", "stack", "-p", str(pid), "--json", "--no-lines"],
                                   capture_output=True, text=True, timeout=60).stdout)
    assert [(t["tid"], t.get("runtime_name")) for t in pj["threads"]] == \
        [(t["tid"], t.get("runtime_name")) for t in cj["threads"]]
