# SPDX-License-Identifier: Apache-2.0
# Windows minidumps, raw machine state with Mach-O modules, and lookups by PDB and Mach-O identity
# through the binding (issues 33 and 34), against independent answers:
# - stack(minidump=): the chain the dumped thread printed itself with RtlVirtualUnwind under wine
#   (tests/unit/minidump/fixtures.cmake, the minidump_chain test's oracle), the exception as the
#   program printed it, the identity as llvm-readobj-14 reads the program's CodeView record;
# - stack(raw=): states of the Mach-O chains executed by python3-unicorn (the oracle of
#   integration_macho_unicorn: the chain from the executed calls and returns, llvm-nm-16's names),
#   the UUID as llvm-dwarfdump-16 --uuid prints it;
# - symbolize_id("pdb-guid-age" | "macho-uuid", ...) from a bundle with the module gone, and
#   symbolize(symbol_path=) finding a moved PDB: llvm-symbolizer-14 / -16 on the original files.
import functools
import json
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

import stackprov
from conftest import need_tool

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")


def build_path(*parts, what):
    p = os.path.join(os.environ.get("STACKPROV_BUILD_DIR", ""), *parts)
    if not os.path.exists(p):
        pytest.fail("%s is missing: build %s" % (p, what))
    return p


# The peers' answers about the build's fixture files (llvm-nm-16's symbols, llvm-dwarfdump-16's UUIDs,
# llvm-readobj-14's and llvm-symbolizer-14's reading of pdb_cpp.exe) are asked once: several tests
# check against the same answer about the same unchanged file.
@functools.lru_cache(maxsize=None)
def nm_functions(path):
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "macho_unicorn"))
    import macho_unicorn_test as mu
    return tuple(mu.nm_functions(need_tool("llvm-nm-16"), path))


@functools.lru_cache(maxsize=None)
def dwarfdump_uuid(path):
    """The UUID llvm-dwarfdump-16 --uuid prints for a thin Mach-O file."""
    out = subprocess.run([need_tool("llvm-dwarfdump-16"), "--uuid", path], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"UUID: (\S+)", out).group(1)


def minidump_check():
    """tests/integration/minidump/minidump_check.py: the dumped program's printout and llvm-readobj-14's key."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "minidump"))
    import minidump_check as mc
    return mc


# ------------------------------------------------------------------ minidumps


def test_stack_minidump_chain():
    mc = minidump_check()
    fix = build_path("tests", "minidump-fixtures", "exception.dmp", what="minidump_fixtures (wine, mingw-w64)")
    fix = os.path.dirname(fix)
    system32 = build_path("wine-prefix", "drive_c", "windows", "system32", what="minidump_fixtures (the wine prefix)")
    key = mc.readobj_key(fix)
    for mode in ("normal", "full", "exception"):
        p = mc.printout(fix, mode)
        info, threads = stackprov.stack_with_info(minidump=os.path.join(fix, mode + ".dmp"), symbol_path=system32,
                                                  lines=False)
        assert info.source == "minidump"
        (t,) = [t for t in threads if t.tid == p["tid"]]
        frames = [(f.pc, f.sp) for f in t.frames]
        # chain_c's activation is the frame at the stack pointer the thread printed for it; the
        # callers' return addresses and stack pointers are the ones it printed after it.
        at = [i for i, (_, sp) in enumerate(frames) if sp == p["self"][0][1]]
        assert at, "%s: no frame at chain_c's sp %#x: %s" % (mode, p["self"][0][1], frames)
        assert frames[at[0] + 1:at[0] + len(p["self"])] == p["self"][1:], mode
        assert t.stop_reason == "end_of_stack", mode
        # The program's frames carry its identity: pdb-guid-age, the key llvm-readobj-14 reads.
        mine = [f for f in t.frames if f.module and f.module.lower().endswith("\\mdprog.exe")]
        assert mine and {(f.id_kind, f.module_key) for f in mine} == {("pdb-guid-age", key)}, mode
        if mode == "exception":
            assert (info.exception_code, info.exception_address, info.exception_tid) == \
                (p["exc"]["code"], p["exc"]["addr"], p["tid"])
            assert info.exception_name == "EXCEPTION_ACCESS_VIOLATION"
            assert threads[0].tid == p["tid"] and (t.frames[0].pc, t.frames[0].sp) == (p["exc"]["addr"], p["self"][0][1])
            assert re.search(r"mdprog\.exe: identity %s from the module file" % key, info.notes)
        else:
            assert info.exception_code is None
            assert (t.frames[0].pc, t.frames[0].sp) == (p["ctx"]["rip"], p["ctx"]["rsp"]), mode


def test_stack_minidump_errors(tmp_path):
    fix = os.path.dirname(build_path("tests", "minidump-fixtures", "normal.dmp", what="minidump_fixtures"))
    cut = tmp_path / "cut.dmp"
    cut.write_bytes(open(os.path.join(fix, "normal.dmp"), "rb").read()[:200])
    with pytest.raises(stackprov.Error, match="passes the end of the file"):
        stackprov.stack(minidump=str(cut))
    with pytest.raises(stackprov.FileMissingError, match="absent.dmp"):
        stackprov.stack(minidump=str(tmp_path / "absent.dmp"))
    with pytest.raises(stackprov.FileMissingError, match="symbol_path directory '%s' does not exist" % (tmp_path / "no")):
        stackprov.stack(minidump=os.path.join(fix, "normal.dmp"), symbol_path=[str(tmp_path / "no")])
    with pytest.raises(stackprov.InvalidArgumentError, match="give one of pid=, core=, minidump=, raw= and snapshot="):
        stackprov.stack(core="x.core", minidump=os.path.join(fix, "normal.dmp"))
    with pytest.raises(stackprov.InvalidArgumentError, match="symbol_path '.*' is only valid with minidump"):
        stackprov.stack(raw=str(tmp_path), symbol_path=str(tmp_path))


def test_stack_snapshot_errors(tmp_path):
    # Saved snapshots (snapshot=): each bad input named. (Their frames against gdb: python_runtime_snapshot.)
    with pytest.raises(stackprov.FileMissingError, match="snapshot '%s': no such file" % (tmp_path / "absent.snap")):
        stackprov.stack(snapshot=str(tmp_path / "absent.snap"))
    junk = tmp_path / "junk.snap"
    junk.write_bytes(b"SPROVSNP" + bytes(40))
    with pytest.raises(stackprov.Error, match="junk.snap"):
        stackprov.stack(snapshot=str(junk))
    with pytest.raises(stackprov.InvalidArgumentError, match="give one of pid=, core=, minidump=, raw= and snapshot="):
        stackprov.stack(core="x.core", snapshot=str(junk))
    with pytest.raises(stackprov.InvalidArgumentError, match="exe 'a.out' is only valid with core"):
        stackprov.stack(snapshot=str(junk), exe="a.out")
    with pytest.raises(stackprov.InvalidArgumentError, match="invalid snapshot 7"):
        stackprov.stack(snapshot=7)


# ------------------------------------------------------------------ raw machine state (Mach-O)


def unicorn_states(out_dir, per_arch=40, gone=None):
    """Raw states of chain_x86_64 and chain_arm64 executed by unicorn (macho_unicorn_test.py's Run):
    {document name: the executed frames}. A fixed sample of the instructions its oracle forces
    (function entries, prologues, epilogues, returns) and of the rest. gone: a directory the images
    (and dSYMs) are copied to; the same states naming them there by identity go to OUT_DIR-bundle."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "macho_unicorn"))
    import macho_unicorn_test as mu
    expected = {}
    os.makedirs(out_dir, exist_ok=True)
    if gone is not None:
        os.makedirs(out_dir + "-bundle")
    for arch in ("x86_64", "arm64"):
        path = build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_" + arch,
                          what="macho_unicorn_fixtures (clang-16, ld64.lld-16)")
        run = mu.Run(path, arch, mu.SLIDE)
        run.syms = nm_functions(path)
        if gone is not None:
            run.gone_path = os.path.join(gone, os.path.basename(path))
            shutil.copy(path, run.gone_path)
            shutil.copytree(path + ".dSYM", run.gone_path + ".dSYM")
        trace, _ = run.execute()
        rng = random.Random(34)
        must = sorted(mu.choose(trace, rng, 0))
        rest = sorted(set(range(len(trace))) - set(must))
        chosen = set(rng.sample(must, min(per_arch, len(must)))) | set(rng.sample(rest, min(per_arch // 4, len(rest))))
        _, exp = run.execute(chosen, out_dir, arch + "_")
        expected.update(exp)
    return expected


def test_stack_raw_macho(tmp_path):
    expected = unicorn_states(str(tmp_path))
    info, threads = stackprov.stack_with_info(raw=str(tmp_path), lines=False)
    assert info.source == "raw"
    assert sorted(t.name for t in threads) == sorted(expected)
    uuids = {}
    for arch in ("x86_64", "arm64"):
        path = build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_" + arch, what="macho_unicorn_fixtures")
        uuids[arch] = dwarfdump_uuid(path)
    bad = []
    for t in threads:
        exp = expected[t.name]
        got = [(f.pc, f.sp) for f in t.frames]
        if got != [(e["pc"], e["sp"]) for e in exp] or [f.cfa for f in t.frames[:-1]] != [e["cfa"] for e in exp[:-1]]:
            bad.append("%s: %s, executed %s" % (t.name, got, [(e["pc"], e["sp"], e["cfa"]) for e in exp]))
        if [f.function or "" for f in t.frames] != [e["function"] for e in exp]:
            bad.append("%s: named %s, llvm-nm-16 %s" % (t.name, [f.function for f in t.frames], [e["function"] for e in exp]))
        if t.stop_reason != "end_of_stack" or any(f.method != "compact_unwind" for f in t.frames[1:]):
            bad.append("%s: stop %s, methods %s" % (t.name, t.stop_reason, [f.method for f in t.frames]))
        arch = t.name.split("_")[0] if t.name.startswith("arm64") else "x86_64"
        if {(f.id_kind, f.module_key) for f in t.frames} != {("macho-uuid", uuids[arch])}:
            bad.append("%s: identities %s, llvm-dwarfdump-16 %s" % (t.name, {(f.id_kind, f.module_key) for f in t.frames},
                                                                    uuids[arch]))
    assert not bad, "%d of %d states differ from the execution:\n%s" % (len(bad), len(threads), "\n".join(bad[:10]))


def test_stack_raw_macho_bundle_offline(tmp_path):
    """The images bundled (ranges from their dSYMs), then gone: the states naming them by UUID,
    unwound and named from the bundle alone (offline) equal the executed chains."""
    gone = tmp_path / "gone"
    gone.mkdir()
    expected = unicorn_states(str(tmp_path / "states"), per_arch=24, gone=str(gone))
    b = stackprov.Bundle.build([str(gone / "chain_x86_64"), str(gone / "chain_arm64")])
    with stackprov.Store(str(tmp_path / "store"), create=True) as st:
        st.put(b)
    shutil.rmtree(gone)
    ctx = stackprov.Context(bundle_store=str(tmp_path / "store"), offline=True)
    threads = stackprov.stack(raw=str(tmp_path / "states-bundle"), context=ctx)
    assert sorted(t.name for t in threads) == sorted(expected)
    bad = []
    for t in threads:
        exp = expected[t.name]
        if [(f.pc, f.sp) for f in t.frames] != [(e["pc"], e["sp"]) for e in exp] or \
                [f.cfa for f in t.frames[:-1]] != [e["cfa"] for e in exp[:-1]]:
            bad.append("%s: %s, executed %s" % (t.name, [(f.pc, f.sp, f.cfa) for f in t.frames],
                                                [(e["pc"], e["sp"], e["cfa"]) for e in exp]))
        if [f.resolved_function for f in t.frames] != [e["function"] for e in exp]:
            bad.append("%s: named %s, llvm-nm-16 %s" % (t.name, [f.resolved_function for f in t.frames],
                                                        [e["function"] for e in exp]))
        if t.stop_reason != "end_of_stack" or any(f.method != "cfi_bundle" for f in t.frames[1:]) or \
                any(f.resolver != "bundle" for f in t.frames):
            bad.append("%s: stop %s, methods %s, resolvers %s" % (t.name, t.stop_reason, [f.method for f in t.frames],
                                                                 [f.resolver for f in t.frames]))
    assert not bad, "%d of %d states differ from the execution:\n%s" % (len(bad), len(threads), "\n".join(bad[:10]))


def test_stack_raw_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "arch": "x86_64", "registers": {"rip": "0x1", "xyz": "0x2"},
                               "memory": [], "modules": []}))
    with pytest.raises(stackprov.Error, match="xyz"):
        stackprov.stack(raw=str(bad))
    with pytest.raises(stackprov.InvalidArgumentError, match="tid 5 does not apply to raw"):
        stackprov.stack(raw=str(bad), tid=5)
    with pytest.raises(stackprov.FileMissingError, match="absent.json"):
        stackprov.stack(raw=str(tmp_path / "absent.json"))


# ------------------------------------------------------------------ lookups by identity


def llvm_chains(symbolizer, obj, addrs):
    r = subprocess.run([need_tool(symbolizer), "--obj=" + obj, "--output-style=JSON", "--inlines"],
                       input="".join("0x%x\n" % a for a in addrs), capture_output=True, text=True, check=True)
    return [[(s["FunctionName"], s["FileName"], s["Line"], s["Column"]) for s in json.loads(line)["Symbol"]]
            for line in r.stdout.splitlines() if line.strip()]


def differences(addrs, got, ref):
    out = []
    for a, g, r in zip(addrs, got, ref):
        # llvm's JSON writes an unknown file "" and an unknown line or column 0 (ours: None)
        gg = [(f.function, f.file or "", f.line or 0, f.column or 0) for f in g]
        if gg != r:
            out.append("%#x: %s, llvm %s" % (a, gg, r))
    return out


@functools.lru_cache(maxsize=None)
def pdb_fixture():
    """pdb_cpp.exe (clang-14 -gcodeview, lld-link-14 /debug: C++ with inlining), its .text addresses,
    its symbol-server key from llvm-readobj-14, and llvm-symbolizer-14's chains at those addresses."""
    exe = build_path("tests", "pdb-fixtures", "pdb_cpp.exe", what="unit_pdb_fixtures (clang-14, lld-link-14)")
    readobj = need_tool("llvm-readobj-14")
    t = subprocess.run([readobj, "--coff-debug-directory", "--sections", "--file-headers", exe], capture_output=True,
                       text=True, check=True).stdout
    g = [int(b, 16) for b in re.search(r"PDBGUID: \(([0-9A-F ]+)\)", t).group(1).split()]
    age = int(re.search(r"PDBAge: (\d+)", t).group(1))
    key = "".join("%02X" % b for b in g[3::-1] + g[5:3:-1] + g[7:5:-1] + g[8:]) + "%X" % age
    base = int(re.search(r"ImageBase: (0x[0-9A-F]+)", t).group(1), 16)
    sec = re.search(r"Name: \.text .*?VirtualSize: (0x[0-9A-F]+)\s+VirtualAddress: (0x[0-9A-F]+)", t, re.S)
    start = base + int(sec.group(2), 16)
    addrs = tuple(range(start, start + int(sec.group(1), 16)))
    return exe, key, addrs, tuple(llvm_chains("llvm-symbolizer-14", exe, addrs))


def test_symbolize_id_pdb_bundle(tmp_path):
    exe, key, addrs, ref = pdb_fixture()
    # The image and its PDB copied, bundled into a store, then gone: only the bundle answers.
    work = tmp_path / "m"
    work.mkdir()
    shutil.copy(exe, work / "pdb_cpp.exe")
    b = stackprov.Bundle.build([str(work / "pdb_cpp.exe")])
    assert [(m.id_kind, m.name) for m in b.modules] == [("pdb-guid-age", "pdb_cpp.exe")]
    with stackprov.Store(str(tmp_path / "store"), create=True) as st:
        st.put(b)
    shutil.rmtree(work)
    got = stackprov.symbolize_id("pdb-guid-age", key, addrs, store=str(tmp_path / "store"))
    diff = differences(addrs, got, ref)
    assert not diff, "%d of %d addresses differ from llvm-symbolizer-14:\n%s" % (len(diff), len(addrs), "\n".join(diff[:10]))
    assert {f.resolver for chain in got for f in chain} <= {"bundle", "none"}
    # The key in lower case, as a Symbolizer method: the same answers.
    sym = stackprov.Context(bundle_store=str(tmp_path / "store")).symbolizer()
    assert [[(f.function, f.line) for f in c] for c in sym.symbolize_id("pdb-guid-age", key.lower(), addrs[:50])] == \
        [[(f.function, f.line) for f in c] for c in got[:50]]
    # Errors name the offending value.
    with pytest.raises(stackprov.InvalidArgumentError, match="invalid id kind 'pdb-guid'"):
        stackprov.symbolize_id("pdb-guid", key, addrs[:1], store=str(tmp_path / "store"))
    with pytest.raises(stackprov.InvalidArgumentError, match="invalid pdb-guid-age key '%s'" % key[:20]):
        stackprov.symbolize_id("pdb-guid-age", key[:20], addrs[:1], store=str(tmp_path / "store"))
    other = key[:-1] + "%X" % (int(key[-1], 16) + 1)
    with pytest.raises(stackprov.NotFoundError, match=other):
        stackprov.symbolize_id("pdb-guid-age", other, addrs[:1], store=str(tmp_path / "store"))
    with pytest.raises(stackprov.FileMissingError, match="absent.sbundle"):
        stackprov.symbolize_id("pdb-guid-age", key, addrs[:1], bundle=str(tmp_path / "absent.sbundle"))


def test_symbolize_symbol_path_pdb(tmp_path):
    """symbolize(symbol_path=): the image moved, its RSDS path made to point nowhere, the PDB in a
    symbol store's NAME.pdb/KEY/NAME.pdb: the answers llvm-symbolizer-14 gives on the original."""
    exe, key, addrs, ref = pdb_fixture()
    data = open(exe, "rb").read()
    pdb_path = os.path.abspath(os.path.splitext(exe)[0] + ".pdb").encode()
    assert data.count(pdb_path) == 1, "the RSDS record's path %s is not in the image once" % pdb_path
    moved = tmp_path / "bin"
    moved.mkdir()
    (moved / "pdb_cpp.exe").write_bytes(data.replace(pdb_path, pdb_path.replace(b"pdb-fixtures", b"pdb-fixturez")))
    store = tmp_path / "symbols"
    (store / "pdb_cpp.pdb" / key).mkdir(parents=True)
    shutil.copy(os.path.splitext(exe)[0] + ".pdb", store / "pdb_cpp.pdb" / key / "pdb_cpp.pdb")
    got = stackprov.symbolize(str(moved / "pdb_cpp.exe"), addrs, symbol_path=str(store))
    diff = differences(addrs, got, ref)
    assert not diff, "%d of %d addresses differ from llvm-symbolizer-14:\n%s" % (len(diff), len(addrs), "\n".join(diff[:10]))
    # Without the symbol path the PDB is not found: the symbol tables alone, no lines.
    bare = stackprov.symbolize(str(moved / "pdb_cpp.exe"), addrs[:50], debug_dirs=[str(tmp_path)])
    assert all(c[-1].line is None and c[-1].file is None for c in bare)
    with pytest.raises(stackprov.InvalidArgumentError, match="the context's"):
        stackprov.symbolize(exe, addrs[:1], symbol_path=str(store), context=stackprov.Context())


def test_symbolize_id_macho_bundle(tmp_path):
    exe = build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_x86_64", what="macho_unicorn_fixtures")
    addrs = macho_text(exe)
    uuid = dwarfdump_uuid(exe)
    ref = llvm_chains("llvm-symbolizer-16", exe, addrs)  # with the dSYM beside the image
    work = tmp_path / "m"
    work.mkdir()
    shutil.copy(exe, work / "chain_x86_64")
    shutil.copytree(exe + ".dSYM", work / "chain_x86_64.dSYM")
    b = stackprov.Bundle.build([str(work / "chain_x86_64")])
    assert [(m.id_kind, m.id) for m in b.modules] == [("macho-uuid", uuid.replace("-", "").lower())]
    bundle = tmp_path / "chain.sbundle"
    bundle.write_bytes(b.to_bytes())
    shutil.rmtree(work)
    got = stackprov.symbolize_id("macho-uuid", uuid, addrs, bundle=str(bundle))
    diff = differences(addrs, got, ref)
    assert not diff, "%d of %d addresses differ from llvm-symbolizer-16:\n%s" % (len(diff), len(addrs), "\n".join(diff[:10]))
    assert sum(1 for c in got if c[-1].line) > len(addrs) // 2  # the dSYM's lines, not only symbols
    # Without dashes, lower case: the same module; another UUID: the bundle is refused naming both.
    assert stackprov.symbolize_id("macho-uuid", uuid.replace("-", "").lower(), addrs[:20], bundle=str(bundle))[5][-1].function \
        == got[5][-1].function
    other = uuid[:-1] + ("0" if uuid[-1] != "0" else "1")
    with pytest.raises(stackprov.BuildIdMismatchError, match=other.replace("-", "").lower()):
        stackprov.symbolize_id("macho-uuid", other, addrs[:1], bundle=str(bundle))
    with pytest.raises(stackprov.InvalidArgumentError, match="invalid macho-uuid '%s'" % uuid[:-1]):
        stackprov.symbolize_id("macho-uuid", uuid[:-1], addrs[:1], bundle=str(bundle))
    # The CLI's --uuid: the same lookup (JSON answers against llvm-symbolizer-16's).
    from conftest import need_env
    some = addrs[::37]
    r = subprocess.run([need_env("STACKPROV_CLI"), "symbolize", "--uuid", uuid, "--bundle", str(bundle),
                        "--output-style=JSON"] + ["0x%x" % a for a in some], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cli = cli_chains(r.stdout)
    assert cli == [ref[addrs.index(a)] for a in some]


def cli_chains(stdout):
    """The chains of `stackprov symbolize --output-style=JSON ADDR...` (one JSON array, as llvm-symbolizer's)."""
    doc = json.loads(stdout)
    return [[(f["FunctionName"], f["FileName"], f["Line"], f["Column"]) for f in a["Symbol"]] for a in doc]


def macho_text(exe):
    heads = subprocess.run([need_tool("llvm-objdump-16"), "--section-headers", exe], capture_output=True, text=True,
                           check=True).stdout
    m = re.search(r"__text\s+([0-9a-f]+)\s+([0-9a-f]+)", heads)
    start = int(m.group(2), 16)
    return list(range(start, start + int(m.group(1), 16)))


def test_symbolize_dsym_dir(tmp_path):
    """The image alone, its dSYM in another directory given as a debug directory (the dSYM search
    path): llvm-symbolizer-16's answers on the original image with its dSYM beside it."""
    exe = build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_arm64", what="macho_unicorn_fixtures")
    addrs = macho_text(exe)
    ref = llvm_chains("llvm-symbolizer-16", exe, addrs)
    (tmp_path / "bin").mkdir()
    (tmp_path / "dsyms").mkdir()
    shutil.copy(exe, tmp_path / "bin" / "chain_arm64")
    # No dSYM anywhere yet: the DWARF of the objects the image's debug map (N_OSO) names, which the
    # dSYM was linked from: the same answers, from the objects.
    bare = stackprov.symbolize(str(tmp_path / "bin" / "chain_arm64"), addrs, debug_dirs=[str(tmp_path / "dsyms")])
    diff = differences(addrs, bare, ref)
    assert not diff, "%d of %d addresses differ from llvm-symbolizer-16:\n%s" % (len(diff), len(addrs), "\n".join(diff[:10]))
    lined = [c[-1] for c in bare if c[-1].line]
    assert len(lined) > len(addrs) // 2 and all(f.source.endswith(".o") for f in lined), {f.source for f in lined}
    shutil.copytree(exe + ".dSYM", tmp_path / "dsyms" / "chain_arm64.dSYM")
    got = stackprov.symbolize(str(tmp_path / "bin" / "chain_arm64"), addrs, debug_dirs=str(tmp_path / "dsyms"))
    diff = differences(addrs, got, ref)
    assert not diff, "%d of %d addresses differ from llvm-symbolizer-16:\n%s" % (len(diff), len(addrs), "\n".join(diff[:10]))
    lined = [c[-1] for c in got if c[-1].line]
    dsym = str(tmp_path / "dsyms" / "chain_arm64.dSYM" / "Contents" / "Resources" / "DWARF" / "chain_arm64")
    assert len(lined) > len(addrs) // 2 and {f.source for f in lined} == {dsym}  # the dSYM now, not the objects
    # The CLI's --dsym-dir: the same answers.
    from conftest import need_env
    some = addrs[::29]
    r = subprocess.run([need_env("STACKPROV_CLI"), "symbolize", "--obj", str(tmp_path / "bin" / "chain_arm64"),
                        "--dsym-dir", str(tmp_path / "dsyms"), "--output-style=JSON"] + ["0x%x" % a for a in some],
                       capture_output=True, text=True, timeout=60)
    cli = cli_chains(r.stdout)
    assert cli == [ref[addrs.index(a)] for a in some]
    with pytest.raises(stackprov.FileMissingError, match="debug_dirs directory '%s' does not exist" % (tmp_path / "nope")):
        stackprov.symbolize(exe, addrs[:1], debug_dirs=[str(tmp_path / "nope")])


# ------------------------------------------------------------------ python3 -m stackprov stack --minidump / --raw


def test_python_m_stack_minidump_raw_equal_cli(tmp_path):
    """`python3 -m stackprov stack --minidump/--raw` prints what the CLI prints, byte for byte, exit status too."""
    from conftest import need_env
    cli = need_env("STACKPROV_CLI")
    fix = os.path.dirname(build_path("tests", "minidump-fixtures", "exception.dmp", what="minidump_fixtures"))
    system32 = build_path("wine-prefix", "drive_c", "windows", "system32", what="minidump_fixtures (the wine prefix)")
    states = tmp_path / "states"
    states.mkdir()
    unicorn_states(str(states), per_arch=8)
    cases = [["--minidump", os.path.join(fix, "exception.dmp"), "--symbol-path", system32],
             ["--minidump", os.path.join(fix, "normal.dmp"), "--json", "--no-lines"],
             ["--raw", str(states)], ["--raw", str(states), "--json"],
             ["--minidump", str(tmp_path / "absent.dmp")], ["--raw", str(states), "--tid", "3"],
             ["--symbol-path", str(tmp_path), "--raw", str(states)]]
    outs = []
    for args in cases:
        want = subprocess.run([cli, "stack"] + args, capture_output=True, text=True, timeout=120)
        got = subprocess.run([sys.executable, "-m", "stackprov", "stack"] + args, capture_output=True, text=True,
                             timeout=120)
        assert (got.stdout, got.returncode) == (want.stdout, want.returncode), args
        if want.returncode == 2:  # a usage error: one line naming the offending option
            assert len(got.stderr.splitlines()) == 1 and args[0] in got.stderr, args
        outs.append(got.stdout)
    assert "exception: 0x" in outs[0]


def test_stack_json_identity_of_any_format(tmp_path):
    """`stack --json` frames name their module's identity in every format (id_kind + module_key, the
    form Frame.module_key has): the PE program's pdb-guid-age key as llvm-readobj-14 reads it, the
    Mach-O fixtures' UUIDs as llvm-dwarfdump-16 reads them; build_id stays an ELF build-id ("")."""
    from conftest import need_env
    cli = need_env("STACKPROV_CLI")
    mc = minidump_check()
    fix = os.path.dirname(build_path("tests", "minidump-fixtures", "exception.dmp", what="minidump_fixtures"))
    key = mc.readobj_key(fix)
    system32 = build_path("wine-prefix", "drive_c", "windows", "system32", what="minidump_fixtures (the wine prefix)")
    out = subprocess.run([cli, "stack", "--minidump", os.path.join(fix, "normal.dmp"), "--symbol-path", system32,
                          "--json", "--no-lines"], capture_output=True, text=True, check=True, timeout=120).stdout
    frames = [f for t in json.loads(out)["threads"] for f in t["frames"] if f.get("module")]
    mine = [f for f in frames if f["module"].lower().endswith("\\mdprog.exe")]
    assert mine and {(f["id_kind"], f["module_key"], f["build_id"]) for f in mine} == {("pdb-guid-age", key, "")}
    states = tmp_path / "states"
    states.mkdir()
    unicorn_states(str(states), per_arch=2)
    uuids = set()
    for arch in ("x86_64", "arm64"):
        path = build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_" + arch, what="macho_unicorn_fixtures")
        uuids.add(dwarfdump_uuid(path))
    out = subprocess.run([cli, "stack", "--raw", str(states), "--json", "--no-lines"], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    got = {(f["id_kind"], f["module_key"], f["build_id"]) for t in json.loads(out)["threads"] for f in t["frames"]}
    assert got == {("macho-uuid", u, "") for u in uuids}, got


def test_stack_raw_macho_fat_slice(tmp_path):
    """Raw states naming a fat (universal) file: each state's slice is the one of its architecture
    (arm64 is not this host's), placed, unwound and named as from the thin file: every frame equals
    the executed chain; the slices' UUIDs are llvm-dwarfdump-16's for the fat file."""
    states = tmp_path / "states"
    expected = unicorn_states(str(states), per_arch=6)
    lipo, dwarfdump = need_tool("llvm-lipo-16"), need_tool("llvm-dwarfdump-16")
    thin = {a: build_path("tests", "integration", "macho_unicorn", "fixtures", "chain_" + a, what="macho_unicorn_fixtures")
            for a in ("x86_64", "arm64")}
    fat = str(tmp_path / "chain_fat")
    subprocess.run([lipo, "-create", thin["x86_64"], thin["arm64"], "-output", fat], check=True)
    dd = subprocess.run([dwarfdump, "--uuid", fat], capture_output=True, text=True, check=True).stdout
    uuids = dict((a, u) for u, a in re.findall(r"UUID: (\S+) \((\w+)\)", dd))
    assert set(uuids) == {"x86_64", "arm64"}, dd
    for name in os.listdir(states):
        doc = json.load(open(states / name))
        for m in doc["modules"]:
            m["path"] = fat
        json.dump(doc, open(states / name, "w"))
    info, threads = stackprov.stack_with_info(raw=str(states), lines=False)
    assert sorted(t.name for t in threads) == sorted(expected)
    bad = []
    for t in threads:
        arch = "arm64" if t.name.startswith("arm64") else "x86_64"
        got = [(f.pc, f.sp, f.function or "") for f in t.frames]
        want = [(e["pc"], e["sp"], e["function"]) for e in expected[t.name]]
        if got != want or {(f.module, f.module_key) for f in t.frames} != {(fat, uuids[arch])}:
            bad.append("%s: %s %s, executed %s, UUID %s" % (t.name, got, {(f.module, f.module_key) for f in t.frames},
                                                             want, uuids[arch]))
    assert not bad, "\n".join(bad[:6])

