# SPDX-License-Identifier: Apache-2.0
# Traces: stackprov.trace_capture from Python into an SQLite store; the CLI (`stackprov
# trace-show --json`, `trace-list`) reads the same trace back, and its frames are eu-stack's pcs.
import json
import subprocess

import pytest
import stackprov
from conftest import eu_stack, need_env


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
    # the stored frames: per thread, the pcs eu-stack prints for the (still parked) fixture
    eu = eu_stack(fixture_bench.pid)
    by_tid = {}
    for f in ours["frames"]:
        by_tid.setdefault(f["tid"], []).append(int(f["ip"], 16))
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
