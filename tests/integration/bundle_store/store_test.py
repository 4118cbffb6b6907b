#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The bundle store end to end: signed bundles verified offline from a copied store, tampering, fsck, concurrent writers.
"""Usage: store_test.py --stackprov PATH --work DIR

Builds C and C++ fixtures (tests/integration/bundle) with gcc/g++, stores signed bundles of
them (`stackprov bundle build --store --sign --log`), copies ONLY the store and the pinned
public keys to a fresh directory and runs `stackprov trace-verify` there in a network
namespace without network (unshare -n). Independent answers:
  - sha256sum (coreutils) for every bundle digest and blob name;
  - openssl dgst -sha256 -verify for the DSSE signature over the PAE bytes computed here and
    for the checkpoint's note signature with the log's public key;
  - the RFC 9162 section 2.1.3.2 inclusion-proof algorithm implemented here, against the
    checkpoint's root, with the leaf hash of the envelope bytes;
  - readelf -n for the build-ids the id map must index; llvm-symbolizer-14 for lookups
    through sha256:HEX; os.stat for --include-debug's embedded size.
Then each tampering (blob byte, envelope signature, proof hash, wrong signer key, wrong log
key, deleted blob, deleted envelope) must fail with exit status 1 and a message naming the
failed check, and the oracles must reject the same tampering; fsck must find a flipped blob
byte, an id entry naming a missing blob and truncated sidecars; 4 concurrent signed builds of
overlapping file sets must leave a clean store whose every id entry resolves.
A missing tool fails the test with its name.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers  # noqa: E402  (tests/lib: the peers' output parsers)
from terminal import stderr_on_pty  # noqa: E402  (tests/lib)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

FIXTURES = os.path.join(HERE, "..", "bundle")
TOOLS = ["gcc", "g++", "readelf", "sha256sum", "openssl", "unshare", "llvm-symbolizer-14", "nm", "python3.11"]
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd, **kw):
    p = run(cmd, **kw)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


# ------------------------------------------------------------------ oracles

def sha256sum(path):
    out = must(["sha256sum", path])
    return "sha256:" + out.split()[0]


def b64(s):
    return base64.b64decode(s, validate=True)


def pae(payload_type, payload):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def openssl_verify(pub, message, der_sig, tmp):
    msg, sig = os.path.join(tmp, "msg.bin"), os.path.join(tmp, "sig.der")
    with open(msg, "wb") as f:
        f.write(message)
    with open(sig, "wb") as f:
        f.write(der_sig)
    p = run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature", sig, msg])
    return p.returncode == 0 and "Verified OK" in p.stdout


def dsse_oracle(envelope_bytes, pub, digest, tmp):
    """True when the envelope's first signature verifies with pub (openssl) and its statement names digest."""
    try:
        env = json.loads(envelope_bytes)
        payload = b64(env["payload"])
        sig = b64(env["signatures"][0]["sig"])
    except (ValueError, KeyError, IndexError):
        return False
    if not openssl_verify(pub, pae(env["payloadType"], payload), sig, tmp):
        return False
    st = json.loads(payload)
    return any("sha256:" + s["digest"]["sha256"] == digest for s in st["subject"])


def H(b):
    return hashlib.sha256(b).digest()


def inclusion_ok(index, size, leaf, proof, root):
    """RFC 9162 section 2.1.3.2, verbatim."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = H(b"\x01" + p + r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = H(b"\x01" + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def proof_oracle(proof_text, envelope_bytes, log_pub, tmp):
    """tlog-proof@v1: the checkpoint note signed by log_pub (openssl), the inclusion proof of the envelope."""
    lines = proof_text.split("\n")
    if lines[0] != "c2sp.org/tlog-proof@v1" or not lines[1].startswith("index "):
        return False
    index = int(lines[1][6:])
    hashes, i = [], 2
    try:
        while lines[i] != "":
            hashes.append(b64(lines[i]))
            i += 1
        note = "\n".join(lines[i + 1:])
        text, sigs = note.split("\n\n", 1)
        text += "\n"
        origin, size, root = text.split("\n")[:3]
        size, root = int(size), b64(root)
        sig_line = sigs.split("\n")[0]
        m = re.match(r"^\u2014 (\S+) (\S+)$", sig_line)
        if not m or m.group(1) != origin:
            return False
        sig = b64(m.group(2))[4:]  # 4-byte key hash, then the DER ECDSA signature
    except (ValueError, IndexError):
        return False
    if not openssl_verify(log_pub, text.encode(), sig, tmp):
        return False
    return inclusion_ok(index, size, H(b"\x00" + envelope_bytes), hashes, root)


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", must(["readelf", "-n", path]))
    if not m:
        sys.exit("FAIL: readelf -n shows no build-id in %s" % path)
    return m.group(1)


# ---------------------------------------------------------------- helpers

def blob(store, digest):
    h = digest[7:]
    return os.path.join(store, "blobs", "sha256", h[:2], h)


def sidecar(store, digest, name):
    h = digest[7:]
    return os.path.join(store, "sigs", "sha256", h[:2], h + "." + name)


def flip_byte(path, offset):
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    S = os.path.abspath(a.stackprov)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        sys.exit("FAIL: missing tools: " + ", ".join(missing))
    w = os.path.abspath(a.work)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    tmp = os.path.join(w, "tmp")
    os.makedirs(tmp)

    # Fixtures: four modules with distinct build-ids.
    fa, fb, fcpp = (os.path.join(FIXTURES, n) for n in ("fixture_a.c", "fixture_b.c", "fixture.cpp"))
    mods = {}
    for name, cmd in (("c_O0", ["gcc", "-g", "-O0", fa, fb]), ("c_O2", ["gcc", "-g", "-O2", fa, fb]),
                      ("cpp_O1", ["g++", "-g", "-O1", fcpp]), ("cpp_O2", ["g++", "-g", "-O2", fcpp])):
        out = os.path.join(w, name)
        must(cmd + ["-o", out])
        mods[name] = out
    ids = {n: build_id(p) for n, p in mods.items()}
    check(len(set(ids.values())) == 4, "four fixtures, four build-ids (readelf -n)")

    keys = os.path.join(w, "keys")
    os.makedirs(keys)
    for k in ("signer", "other", "logkey", "otherlog"):
        must([S, "keygen", "--out", os.path.join(keys, k)])
    log = os.path.join(w, "log")
    must([S, "log", "init", log, "--key", os.path.join(keys, "logkey")])
    # A second log with the same origin ('stackprov.local/log') and another key.
    os.makedirs(os.path.join(w, "elsewhere"))
    log2 = os.path.join(w, "elsewhere", "log")
    must([S, "log", "init", log2, "--key", os.path.join(keys, "otherlog")])

    store = os.path.join(w, "store")
    sign = ["--sign", os.path.join(keys, "signer"), "--log", log, "--log-key", os.path.join(keys, "logkey")]

    # ---- build into the store, signed; the digest is sha256sum of the blob and of the plain file.
    p = run([S, "bundle", "build", "--store", store] + sign + [mods["c_O0"], mods["cpp_O1"]])
    check(p.returncode == 0, "bundle build --store --sign of two files: exit 0 (%s)" % p.stderr.strip())
    d1 = p.stdout.strip()
    check(re.fullmatch(r"sha256:[0-9a-f]{64}", d1) is not None, "build prints sha256:<hex> (%s)" % d1)
    check(sha256sum(blob(store, d1)) == d1, "blob's sha256sum equals the printed digest and its name")
    plain = os.path.join(w, "plain.sbundle")
    p = run([S, "bundle", "build", "--out", plain, mods["c_O0"], mods["cpp_O1"]])
    check(p.returncode == 0 and p.stdout.strip() == d1 and sha256sum(plain) == d1,
          "the same files without a store: same bytes (sha256sum)")
    check(p.stderr == "", "build without a terminal is quiet on stderr")
    p = run([S, "bundle", "build", "--store", store] + sign + [mods["c_O2"]])
    d2 = p.stdout.strip()
    check(p.returncode == 0 and sha256sum(blob(store, d2)) == d2, "second signed bundle stored")
    p = run([S, "bundle", "build", "--sign", os.path.join(keys, "signer"), mods["c_O2"]])
    check(p.returncode == 2 and "--log" in p.stderr, "--sign without --log is refused naming --log")

    # ---- inspect and lookup through sha256:HEX
    p = run([S, "bundle", "inspect", d1, "--store", store, "--json"])
    j = json.loads(p.stdout) if p.returncode == 0 else {"modules": []}
    check(j.get("bundle") == d1 and sorted(m["id"] for m in j["modules"]) == sorted([ids["c_O0"], ids["cpp_O1"]]),
          "inspect sha256:HEX --json: the bundle's digest and the readelf build-ids")
    syms = [l.split() for l in must(nm_command() + ["--defined-only", mods["c_O0"]]).splitlines()]
    addrs = sorted({int(s[0], 16) for s in syms if len(s) == 3 and s[1] in "tT"})[:20]
    exp = llvm_symbolizer_answers(must(["llvm-symbolizer-14", "--obj=" + mods["c_O0"], "--no-demangle", "--inlining",
                                        "--output-style=LLVM"], input="".join("0x%x\n" % x for x in addrs)))
    # The functions of the fixture sources (the bundle holds what DWARF describes; crt files have none).
    keep = [(x, e) for x, e in zip(addrs, exp) if any("fixture_" in s for frame in e for s in frame)]
    got = must([S, "bundle", "lookup", d1, "--store", store, "--build-id", ids["c_O0"]] + ["0x%x" % x for x, _ in keep])
    try:
        got = llvm_symbolizer_answers(got)
    except ValueError:
        pass  # malformed: not the answers below
    check(len(keep) >= 4 and got == [e for _, e in keep],
          "lookup sha256:HEX --build-id at %d fixture function starts == llvm-symbolizer-14" % len(keep))
    dbgstore = os.path.join(w, "dbgstore")
    p = run([S, "bundle", "build", "--store", dbgstore, "--include-debug", mods["c_O2"]])
    j = json.loads(must([S, "bundle", "inspect", p.stdout.strip(), "--store", dbgstore, "--json"]))
    check(j["modules"][0]["debug_blob"] == os.stat(mods["c_O2"]).st_size,
          "--include-debug embeds the debug file (its DWARF is in the file itself): size == os.stat")
    env = dict(os.environ, STACKPROV_STORE=store)
    p = run([S, "bundle", "inspect", d2], env=env)
    check(p.returncode == 0 and d2 in p.stdout, "STACKPROV_STORE is the default store")

    # ---- progress: on a terminal (a pty as stderr) for large inputs, nothing on a pipe.
    big = ["/usr/bin/python3.11", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
    pstore = os.path.join(w, "pstore")
    pr, tty, out = stderr_on_pty([S, "bundle", "build", "--store", pstore] + big, stdout=subprocess.PIPE)
    out = out.decode().strip()
    check(pr.returncode == 0 and re.fullmatch(r"sha256:[0-9a-f]{64}", out) is not None,
          "large build with a terminal as stderr: the digest alone on stdout")
    check("module 1/2" in tty and "module 2/2" in tty and "ETA" in tty and " MB" in tty,
          "progress (modules, MB, ETA) on the terminal: %r" % tty[-200:])
    # Within a module (issue 36: a large module sat at 0.0 MB until it was done): python3.11's ~2.5 MB
    # of code report after every MiB, so the first module's MB grow before it is done.
    inner = sorted({float(x) for x in re.findall(r"module 0/2, (\d+\.\d)/", tty)})
    check(len(inner) >= 2 and inner[-1] > 0.0, "progress within the first module: MB done %s" % inner)
    p = run([S, "bundle", "build", "--out", os.path.join(w, "big.sbundle")] + big)
    check(p.returncode == 0 and p.stdout.strip() == out and p.stderr == "",
          "the same large build with stderr on a pipe: no progress, same digest")

    # ---- copy ONLY the store and the pinned public keys; verify offline (no network namespace access).
    fresh = os.path.join(w, "fresh")
    os.makedirs(fresh)
    shutil.copytree(store, os.path.join(fresh, "store"))
    shutil.copy(os.path.join(keys, "signer.pub"), os.path.join(fresh, "signer.pub"))
    shutil.copy(os.path.join(keys, "other.pub"), os.path.join(fresh, "other.pub"))
    shutil.copy(os.path.join(log, "trusted_root.json"), os.path.join(fresh, "log_root.json"))
    shutil.copy(os.path.join(log, "log.pub"), os.path.join(fresh, "log.pub"))
    shutil.copy(os.path.join(log2, "trusted_root.json"), os.path.join(fresh, "other_root.json"))

    def verify(root_dir, digest, key="signer.pub", trusted="log_root.json", extra=()):
        cmd = ["unshare", "-n", S, "trace-verify", "--bundle", digest, "--dsse", "--rekor",
               "--store", os.path.join(root_dir, "store"), "--key", os.path.join(root_dir, key),
               "--trusted-root", os.path.join(root_dir, trusted)] + list(extra)
        return run(cmd, cwd=root_dir)

    for d in (d1, d2):
        p = verify(fresh, d)
        check(p.returncode == 0 and "trace-verify: OK " + d in p.stdout and "ok inclusion-proof" in p.stdout,
              "offline trace-verify from the copied store passes for %s (%s)" % (d[:19], p.stderr.strip()))
        envb = open(sidecar(os.path.join(fresh, "store"), d, "dsse.json"), "rb").read()
        check(dsse_oracle(envb, os.path.join(fresh, "signer.pub"), d, tmp),
              "oracle: openssl verifies the DSSE PAE signature, the statement names sha256sum's digest")
        proof = open(sidecar(os.path.join(fresh, "store"), d, "tlog-proof")).read()
        check(proof_oracle(proof, envb, os.path.join(fresh, "log.pub"), tmp),
              "oracle: RFC 9162 inclusion of the envelope under the checkpoint openssl verifies with log.pub")
    p = run(["unshare", "-n", S, "trace-verify", "--bundle", d1, "--dsse", "--rekor", "--key",
             os.path.join(fresh, "signer.pub"), "--trusted-root", os.path.join(fresh, "log_root.json")],
            env=dict(os.environ, STACKPROV_STORE=os.path.join(fresh, "store")))
    check(p.returncode == 0, "trace-verify finds the store through STACKPROV_STORE")
    p = run([S, "trace-verify", "--bundle", d1, "--dsse", "--rekor", "--store", os.path.join(fresh, "store"),
             "--key", os.path.join(fresh, "signer.pub")])
    check(p.returncode == 2 and "--trusted-root" in p.stderr,
          "the store's proof without a pinned --trusted-root is refused (the store never vouches for itself)")

    # ---- tampering: each in its own copy; exit 1 and the failed check named; the oracles agree.
    def tampered(name, mutate, expect, **kw):
        t = os.path.join(w, "t_" + name)
        shutil.copytree(fresh, t)
        ts = os.path.join(t, "store")
        oracle = mutate(ts)
        p = verify(t, d1, **kw)
        line = p.stderr.strip()
        check(p.returncode == 1 and line.startswith("trace-verify: FAIL") and (" %s: " % expect) in line,
              "tampered %s: exit 1 naming '%s' (exit %d: %s)" % (name, expect, p.returncode, line))
        if oracle is not None:
            check(not oracle, "oracle also rejects tampered %s" % name)

    def flip_blob(ts):
        flip_byte(blob(ts, d1), 100)
        return sha256sum(blob(ts, d1)) == d1

    def flip_envelope_sig(ts):
        path = sidecar(ts, d1, "dsse.json")
        e = json.load(open(path))
        s = bytearray(b64(e["signatures"][0]["sig"]))
        s[-1] ^= 0x01
        e["signatures"][0]["sig"] = base64.b64encode(bytes(s)).decode()
        with open(path, "w") as f:
            json.dump(e, f)
        return dsse_oracle(open(path, "rb").read(), os.path.join(ts, "..", "signer.pub"), d1, tmp)

    def flip_envelope_payload(ts):
        path = sidecar(ts, d1, "dsse.json")
        e = json.load(open(path))
        payload = bytearray(b64(e["payload"]))
        i = payload.find(d1[7:].encode())
        payload[i] = ord("0") if payload[i] != ord("0") else ord("1")  # another subject digest
        e["payload"] = base64.b64encode(bytes(payload)).decode()
        with open(path, "w") as f:
            json.dump(e, f)
        return dsse_oracle(open(path, "rb").read(), os.path.join(ts, "..", "signer.pub"), d1, tmp)

    def flip_proof(ts):
        path = sidecar(ts, d1, "tlog-proof")
        lines = open(path).read().split("\n")
        lines[1] = "index 1"  # d1's envelope is entry 0; entry 1 is d2's
        with open(path, "w") as f:
            f.write("\n".join(lines))
        envb = open(sidecar(ts, d1, "dsse.json"), "rb").read()
        return proof_oracle("\n".join(lines), envb, os.path.join(ts, "..", "log.pub"), tmp)

    def flip_checkpoint_root(ts):
        path = sidecar(ts, d1, "tlog-proof")
        text = open(path).read()
        head, note = text.split("\n\n", 1)
        nl = note.split("\n")
        root = bytearray(b64(nl[2]))
        root[0] ^= 1
        nl[2] = base64.b64encode(bytes(root)).decode()
        with open(path, "w") as f:
            f.write(head + "\n\n" + "\n".join(nl))
        envb = open(sidecar(ts, d1, "dsse.json"), "rb").read()
        return proof_oracle(open(path).read(), envb, os.path.join(ts, "..", "log.pub"), tmp)

    tampered("blob-byte", flip_blob, "artifact-digest")
    tampered("envelope-signature", flip_envelope_sig, "dsse-signature")
    tampered("envelope-payload", flip_envelope_payload, "dsse-signature")
    tampered("proof-index", flip_proof, "inclusion-proof")
    tampered("checkpoint-root", flip_checkpoint_root, "checkpoint-signature")
    tampered("wrong-signer-key", lambda ts: None, "dsse-signature", key="other.pub")
    tampered("wrong-log-key", lambda ts: None, "checkpoint-signature", trusted="other_root.json")
    tampered("blob-deleted", lambda ts: os.remove(blob(ts, d1)), "artifact-digest")
    tampered("envelope-deleted", lambda ts: os.remove(sidecar(ts, d1, "dsse.json")), "envelope")
    tampered("proof-deleted", lambda ts: os.remove(sidecar(ts, d1, "tlog-proof")), "log-proof")

    # ---- fsck: clean, then each corruption found (exit 1, the path named).
    p = run([S, "bundle", "fsck", "--store", store])
    check(p.returncode == 0 and "clean" in p.stdout and p.stderr == "", "fsck of the built store: clean, exit 0")

    def fsck_case(name, mutate, expect_path, expect_text):
        t = os.path.join(w, "f_" + name)
        shutil.copytree(store, t)
        mutate(t)
        p = run([S, "bundle", "fsck", "--store", t])
        errs = [l for l in p.stdout.splitlines() if l.startswith("error ")]
        hit = [l for l in errs if expect_path(t) in l and expect_text in l]
        check(p.returncode == 1 and len(hit) == 1,
              "fsck finds %s: exit 1, one error naming the file and '%s' (%s)" % (name, expect_text, errs))

    t = os.path.join(w, "f_leftover-temp")
    shutil.copytree(store, t)
    leftover = blob(t, d1) + ".tmp.Ab12Cd"
    with open(leftover, "wb") as f:
        f.write(b"half a bund")
    p = run([S, "bundle", "fsck", "--store", t])
    check(p.returncode == 0 and "clean" in p.stdout and "warning " + leftover in p.stderr and "error" not in p.stdout,
          "fsck: a leftover temp file is a warning on stderr naming it, exit 0 (%s)" % p.stderr.strip())
    fsck_case("blob-byte-flip", lambda t: flip_byte(blob(t, d1), 4000), lambda t: blob(t, d1), "hashes to")
    ghost = "sha256:" + hashlib.sha256(b"no such bundle").hexdigest()

    def dangling(t):
        with open(os.path.join(t, "ids", "linux", "elf-build-id", "00112233445566778899"), "w") as f:
            f.write(ghost + "\n")
    fsck_case("id-entry-missing-blob", dangling,
              lambda t: os.path.join(t, "ids", "linux", "elf-build-id", "00112233445566778899"), "not in the store")
    for sc in ("dsse.json", "tlog-proof", "checkpoint"):
        def truncate(t, sc=sc):
            path = sidecar(t, d1, sc)
            n = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.truncate(n // 2)
        fsck_case("truncated-" + sc, truncate, lambda t, sc=sc: sidecar(t, d1, sc), "")

    # ---- concurrent writers: 4 signed builds of overlapping file sets at once.
    cstore = os.path.join(w, "cstore")
    sets = [["c_O0", "c_O2"], ["c_O2", "cpp_O1"], ["cpp_O1", "cpp_O2"], ["cpp_O2", "c_O0"]]
    procs = [subprocess.Popen([S, "bundle", "build", "--store", cstore] + sign + [mods[n] for n in s],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in sets]
    outs = [pr.communicate() + (pr.returncode,) for pr in procs]
    check(all(o[2] == 0 for o in outs), "4 concurrent signed builds: all exit 0 (%s)" % [o[1].strip() for o in outs if o[2]])
    digests = [o[0].strip() for o in outs]
    check(all(sha256sum(blob(cstore, d)) == d for d in digests), "every concurrent build's blob: sha256sum == digest")
    p = run([S, "bundle", "fsck", "--store", cstore])
    check(p.returncode == 0 and "clean" in p.stdout and p.stderr == "", "fsck after concurrent writers: clean (%s)" % p.stdout)
    for n, bid in ids.items():
        entry = os.path.join(cstore, "ids", "linux", "elf-build-id", bid)
        d = open(entry).read().strip() if os.path.exists(entry) else ""
        ok = d in digests and sha256sum(blob(cstore, d)) == d
        if ok:
            j = json.loads(must([S, "bundle", "inspect", d, "--store", cstore, "--json"]))
            ok = bid in [m["id"] for m in j["modules"]] and any(n in sets[i] for i in range(4) if digests[i] == d)
        check(ok, "id entry of %s (readelf build-id %s) names a stored bundle holding it" % (n, bid[:12]))
    for d in digests:
        p = run([S, "trace-verify", "--bundle", d, "--dsse", "--rekor", "--store", cstore,
                 "--key", os.path.join(keys, "signer.pub"), "--trusted-root", os.path.join(log, "trusted_root.json")])
        check(p.returncode == 0, "concurrently signed %s verifies (%s)" % (d[:19], p.stderr.strip()))

    if failures:
        sys.exit("FAIL: %d check(s) failed:\n  %s" % (len(failures), "\n  ".join(failures)))
    print("PASS")


if __name__ == "__main__":
    main()
