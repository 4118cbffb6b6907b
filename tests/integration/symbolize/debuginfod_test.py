#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# stackprov symbolize through a real local debuginfod (stripped fixture) vs llvm-symbolizer-14 on the unstripped one; dead/hung server fallbacks.
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_llvm as cl  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(url, deadline):
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except Exception:
            time.sleep(0.2)
    return False


def ours(stackprov, obj, addrs, env):
    inp = "".join("0x%x\n" % a for a in addrs)
    t0 = time.time()
    out = subprocess.run([stackprov, "symbolize", "--obj", obj, "--inlines", "--output-style=JSON", "--no-demangle",
                          "--provenance"], input=inp, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()], time.time() - t0


def gcore_at(work, binary, function):
    """A core of `binary` stopped at `function` (gdb: break, run, gcore); its path."""
    core = os.path.join(work, "fixture.core")
    cl.run(["gdb", "-q", "-batch", "-nx", "-ex", "break " + function, "-ex", "run", "-ex", "gcore " + core,
            "--args", binary, "a", "b"])
    return core


def stack_frames_check(stackprov, work, stripped, bdir, url, bid):
    """Frames named through debuginfod carry their file:line in `stack --json` and in Python's
    stackprov.stack(), as in `symbolize` (the one rule of sprov_resolver_gives_lines; before it,
    `stack` and Python dropped the lines of debuginfod frames). The fixture's frames of a core of
    the stripped binary, against llvm-symbolizer-14 with the debug file under a build-id directory
    (caller frames looked up at their return address - 1). Returns the failure count."""
    core = gcore_at(work, stripped, "fixture::count_words")
    env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=os.path.join(work, "cache-stack"),
               DEBUGINFOD_TIMEOUT="10")
    r = subprocess.run([stackprov, "stack", "--core", core, "--exe", stripped, "--json"], capture_output=True,
                       text=True, env=env, timeout=120)
    frames = [f for t in json.loads(r.stdout)["threads"] for f in t["frames"] if f.get("module") == stripped]
    py = subprocess.run([sys.executable, "-c", PY_STACK, core, stripped], capture_output=True, text=True, env=env,
                        timeout=120, cwd=work)
    failures = 0
    pyframes = json.loads(py.stdout) if py.returncode == 0 else None
    if pyframes is None:
        print("FAIL: python stackprov.stack(core=...): %s" % py.stderr.strip()[-400:])
        failures += 1
    lookups = [int(f["module_offset"], 16) - (1 if f["index"] > 0 else 0) for f in frames]
    ref = cl.symbolize([cl.LLVM], stripped, lookups, ["--debug-file-directory", bdir]) if lookups else []
    want = [(x["Symbol"][-1]["FileName"], x["Symbol"][-1]["Line"]) for x in ref]  # the physical function's
    got = [(f.get("file") or "", f.get("line") or 0) for f in frames]
    # Frames with source (count_words, main) are named through debuginfod; crt code (_start) has no DWARF.
    dbg = [f["resolver"] for f, w in zip(frames, want) if w[1]]
    print("stack --core (debuginfod): %d fixture frames %s, resolvers of those with lines %s" %
          (len(frames), got, sorted(set(dbg))))
    if len(dbg) < 2 or set(dbg) != {"debuginfod"} or got != want:
        print("FAIL: stack --json frames %s, llvm-symbolizer-14 %s" % (got, want))
        failures += 1
    if pyframes is not None and [[f or "", l or 0] for f, l in pyframes] != [list(w) for w in want]:
        print("FAIL: Python frames (file, line) %s, llvm-symbolizer-14 %s" % (pyframes, want))
        failures += 1
    os.unlink(core)
    return failures


PY_STACK = """
import json, sys
import stackprov
core, exe = sys.argv[1], sys.argv[2]
t = stackprov.stack(core=core, exe=exe)[0]
print(json.dumps([[f.file, f.line] for f in t.frames if f.module == exe]))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    for tool in ("debuginfod", cl.LLVM, "g++"):
        if shutil.which(tool) is None:
            print("FAIL: %s not found (make deps)" % tool)
            return 1
    work = cl.fresh_dir(os.path.abspath(args.work))
    base = cl.build(work, "g++", ["-std=c++17"], "dwarf-5", "fixture_inline.cpp", "fixture")
    addrs = cl.text_addresses(base)
    bid = cl.re.search(r"Build ID: ([0-9a-f]+)", cl.run(["readelf", "-n", base])).group(1)
    srv = cl.fresh_dir(os.path.join(work, "served"))
    cl.run(["objcopy", "--only-keep-debug", base, os.path.join(srv, "fixture.debug")])
    stripped = os.path.join(work, "fixture.stripped")      # .symtab kept, no DWARF, no debuglink
    cl.run(["objcopy", "--strip-debug", base, stripped])
    stripped_all = os.path.join(work, "fixture.stripped-all")  # no .symtab either
    cl.run(["objcopy", "--strip-all", base, stripped_all])
    # The reference is llvm-symbolizer-14 on the same binary with the debug file under a
    # build-id directory (what debuginfod serves; --strip-debug also drops the STT_FILE symbols
    # llvm would print for crt code, so the unstripped binary is not the same question).
    bdir = os.path.join(work, "buildid-dir")
    os.makedirs(os.path.join(bdir, ".build-id", bid[:2]), exist_ok=True)
    shutil.copy(os.path.join(srv, "fixture.debug"), os.path.join(bdir, ".build-id", bid[:2], bid[2:] + ".debug"))
    ref_unstripped = cl.symbolize([cl.LLVM], stripped, addrs, ["--debug-file-directory", bdir])
    ref_all = cl.symbolize([cl.LLVM], stripped_all, addrs, ["--debug-file-directory", bdir])

    port = free_port()
    url = "http://127.0.0.1:%d" % port
    log = open(os.path.join(work, "debuginfod.log"), "w")
    # 0.188 has no bind-address option: it listens on all interfaces, only for the test's life.
    server = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", os.path.join(work, "db.sqlite"),
                               "-t", "0", "-g", "0", srv], stdout=log, stderr=subprocess.STDOUT)
    failures = 0
    try:
        if not wait_http(url + "/metrics", time.time() + 30):
            print("FAIL: debuginfod did not answer /metrics")
            return 1
        if not wait_http("%s/buildid/%s/debuginfo" % (url, bid), time.time() + 60):
            print("FAIL: debuginfod did not index the debug file")
            return 1
        for label, obj, ref in (("strip-debug", stripped, ref_unstripped), ("strip-all", stripped_all, ref_all)):
            env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=os.path.join(work, "cache-" + label),
                       DEBUGINFOD_TIMEOUT="10")
            res, secs = ours(args.stackprov, obj, addrs, env)
            for r in ref:
                r["ModuleName"] = obj
            # Every address, every field (function, file, line, column, discriminator, start
            # line/file/address of every frame), as llvm-symbolizer-14 answers.
            diffs = [(a, cl.difference(x, y)) for a, x, y in zip(addrs, res, ref)]
            bad = [(a, d) for a, d in diffs if d]
            prov = set((r.get("Resolver"), r.get("Source")) for r in res if any(f.get("Line") for f in r["Symbol"]))
            want = ("debuginfod+dwarf", "%s/buildid/%s/debuginfo" % (url, bid))
            print("%-22s %5d addresses, %d differ from llvm-symbolizer-14, %.2fs, provenance %s" %
                  (label, len(addrs), len(bad), secs, sorted(prov)))
            for a, d in bad[:3]:
                print("   0x%x %s" % (a, d))
            if bad or not addrs:
                failures += 1
            if prov != {want}:
                print("FAIL: provenance %s, expected %s" % (sorted(prov), want))
                failures += 1
        failures += stack_frames_check(args.stackprov, work, stripped, bdir, url, bid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()

    # The server is gone: connection refused, a clean fallback to .symtab.
    env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=os.path.join(work, "cache-dead"),
               DEBUGINFOD_TIMEOUT="2")
    res, secs = ours(args.stackprov, stripped, addrs, env)
    kinds = set(r.get("Resolver") for r in res)
    print("%-22s %5d addresses in %.2fs, resolvers %s" % ("server stopped", len(res), secs, sorted(kinds)))
    if secs > 10 or "debuginfod+dwarf" in kinds or "symtab" not in kinds:
        failures += 1
    # A server that accepts and never answers: DEBUGINFOD_TIMEOUT bounds the one query, the
    # negative cache the rest.
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)
    env = dict(os.environ, DEBUGINFOD_URLS="http://127.0.0.1:%d" % hung.getsockname()[1],
               DEBUGINFOD_CACHE_PATH=os.path.join(work, "cache-hung"), DEBUGINFOD_TIMEOUT="2")
    res, secs = ours(args.stackprov, stripped, addrs, env)
    hung.close()
    kinds = set(r.get("Resolver") for r in res)
    print("%-22s %5d addresses in %.2fs, resolvers %s" % ("server hangs", len(res), secs, sorted(kinds)))
    if secs > 15 or "debuginfod+dwarf" in kinds or "symtab" not in kinds:
        failures += 1
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
