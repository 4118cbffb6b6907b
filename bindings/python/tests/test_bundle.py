# SPDX-License-Identifier: Apache-2.0
# Bundles and the bundle store from Python against the CLI (`stackprov bundle build/inspect/fsck`,
# `trace-verify`), hashlib (sha256 of the bytes), readelf -n (build-ids) and nm (function addresses).
import hashlib
import json
import os
import re
import subprocess

import pytest
import stackprov
from conftest import need_env, need_tool

LIBGCC = "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def build_id(path):
    """The GNU build-id as readelf -n prints it."""
    r = run([need_tool("readelf"), "-n", path])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    if not m:
        pytest.fail("readelf -n %s shows no build-id: %s" % (path, r.stderr))
    return m.group(1)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def inputs():
    fx = need_env("STACKPROV_FIXTURE")
    if not os.path.exists(LIBGCC):
        pytest.fail("%s missing (libgcc-s1)" % LIBGCC)
    return [fx, LIBGCC]


def test_build_equals_cli_bundle_build(tmp_path):
    cli = need_env("STACKPROV_CLI")
    paths = inputs()
    b = stackprov.Bundle.build(paths)
    out = tmp_path / "cli.sbundle"
    r = run([cli, "bundle", "build", "-o", str(out)] + paths)
    assert r.returncode == 0, r.stderr
    # the same digest as the CLI, and both are the sha256 of the bytes (hashlib)
    assert r.stdout.strip() == b.digest
    assert b.digest == "sha256:" + sha256_file(str(out))
    assert b.digest == "sha256:" + hashlib.sha256(b.to_bytes()).hexdigest()
    assert b.size == len(b.to_bytes())
    # modules (ordered by identity): readelf's build-ids, the files' basenames and sha256s
    assert [(m.id_kind, m.id, m.name, m.sha256_file) for m in b.modules] == sorted(
        ("elf-build-id", build_id(p), os.path.basename(p), sha256_file(p)) for p in paths)
    # save() writes the same bytes; open() and from_bytes() read them back
    # a symlink planted at the old fixed temp name (PATH.tmp<pid>) and at PATH itself is never
    # written through (doc/hardening.md attack 5): the victim keeps its bytes
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(str(victim), str(tmp_path / ("py.sbundle.tmp%d" % os.getpid())))
    os.symlink(str(victim), str(tmp_path / "py.sbundle"))
    b.save(str(tmp_path / "py.sbundle"))
    assert victim.read_text() == "precious\n" and not os.path.islink(str(tmp_path / "py.sbundle"))
    assert sha256_file(str(tmp_path / "py.sbundle")) == b.digest[7:]
    assert stackprov.Bundle.open(str(out)).digest == b.digest
    assert stackprov.Bundle.from_bytes(out.read_bytes()).digest == b.digest
    # one file with a name, as --name
    named = stackprov.Bundle.build(paths[:1], names=["app"])
    r = run([cli, "bundle", "build", "--name", "app", "-o", str(tmp_path / "n.sbundle"), paths[0]])
    assert r.stdout.strip() == named.digest and named.modules[0].name == "app"


def test_lookup_names_nm_symbol():
    fx = need_env("STACKPROV_FIXTURE")
    b = stackprov.Bundle.build([fx, LIBGCC])
    r = run([need_tool("nm"), "--defined-only", fx])
    addr = None
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "Tt" and f[2] == "main":
            addr = int(f[0], 16)
    assert addr is not None, "nm shows no main in %s" % fx
    chain = b.lookup(addr, build_id=build_id(fx))
    assert chain and chain[-1].function == "main"
    index = [m.id for m in b.modules].index(build_id(fx))
    assert b.lookup(addr, module=index)[-1].function == "main"
    assert b.unwind_row(addr, module=index).startswith("CFA=")
    index = json.loads(b.export("symbol-index-json"))
    assert index  # the export parses as JSON


def test_store_round_trip_and_cli(tmp_path):
    cli = need_env("STACKPROV_CLI")
    paths = inputs()
    b = stackprov.Bundle.build(paths)
    d = str(tmp_path / "store")
    with stackprov.Store(d, create=True) as st:
        assert st.dir == d
        assert st.put(b.to_bytes()) == b.digest
        assert st.put(b) == b.digest  # a Bundle too
        assert b.digest in st and st.list() == [b.digest]
        for p in paths:
            bid = build_id(p)
            assert st.find(bid) == b.digest
            data = st.get(build_id=bid)
            assert "sha256:" + hashlib.sha256(data).hexdigest() == b.digest
        assert hashlib.sha256(st.get(b.digest)).hexdigest() == b.digest[7:]
        assert st.open(build_id=build_id(paths[0])).digest == b.digest
        assert sha256_file(st.blob_path(b.digest)) == b.digest[7:]
        report, errors = st.fsck()
        assert errors == 0
    # the CLI reads the store Python wrote
    r = run([cli, "bundle", "inspect", b.digest, "--store", d, "--json"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["bundle"] == b.digest and [m["id"] for m in j["modules"]] == sorted(build_id(p) for p in paths)
    assert run([cli, "bundle", "fsck", "--store", d]).returncode == 0
    # and Python reads a store the CLI wrote
    d2 = str(tmp_path / "store2")
    r = run([cli, "bundle", "build", "--store", d2] + paths)
    assert r.stdout.strip() == b.digest
    assert stackprov.Store(d2).list() == [b.digest]


def test_store_sign_verified_by_cli(tmp_path):
    cli = need_env("STACKPROV_CLI")
    key, log = str(tmp_path / "k.pem"), str(tmp_path / "log")
    assert run([cli, "keygen", "-o", key]).returncode == 0
    assert run([cli, "log", "init", log, "--key", key]).returncode == 0
    b = stackprov.Bundle.build(inputs()[:1])
    d = str(tmp_path / "store")
    with stackprov.Store(d, create=True) as st:
        st.put(b)
        assert st.sign(b.digest, key=key, log_dir=log) == 0  # the log's first entry
        assert os.path.exists(st.sidecar_path(b.digest, "dsse.json"))
    r = run([cli, "trace-verify", "--bundle", b.digest, "--store", d, "--dsse", "--key", key + ".pub", "--rekor",
             "--trusted-root", os.path.join(log, "trusted_root.json")])
    assert r.returncode == 0, r.stdout + r.stderr


def test_bundle_errors(tmp_path):
    with pytest.raises(stackprov.InvalidArgumentError):
        stackprov.Bundle.build([])
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.Bundle.build(["/nonexistent/prog"])
    assert "/nonexistent/prog" in e.value.message
    with pytest.raises(stackprov.FormatError) as e:
        stackprov.Bundle.build(["/etc/hostname"])
    assert "/etc/hostname" in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        stackprov.Bundle.build([LIBGCC], names=["a", "b"])
    assert "names has 2" in e.value.message
    with pytest.raises(stackprov.VerificationError) as e:
        stackprov.Bundle.from_bytes(b"junk")
    assert "4 bytes" in e.value.message
    b = stackprov.Bundle.build([LIBGCC])
    with pytest.raises(stackprov.FileMissingError) as e:
        b.save(str(tmp_path / "nodir" / "b.sbundle"))
    assert str(tmp_path / "nodir" / "b.sbundle") in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        b.lookup(0x1000, module=5)
    assert "module 5" in e.value.message
    with pytest.raises(stackprov.NotFoundError) as e:
        b.lookup(0x1000, build_id="ab" * 20)
    assert "ab" * 20 in e.value.message
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        b.export("yaml")
    assert "'yaml'" in e.value.message
    with pytest.raises(stackprov.NotFoundError) as e:
        stackprov.Store(str(tmp_path / "none"))
    assert str(tmp_path / "none") in e.value.message
    st = stackprov.Store(str(tmp_path / "st"), create=True)
    with pytest.raises(stackprov.NotFoundError) as e:
        st.get(build_id="cd" * 20)
    assert "cd" * 20 in e.value.message
    with pytest.raises(stackprov.NotFoundError) as e:
        st.get("sha256:" + "0" * 64)
    assert "0" * 64 in e.value.message
    with pytest.raises(stackprov.VerificationError):
        st.put(b"junk")
    st.put(b)
    with pytest.raises(stackprov.FileMissingError) as e:
        st.sign(b.digest, key="/nonexistent/k.pem", log_dir=str(tmp_path))
    assert "/nonexistent/k.pem" in e.value.message
    st.close()
    with pytest.raises(stackprov.InvalidArgumentError) as e:
        st.list()
    assert "closed" in e.value.message
