# SPDX-License-Identifier: Apache-2.0
# stackprov.Log and the offline log verifiers, against independent answers: inclusion proofs checked
# by RFC 9162's algorithm in pure Python and the checkpoint's signature by openssl
# (tests/integration/bundle_store/store_test.py's oracle), consistency proofs by RFC 9162 §2.1.4.2
# written out below; errors carry the offending value.
import base64
import hashlib
import os
import sys

import pytest

import stackprov

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "integration", "bundle_store"))
from store_test import proof_oracle  # noqa: E402

ORIGIN = "stackprov.test/log"


def H(b):
    return hashlib.sha256(b).digest()


def note_size_root(note):
    """(size, root hash) of a signed checkpoint note: origin, size, base64 root."""
    origin, size, root = note.split("\n")[:3]
    assert origin == ORIGIN
    return int(size), base64.b64decode(root)


def mth(entries):
    """RFC 9162 section 2.1.1: the Merkle tree hash of the entries."""
    if not entries:
        return H(b"")
    if len(entries) == 1:
        return H(b"\x00" + entries[0])
    k = 1
    while k * 2 < len(entries):
        k *= 2
    return H(b"\x01" + mth(entries[:k]) + mth(entries[k:]))


def consistency_ok(first, second, first_hash, second_hash, proof):
    """RFC 9162 section 2.1.4.2, verbatim."""
    if first == second:
        return not proof and first_hash == second_hash
    if first == 0 or first > second or not proof:
        return False
    if first & (first - 1) == 0:
        proof = [first_hash] + proof
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = H(b"\x01" + c + fr)
            sr = H(b"\x01" + c + sr)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = H(b"\x01" + sr + c)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0


def parse_consistency(text):
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "c2sp.org/stackprov-consistency@v1", text
    old, new = int(lines[1].split()[1]), int(lines[2].split()[1])
    return old, new, [base64.b64decode(x) for x in lines[3:]]


@pytest.fixture
def log_dir(tmp_path):
    priv, pub = str(tmp_path / "log.key"), str(tmp_path / "log.pub.pem")
    stackprov.key_generate(priv, pub)
    d = str(tmp_path / "log")
    stackprov.log_init(d, key=priv, origin=ORIGIN)
    return d, priv, pub


def test_append_prove_consistency(log_dir, tmp_path):
    d, priv, pub = log_dir
    entries = [b"entry %d" % i for i in range(11)]
    with stackprov.Log(d) as log:
        assert log.size == 0
        first, note3 = log.append(entries[:3], key=priv)
        assert first == 0 and note_size_root(note3)[0] == 3
        first, none = log.append(entries[3:5])  # no key: no checkpoint
        assert first == 3 and none is None and log.size == 5
        first, note11 = log.append(entries[5:], key=priv)
        assert first == 5 and log.size == 11 and note_size_root(note11)[0] == 11
        assert log.find(entries[7]) == 7 and log.find(b"absent") is None
        for i, e in enumerate(entries):
            proof = log.prove(i)
            assert proof_oracle(proof, e, pub, str(tmp_path)), f"entry {i}: RFC 9162 inclusion + openssl signature"
            stackprov.log_verify_proof(proof, e, log_key=pub, origin=ORIGIN)
            with pytest.raises(stackprov.VerificationError):
                stackprov.log_verify_proof(proof, e + b"x", log_key=pub, origin=ORIGIN)
        old, new, hashes = parse_consistency(log.consistency(3))
        assert (old, new) == (3, 11)
        assert consistency_ok(3, 11, note_size_root(note3)[1], note_size_root(note11)[1], hashes)
        stackprov.log_verify_consistency(note3, note11, log.consistency(3), log_key=pub, origin=ORIGIN)
        with pytest.raises(stackprov.Error):
            stackprov.log_verify_consistency(note11, note3, log.consistency(3), log_key=pub, origin=ORIGIN)
        root11 = note_size_root(note11)[1]
        assert mth(entries) == root11, "the checkpoint's root is the RFC 9162 tree hash of the entries"
        for k in range(1, 11):  # every old size, powers of two (the other branch) included
            old, new, hashes = parse_consistency(log.consistency(k, 11))
            assert (old, new) == (k, 11) and consistency_ok(k, 11, mth(entries[:k]), root11, hashes), k
        log.fsck()
        assert log.checkpoint(key=priv).startswith(ORIGIN + "\n11\n")


def test_errors_name_the_value(log_dir, tmp_path):
    d, priv, pub = log_dir
    log = stackprov.Log(d)
    log.append([b"a", b"b"], key=priv)
    with pytest.raises(stackprov.Error) as e:
        log.prove(100)
    assert "100" in str(e.value)
    with pytest.raises(stackprov.Error) as e:
        log.append([b"c"], key=pub)  # a public key where the log's private key is needed
    assert pub in str(e.value) and log.size == 2
    other, other_pub = str(tmp_path / "other.key"), str(tmp_path / "other.pub")
    stackprov.key_generate(other, other_pub)
    with pytest.raises(stackprov.Error):
        log.append([b"c"], key=other)
    assert log.size == 2, "a wrong key leaves the log unchanged"
    with pytest.raises(stackprov.Error):
        log.append([b""])  # entries are 1..65535 bytes
    log.close()
    with pytest.raises(stackprov.InvalidArgumentError, match="closed"):
        log.prove(0)
    missing = str(tmp_path / "no-such-log")
    with pytest.raises(stackprov.Error) as e:
        stackprov.Log(missing)
    assert missing in str(e.value)
