#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov stack --core --offline` from symbol bundles alone (every binary deleted) against gdb, eu-stack and our own walk with the binaries.
"""The fixture (fx_main.c + fx_lib.c, -O2 without frame pointers) runs from RUN_DIR with its own
copies of libc.so.6 and ld.so, parks four threads in libc (through the shared library and
in a signal handler), and is dumped with gcore. Then:

  1. with every binary in place: gdb's frames (non-inline, pc per frame) and eu-stack's for each
     thread are the oracles; `stackprov stack --core` (files) must equal gdb and start with
     eu-stack's frames;
  2. bundles are built with `stackprov bundle build` from copies of the four binaries (the
     executable, its .so, libc.so.6 with libc6-dbg's DWARF, ld.so) and stored in a store
     directory; then RUN_DIR and the copies are deleted;
  3. `stackprov stack --core --offline --store` under strace: every thread's pc sequence must
     equal gdb's (and the file walk's), every caller frame in a module must be found by
     cfi_bundle (no frame pointers: only CFI can find them) or be the signal frame the file walk
     has too (the trampoline's CFI is an expression, not in the bundle: the frame below it is
     flagged cfi_not_in_bundle), the stop reasons must equal the file walk's, and no file under RUN_DIR, the copies or /usr/lib/debug may be opened or
     even looked up (strace's file-syscall log);
  4. `--store` without --offline (files missing): the same frames from bundles;
  5. a store without the .so's bundle: a warning names the module; every frame up to the first
     one in the .so equals gdb's, and the walk states a stop reason;
  6. serialized snapshots of the same process captured live (snapshot_tool.c: sprov_process_capture
     + sprov_snapshot_serialize), unwound offline after the deletion: equal to the live walk with
     the files (`stack --pid`) and starting with eu-stack -p's frames; no module file looked up;
  7. the default store ($STACKPROV_STORE), usage errors of --offline, --help.
Names: every frame's file:line:column and inline chain from the bundles alone (resolver "bundle")
equal llvm-symbolizer-14's on the binaries (where it names nothing there, on the module's separate
debug file), and its physical function (resolved_function) the name the walk with the files gives
(the symbol tables' choice among aliases, which format-5 bundles carry; llvm's where the tables
name nothing), for every frame llvm names, including
symbol-table-only ones such as _start and libc's __restore_rt (the sigreturn trampoline, looked up
at its pc as eu-stack does: named __restore_rt); the symbol-table name ("function") is empty
offline or equal.
Exit 0 on success, 1 on a mismatch or a missing tool.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import gdb_frames_script, llvm_symbolizer_chains, parse_eu_stack, parse_gdb_frames, real_frames  # noqa: E402

FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL", msg)


def run(cmd, timeout=120, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def gdb_frames(gdb, exe, core, work):
    """gdb's stack frames per thread: inline frames (they share their caller's pc) and tail-call frames
    (gdb's reconstruction from DWARF call-site info: no frame on the stack) skipped."""
    script = os.path.join(work, "frames.py")
    with open(script, "w") as f:
        f.write(gdb_frames_script(tailcall=False))
    r = run(["timeout", "-s", "KILL", "100", gdb, "-nx", "-batch", "-ex", "set debuginfod enabled off",
             "-ex", "set backtrace past-main on",
             exe, core, "-ex", "source " + script])
    frames = parse_gdb_frames(r.stdout)
    if frames is None:
        raise SystemExit("FAIL: gdb gave no frames: " + r.stderr[-2000:])
    return frames


def eu_stack_frames(eu, exe, core, pid=None):
    """eu-stack's pcs per thread: {tid: [pc, ...]}."""
    r = run([eu, "-m", "-n", "256"] + (["-p", str(pid)] if pid else ["--core", core, "-e", exe]))
    threads = {tid: [pc for pc, _, _ in frames] for tid, frames in parse_eu_stack(r.stdout).items()}
    if not threads:
        raise SystemExit("FAIL: eu-stack --core gave no frames: %s %s" % (r.stdout[-1000:], r.stderr[-1000:]))
    return threads


def stack_json(stackprov, args, strace=None, trace_out=None, stop_short=False):
    """stack --json; with stop_short, walks that stop before the end of the stack are expected:
    then exit 1 with one line saying the stacks are not whole (stack --help), as they are."""
    cmd = [stackprov, "stack"] + args + ["--json"]
    if strace:
        cmd = [strace, "-f", "-qq", "-e", "trace=%file", "-o", trace_out] + cmd
    r = run(cmd)
    short = []
    if r.returncode in (0, 1) and r.stdout.startswith("{"):
        short = [t["tid"] for t in json.loads(r.stdout)["threads"]
                 if t["stop_reason"] not in ("end_of_stack", "max_frames")]
    errs = [l for l in r.stderr.splitlines() if not l.startswith("stackprov: warning: ")]
    want = 1 if stop_short and short else 0
    if r.returncode != want or (want and (len(errs) != 1 or "the stacks are not whole" not in errs[0])):
        fail("stackprov stack %s exited %d (want %d; threads stopped short: %s): %s" %
             (" ".join(args), r.returncode, want, short, r.stderr))
        if not r.stdout.startswith("{"):
            return {}, r.stderr
    doc = json.loads(r.stdout)
    # Compared with gdb's frames without its tail-call frames and eu-stack's: the inferred tail-call
    # frames (with files and, from the bundles' call sites, offline) are left out here;
    # integration_tailcall_gdb_dwarf5 compares them offline with gdb's.
    return {t["tid"]: dict(t, frames=real_frames(t["frames"])) for t in doc["threads"]}, r.stderr


def build_id(path):
    """The GNU build-id of an ELF file, read by readelf (binutils)."""
    r = run(["readelf", "-n", path])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    if not m:
        raise SystemExit("FAIL: readelf -n %s: no build-id" % path)
    return m.group(1)


def store_bundle(store, bundle_path, build_ids):
    """Puts a bundle into a store directory by the layout of lib/symbolize/bundle_store.hpp
    (the one place of this test that knows it): blobs/sha256/<hh>/<hex> and
    ids/linux/elf-build-id/<build-id hex> = "sha256:<hex>\\n"."""
    data = open(bundle_path, "rb").read()
    hexd = hashlib.sha256(data).hexdigest()
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, "store.json"), "w") as f:
        f.write('{"format":"stackprov-bundle-store","version":1}\n')
    blob_dir = os.path.join(store, "blobs", "sha256", hexd[:2])
    os.makedirs(blob_dir, exist_ok=True)
    with open(os.path.join(blob_dir, hexd), "wb") as f:
        f.write(data)
    id_dir = os.path.join(store, "ids", "linux", "elf-build-id")
    os.makedirs(id_dir, exist_ok=True)
    for bid in build_ids:
        with open(os.path.join(id_dir, bid), "w") as f:
            f.write("sha256:%s\n" % hexd)
    return "sha256:" + hexd


def pcs(thread):
    return [int(f["pc"], 16) for f in thread["frames"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--snapshot-tool", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tools = {}
    for t in ("gdb", "gcore", "eu-stack", "strace", "readelf", "llvm-symbolizer-14"):
        tools[t] = shutil.which(t)
        if tools[t] is None:
            print("FAIL: %s not found (make deps installs it)" % t)
            return 1
    t0 = time.time()
    run_dir, work = args.run_dir, args.work
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(run_dir)
    os.makedirs(work)
    libc = os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6")
    ldso = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    names = {"exe": "offline_fx", "lib": "liboffline_fx.so", "libc": "libc.so.6",
             "ldso": "ld-linux-x86-64.so.2"}
    for key, src in (("exe", args.fixture), ("lib", args.lib), ("libc", libc), ("ldso", ldso)):
        shutil.copy2(src, os.path.join(run_dir, names[key]))
    exe = os.path.join(run_dir, names["exe"])

    # ---- the core: the fixture parked, dumped by gcore
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("ready "):
            print("FAIL: fixture did not get ready: %r" % line)
            return 1
        time.sleep(0.3)  # the threads posted their semaphores just before blocking
        core_prefix = os.path.join(work, "core")
        r = run([tools["gcore"], "-o", core_prefix, str(proc.pid)])
        core = "%s.%d" % (core_prefix, proc.pid)
        if not os.path.exists(core):
            print("FAIL: gcore wrote no core: %s %s" % (r.stdout, r.stderr))
            return 1
        # The same parked process live: eu-stack -p (oracle), our walk with the files, and
        # serialized snapshots of every thread (sprov_process_capture + sprov_snapshot_serialize).
        eu_live = eu_stack_frames(tools["eu-stack"], None, None, pid=proc.pid)
        live, _ = stack_json(args.stackprov, ["--pid", str(proc.pid)])
        snaps = os.path.join(work, "snaps")
        os.makedirs(snaps)
        r = run([args.snapshot_tool, "save", str(proc.pid), snaps])
        if r.returncode != 0:
            print("FAIL: snapshot_tool save: %s" % r.stderr)
            return 1
    finally:
        proc.kill()
        proc.wait()

    # ---- oracles and our walk with every binary in place
    gdb = gdb_frames(tools["gdb"], exe, core, work)
    eu = eu_stack_frames(tools["eu-stack"], exe, core)
    files, _ = stack_json(args.stackprov, ["--core", core])
    if len(files) != 4 or set(files) != set(gdb):
        fail("threads: stackprov %s, gdb %s (the fixture has 4)" % (sorted(files), sorted(gdb)))
    for tid, t in files.items():
        g = [pc for pc, _ in gdb.get(tid, [])]
        if pcs(t) != g:
            fail("tid %d (files): pcs %s, gdb %s" % (tid, [hex(p) for p in pcs(t)], [hex(p) for p in g]))
        e = eu.get(tid, [])
        if not e or pcs(t)[:len(e)] != e:
            fail("tid %d (files): pcs do not start with eu-stack's %s" % (tid, [hex(p) for p in e]))
    # The fixture's chains cross the .so and libc by CFI: at least one walk passes the .so.
    lib_path = os.path.join(run_dir, names["lib"])
    if not any(f["module"] == lib_path for t in files.values() for f in t["frames"]):
        fail("no frame of %s in the file walk: the fixture did not park as designed" % lib_path)

    # ---- names oracle: llvm-symbolizer-14 on the binaries (and libc6-dbg), before they go.
    # Caller frames are looked up at pc - 1 (inside the call), as stackprov does; a frame
    # restored from a signal frame has the exact interrupted pc, and so has the sigreturn
    # trampoline above it (__restore_rt: the handler returned to its first byte; eu-stack and gdb
    # name it there). Where llvm-symbolizer-14 names nothing on the module, the bundle holds its
    # answer on the module's separate debug file (/usr/lib/debug/.build-id/..., whose .symtab has
    # the local symbols a stripped libc lost: __restore_rt), doc/bundles.md "Symbol-table ranges".
    llvm_chain = {}  # (tid, index) -> [(function, file, line, column)] innermost first
    by_module = {}
    for tid, t in files.items():
        fr = t["frames"]
        for i, f in enumerate(fr):
            if f["module"] and f["module"] != "[vdso]" and os.path.exists(f["module"]):
                trampoline = i + 1 < len(fr) and fr[i + 1]["method"] == "signal"
                off = int(f["module_offset"], 16) - (1 if i > 0 and f["method"] != "signal" and not trampoline else 0)
                by_module.setdefault(f["module"], []).append((tid, i, off))

    def llvm_chains(obj, items):
        r = run([tools["llvm-symbolizer-14"], "--obj=" + obj, "--inlining"] + ["0x%x" % o for _, _, o in items])
        chains = llvm_symbolizer_chains(r.stdout)
        if r.returncode != 0 or len(chains) != len(items):
            fail("llvm-symbolizer-14 on %s: exit %d, %d answers for %d addresses" %
                 (obj, r.returncode, len(chains), len(items)))
            return None
        return chains

    for mod, items in by_module.items():
        chains = llvm_chains(mod, items)
        if chains is None:
            continue
        bid = build_id(mod)
        dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
        unnamed = [k for k, c in enumerate(chains) if c[-1][0] == "??"]
        if unnamed and os.path.exists(dbg):
            again = llvm_chains(dbg, [items[k] for k in unnamed])
            for k, c in zip(unnamed, again or []):
                chains[k] = c
        for (tid, i, _), chain in zip(items, chains):
            llvm_chain[(tid, i)] = chain

    # ---- bundles from copies of the binaries, then every binary deleted
    src = os.path.join(work, "src")
    shutil.copytree(run_dir, src)
    store = os.path.join(work, "store")
    store_no_lib = os.path.join(work, "store-no-lib")
    t_bundles = time.time()
    for key in ("exe", "lib", "libc", "ldso"):
        path = os.path.join(src, names[key])
        out = os.path.join(work, names[key] + ".sbundle")
        r = run([args.stackprov, "bundle", "build", path, "--out", out], timeout=300)
        if r.returncode != 0 or not r.stdout.strip().startswith("sha256:"):
            print("FAIL: bundle build %s exited %d: %s" % (path, r.returncode, r.stderr))
            return 1
        bid = build_id(path)
        digest = store_bundle(store, out, [bid])
        if digest != r.stdout.strip():
            fail("bundle build %s printed %s, its bytes hash to %s" % (path, r.stdout.strip(), digest))
        if key != "lib":
            store_bundle(store_no_lib, out, [bid])
    t_bundles = time.time() - t_bundles
    shutil.rmtree(run_dir)
    shutil.rmtree(src)

    # ---- offline: bundles only, no file opened
    empty = os.path.join(work, "empty-sysroot")
    os.makedirs(empty)
    trace = os.path.join(work, "strace.txt")
    t_off = time.time()
    offline, off_err = stack_json(args.stackprov, ["--core", core, "--offline", "--store", store,
                                                   "--sysroot", empty], strace=tools["strace"], trace_out=trace)
    t_off = time.time() - t_off
    forbidden = (run_dir, src, "/usr/lib/debug")
    touched = [ln.strip() for ln in open(trace) if any(p in ln for p in forbidden)]
    if touched:
        fail("the offline walk looked up module files: %s" % touched[:5])
    compared, named_ok, symtab_only = [0], [0], [0]
    for tid, t in files.items():
        o = offline.get(tid)
        if o is None:
            fail("tid %d: missing offline" % tid)
            continue
        g = [pc for pc, _ in gdb.get(tid, [])]
        if pcs(o) != g or pcs(o) != pcs(t):
            fail("tid %d (offline): pcs %s, gdb %s, files %s" % (tid, [hex(p) for p in pcs(o)],
                                                                [hex(p) for p in g], [hex(p) for p in pcs(t)]))
        if o["stop_reason"] != t["stop_reason"]:
            fail("tid %d: offline stop %s, files %s" % (tid, o["stop_reason"], t["stop_reason"]))
        for i, f in enumerate(o["frames"]):
            if i > 0 and f["module"] != "[vdso]" and f["method"] not in ("cfi_bundle", "signal"):
                fail("tid %d #%d %s: method %s, want cfi_bundle" % (tid, i, f["pc"], f["method"]))
            # A signal frame: the file walk's too; the trampoline's row is an expression
            # (not in the bundle), so the frame below carries the flag.
            want_signal = i < len(t["frames"]) and t["frames"][i]["method"] == "signal"
            if want_signal != (f["method"] == "signal"):
                fail("tid %d #%d: offline method %s, files %s" % (tid, i, f["method"], t["frames"][i]["method"]))
            if want_signal and "cfi_not_in_bundle" not in o["frames"][i - 1].get("flags", []):
                fail("tid %d #%d: the frame below the signal frame lacks flag cfi_not_in_bundle" % (tid, i - 1))
            if f["function"] and i < len(t["frames"]) and f["function"] != t["frames"][i]["function"]:
                fail("tid %d #%d: offline name %r, files %r" % (tid, i, f["function"], t["frames"][i]["function"]))
            # Names and source positions from the bundles alone equal llvm-symbolizer-14's on the
            # binaries: the physical function, file:line:column and the inline chain, for every
            # frame llvm answers, including those it names from the symbol table alone (_start:
            # "??:0:0" or "<STT_FILE name>:0:0", no DWARF there: the bundle's symbol-table ranges;
            # counted). An unnamed frame ("", printed "??" by llvm) fails where llvm names it.
            chain = llvm_chain.get((tid, i))
            if chain is not None:
                compared[0] += 1
                want_name, want_file, want_line, want_col = chain[-1]
                if len(chain) == 1 and want_name != "??" and want_line == 0 and "/" not in want_file:
                    symtab_only[0] += 1
                # The physical function's name outside llvm-symbolizer mode is the naming rule's
                # (format 5's symbol names, doc/bundles.md): the one the walk with the files prints
                # (the symbol tables' choice among aliases: __clone3, read, clock_nanosleep@GLIBC_2.2.5,
                # where llvm says clone3, __read, clock_nanosleep); llvm's where the tables name nothing.
                if i < len(t["frames"]) and t["frames"][i]["function"]:
                    want_name = t["frames"][i]["function"]
                    # ... and its offset, the one the walk with the files prints.
                    if f.get("resolved_function") == want_name and \
                            f.get("resolved_function_offset") != t["frames"][i].get("function_offset"):
                        fail("tid %d #%d %s: offline offset %r, files %r" % (
                            tid, i, f["pc"], f.get("resolved_function_offset"), t["frames"][i].get("function_offset")))
                got = (f.get("resolved_function") or "??", f.get("file") or "??", f.get("line") or 0, f.get("column") or 0)
                if got != (want_name, want_file, want_line, want_col):
                    fail("tid %d #%d %s: offline %r, llvm-symbolizer %r" % (tid, i, f["pc"], got, chain[-1]))
                got_in = [(x["function"], x["file"], x["line"], x["column"]) for x in f.get("inlined", [])]
                if got_in != chain[:-1]:
                    fail("tid %d #%d %s: offline inlined %r, llvm-symbolizer %r" % (tid, i, f["pc"], got_in,
                                                                                 chain[:-1]))
                if f.get("resolver") != ("none" if want_name == "??" else "bundle"):
                    fail("tid %d #%d: offline resolver %r, llvm-symbolizer %r" % (tid, i, f.get("resolver"), want_name))
                named_ok[0] += 1
    if symtab_only[0] == 0:
        fail("no frame named by llvm-symbolizer-14 from the symbol table only (_start): not exercised")
    if not any(f["method"] == "signal" for t in offline.values() for f in t["frames"]):
        fail("no signal frame in the offline walk: the signal thread did not park as designed")
    tramp = [f.get("resolved_function") for t in offline.values() for i, f in enumerate(t["frames"])
             if i + 1 < len(t["frames"]) and t["frames"][i + 1]["method"] == "signal"]
    if tramp != ["__restore_rt"]:
        fail("the sigreturn trampoline frame (above the signal frame) named %r offline, want ['__restore_rt'] "
             "(eu-stack's name; libc6-dbg's .symtab only)" % tramp)
    named = sum(1 for t in offline.values() for f in t["frames"] if f.get("resolved_function"))
    if named == 0:
        fail("no frame of the offline walk is named from the bundles")
    print("names vs llvm-symbolizer-14: %d frames compared, %d equal (file:line:column, inline chain; the "
          "function as the file walk names it), of them %d named by llvm from the symbol table only" %
          (compared[0], named_ok[0], symtab_only[0]))
    print("offline: %d threads, %d frames (%d named) in %.2fs; bundles built in %.1fs" %
          (len(offline), sum(len(t["frames"]) for t in offline.values()), named, t_off, t_bundles))

    # ---- serialized snapshots of the live process, unwound offline (sprov_snapshot_deserialize)
    snap_files = sorted(os.path.join(snaps, f) for f in os.listdir(snaps))
    trace2 = os.path.join(work, "strace-snap.txt")
    r = run([tools["strace"], "-f", "-qq", "-e", "trace=%file", "-o", trace2, args.snapshot_tool, "unwind", store]
            + snap_files)
    if r.returncode != 0:
        fail("snapshot_tool unwind exited %d: %s" % (r.returncode, r.stderr))
    touched = [ln.strip() for ln in open(trace2) if any(p in ln for p in forbidden)]
    if touched:
        fail("the offline snapshot walk looked up module files: %s" % touched[:5])
    snap_walks = {d["tid"]: d for d in map(json.loads, r.stdout.splitlines())}
    if set(snap_walks) != set(live) or len(live) != 4:
        fail("snapshot threads %s, live walk %s" % (sorted(snap_walks), sorted(live)))
    for tid, t in live.items():
        w = snap_walks.get(tid)
        if w is None:
            continue
        got = [int(p, 16) for p in w["pcs"]]
        e = eu_live.get(tid, [])
        if got != pcs(t) or w["stop"] != t["stop_reason"]:
            fail("tid %d (snapshot, offline): %s %s, live walk %s %s" % (tid, w["pcs"], w["stop"],
                                                                       [hex(p) for p in pcs(t)], t["stop_reason"]))
        if not e or got[:len(e)] != e:
            fail("tid %d (snapshot, offline): pcs do not start with eu-stack -p's %s" % (tid, [hex(p) for p in e]))
        if any(m not in ("cfi_bundle", "signal") for m in w["methods"][1:]):
            fail("tid %d (snapshot, offline): methods %s" % (tid, w["methods"]))
    print("snapshots: %d threads unwound offline, same frames as the live walk" % len(snap_walks))

    # ---- --store without --offline: the files are gone, the bundles take over
    fallback, _ = stack_json(args.stackprov, ["--core", core, "--store", store])
    for tid, t in files.items():
        fb = fallback.get(tid)
        if fb is None or pcs(fb) != pcs(t) or fb["stop_reason"] != t["stop_reason"]:
            fail("tid %d (--store, files missing): %s, files %s" %
                 (tid, fb and [hex(p) for p in pcs(fb)], [hex(p) for p in pcs(t)]))
        elif any(f["method"] not in ("cfi_bundle", "signal") for f in fb["frames"][1:] if f["module"] != "[vdso]"):
            fail("tid %d (--store, files missing): methods %s" % (tid, [f["method"] for f in fb["frames"]]))

    # ---- the default store ($STACKPROV_STORE) when --store is not given
    env = dict(os.environ, STACKPROV_STORE=store)
    r = run([args.stackprov, "stack", "--core", core, "--offline", "--json"], env=env)
    dflt = {t["tid"]: dict(t, frames=real_frames(t["frames"])) for t in json.loads(r.stdout)["threads"]} \
        if r.returncode == 0 else {}
    if {tid: pcs(t) for tid, t in dflt.items()} != {tid: pcs(t) for tid, t in offline.items()}:
        fail("--offline with STACKPROV_STORE (no --store): exit %d, frames differ: %s" % (r.returncode, r.stderr))

    # ---- options: --offline needs --core and excludes --exe (usage errors, exit 2)
    for bad, msg in ((["--pid", "1", "--offline"], "--offline is only valid with --core"),
                     (["--core", core, "--offline", "--exe", exe], "not valid with --offline")):
        r = run([args.stackprov, "stack"] + bad)
        if r.returncode != 2 or msg not in r.stderr:
            fail("stack %s: exit %d, stderr %r (want 2 and %r)" % (" ".join(bad), r.returncode, r.stderr, msg))
    r = run([args.stackprov, "stack", "--help"])
    if "--offline" not in r.stdout or "--store DIR" not in r.stdout:
        fail("stack --help does not document --offline and --store")

    # ---- a module without a bundle: a note naming it; frames up to it; a stated stop
    nolib, nolib_err = stack_json(args.stackprov, ["--core", core, "--offline", "--store", store_no_lib],
                                  stop_short=True)
    if not re.search(re.escape(lib_path) + r".*no bundle", nolib_err):
        fail("no warning naming %s without a bundle: %s" % (lib_path, nolib_err))
    for tid, t in files.items():
        n = nolib.get(tid)
        g = [pc for pc, _ in gdb.get(tid, [])]
        mods = [f["module"] for f in t["frames"]]
        cut = mods.index(lib_path) + 1 if lib_path in mods else len(mods)
        if n is None or pcs(n)[:cut] != g[:cut]:
            fail("tid %d (no .so bundle): first %d pcs %s, gdb %s" %
                 (tid, cut, n and [hex(p) for p in pcs(n)[:cut]], [hex(p) for p in g[:cut]]))
        elif n["stop_reason"] in ("none", ""):
            fail("tid %d (no .so bundle): no stop reason" % tid)
        else:
            print("tid %d without the .so's bundle: %d frames, stop %s (with it: %d)" %
                  (tid, len(n["frames"]), n["stop_reason"], len(t["frames"])))

    print("elapsed %.1fs" % (time.time() - t0))
    print("PASS" if not FAILS else "FAILED (%d)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
