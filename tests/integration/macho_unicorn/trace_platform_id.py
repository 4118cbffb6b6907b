#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mach-O UUIDs in traces (doc/macos.md "Traces"): a raw state (doc/raw-state.md) of a thread stopped
at the entry of chain_x86_64's `leaf` (its address from llvm-nm-16, the return address 0 on the
stack) is captured with `trace-capture --raw --bundle`; the stored frame's module identity must be
kind macho-uuid with the UUID llvm-dwarfdump-16 --uuid reads, the trace's bundle must hold it, and
`trace-replay`'s platform-id check must pass. Then the same state captured without a bundle and
resolved with the bundle of another build of chain_x86_64 (a copy whose LC_UUID bytes differ, named
chain_x86_64 too): platform-id must fail naming both UUIDs (the trace's and the bundle's), and a
raw state that claims the other UUID for the original file is refused naming both.

  trace_platform_id.py --stackprov BIN --fixture chain_x86_64
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, **kw)


def must(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout


def uuid_of(path):
    """The x86_64 UUID llvm-dwarfdump-16 --uuid prints ("UUID: 4C4C44EA-... (x86_64) PATH"), as lowercase
    hex without dashes."""
    m = re.search(r"UUID: ([0-9A-F-]{36}) \(x86_64\)", must(["llvm-dwarfdump-16", "--uuid", path]))
    return m.group(1).replace("-", "").lower()


def leaf_address(path):
    for line in must(["llvm-nm-16", "-n", path]).splitlines():
        w = line.split()
        if len(w) == 3 and w[2] == "_leaf" and w[1] in ("t", "T"):
            return int(w[0], 16)
    raise RuntimeError("no _leaf in llvm-nm-16 -n " + path)


def write_state(path, exe, uuid=None):
    """A state at the entry of leaf: rip = leaf, rsp on a return address 0 (the end of the stack)."""
    sp = 0x7f0001000
    mod = {"path": exe, "load_address": "0x100000000"}
    if uuid:
        mod["identity"] = {"kind": "macho-uuid", "hex": uuid}
    doc = {"version": 1, "arch": "x86_64", "pid": 4242, "tid": 4242,
           "registers": {"rip": "0x%x" % leaf_address(exe), "rsp": "0x%x" % sp},
           "memory": [{"address": "0x%x" % sp, "hex": "00" * 64}],
           "modules": [mod]}
    with open(path, "w") as f:
        json.dump(doc, f)


def fail(msg):
    print("FAIL: " + msg)
    return 1


def gate(a, store, tid):
    r = run([a.stackprov, "trace-replay", "--trace", tid, "--seeds", "1", "--json", "--store", store])
    doc = json.loads(r.stdout)
    return {c["name"]: c for c in doc["checks"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    a = ap.parse_args()
    for tool in ("llvm-dwarfdump-16", "llvm-nm-16"):
        if shutil.which(tool) is None:
            return fail(f"{tool} missing (make deps)")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOME=tmp, XDG_DATA_HOME=os.path.join(tmp, "xdg"), TMPDIR=tmp)
        env.pop("STACKPROV_STORE", None)
        exe = os.path.join(tmp, "orig", "chain_x86_64")
        os.makedirs(os.path.dirname(exe))
        shutil.copy(a.fixture, exe)
        u1 = uuid_of(exe)
        # Another build: the same bytes with the LC_UUID changed (as a rebuild changes it).
        other = os.path.join(tmp, "other", "chain_x86_64")
        os.makedirs(os.path.dirname(other))
        data = bytearray(open(exe, "rb").read())
        at = data.find(bytes.fromhex(u1))
        if at < 0 or data.find(bytes.fromhex(u1), at + 1) >= 0:
            return fail(f"the UUID {u1} is not exactly once in {exe}")
        data[at] ^= 0xff
        with open(other, "wb") as f:
            f.write(data)
        u2 = uuid_of(other)
        if u2 == u1:
            return fail("the copy's UUID did not change")
        state = os.path.join(tmp, "state.json")
        write_state(state, exe)
        store = "sqlite:" + os.path.join(tmp, "traces.db")
        bstore = os.path.join(tmp, "bundles")
        r = run([a.stackprov, "trace-capture", "--raw", state, "--store", store, "--bundle", "--bundle-store", bstore],
                env=env)
        if r.returncode != 0:
            return fail(f"trace-capture --raw --bundle: exit {r.returncode}: {r.stderr}")
        tid = r.stdout.strip()
        ev = json.loads(must([a.stackprov, "trace-show", tid, "--json", "--store", store], env=env))
        frames = ev["frames"]
        if not frames or frames[0].get("module_id_kind") != "macho-uuid" or frames[0].get("module_build_id") != u1 \
                or ev.get("platform") != "macos":
            bad += fail(f"the trace's frame {frames[:1]} (platform {ev.get('platform')}): want macho-uuid {u1} "
                        "(llvm-dwarfdump-16 --uuid), platform macos")
        if frames and frames[0].get("symbol") != "leaf":
            bad += fail(f"frame 0 is {frames[0].get('symbol')!r}, llvm-nm-16 says _leaf")
        checks = gate(a, store, tid)
        pid = checks.get("platform-id", {})
        if not pid.get("passed"):
            bad += fail(f"platform-id with the trace's own bundle: {pid}")
        # Without a bundle, resolved with another build's bundle: refused naming both UUIDs. A trace
        # store of its own (the first one holds the right bundle, which resolve would find by UUID).
        store = "sqlite:" + os.path.join(tmp, "traces2.db")
        r = run([a.stackprov, "trace-capture", "--raw", state, "--store", store], env=env)
        tid2 = r.stdout.strip()
        ob = os.path.join(tmp, "other.bundle")
        must([a.stackprov, "bundle", "build", "-o", ob, other], env=env)
        r = run([a.stackprov, "trace-resolve", "--trace", tid2, "--bundle", ob, "--store", store], env=env)
        checks = gate(a, store, tid2)
        pid = checks.get("platform-id", {})
        detail = pid.get("detail", "")
        if pid.get("passed") is not False or u1 not in detail or u2 not in detail or "macho-uuid" not in detail:
            bad += fail(f"platform-id with another build's bundle: {pid} (want a failure naming {u1} and {u2})")
        # A state that claims the other build's UUID for the original file is refused, naming both.
        claim = os.path.join(tmp, "claim.json")
        write_state(claim, exe, uuid=u2)
        r = run([a.stackprov, "trace-capture", "--raw", claim, "--store", store], env=env)
        if r.returncode != 1 or u1 not in r.stderr.lower().replace("-", "") or u2 not in r.stderr.lower().replace("-", ""):
            bad += fail(f"a state claiming {u2}: exit {r.returncode}, {r.stderr!r}")
        if bad == 0:
            print(f"ok   trace of a Mach-O raw state: frame keyed macho-uuid {u1} (llvm-dwarfdump-16), platform-id "
                  f"passes with its bundle; with another build's bundle it fails: {detail}")
    print("ok" if bad == 0 else f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
