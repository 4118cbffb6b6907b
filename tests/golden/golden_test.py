#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Golden outputs (issue 32): behaviour stays byte-identical across a refactor.

The inputs (inputs/, made once by make_inputs.sh at the commit before the refactor and committed)
are a static non-PIE program, a gcore core of it, a `stackprov record` recording and serialized
snapshots of the core's threads: no address depends on ASLR, the clone's path or the compiler
installed later. This test runs `stack` (text, JSON, --no-lines, --sysroot, --offline from a
bundle), `symbolize` (LLVM, JSON, GNU, --no-inlines, by build-id from a bundle), `bundle build`
(the bundle's sha256 and its inspect/lookup/unwind output), `perf-import` (folded, JSON, pprof),
the snapshots through Python (unwound, and to_bytes(from_bytes(x)) == x) and a trace (capture
from the core with a bundle, show, resolve, replay) and compares each output with expected/NAME.

The goldens are our own output at that commit: they guard "unchanged", not "right". What makes
them right is checked here against gdb (every frame address of the core's threads, up to main, is
gdb's) and elsewhere against eu-stack, llvm-symbolizer and perf script. A change of output on
purpose regenerates them in the same commit (--update) and says why in its message.

  golden_test.py --stackprov CLI --python-path DIR [--update] [--keep]
"""
import argparse
import difflib
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from peers import parse_gdb_bt  # noqa: E402  (tests/lib: the peers' output parsers)
from kernel_notes import notes_build_id  # noqa: E402

INPUTS = os.path.join(HERE, "inputs")
EXPECTED = os.path.join(HERE, "expected")
FIXTURE_PATH = "/tmp/stackprov-golden/fixture"  # where make_inputs.sh ran it (in the core and recording)

failures = []


def run(cmd, stdin=None, env=None, check=True):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=300)
    if check and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return p


WORK = None  # the work directory's path, "<WORK>" in the goldens (the clone is anywhere)


def compare(name, text, update, head=None):
    """expected/NAME holds `text` (with head=N: its first N lines and the whole text's sha256)."""
    text = text.replace(WORK, "<WORK>")
    if head is not None:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[:head]) + f"... {len(lines)} lines, sha256 {hashlib.sha256(text.encode()).hexdigest()}\n"
    path = os.path.join(EXPECTED, name)
    if update:
        with open(path, "w") as f:
            f.write(text)
        return
    with open(path) as f:
        want = f.read()
    if want != text:
        diff = list(difflib.unified_diff(want.splitlines(), text.splitlines(), "expected/" + name, "now", lineterm=""))
        failures.append(name)
        print(f"FAIL {name}: differs from expected/{name}:\n" + "\n".join(diff[:80]))
    else:
        print(f"ok   {name}")


def unpack(work):
    files = {}
    for name in ("fixture", "fixture.core", "fixture.cap", "thread0.snap", "thread1.snap"):
        out = os.path.join(work, name)
        with lzma.open(os.path.join(INPUTS, name + ".xz")) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        files[name] = out
    os.chmod(files["fixture"], 0o755)
    # A sysroot holding the fixture at the path the core and the recording name.
    sysroot = os.path.join(work, "sysroot")
    os.makedirs(os.path.dirname(sysroot + FIXTURE_PATH), exist_ok=True)
    shutil.copy2(files["fixture"], sysroot + FIXTURE_PATH)
    files["sysroot"] = sysroot
    # The recording's kernel (build-id 4a5a9b0a..., a firecracker guest kernel the CI machines no longer
    # boot) as perf's build-id cache on the recording machine holds it: perf-import names another
    # build's kernel frames from that copy, as perf script does. The copy is cut to the five functions the
    # samples hit, with the names that build's /proc/kallsyms gave them when the capture was made (the
    # golden committed then); their start addresses are not known any more: each starts 0x10-0x16 bytes
    # before its frame's address.
    kdir = os.path.join(work, ".debug", "[kernel.kallsyms]", "4a5a9b0affb66c437abcd455d2738af879985fa9")
    os.makedirs(kdir)
    shutil.copy(os.path.join(INPUTS, "kallsyms-4a5a9b0a"), os.path.join(kdir, "kallsyms"))
    return files


def gdb_pcs(fixture, core):
    """{lwp: [pc or None per frame]} from gdb's `thread apply all bt` (None: frame 0 or
    <signal handler called>, where gdb prints no address)."""
    out = run(["gdb", "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt", fixture, core]).stdout
    threads = {}
    for lwp, frames in parse_gdb_bt(out).items():
        if lwp is None:  # the frame gdb prints when it loads the core, before the backtraces
            continue
        cur = threads[lwp] = []
        for f in frames:
            if f["index"] == len(cur):
                cur.append(f["pc"])
    return threads


def check_against_gdb(stack_json, files):
    gdb = gdb_pcs(files["fixture"], files["fixture.core"])
    ours = {t["tid"]: [int(f["pc"], 16) for f in t["frames"]] for t in stack_json["threads"]}
    if set(gdb) != set(ours):
        failures.append("gdb threads")
        print(f"FAIL gdb: threads {sorted(gdb)} vs ours {sorted(ours)}")
        return
    compared = 0
    for tid, pcs in gdb.items():
        for i, pc in enumerate(pcs):
            if pc is None:
                continue
            compared += 1
            if i >= len(ours[tid]) or ours[tid][i] != pc:
                failures.append("gdb pcs")
                print(f"FAIL gdb: thread {tid} frame {i}: gdb {pc:#x}, ours "
                      f"{ours[tid][i] if i < len(ours[tid]) else None}")
    if compared < 8:
        failures.append("gdb count")
        print(f"FAIL gdb: only {compared} frame addresses compared")
    print(f"ok   gdb: {compared} frame addresses of {len(gdb)} threads agree")


def norm_bytes(data):
    """Binary output with the work directory's path and the running kernel's build-id overwritten in
    place (the same length: the work directory is a mkdtemp name of fixed length, so length prefixes
    do not move). perf-import names the running kernel's build-id when the recording's differs (the
    recording's kernel is the committed one; the machine running the test boots any)."""
    data = data.replace(WORK.encode(), b"#" * len(WORK))
    running = notes_build_id()
    if running:
        data = data.replace(running.encode(), b"k" * len(running))
    return data


def trace_norm(text, trace_id, db_path):
    """The trace's random ids and clock readings as placeholders; its captured data (which holds
    the --exe path) by the sha256 of its normalized bytes."""
    import sqlite3
    text = text.replace(trace_id, "<TRACE-ID>")
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<UUID>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<TIME>", text)
    text = re.sub(r'"verify_time_ms":\d+', '"verify_time_ms":<MS>', text)
    with sqlite3.connect(db_path) as db:
        for sha, blob in db.execute("SELECT sha256, gzip FROM trace_data"):
            text = text.replace(sha, "normalized:" + hashlib.sha256(norm_bytes(gzip.decompress(blob))).hexdigest())
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--python-path", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    global WORK
    a.work = tempfile.mkdtemp(prefix="sprov-golden-", dir="/tmp")  # fixed length, unpredictable
    WORK = a.work
    try:
        return run_all(a)
    finally:
        if a.keep:
            print(f"work directory kept: {a.work}")
        else:
            shutil.rmtree(a.work, ignore_errors=True)


def run_all(a):
    os.makedirs(EXPECTED, exist_ok=True)
    cli = a.stackprov
    f = unpack(a.work)
    fx, core = f["fixture"], f["fixture.core"]
    env = dict(os.environ, STACKPROV_STORE="", XDG_DATA_HOME=os.path.join(a.work, "xdg"), HOME=a.work)
    env.pop("DEBUGINFOD_URLS", None)
    env.pop("STACKPROV_STORE")

    # ---- stack from the core
    stack_json = run([cli, "stack", "--core", core, "--exe", fx, "--json"], env=env).stdout
    check_against_gdb(json.loads(stack_json), f)
    compare("stack.json", stack_json, a.update)
    compare("stack.txt", run([cli, "stack", "--core", core, "--exe", fx], env=env).stdout, a.update)
    compare("stack_nolines.json", run([cli, "stack", "--core", core, "--exe", fx, "--json", "--no-lines"], env=env).stdout, a.update)
    compare("stack_sysroot.json", run([cli, "stack", "--core", core, "--sysroot", f["sysroot"], "--json"], env=env).stdout, a.update)

    # ---- bundles: bytes (sha256), inspect, lookup, unwind; offline stack from the store
    store = os.path.join(a.work, "store")
    bundle = os.path.join(a.work, "fixture.sbundle")
    built = run([cli, "bundle", "build", fx, "--store", store, "-o", bundle], env=env).stdout
    with open(bundle, "rb") as b:
        digest = hashlib.sha256(b.read()).hexdigest()
    addresses = open(os.path.join(INPUTS, "addresses.txt")).read().split()
    text = built + f"file sha256 {digest}\n"
    text += run([cli, "bundle", "inspect", bundle], env=env).stdout
    text += run([cli, "bundle", "inspect", bundle, "--json"], env=env).stdout
    text += run([cli, "bundle", "lookup", bundle] + addresses, env=env).stdout
    text += run([cli, "bundle", "unwind", bundle] + addresses, env=env).stdout
    compare("bundle.txt", text, a.update)
    compare("stack_offline.json", run([cli, "stack", "--core", core, "--offline", "--store", store, "--json"], env=env).stdout, a.update)

    # ---- symbolize
    addr_in = "\n".join(addresses) + "\n"
    text = ""
    for opts in ([], ["--output-style=JSON"], ["--output-style=GNU"], ["--no-inlines"], ["-a", "-p"]):
        text += f"== {' '.join(opts)}\n" + run([cli, "symbolize", "--obj", fx] + opts, stdin=addr_in, env=env).stdout
    build_id = json.loads(stack_json)["threads"][0]["frames"][0]["build_id"]
    text += "== --build-id --store\n" + run([cli, "symbolize", "--build-id", build_id, "--store", store],
                                            stdin=addr_in, env=env).stdout
    compare("symbolize.txt", text, a.update)

    # ---- perf-import of the recording (module file under --sysroot; from the bundle store)
    cap = f["fixture.cap"]
    pi = [cli, "perf-import", "-q", cap]
    compare("perf_folded.txt", run(pi + ["--sysroot", f["sysroot"]], env=env).stdout, a.update)
    compare("perf.jsonl", run(pi + ["--sysroot", f["sysroot"], "-f", "json"], env=env).stdout, a.update, head=12)
    empty_root = os.path.join(a.work, "empty-root")
    os.makedirs(empty_root)
    compare("perf_store.jsonl", run(pi + ["--sysroot", empty_root, "--store", store, "-f", "json"], env=env).stdout, a.update, head=12)
    pprof = os.path.join(a.work, "perf.pb.gz")
    run(pi + ["--sysroot", f["sysroot"], "-f", "pprof", "-o", pprof], env=env)
    with gzip.open(pprof) as g:
        compare("perf_pprof.sha256", hashlib.sha256(norm_bytes(g.read())).hexdigest() + "\n", a.update)

    # ---- serialized snapshots through Python
    py = r"""
import json, sys, stackprov
sysroot, snaps = sys.argv[1], sys.argv[2:]
def plain(o):
    if o is None or isinstance(o, (bool, int, str, float)):
        return o
    if isinstance(o, (list, tuple)):
        return [plain(x) for x in o]
    return {n: plain(getattr(o, n)) for n in dir(o) if not n.startswith("_") and not callable(getattr(o, n))}
ctx = stackprov.Context(sysroot=sysroot)
uw = ctx.unwinder()
for path in snaps:
    data = open(path, "rb").read()
    snap = stackprov.Snapshot.from_bytes(data)
    assert snap.to_bytes() == data, path + ": to_bytes(from_bytes(x)) != x"
    st = uw.unwind(snap)
    print(json.dumps({"pid": snap.pid, "tid": snap.tid, "arch": snap.arch, "modules": snap.modules,
                      "stack": plain(st)}, sort_keys=True))
"""
    penv = dict(env, PYTHONPATH=a.python_path, PYTHONDONTWRITEBYTECODE="1")
    compare("snapshots.jsonl", run([sys.executable, "-c", py, f["sysroot"], f["thread0.snap"], f["thread1.snap"]],
                                   env=penv).stdout, a.update)

    # ---- a trace of the core: capture (bundle), show, resolve, replay
    db_path = os.path.join(a.work, "traces.db")
    db = "sqlite:" + db_path
    bstore = os.path.join(a.work, "trace-bundles")
    cap_out = run([cli, "trace-capture", "--core", core, "--exe", fx, "--store", db, "--bundle",
                   "--bundle-store", bstore], env=env)
    trace_id = cap_out.stdout.strip()
    text = cap_out.stdout + cap_out.stderr
    text += run([cli, "trace-show", trace_id, "--store", db], env=env).stdout
    text += run([cli, "trace-show", trace_id, "--store", db, "--json"], env=env).stdout
    text += run([cli, "trace-resolve", "--trace", trace_id, "--store", db, "--offline"], env=env).stdout
    rep = run([cli, "trace-replay", "--trace", trace_id, "--store", db, "--json"], env=env, check=False)
    text += f"replay exit {rep.returncode}\n" + rep.stdout
    compare("trace.txt", trace_norm(text, trace_id, db_path), a.update)

    if failures:
        print(f"FAIL: {len(failures)} golden(s) differ: {', '.join(failures)} (tests/golden/golden_test.py --update "
              "regenerates them when the change is intended; say why in the commit)")
        return 1
    print("all goldens identical" if not a.update else f"goldens written to {EXPECTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
