# SPDX-License-Identifier: Apache-2.0
# Traces: stackprov.trace_capture from Python into an SQLite store; the CLI (`stackprov
# trace-show --json`, `trace-list`) reads the same trace back, and its frames are eu-stack's pcs.
import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
import stackprov
from conftest import PY311, SPIN_PY, eu_stack, need_env, spin_py_chain


def test_trace_capture_read_by_cli_and_matching_eu_stack(fixture_bench, tmp_path):
    cli = need_env("STACKPROV_CLI")
    url = "sqlite:%s" % (tmp_path / "traces.db")
    with stackprov.TraceStore(url) as store:
        assert store.url == url
        tid = stackprov.trace_capture(pid=fixture_bench.pid, store=store)
        ours = stackprov.trace_get(tid, store=store)
        listed = stackprov.trace_list(store=store)
    r = subprocess.run([cli, "trace-show", tid, "--store", url, "--json"], capture_output=True, text=True,
                       check=True)
    assert json.loads(r.stdout.splitlines()[0]) == ours
    r = subprocess.run([cli, "trace-list", "--store", url, "--json"], capture_output=True, text=True,
                       check=True)
    assert json.loads(r.stdout) == listed
    assert [t["trace_id"] for t in listed] == [tid]
    # the stored frames: per thread, the pcs eu-stack prints for the (still parked) fixture; eu-stack
    # shows the frames on the stack, not the tail-call frames inferred from DWARF call sites
    # ("unwind": "tail_call+inferred", libc's when its debug file is installed)
    eu = eu_stack(fixture_bench.pid)
    by_tid = {}
    for f in ours["frames"]:
        by_tid.setdefault(f["tid"], [])
        if not f.get("unwind", "").endswith("+inferred"):
            by_tid[f["tid"]].append(int(f["ip"], 16))
    assert sorted(by_tid) == sorted(eu)
    for t, want in eu.items():
        assert by_tid[t][:len(want)] == [pc for pc, _, _ in want]


def test_trace_errors(tmp_path):
    url = "sqlite:%s" % (tmp_path / "t.db")
    with pytest.raises(stackprov.Error) as e:
        stackprov.trace_get("00000000-0000-0000-0000-000000000000", store=url)
    assert "00000000-0000-0000-0000-000000000000" in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError):
        stackprov.trace_capture(store=url)


# ---- trace_resolve / trace_replay against `stackprov trace-resolve` / `trace-replay` on one store

# fields of a replay report that differ from run to run (ids of the new replay rows, timings)
VOLATILE = ("replay_id", "verify_time_ms")


def stable(report):
    for s in report["seeds"]:
        for k in VOLATILE:
            s.pop(k, None)
    return report


@pytest.fixture(scope="module")
def signed_trace(fixture_bench, tmp_path_factory):
    """A trace of the parked fixture captured from Python with a signed bundle; the default
    bundle store ($XDG_DATA_HOME/stackprov/store) is private to this module for Python and CLI."""
    cli = need_env("STACKPROV_CLI")
    tmp = tmp_path_factory.mktemp("trace")
    saved = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "STACKPROV_STORE")}
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    os.environ.pop("STACKPROV_STORE", None)
    key, log = str(tmp / "k.pem"), str(tmp / "log")
    for cmd in (["keygen", "-o", key], ["log", "init", log, "--key", key]):
        r = subprocess.run([cli] + cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    bundles = stackprov.Store(None, create=True)
    url = "sqlite:%s" % (tmp / "traces.db")
    ctx = stackprov.Context(bundle_store=bundles.dir)
    tid = stackprov.trace_capture(pid=fixture_bench.pid, store=url, bundle=True, sign_key=key, log_dir=log,
                                  context=ctx)
    env = dict(os.environ)
    yield {"id": tid, "url": url, "key": key, "pub": key + ".pub", "root": os.path.join(log, "trusted_root.json"),
           "cli": cli, "env": env, "bundles": bundles.dir}
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def cli_run(t, *args):
    return subprocess.run([t["cli"]] + list(args) + ["--store", t["url"]], capture_output=True, text=True,
                          env=t["env"], timeout=120)


def test_trace_resolve_equals_cli(signed_trace):
    t = signed_trace
    ours = stackprov.trace_resolve(t["id"], store=t["url"], offline=True)
    r = cli_run(t, "trace-resolve", "--trace", t["id"], "--offline", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ours
    # the figures are the stored frames' (trace-show's JSON, read by the CLI)
    r = cli_run(t, "trace-show", t["id"], "--json")
    frames = json.loads(r.stdout.splitlines()[0])["frames"]
    assert ours["frames"] == len(frames)
    assert ours["named"] == sum(1 for f in frames if f.get("symbol"))
    assert ours["with_lines"] == sum(1 for f in frames if f.get("file"))
    assert ours["symbol_coverage_pct"] == pytest.approx(100.0 * ours["covered"] / ours["frames"], abs=0.05)
    assert sum(ours["resolvers"].values()) == ours["frames"]
    assert ours["offline"] is True and ours["trace_id"] == t["id"]
    # an uppercase id is the same trace, as on the command line
    assert stackprov.trace_resolve(t["id"].upper(), store=t["url"], offline=True)["frames"] == ours["frames"]


def test_trace_replay_equals_cli(signed_trace):
    t = signed_trace
    before = len(stackprov.trace_replays(t["id"], store=t["url"]))
    # without keys and trusted root: the dsse check fails first (exit 5, doc/traces.md)
    rep = stackprov.trace_replay(t["id"], store=t["url"], seeds=3)
    r = cli_run(t, "trace-replay", "--trace", t["id"], "--seeds", "3", "--json")
    assert (rep.exit_code, r.returncode) == (5, 5) and not rep.passed
    assert stable(json.loads(r.stdout)) == stable(rep.to_dict())
    assert json.loads(rep.json()) == rep.to_dict()
    # with the key and the log's trusted root: the gate passes, exit 0 as the CLI
    rep = stackprov.trace_replay(t["id"], store=t["url"], seeds=3, keys=[t["pub"]], trusted_root=t["root"])
    junit = os.path.join(os.path.dirname(t["url"][len("sqlite:"):]), "j.xml")
    r = cli_run(t, "trace-replay", "--trace", t["id"], "--seeds", "3", "--key", t["pub"], "--trusted-root", t["root"],
                "--junit", junit)
    assert (rep.exit_code, r.returncode) == (0, 0) and rep.passed
    assert r.stdout.strip() == rep.summary().strip()
    d = rep.to_dict()
    assert (rep.coverage_pct, rep.success_ratio) == (d["symbol_coverage_pct"], d["replay_success_ratio"])
    assert rep.success_ratio == 1.0  # a replay from the trace's own bundle reproduces every frame
    # repr: the figures as Python prints the floats (not printf's six decimals), and it evaluates back
    assert repr(rep) == "ReplayReport(exit_code=0, coverage_pct=%r, success_ratio=1.0)" % rep.coverage_pct
    assert "%.1f%% coverage" % rep.coverage_pct in rep.summary()
    # JUnit: one testcase per check and per seed, none failed (ElementTree, and the CLI's file)
    with open(junit) as f:
        cli_junit = f.read()
    for xml_text in (rep.junit(), cli_junit):
        cases = ET.fromstring(xml_text).iter("testcase")
        names = [c.get("name") for c in cases]
        assert len(names) == 5 + 3
        assert not list(ET.fromstring(xml_text).iter("failure"))
    # every replay recorded: 3 (Python) + 3 (CLI) + 3 + 3
    assert len(stackprov.trace_replays(t["id"], store=t["url"])) == before + 12
    # thresholds as the CLI's: an impossible coverage fails coverage (exit 3) in both
    rep = stackprov.trace_replay(t["id"], store=t["url"], seeds=1, min_coverage=100, keys=[t["pub"]],
                                 trusted_root=t["root"])
    r = cli_run(t, "trace-replay", "--trace", t["id"], "--seeds", "1", "--min-coverage", "100", "--key", t["pub"],
                "--trusted-root", t["root"])
    assert rep.exit_code == r.returncode
    assert rep.exit_code == (0 if rep.coverage_pct >= 100 else 3)


def test_trace_resolve_replay_errors(signed_trace, tmp_path):
    t = signed_trace
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.trace_resolve("not-a-uuid", store=t["url"])
    assert "'not-a-uuid'" in e.value.message
    unknown = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(stackprov.NotFoundError) as e:
        stackprov.trace_resolve(unknown, store=t["url"])
    assert unknown in e.value.message
    with pytest.raises(stackprov.NotFoundError) as e:
        stackprov.trace_replay(unknown, store=t["url"], seeds=1)
    assert unknown in e.value.message
    missing = "sqlite:%s" % (tmp_path / "none.db")
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.trace_resolve(t["id"], store=missing)
    assert str(tmp_path / "none.db") in e.value.message and not (tmp_path / "none.db").exists()
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.trace_resolve(t["id"], store=t["url"], bundles=["sha256:xyz"])
    assert "sha256:xyz" in e.value.message
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.trace_resolve(t["id"], store=t["url"], bundles=[str(tmp_path / "b.sbundle")])
    assert str(tmp_path / "b.sbundle") in e.value.message
    for kw, shown in ((dict(seeds=0), "seeds 0"), (dict(seeds=1001), "seeds 1001"),
                      (dict(first_seed=0), "first_seed 0"), (dict(min_coverage=101), "min_coverage 101"),
                      (dict(min_success=1.5), "min_success 1.5")):
        with pytest.raises(stackprov.InvalidArgumentError) as e:
            stackprov.trace_replay(t["id"], store=t["url"], **kw)
        assert shown in e.value.message
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.trace_replay(t["id"], store=t["url"], keys=[str(tmp_path / "nokey.pub")])
    assert "nokey.pub" in e.value.message
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.trace_replay(t["id"], store=t["url"], trusted_root=str(tmp_path / "root.json"))
    assert "root.json" in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.trace_capture(pid=1, store=t["url"], sign_key=t["key"])
    assert t["key"] in e.value.message


def test_trace_capture_python_frames(tmp_path):
    """trace_capture(python="auto", the default) of Debian's python3.11 running
    fixture_py311_spin.py: the main thread's trace frames of unwind method "runtime" are the chain
    leaf <- middle <- outer <- <module> at the lines of the fixture's source that make each call (the
    oracle: the source text), each right before a _PyEval_EvalFrameDefault frame; python="off" stores
    none; python3 -m stackprov trace-capture --python off likewise, and a bad value is refused."""
    want, src = spin_py_chain(), SPIN_PY
    url = "sqlite:%s" % (tmp_path / "traces.db")
    p = subprocess.Popen([PY311, src], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        with stackprov.TraceStore(url) as store:
            # The fixture's main thread prints "ready" on the line before it calls outer(): a capture
            # can land between the two. Captured again until the main thread is in leaf (at most 5 s).
            deadline = time.monotonic() + 5
            while True:
                on = stackprov.trace_get(stackprov.trace_capture(pid=p.pid, store=store), store=store)
                if time.monotonic() > deadline or any(
                        f["tid"] == p.pid and f["unwind"] == "runtime" and f["symbol"] == "leaf" for f in on["frames"]):
                    break
                time.sleep(0.05)
            off = stackprov.trace_get(stackprov.trace_capture(pid=p.pid, store=store, python="off"), store=store)
        import sys
        cli = subprocess.run([sys.executable, "-m", "stackprov", "trace-capture", "-p", str(p.pid), "--store", url,
                              "--python", "off"], capture_output=True, text=True)
        bad = subprocess.run([sys.executable, "-m", "stackprov", "trace-capture", "-p", str(p.pid), "--store", url,
                              "--python", "on"], capture_output=True, text=True)
    finally:
        p.kill()
        p.wait()
    main = [f for f in on["frames"] if f["tid"] == p.pid]
    got = [(f["symbol"], f["line"]) for f in main if f["unwind"] == "runtime"]
    assert got == want, got
    assert all(f["file"] == src for f in main if f["unwind"] == "runtime")
    k = max(i for i, f in enumerate(main) if f["unwind"] == "runtime")
    assert main[k + 1]["symbol"] == "_PyEval_EvalFrameDefault"
    assert not any(f["unwind"] == "runtime" for f in off["frames"])
    assert cli.returncode == 0, cli.stderr
    with stackprov.TraceStore(url) as store:
        shown = stackprov.trace_get(cli.stdout.strip().split()[0], store=store)
    assert not any(f["unwind"] == "runtime" for f in shown["frames"])
    assert bad.returncode == 2 and "invalid --python value 'on'" in bad.stderr, bad.stderr
    with pytest.raises(stackprov.InvalidArgumentError, match="invalid python value 'on'"):
        stackprov.trace_capture(pid=1, store=url, python="on")
