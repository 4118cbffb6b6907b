# SPDX-License-Identifier: Apache-2.0
# python3 -m stackprov keygen | sign | bundle build | bundle export. They run the C functions the CLI runs (sprov_key_generate,
# sprov_dsse_sign_file, sprov_bundle_build, sprov_bundle_export), so the oracles are the CLI tests' independent ones
# (tests/integration/provenance/cli_test.py): the key id is hashlib's sha256 of the DER
# SubjectPublicKeyInfo, the statement's subject is hashlib's sha256 of the file, and the DSSE
# signature over the PAE verifies with python3-cryptography's ECDSA. The envelope is also the CLI's,
# byte for byte (RFC 6979 signing is deterministic); errors exit as the CLI's.
import base64
import hashlib
import json
import os
import re
import stat
import subprocess
import sys

import pytest
from conftest import need_env


def py(args, cwd):
    return subprocess.run([sys.executable, "-m", "stackprov"] + args, capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def cli(args, cwd):
    return subprocess.run([need_env("STACKPROV_CLI")] + args, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_python_m_keygen_and_sign(tmp_path):
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
    except ImportError as e:
        pytest.fail("python3-cryptography (the independent ECDSA verifier) is not importable: %s" % e)
    r = py(["keygen", "-o", "k"], tmp_path)
    assert r.returncode == 0, r.stderr
    pub_pem = (tmp_path / "k.pub").read_bytes()
    der = base64.b64decode("".join(pub_pem.decode().splitlines()[1:-1]))
    assert r.stdout == "private key: k (mode 0600)\npublic key:  k.pub\nkey id:      %s\n" % hashlib.sha256(der).hexdigest()
    assert stat.S_IMODE(os.stat(tmp_path / "k").st_mode) == 0o600
    art = tmp_path / "artifact.bin"
    art.write_bytes(os.urandom(3000))
    r = py(["sign", "--key", "k", "artifact.bin"], tmp_path)
    assert r.returncode == 0, r.stderr
    env = json.loads(r.stdout)
    payload = base64.b64decode(env["payload"])
    stmt = json.loads(payload)
    assert stmt["subject"][0]["digest"]["sha256"] == hashlib.sha256(art.read_bytes()).hexdigest()
    assert stmt["subject"][0]["name"] == "artifact.bin"
    pae = b"DSSEv1 %d %s %d %s" % (len(env["payloadType"]), env["payloadType"].encode(), len(payload), payload)
    key = serialization.load_pem_public_key(pub_pem)
    key.verify(base64.b64decode(env["signatures"][0]["sig"]), pae, ec.ECDSA(hashes.SHA256()))
    assert r.stdout == cli(["sign", "--key", "k", "artifact.bin"], tmp_path).stdout
    # -o: the file, and the line on stderr, as the CLI's.
    p, c = py(["sign", "--key", "k", "-o", "p.json", "artifact.bin"], tmp_path), \
        cli(["sign", "--key", "k", "-o", "c.json", "artifact.bin"], tmp_path)
    assert (tmp_path / "p.json").read_bytes() == (tmp_path / "c.json").read_bytes()
    assert p.stderr.replace("p.json", "c.json") == c.stderr


@pytest.mark.parametrize("args,status,shown", [
    (["keygen"], 2, "-o KEY"),
    (["keygen", "-o", "k", "extra"], 2, "'extra'"),
    (["keygen", "-o", "."], 2, "'.'"),
    (["keygen", "-o", "existing"], 1, "'existing'"),
    (["sign", "x"], 2, "--key KEY"),
    (["sign", "--key", "existing"], 2, "exactly one FILE"),
    (["sign", "--key", "existing", "missing-file"], 1, "'existing'"),  # not a key
])
def test_python_m_keygen_sign_errors_as_cli(tmp_path, args, status, shown):
    (tmp_path / "existing").write_text("not a key\n")
    want, got = cli(args, tmp_path), py(args, tmp_path)
    assert (want.returncode, got.returncode) == (status, status), (want.stderr, got.stderr)
    assert shown in want.stderr and shown in got.stderr, (want.stderr, got.stderr)
    assert got.stdout == want.stdout == ""


def readelf_build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def test_python_m_bundle_build_export_sign(tmp_path):
    """bundle build | export through Bundle.build / Bundle.export: the digest is hashlib's sha256
    of the file written, the module readelf's build-id and hashlib's sha256 of the ELF file (the
    CLI tests' oracles); the bytes are the CLI's. --sign: `stackprov trace-verify --dsse` accepts
    the envelope Python stored."""
    exe = need_env("STACKPROV_PERF_SPIN")
    r = py(["bundle", "build", "-o", "p.sbundle", exe], tmp_path)
    assert r.returncode == 0, r.stderr
    data = (tmp_path / "p.sbundle").read_bytes()
    assert r.stdout == "sha256:%s\n" % hashlib.sha256(data).hexdigest()
    c = cli(["bundle", "build", "-o", "c.sbundle", exe], tmp_path)
    assert c.stdout == r.stdout and (tmp_path / "c.sbundle").read_bytes() == data
    e = py(["bundle", "export", "p.sbundle", "--format", "symbol-index-json"], tmp_path)
    assert e.returncode == 0, e.stderr
    assert e.stdout == cli(["bundle", "export", "p.sbundle", "--format", "symbol-index-json"], tmp_path).stdout
    mod = re.search(r'\{"id_kind":"elf-build-id","id":"([0-9a-f]+)","name":"[^"]*","sha256_file":"([0-9a-f]+)"',
                    e.stdout)
    assert mod and mod.group(1) == readelf_build_id(exe)
    assert mod.group(2) == hashlib.sha256(open(exe, "rb").read()).hexdigest()
    s = py(["bundle", "export", "p.sbundle", "--format", "symbfile", "-o", "p.sf"], tmp_path)
    cli(["bundle", "export", "p.sbundle", "--format", "symbfile", "-o", "c.sf"], tmp_path)
    assert s.returncode == 0 and (tmp_path / "p.sf").read_bytes() == (tmp_path / "c.sf").read_bytes()
    assert cli(["keygen", "-o", "k"], tmp_path).returncode == 0
    assert cli(["log", "init", "lg", "--key", "k"], tmp_path).returncode == 0
    g = py(["bundle", "build", "--store", "st", "--sign", "k", "--log", "lg", exe], tmp_path)
    assert g.returncode == 0 and g.stdout == r.stdout, g.stderr
    assert "bundle: signed %s, log 'lg' entry 0" % r.stdout.strip() in g.stderr
    v = cli(["trace-verify", "--bundle", r.stdout.strip(), "--store", "st", "--dsse", "--key", "k.pub"], tmp_path)
    assert v.returncode == 0 and "trace-verify: OK" in v.stdout, v.stdout + v.stderr
    for args, shown in ((["bundle", "build"], "needs a FILE"), (["bundle", "build", "--sign", "k", exe], "--log DIR"),
                        (["bundle", "export", "p.sbundle"], "--format"),
                        (["bundle", "export", "p.sbundle", "--format", "x"], "--format")):
        want, got = cli(args, tmp_path), py(args, tmp_path)
        assert (want.returncode, got.returncode) == (2, 2) and shown in got.stderr and shown in want.stderr, args


def test_python_m_log_equals_cli_and_rfc6962(tmp_path):
    """python3 -m stackprov log (Log, log_init, log_verify_*): the checkpoint's root is the RFC 6962
    Merkle tree hash of the entries computed with hashlib (tests/integration/provenance/cli_test.py's
    oracle), its signature verifies with python3-cryptography, and every action prints what the
    CLI prints for the same log made by the CLI (deterministic signatures)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests",
                                    "integration", "provenance"))
    from cli_test import leaf, mth
    assert cli(["keygen", "-o", "k"], tmp_path).returncode == 0
    entries = []
    for i in range(5):
        (tmp_path / ("e%d" % i)).write_bytes(b"entry %d" % i * (i + 1))
        entries.append((tmp_path / ("e%d" % i)).read_bytes())
    steps = [["log", "init", "{d}", "--key", "k", "--origin", "ex.org/l"],
             ["log", "append", "{d}", "e0", "e1", "e2"],
             ["log", "append", "{d}", "--key", "k", "e3", "e4"],
             ["log", "checkpoint", "{d}", "--key", "k"],
             ["log", "prove", "{d}", "--index", "3"],
             ["log", "prove", "{d}", "--entry", "e1", "-o", "{d}.proof"],
             ["log", "consistency", "{d}", "--old", "2"],
             ["log", "verify", "{d}"],
             ["log", "verify-proof", "--proof", "{d}.proof", "--entry", "e1", "--log-key", "{d}/log.pub",
              "--origin", "ex.org/l"]]
    for step in steps:
        # Directory names with "_", which base64 and hex never hold: the replace below cannot touch a
        # signature or hash (with "pl"/"cl" it turned a signature's "pl" into "cl" now and then).
        p = py([a.format(d="py_log") for a in step], tmp_path)
        c = cli([a.format(d="cli_log") for a in step], tmp_path)
        assert p.returncode == c.returncode == 0, (step, p.stderr, c.stderr)
        assert p.stdout.replace("py_log", "cli_log") == c.stdout, step
    note = (tmp_path / "py_log" / "checkpoint").read_text()
    lines = note.split("\n")
    assert lines[0] == "ex.org/l" and lines[1] == "5"
    assert base64.b64decode(lines[2]) == mth([leaf(e) for e in entries])
    blob = base64.b64decode(note.split("\n\n")[1].strip().split(" ")[2])
    key = serialization.load_pem_public_key((tmp_path / "py_log" / "log.pub").read_bytes())
    key.verify(blob[4:], note.split("\n\n")[0].encode() + b"\n", ec.ECDSA(hashes.SHA256()))
    for args, status, shown in ((["log", "init", "x"], 2, "--key KEY"), (["log", "prove", "py_log"], 2, "--index N"),
                                (["log", "frobnicate", "py_log"], 2, "'frobnicate'"),
                                (["log", "verify", "nonexistent"], 1, "nonexistent")):
        want, got = cli(args, tmp_path), py(args, tmp_path)
        assert (want.returncode, got.returncode) == (status, status), (args, want.stderr, got.stderr)
        assert shown in want.stderr and shown in got.stderr, (args, want.stderr, got.stderr)
