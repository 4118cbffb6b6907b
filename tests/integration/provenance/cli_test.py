#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# CLI tests for keygen/sign/log/trace-verify/verify-sigstore, checked against independent implementations.
"""Usage: cli_test.py {conformance|roundtrip|crash} PATH/TO/stackprov

Independent oracles: expectations.json (conformance), Python hashlib for SHA-256 and the
RFC 6962 Merkle tree, and the `cryptography` package's (python3-cryptography, installed by
make deps; a missing package fails the test) ECDSA verifier for our DSSE and checkpoint signatures.
The vectors are in tests/data/sigstore (STACKPROV_SIGSTORE_DIR, set by ctest, overrides).
"""
import base64
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SIG = os.environ.get("STACKPROV_SIGSTORE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "..", "..", "data", "sigstore")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(*args, stdin=None):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, input=stdin)
    return p.returncode, p.stdout, p.stderr


# ----------------------------------------------------------------- oracles

def leaf(e):
    return hashlib.sha256(b"\x00" + e).digest()


def mth(leaves):  # RFC 6962 section 2.1, straight from the definition
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def crypto():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        return serialization, ec, hashes
    except ImportError as e:
        sys.exit("FAIL: python3-cryptography (the independent ECDSA verifier) is not importable: %s "
                 "(make deps installs it)" % e)


def ecdsa_ok(pub_pem, msg, sig):
    serialization, ec, hashes = crypto()
    key = serialization.load_pem_public_key(pub_pem)
    try:
        key.verify(sig, msg, ec.ECDSA(hashes.SHA256()))
        return True
    except Exception:  # noqa: BLE001
        return False


# ------------------------------------------------------------------- tests

def test_conformance():
    ex = json.load(open(os.path.join(SIG, "expectations.json")))
    names = {"entry-body": "entry-body", "checkpoint signature": "checkpoint-signature",
             "Merkle inclusion": "inclusion-proof"}
    for case in ex["cases"]:
        b = os.path.join(SIG, case["bundle"])
        root = os.path.join(SIG, case["trusted_root"])
        rc, out, err = run("verify-sigstore", b, "--trusted-root", root)
        want = case["expect"].startswith("accept")
        check((rc == 0) == want, f"{case['bundle']}: exit {rc}, expected {'accept' if want else 'reject'}")
        if not want:
            lines = [l for l in err.splitlines() if l.strip()]
            check(len(lines) == 1, f"{case['bundle']}: exactly one error line ({len(lines)})")
            expected = next(v for k, v in names.items() if case["fails_at"].startswith(k))
            check(expected + ":" in err, f"{case['bundle']}: failure names '{expected}': {err.strip()}")
    # Roots named in the README for bundle 05 (independent verifier's numbers).
    rc, out, err = run("verify-sigstore", os.path.join(SIG, "05-invalid-inclusion-proof-hash.sigstore.json"),
                       "--trusted-root", os.path.join(SIG, "trusted_root.public-good.json"))
    check("a2f7758b" in err and "1679e3d7" in err, "bundle 05 failure shows the recomputed and expected roots")
    # Artifact binding: the subject digest read from the statement by hand.
    b1 = os.path.join(SIG, "01-valid-dsse-rekorv1.sigstore.json")
    stmt = json.loads(base64.b64decode(json.load(open(b1))["dsseEnvelope"]["payload"]))
    digest = stmt["subject"][0]["digest"]["sha256"]
    root = os.path.join(SIG, "trusted_root.public-good.json")
    rc, _, _ = run("verify-sigstore", b1, "--trusted-root", root, "--digest", "sha256:" + digest)
    check(rc == 0, "bundle 01 verifies with its subject digest")
    rc, _, err = run("verify-sigstore", b1, "--trusted-root", root, "--digest", "sha256:" + "0" * 64)
    check(rc == 1 and "artifact-digest" in err, "bundle 01 rejects another digest")
    # Clean errors for bad input.
    rc, _, err = run("verify-sigstore", "/nonexistent.json", "--trusted-root", root)
    check(rc == 1 and "/nonexistent.json" in err, "missing bundle is named")
    rc, _, err = run("verify-sigstore", b1)
    check(rc == 2 and "--trusted-root" in err, "missing --trusted-root is a usage error")
    rc, _, err = run("verify-sigstore", b1, "--trusted-root", root, "--digest", "md5:00")
    check(rc == 1 and "md5" in err, "unsupported digest algorithm is named")
    rc, _, err = run("verify-sigstore", b1, "--trusted-root", root, "--bogus")
    check(rc == 2 and "--bogus" in err, "unknown option is named")
    with tempfile.TemporaryDirectory() as d:
        trunc = os.path.join(d, "t.json")
        open(trunc, "wb").write(open(b1, "rb").read()[:3000])
        rc, _, err = run("verify-sigstore", trunc, "--trusted-root", root)
        check(rc == 1 and "bundle-parse" in err, "truncated bundle gives a clean parse error")
        big = os.path.join(d, "big.json")
        with open(big, "wb") as f:
            f.truncate(17 << 20)
        rc, _, err = run("verify-sigstore", big, "--trusted-root", root)
        check(rc == 1 and "limit" in err, "oversized bundle is refused")
    for cmd in ("keygen", "sign", "log", "trace-verify", "verify-sigstore"):
        rc, out, _ = run(cmd, "--help")
        check(rc == 0 and "usage: stackprov " + cmd in out, f"{cmd} --help")


def test_roundtrip():
    d = tempfile.mkdtemp(prefix="sprov-prov-")
    try:
        k, lk = os.path.join(d, "signer.key"), os.path.join(d, "log.key")
        rc, out, _ = run("keygen", "--out", k)
        check(rc == 0 and (os.stat(k).st_mode & 0o077) == 0, "keygen writes a 0600 private key")
        priv = open(k).read()
        check(priv.splitlines()[1] not in out, "keygen does not print the private key")
        pub_pem = open(k + ".pub", "rb").read()
        der = base64.b64decode("".join(pub_pem.decode().splitlines()[1:-1]))
        check(hashlib.sha256(der).hexdigest() in out, "key id is sha256 of the DER SPKI")
        rc, _, err = run("keygen", "--out", k)
        check(rc != 0 and k in err, "keygen refuses to overwrite a key")
        run("keygen", "--out", lk)

        art = os.path.join(d, "artifact.bin")
        open(art, "wb").write(os.urandom(5000))
        digest = hashlib.sha256(open(art, "rb").read()).hexdigest()
        env_path = os.path.join(d, "artifact.dsse.json")
        rc, _, err = run("sign", "--key", k, "--out", env_path, art)
        check(rc == 0, "sign")
        env = json.load(open(env_path))
        payload = base64.b64decode(env["payload"])
        stmt = json.loads(payload)
        check(stmt["_type"] == "https://in-toto.io/Statement/v1", "statement type")
        check(stmt["subject"][0]["digest"]["sha256"] == digest, "statement subject is the artifact sha256")
        pae = b"DSSEv1 %d %s %d %s" % (len(env["payloadType"]), env["payloadType"].encode(), len(payload), payload)
        ok = ecdsa_ok(pub_pem, pae, base64.b64decode(env["signatures"][0]["sig"]))
        check(ok is True, "DSSE signature verifies with an independent ECDSA implementation")
        rc2, out2, _ = run("sign", "--key", k, art)
        check(json.loads(out2)["signatures"][0]["sig"] == env["signatures"][0]["sig"], "RFC 6979: signing is deterministic")

        log = os.path.join(d, "log")
        rc, _, _ = run("log", "init", log, "--key", lk, "--origin", "example.org/it-log")
        check(rc == 0, "log init")
        others = []
        for i in range(300):
            p = os.path.join(d, f"e{i}")
            open(p, "wb").write(b"other entry %d" % i)
            others.append(p)
        rc, _, _ = run("log", "append", log, *others[:200])
        check(rc == 0, "append 200 entries")
        rc, cp1, _ = run("log", "checkpoint", log, "--key", lk)
        check(rc == 0, "checkpoint 1")
        rc, _, _ = run("log", "append", log, "--key", lk, env_path, *others[200:])
        check(rc == 0, "append the envelope + 100 entries with a checkpoint")
        cp2 = open(os.path.join(log, "checkpoint")).read()
        entries = [open(p, "rb").read() for p in others[:200]] + [open(env_path, "rb").read()] + \
                  [open(p, "rb").read() for p in others[200:]]
        lines = cp2.split("\n")
        check(lines[0] == "example.org/it-log" and lines[1] == "301", "checkpoint origin and size")
        check(base64.b64decode(lines[2]) == mth([leaf(e) for e in entries]), "checkpoint root equals the RFC 6962 root")
        sig_line = cp2.split("\n\n")[1].strip()
        blob = base64.b64decode(sig_line.split(" ")[2])
        log_pub = open(os.path.join(log, "log.pub"), "rb").read()
        ok = ecdsa_ok(log_pub, cp2.split("\n\n")[0].encode() + b"\n", blob[4:])
        check(ok is True, "checkpoint signature verifies independently")
        check(blob[:4] == hashlib.sha256(base64.b64decode("".join(log_pub.decode().splitlines()[1:-1]))).digest()[:4],
              "checkpoint key id = sha256(SPKI)[:4]")
        # Tiles on disk: level-0 tile 0 is full, tile 1 is partial (45 hashes), entry bundles likewise.
        t0 = open(os.path.join(log, "tile/0/000"), "rb").read()
        check(t0 == b"".join(leaf(e) for e in entries[:256]), "tile/0/000 holds the first 256 leaf hashes")
        check(os.path.exists(os.path.join(log, "tile/0/001.p/45")), "partial tile tile/0/001.p/45")
        eb = open(os.path.join(log, "tile/entries/001.p/45"), "rb").read()
        check(eb[:2] == len(entries[256]).to_bytes(2, "big") and eb[2:2 + len(entries[256])] == entries[256],
              "entry bundles are uint16-BE length-prefixed")
        check(open(os.path.join(log, "tile/1/000.p/1"), "rb").read() == mth([leaf(e) for e in entries[:256]]),
              "level-1 tile holds the root of tile 0")

        rc, _, _ = run("log", "verify", log)
        check(rc == 0, "log verify")
        proof = os.path.join(d, "proof.txt")
        rc, _, _ = run("log", "prove", log, "--entry", env_path, "--out", proof)
        check(rc == 0 and open(proof).read().startswith("c2sp.org/tlog-proof@v1\nindex 200\n"), "prove --entry")
        rc, _, _ = run("log", "verify-proof", "--proof", proof, "--entry", env_path, "--log-key",
                       os.path.join(log, "log.pub"), "--origin", "example.org/it-log")
        check(rc == 0, "verify-proof")
        rc, _, err = run("log", "verify-proof", "--proof", proof, "--entry", others[0], "--log-key",
                         os.path.join(log, "log.pub"), "--origin", "example.org/it-log")
        check(rc == 1 and "inclusion-proof" in err, "verify-proof rejects another entry")
        frag = os.path.join(d, "frag")
        rc, _, _ = run("log", "fragment", log, "--entry", env_path, "--out", frag)
        check(rc == 0, "log fragment")
        fargs = ["log", "verify-fragment", "--fragment", frag, "--log-key", os.path.join(log, "log.pub"),
                 "--origin", "example.org/it-log"]
        rc, _, _ = run(*fargs, "--entry", env_path)
        check(rc == 0, "verify-fragment")
        rc, _, err = run(*fargs, "--entry", others[0])
        check(rc == 1 and "inclusion-proof" in err, "verify-fragment rejects another entry")
        # Consistency 200 -> 301.
        cp1_path, cp2_path, cons = (os.path.join(d, n) for n in ("cp1", "cp2", "cons"))
        open(cp1_path, "w").write(cp1)
        open(cp2_path, "w").write(cp2)
        rc, _, _ = run("log", "consistency", log, "--old", "200", "--out", cons)
        check(rc == 0, "consistency proof")
        args = ["log", "verify-consistency", "--old-checkpoint", cp1_path, "--new-checkpoint", cp2_path, "--proof",
                cons, "--log-key", os.path.join(log, "log.pub"), "--origin", "example.org/it-log"]
        rc, _, _ = run(*args)
        check(rc == 0, "verify-consistency 200 -> 301")
        text = open(cons).read().split("\n")
        h = bytearray(base64.b64decode(text[3]))
        h[0] ^= 1
        text[3] = base64.b64encode(bytes(h)).decode()
        open(cons, "w").write("\n".join(text))
        rc, _, err = run(*args)
        check(rc == 1 and "consistency" in err, "tampered consistency proof rejected")

        tv = ["trace-verify", "--bundle", "sha256:" + digest, "--envelope", env_path, "--artifact", art]
        root = os.path.join(d, "pinned_root.json")  # the log's root, pinned by its user before
        shutil.copy(os.path.join(log, "trusted_root.json"), root)
        rc, out, err = run(*tv, "--dsse", "--key", k + ".pub", "--rekor", "--log", log, "--trusted-root", root)
        check(rc == 0, "trace-verify --dsse --rekor --log --trusted-root")
        # Attack 6 (doc/hardening.md): whoever writes the log directory must not decide what
        # verifies. Without --trusted-root the log's own trusted_root.json was trusted: refused now.
        rc, out, err = run(*tv, "--dsse", "--key", k + ".pub", "--rekor", "--log", log)
        check(rc == 2 and "--trusted-root" in err, "--rekor --log without --trusted-root is a usage error naming it")
        # A log rewritten by an attacker (its own key, its own trusted_root.json, the envelope
        # appended) verifies only against its own root, never against the pinned one.
        evil = os.path.join(d, "evil-log")
        ek = os.path.join(d, "evil.key")
        rc, _, _ = run("keygen", "--out", ek)
        check(rc == 0, "keygen for the attacker's log")
        rc, _, _ = run("log", "init", evil, "--origin", "example.org/it-log", "--key", ek)
        rc2, _, _ = run("log", "append", evil, env_path)
        check(rc == 0 and rc2 == 0, "attacker's log holds the envelope")
        rc, _, err = run(*tv, "--rekor", "--log", evil, "--trusted-root", root)
        check(rc == 1 and "checkpoint" in err, "an attacker's log is refused under the pinned root (%s)" % err.strip())
        rc, _, err = run(*tv, "--rekor", "--log", evil)
        check(rc == 2 and "--trusted-root" in err, "and is not trusted through its own trusted_root.json")
        rc, out, err = run(*tv, "--rekor", "--proof", proof, "--trusted-root", os.path.join(log, "trusted_root.json"))
        check(rc == 0, "trace-verify --rekor --proof --trusted-root")
        rc, _, err = run(*tv, "--dsse", "--key", lk + ".pub")
        check(rc == 1 and "dsse-signature" in err, "trace-verify rejects an untrusted signer")
        rc, _, err = run("trace-verify", "--bundle", "sha256:" + "1" * 64, "--envelope", env_path, "--dsse", "--key",
                         k + ".pub")
        check(rc == 1 and "statement-subject" in err, "trace-verify rejects a digest the statement does not name")
        # Tampered envelope: every field in turn.
        for field in ("payload", "payloadType", "sig"):
            e2 = json.load(open(env_path))
            if field == "sig":
                s = bytearray(base64.b64decode(e2["signatures"][0]["sig"]))
                s[12] ^= 1
                e2["signatures"][0]["sig"] = base64.b64encode(bytes(s)).decode()
            elif field == "payload":
                p = json.loads(base64.b64decode(e2["payload"]))
                p["predicate"] = {"x": 1}
                e2["payload"] = base64.b64encode(json.dumps(p).encode()).decode()
            else:
                e2["payloadType"] += "x"
            bad = os.path.join(d, "bad.json")
            json.dump(e2, open(bad, "w"))
            rc, _, err = run("trace-verify", "--bundle", "sha256:" + digest, "--envelope", bad, "--dsse", "--key",
                             k + ".pub")
            check(rc == 1 and "dsse-signature" in err, f"tampered envelope {field} rejected")
            rc, _, err = run("trace-verify", "--bundle", "sha256:" + digest, "--envelope", bad, "--rekor", "--log", log,
                             "--trusted-root", root)
            check(rc == 1 and "log-entry" in err, f"tampered envelope ({field}) is not in the log")
        rc, _, err = run("trace-verify", "--bundle", "sha256:xyz", "--envelope", env_path, "--dsse", "--key", k + ".pub")
        check(rc == 2 and "sha256:xyz" in err, "bad digest is a usage error naming it")
        rc, _, err = run("log", "prove", log, "--index", "abc")
        check(rc == 2 and "abc" in err, "bad --index is named")
        rc, _, err = run("log", "append", os.path.join(d, "nolog"), env_path)
        check(rc == 1 and "nolog" in err, "missing log directory is named")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_crash():
    d = tempfile.mkdtemp(prefix="sprov-crash-")
    try:
        lk = os.path.join(d, "log.key")
        run("keygen", "--out", lk)
        log = os.path.join(d, "log")
        run("log", "init", log, "--key", lk, "--origin", "example.org/crash")
        files = []
        for i in range(2000):
            p = os.path.join(d, f"f{i}")
            open(p, "wb").write(b"crash entry %d %s" % (i, b"." * (i % 50)))
            files.append(p)
        # How long does one full append take here? Kill moments are spread over that span.
        scratch = os.path.join(d, "scratch")
        run("log", "init", scratch, "--key", lk, "--origin", "example.org/scratch")
        t0 = time.monotonic()
        run("log", "append", scratch, "--key", lk, *files)
        span = time.monotonic() - t0
        rnd = random.Random(1234)
        expected_size = 0
        mid_write = committed = 0
        for r in range(16):
            before = set(os.listdir(os.path.join(log, "tile", "entries"))) if os.path.isdir(
                os.path.join(log, "tile", "entries")) else set()
            proc = subprocess.Popen([CLI, "log", "append", log, "--key", lk, *files], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0.0, span * 1.1))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            rc, out, err = run("log", "verify", log)
            check(rc == 0, f"round {r}: log verifies after SIGKILL during append ({(out + err).strip()})")
            size = int(open(os.path.join(log, "state")).read().split("\n")[0])
            check(size in (expected_size, expected_size + len(files)), f"round {r}: append is all or nothing ({size})")
            after = set(os.listdir(os.path.join(log, "tile", "entries"))) if os.path.isdir(
                os.path.join(log, "tile", "entries")) else set()
            if size == expected_size and after != before:
                mid_write += 1  # killed after writing tiles but before the commit
            if size != expected_size:
                committed += 1
            expected_size = size
        print(f"note: {mid_write} kill(s) landed between tile writes and the commit, {committed} append(s) committed")
        check(mid_write + committed > 0, "at least one kill happened after the append started writing")
        rc, _, _ = run("log", "append", log, "--key", lk, files[0])
        check(rc == 0, "append after crashes")
        rc, _, _ = run("log", "verify", log)
        check(rc == 0, "log verifies at the end")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    CLI = sys.argv[2]
    {"conformance": test_conformance, "roundtrip": test_roundtrip, "crash": test_crash}[sys.argv[1]]()
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all passed")
