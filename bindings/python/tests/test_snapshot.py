# SPDX-License-Identifier: Apache-2.0
# Snapshots across Python and C: bytes written by Python read by a C program (snapshot_peer.c,
# public C ABI) and the other way round, compared field by field; the fields themselves against
# the kernel (/proc/self/maps) and readelf.
import os
import subprocess

import stackprov
from conftest import need_env

RSP, RIP = 7, 16  # DWARF register numbers of x86_64


def py_dump(snap, uw):
    lines = ["pid %d" % snap.pid, "tid %d" % snap.tid, "arch %s" % snap.arch]
    for r in range(17):
        v = snap.reg(r)
        if v is not None:
            lines.append("reg %d 0x%x" % (r, v))
    for m in snap.modules:
        lines.append("module %s 0x%x 0x%x 0x%x %s" % (m["path"], m["start"], m["end"], m["load_bias"],
                                                       m["build_id"]))
    st = uw.unwind(snap, symbolize=False)
    lines += ["pc 0x%x" % f.pc for f in st.frames]
    lines.append("stop %s" % st.stop_reason)
    return "\n".join(lines) + "\n"


def test_python_snapshot_read_by_c(tmp_path):
    peer = need_env("STACKPROV_SNAPSHOT_PEER")
    with stackprov.Context() as ctx, ctx.unwinder() as uw:
        snap = ctx.capture_self()
        path = tmp_path / "py.snap"
        path.write_bytes(snap.to_bytes())
        r = subprocess.run([peer, "dump", str(path)], capture_output=True, text=True, check=True)
        assert r.stdout == py_dump(snap, uw)
        assert "stop end_of_stack\n" in r.stdout and r.stdout.count("\npc ") > 5


def test_c_snapshot_read_by_python(tmp_path):
    peer = need_env("STACKPROV_SNAPSHOT_PEER")
    path = tmp_path / "c.snap"
    r = subprocess.run([peer, "capture", str(path)], capture_output=True, text=True, check=True)
    snap = stackprov.Snapshot.from_bytes(path.read_bytes())
    with stackprov.Context() as ctx, ctx.unwinder() as uw:
        assert py_dump(snap, uw) == r.stdout
        # the peer's own frames: main called into the capture
        names = [f.function for f in uw.unwind(snap).frames]
        assert "main" in names and "__libc_start_main" in " ".join(n or "" for n in names)
    assert snap.to_bytes() == path.read_bytes()


def test_capture_self_fields_against_the_kernel():
    snap = stackprov.Context().capture_self()
    assert (snap.pid, snap.arch) == (os.getpid(), "x86_64")
    with open("/proc/self/maps") as fh:
        maps = [line.split() for line in fh]
    def mapping(addr):
        for m in maps:
            lo, hi = (int(x, 16) for x in m[0].split("-"))
            if lo <= addr < hi:
                return m
    assert mapping(snap.reg(RSP))[-1] == "[stack]"
    assert mapping(snap.reg(RIP))[-1] == stackprov._stackprov.__file__
    exec_paths = {m[5] for m in maps if len(m) > 5 and "x" in m[1] and m[5].startswith("/")}
    mods = {m["path"]: m for m in snap.modules}
    assert exec_paths <= set(mods)
    for path in (os.path.realpath("/usr/bin/python3.11"), stackprov._stackprov.__file__):
        notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
        assert "Build ID: " + mods[path]["build_id"] in notes
    # captured stack memory: the return address slot at the CFA of frame 0 is frame 1's pc
    st = stackprov.Context().unwinder().unwind(snap)
    f0, f1 = st.frames[0], st.frames[1]
    assert int.from_bytes(snap.read_memory(f0.cfa - 8, 8), "little") == f1.pc
    # and the CPython interpreter loop is on the stack, as it must be for a call from Python
    assert "_PyEval_EvalFrameDefault" in [f.function for f in st.frames]
    again = stackprov.Snapshot.from_bytes(snap.to_bytes())
    assert [f.pc for f in stackprov.Context().unwinder().unwind(again).frames] == [f.pc for f in st.frames]
