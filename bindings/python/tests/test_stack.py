# SPDX-License-Identifier: Apache-2.0
# stackprov.stack() and Context.capture() of live fixture processes against eu-stack -p (elfutils):
# the same threads, the same pc in every frame eu-stack prints, the same function names.
import re
import subprocess

import stackprov
from conftest import eu_stack

_VERSION = re.compile(r"@@?[A-Za-z0-9_.]+$")
_CLONE = re.compile(r"(\.(cold|isra|part|constprop|lto_priv|localalias)(\.\d+)?)+$")


def norm(name):
    """eu-stack -m prints names without the +offset; both sides without version/clone suffixes."""
    return _CLONE.sub("", _VERSION.sub("", name or ""))


def eu_name(s):
    return "" if s in ("", "??") else norm(s)


def test_stack_pcs_and_names_match_eu_stack(fixture_bench):
    eu = eu_stack(fixture_bench.pid)
    # eu-stack shows the frames on the stack: without the tail-call frames inferred from DWARF
    threads = stackprov.stack(pid=fixture_bench.pid, tail_calls=False)
    assert sorted(eu) == sorted(t.tid for t in threads)
    assert len(threads) == 16
    frames = 0
    for t in threads:
        want = eu[t.tid]
        assert t.stop_reason == "end_of_stack", t
        assert [f.pc for f in t.frames[:len(want)]] == [pc for pc, _, _ in want], "tid %d" % t.tid
        assert [norm(f.function) for f in t.frames[:len(want)]] == [eu_name(n) for _, n, _ in want], \
            "tid %d" % t.tid
        assert [f.module for f in t.frames[:len(want)]] == [m for _, _, m in want]
        frames += len(want)
        # The fixture's own chain (tests/integration/stack/fixture_threads.cpp), not copied from our output.
        names = [f.function for f in t.frames]
        if t.tid != fixture_bench.pid:
            assert "nanosleep_mid" in names and "bench_main" in names
    assert frames > 16 * 4


def test_unknown_line_is_none_as_file(fixture_bench):
    # issue 36: Frame.file was None when unknown but Frame.line and .column 0; all None now. With
    # lines=False no frame has a source position; with lines, a frame has a file exactly when it
    # has a line, and no column without them (test_symbolize checks a column 0 against llvm).
    for t in stackprov.stack(pid=fixture_bench.pid, lines=False):
        assert all(f.file is None and f.line is None and f.column is None for f in t.frames)
    frames = [f for t in stackprov.stack(pid=fixture_bench.pid) for f in t.frames]
    assert all((f.file is None) == (f.line is None) for f in frames)
    assert all(f.column is None for f in frames if f.file is None)
    assert any(f.line for f in frames) and any(f.line is None for f in frames) and any(f.column for f in frames)


def test_stack_of_every_role_matches_eu_stack_pcs(fixture_all):
    eu = eu_stack(fixture_all.pid)
    threads = {t.tid: t for t in stackprov.stack(pid=fixture_all.pid, lines=False)}
    assert sorted(eu) == sorted(threads)
    for tid, want in eu.items():
        got = threads[tid].frames
        assert len(got) >= len(want), "tid %d (%s)" % (tid, fixture_all.roles.get(tid))
        assert [f.pc for f in got[:len(want)]] == [pc for pc, _, _ in want], \
            "tid %d (%s)" % (tid, fixture_all.roles.get(tid))


def test_frame_fields(fixture_bench):
    t = stackprov.stack(pid=fixture_bench.pid, tid=fixture_bench.pid, tail_calls=False)  # frames on the stack
    assert [x.tid for x in t] == [fixture_bench.pid]
    frames = t[0].frames
    assert frames[0].method == "context"
    assert all(f.method in ("cfi_eh_frame", "cfi_debug_frame", "frame_pointer") for f in frames[1:])
    # x86-64: a caller's sp is its callee's CFA (the return address sits just below it)
    for callee, caller in zip(frames, frames[1:]):
        assert callee.cfa != 0 and caller.sp == callee.cfa
    with open("/proc/%d/maps" % fixture_bench.pid) as fh:
        maps = [line.split() for line in fh]
    for f in t[0].frames:
        # module and module_offset agree with the kernel's mapping of that pc
        row = [m for m in maps if int(m[0].split("-")[0], 16) <= f.pc < int(m[0].split("-")[1], 16)]
        assert row and row[0][-1] == f.module
    # build_id: readelf -n of the module file
    mod = t[0].frames[0].module
    notes = subprocess.run(["readelf", "-n", mod], capture_output=True, text=True).stdout
    assert "Build ID: " + t[0].frames[0].build_id in notes


def test_capture_roundtrip_through_bytes_matches_eu_stack(fixture_bench):
    """Context.capture -> each thread's Snapshot.to_bytes -> from_bytes -> Unwinder.unwind: the
    pcs eu-stack prints (the serialized form carries everything the unwind needs)."""
    eu = eu_stack(fixture_bench.pid)
    with stackprov.Context() as ctx, ctx.capture(fixture_bench.pid) as proc, ctx.unwinder() as uw:
        assert proc.info.pid == fixture_bench.pid and not proc.info.core
        for snap in proc.threads:
            again = stackprov.Snapshot.from_bytes(snap.to_bytes())
            assert again.to_bytes() == snap.to_bytes()
            assert (again.pid, again.tid, again.arch) == (fixture_bench.pid, snap.tid, "x86_64")
            st = uw.unwind(again)
            want = eu[snap.tid]
            assert [f.pc for f in st.frames[:len(want)]] == [pc for pc, _, _ in want]


def test_names_that_are_not_utf8_read_as_u_fffd():
    """A symbol "park_\\xff\\xfe" and a thread named "bad\\xff\\xfename" (prctl): bytes, not UTF-8.
    Reading them must not raise UnicodeDecodeError; each byte outside a well-formed sequence is
    U+FFFD, as Python's own errors="replace" decodes nm's and /proc's raw bytes (the oracles)."""
    import os
    import signal
    from conftest import need_env
    exe = need_env("STACKPROV_BYTES_TARGET")
    p = subprocess.Popen([exe], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout.readline().strip() == b"ready"
        raw_sym = next(l.split()[-1] for l in subprocess.run(["nm", exe], capture_output=True).stdout.splitlines()
                       if l.split()[-1].startswith(b"park_"))
        assert not raw_sym.isascii()
        with open("/proc/%d/comm" % p.pid, "rb") as f:
            raw_comm = f.read().rstrip(b"\n")
        threads = stackprov.stack(pid=p.pid)
        assert threads[0].name == raw_comm.decode("utf-8", "replace")
        assert raw_sym.decode("utf-8", "replace") in [f.function for f in threads[0].frames]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
