# SPDX-License-Identifier: Apache-2.0
# Evidence (include/stackprov/bundle.h) from Python: key ids against openssl (sha256 of the DER
# public key), digests against hashlib, envelopes and log proofs checked by the CLI (`trace-verify`)
# and the other way round (a store the CLI signed verified from Python).
import hashlib
import json
import os
import subprocess

import pytest
import stackprov
from conftest import need_env, need_tool


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def der_sha256(pub):
    r = subprocess.run([need_tool("openssl"), "pkey", "-pubin", "-in", pub, "-outform", "DER"], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return hashlib.sha256(r.stdout).hexdigest()


def test_keys_digest_dsse_against_openssl_hashlib_cli(tmp_path):
    cli = need_env("STACKPROV_CLI")
    key = str(tmp_path / "k.pem")
    kid = stackprov.key_generate(key)
    assert kid == der_sha256(key + ".pub") == stackprov.key_id(key + ".pub") == stackprov.key_id(key)
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    art = tmp_path / "artifact.bin"
    art.write_bytes(b"stackprov evidence\n" * 100)
    digest = stackprov.digest_file(str(art))
    assert digest == "sha256:" + hashlib.sha256(art.read_bytes()).hexdigest()
    env = stackprov.dsse_sign_file(key, str(art))
    (tmp_path / "env.json").write_text(env)
    # the statement names the artifact's digest (base64 payload, decoded here)
    import base64
    stmt = json.loads(base64.b64decode(json.loads(env)["payload"]))
    assert stmt["subject"][0]["digest"]["sha256"] == digest[7:]
    stackprov.dsse_verify(env.encode(), keys=[key + ".pub"], subject_digest=digest)
    r = run([cli, "trace-verify", "--bundle", digest, "--envelope", str(tmp_path / "env.json"), "--artifact", str(art),
             "--dsse", "--key", key + ".pub"])
    assert r.returncode == 0, r.stdout + r.stderr
    # another key does not verify; a tampered payload neither
    other = str(tmp_path / "o.pem")
    stackprov.key_generate(other)
    with pytest.raises(stackprov.VerificationError):
        stackprov.dsse_verify(env.encode(), keys=[other + ".pub"])
    with pytest.raises(stackprov.VerificationError):
        stackprov.dsse_verify(env.replace(json.loads(env)["payload"][:8], "AAAAAAAA").encode(), keys=[key + ".pub"])
    with pytest.raises(stackprov.Error) as e:
        stackprov.key_generate(key)  # exists already
    assert key in e.value.message
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.digest_file(str(tmp_path / "none"))
    assert str(tmp_path / "none") in e.value.message


def test_log_and_signed_store_verified_both_ways(tmp_path):
    cli = need_env("STACKPROV_CLI")
    key, log = str(tmp_path / "k.pem"), str(tmp_path / "log")
    stackprov.key_generate(key)
    stackprov.log_init(log, key=key)
    with open(os.path.join(log, "trusted_root.json")) as f:
        assert json.load(f)  # a trusted root the CLI reads below
    b = stackprov.Bundle.build([need_env("STACKPROV_FIXTURE")])
    d = str(tmp_path / "store")
    with stackprov.Store(d, create=True) as st:
        st.put(b)
        st.sign(b.digest, key=key, log_dir=log)
        envelope = st.sidecar_path(b.digest, "dsse.json")
        proof = st.sidecar_path(b.digest, "tlog-proof")
    root = os.path.join(log, "trusted_root.json")
    rep = stackprov.trace_verify(b.digest, envelope=envelope, keys=[key + ".pub"], dsse=True, log=True, proof=proof,
                                 trusted_root=root)
    assert "ok" in rep
    r = run([cli, "trace-verify", "--bundle", b.digest, "--store", d, "--dsse", "--key", key + ".pub", "--rekor",
             "--trusted-root", root])
    assert r.returncode == 0, r.stdout + r.stderr
    # a store the CLI signed, verified from Python
    key2, log2, d2 = str(tmp_path / "k2.pem"), str(tmp_path / "log2"), str(tmp_path / "store2")
    assert run([cli, "keygen", "-o", key2]).returncode == 0
    assert run([cli, "log", "init", log2, "--key", key2]).returncode == 0
    r = run([cli, "bundle", "build", "--store", d2, "--sign", key2, "--log", log2, need_env("STACKPROV_FIXTURE")])
    assert r.stdout.strip() == b.digest, r.stderr
    st2 = stackprov.Store(d2)
    stackprov.trace_verify(b.digest, envelope=st2.sidecar_path(b.digest, "dsse.json"), keys=[key2 + ".pub"], log=True,
                           proof=st2.sidecar_path(b.digest, "tlog-proof"), trusted_root=os.path.join(log2, "trusted_root.json"))
    # attack 6: a log check without the caller's trusted root is refused, naming it (the log
    # directory's own trusted_root.json was trusted before)
    with pytest.raises(stackprov.Error) as e:
        stackprov.trace_verify(b.digest, envelope=envelope, keys=[key + ".pub"], log=True, log_dir=log)
    assert "trusted_root" in e.value.message
    # the wrong key: VerificationError naming the digest or the key
    with pytest.raises(stackprov.VerificationError):
        stackprov.trace_verify(b.digest, envelope=st2.sidecar_path(b.digest, "dsse.json"), keys=[key + ".pub"])
    with pytest.raises(stackprov.FileMissingError) as e:
        stackprov.log_init(str(tmp_path / "log3"), key=str(tmp_path / "nokey.pem"))
    assert "nokey.pem" in e.value.message
