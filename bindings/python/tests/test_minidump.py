# SPDX-License-Identifier: Apache-2.0
# Context.open_minidump on the dumps written under wine by tests/unit/minidump/fixtures.cmake, against
# the dumped program's own printout (its worker's tid, GetThreadContext's registers, the exception)
# and llvm-readobj-14's GUID/Age of the program.
import os
import re

import pytest

import stackprov

X86_64_RIP, X86_64_RSP = 16, 7


def fixtures():
    d = os.path.join(os.environ.get("STACKPROV_BUILD_DIR", ""), "tests", "minidump-fixtures")
    if not os.path.exists(os.path.join(d, "exception.dmp")):
        pytest.fail("%s has no minidump fixtures: build minidump_fixtures (wine, mingw-w64)" % d)
    return d


def printout(mode):
    p = {}
    for line in open(os.path.join(fixtures(), mode + ".out")):
        w = line.split()
        if w[:1] == ["tid"]:
            p["tid"] = int(w[1], 16)
        elif w[:1] == ["ctx"]:
            p["rip"], p["rsp"] = int(w[2], 16), int(w[4], 16)
        elif w[:1] == ["exc"]:
            p["code"], p["addr"] = int(w[2], 16), int(w[4], 16)
    return p


def readobj_key():
    t = open(os.path.join(fixtures(), "mdprog.readobj.txt")).read()
    g = [int(b, 16) for b in re.search(r"PDBGUID: \(([0-9A-F ]+)\)", t).group(1).split()]
    age = int(re.search(r"PDBAge: (\d+)", t).group(1))
    return "".join("%02X" % b for b in g[3::-1] + g[5:3:-1] + g[7:5:-1] + g[8:]) + "%X" % age


def test_open_minidump_exception():
    p = printout("exception")
    with stackprov.Context() as ctx:
        proc = ctx.open_minidump(os.path.join(fixtures(), "exception.dmp"))
        info = proc.info
        assert (info.exception_code, info.exception_address, info.exception_tid) == (p["code"], p["addr"], p["tid"])
        assert info.exception_name == "EXCEPTION_ACCESS_VIOLATION"
        first = proc.threads[0]
        assert first.tid == p["tid"]
        assert first.reg(X86_64_RIP) == p["addr"]
        assert re.search(r"mdprog\.exe: identity %s from the module file" % readobj_key(), info.notes)


def test_open_minidump_normal_and_errors(tmp_path):
    p = printout("normal")
    with stackprov.Context() as ctx:
        proc = ctx.open_minidump(os.path.join(fixtures(), "normal.dmp"), tid=p["tid"])
        assert proc.info.exception_code is None
        (t,) = proc.threads
        assert (t.tid, t.reg(X86_64_RIP), t.reg(X86_64_RSP)) == (p["tid"], p["rip"], p["rsp"])
        bad = tmp_path / "cut.dmp"
        bad.write_bytes(open(os.path.join(fixtures(), "normal.dmp"), "rb").read()[:100])
        with pytest.raises(stackprov.Error, match="passes the end of the file"):
            ctx.open_minidump(str(bad))
