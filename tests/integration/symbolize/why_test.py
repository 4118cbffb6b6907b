#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# `symbolize --verbose` and `stack --verbose` (issue 36): every path and URL looked at and why each failed, stdout unchanged.
"""The fixtures are compiled here (why_fixture.c with -g, why_nodebug.c without) and cut with objcopy. What
`--verbose` must name comes from other tools: the build-ids from `readelf -n`, whether a file has DWARF from
`readelf -S`, whether DWARF covers an address from llvm-symbolizer-14 (a FileName of "??" means it does
not). Each case also checks that stdout is byte-identical with and without --verbose."""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_llvm as cl  # noqa: E402

failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def build_id(path):
    return re.search(r"Build ID: ([0-9a-f]+)", cl.run(["readelf", "-n", path])).group(1)


def has_section(path, name):
    return re.search(r"\s%s\s" % re.escape(name), cl.run(["readelf", "-S", "-W", path])) is not None


def symbol_address(path, name):
    for line in cl.run(cl.nm_command() + [path]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise RuntimeError("%s has no symbol %s" % (path, name))


def closed_port():
    """A loopback port nothing listens on: bound, then closed (connect() gets ECONNREFUSED)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def base_env(work, **extra):
    env = dict(os.environ)
    # The user's or the distribution's servers must not answer (nor be waited for).
    for k in ("DEBUGINFOD_URLS", "STACKPROV_STORE"):
        env.pop(k, None)
    env["DEBUGINFOD_CACHE_PATH"] = os.path.join(work, "debuginfod-cache")
    env.update(extra)
    return env


def symbolize(stackprov, obj, addrs, env, extra, verbose):
    cmd = [stackprov, "symbolize", "--obj", obj] + extra + (["--verbose"] if verbose else []) + \
        ["0x%x" % a for a in addrs]
    r = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def run_case(stackprov, label, obj, addrs, env, extra):
    """symbolize without and with --verbose: the same exit status and stdout bytes; the verbose stderr."""
    for style in ([], ["--output-style=JSON"]):
        rc0, out0, _ = symbolize(stackprov, obj, addrs, env, extra + style, False)
        rc1, out1, err1 = symbolize(stackprov, obj, addrs, env, extra + style, True)
        check(rc0 == rc1 == 0, "[%s%s] exit status %d without --verbose, %d with" % (label, " JSON" if style else "",
                                                                                    rc0, rc1))
        check(out0 == out1 and out0, "[%s%s] stdout byte-identical with and without --verbose (%d bytes, %d bytes)" %
              (label, " JSON" if style else "", len(out0), len(out1)))
    print("--- %s: stderr of --verbose\n%s---" % (label, err1))
    return err1


def line_with(text, *needles):
    """The first stderr line containing every needle (case-insensitive), else None."""
    for line in text.splitlines():
        if all(n.lower() in line.lower() for n in needles):
            return line
    return None


def build_path(ddir, bid):
    return os.path.join(ddir, ".build-id", bid[:2], bid[2:] + ".debug")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    for tool in ("gcc", "objcopy", "readelf", "nm", cl.LLVM):
        if shutil.which(tool) is None:
            print("FAIL: %s not found (make deps)" % tool)
            return 1
    work = cl.fresh_dir(os.path.realpath(args.work))  # as /proc/PID/maps names the live fixture
    here = os.path.dirname(os.path.abspath(__file__))

    def compile_fixture(name, variant):
        nodebug = os.path.join(work, "why_nodebug_%d.o" % variant)
        cl.run(["gcc", "-O1", "-g0", "-c", "-o", nodebug, os.path.join(here, "why_nodebug.c")])
        out = os.path.join(work, name)
        cl.run(["gcc", "-O1", "-g", "-DWHY_VARIANT=%d" % variant, "-Wl,--build-id", "-o", out,
                os.path.join(here, "why_fixture.c"), nodebug])
        return out

    full = compile_fixture("why_fixture", 1)
    other = compile_fixture("why_fixture_other", 2)  # another build-id
    bid, other_bid = build_id(full), build_id(other)
    check(bid != other_bid, "the two builds have different build-ids (%s, %s)" % (bid, other_bid))
    leaf, nodebug = symbol_address(full, "why_leaf"), symbol_address(full, "why_nodebug")
    stripped = os.path.join(work, "why_fixture.stripped")  # .symtab kept, no DWARF, no debuglink
    cl.run(["objcopy", "--strip-debug", full, stripped])
    check(has_section(full, ".debug_info") and not has_section(stripped, ".debug_info"),
          "readelf: the fixture has .debug_info, the stripped copy none")
    # The oracle for "DWARF covers the address": llvm-symbolizer-14 gives why_leaf a file, why_nodebug none.
    ref = cl.symbolize([cl.LLVM], full, [leaf, nodebug], [])
    covered = [r["Symbol"][0]["FileName"] not in ("", "??") for r in ref]
    check(covered == [True, False], "llvm-symbolizer-14: DWARF covers why_leaf, not why_nodebug (%s)" % covered)

    d1, d2 = cl.fresh_dir(os.path.join(work, "debug-a")), cl.fresh_dir(os.path.join(work, "debug-b"))
    dirs = ["--debug-file-directory", d1, "--debug-file-directory", d2]

    # 1. Stripped, no debug file anywhere, no debuginfod: each build-id path is named, missing.
    err = run_case(args.stackprov, "stripped", stripped, [leaf], base_env(work), dirs)
    check(line_with(err, "why '%s'" % stripped) is not None and err.count("why '%s'" % stripped) == 1,
          "the module's attempts are printed once, under a line naming it")
    check(line_with(err, "dwarf %s:" % stripped, "no DWARF") is not None, "the module itself: no DWARF")
    for d in (d1, d2):
        check(line_with(err, "dwarf %s:" % build_path(d, bid), "missing") is not None,
              "build-id path under %s named, missing" % d)
    check(line_with(err, "debuginfod -:", "skipped", "DEBUGINFOD_URLS is not set") is not None,
          "debuginfod: skipped, DEBUGINFOD_URLS not set")
    check(line_with(err, "0x%x in '%s'" % (leaf, stripped), "symtab %s:" % stripped, "answered") is not None,
          "the address: answered by symtab (the stripped file's .symtab)")

    # 1b. With a .gnu_debuglink whose file is gone: each debuglink place is named, missing.
    linked = os.path.join(work, "why_fixture.linked")
    gone = cl.fresh_dir(os.path.join(work, "gone"))
    cl.run(["objcopy", "--only-keep-debug", full, os.path.join(gone, "why_fixture.debug")])
    cl.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + os.path.join(gone, "why_fixture.debug"), full, linked])
    shutil.rmtree(gone)
    err = run_case(args.stackprov, "debuglink", linked, [leaf], base_env(work), dirs)
    for p in (os.path.join(work, "why_fixture.debug"), os.path.join(work, ".debug", "why_fixture.debug"),
              os.path.join(d1 + work, "why_fixture.debug")):
        check(line_with(err, "dwarf %s:" % p, "missing", "debuglink") is not None,
              ".gnu_debuglink place %s named, missing" % p)

    # 2. A debug file with another build-id at the module's build-id path: both ids named.
    wrong = build_path(d1, bid)
    os.makedirs(os.path.dirname(wrong))
    cl.run(["objcopy", "--only-keep-debug", other, wrong])
    err = run_case(args.stackprov, "mismatch", stripped, [leaf], base_env(work), dirs)
    line = line_with(err, "dwarf %s:" % wrong, "identity mismatch")
    check(line is not None and other_bid in line and bid in line,
          "identity mismatch at %s names both build-ids (%s, %s): %r" % (wrong, other_bid, bid, line))
    check(line_with(err, "dwarf %s:" % build_path(d2, bid), "missing") is not None,
          "the next debug directory is still looked at")
    os.unlink(wrong)

    # 3. debuginfod at a closed loopback port: the URL named, connection refused.
    url = "http://127.0.0.1:%d" % closed_port()
    env = base_env(work, DEBUGINFOD_URLS=url, DEBUGINFOD_TIMEOUT="5")
    err = run_case(args.stackprov, "debuginfod refused", stripped, [leaf], env, dirs)
    want_url = "%s/buildid/%s/debuginfo" % (url, bid)
    check(line_with(err, "debuginfod %s:" % want_url, "fetch failed", "connection refused") is not None,
          "debuginfod URL %s named, connection refused" % want_url)

    # 4. A binary with DWARF: which resolver answered; an address its DWARF does not cover.
    err = run_case(args.stackprov, "dwarf", full, [leaf, nodebug], base_env(work), dirs)
    check(line_with(err, "dwarf %s:" % full, "found") is not None, "the module's own DWARF: found")
    check(line_with(err, "debuginfod -:", "not asked") is not None, "debuginfod not asked (DWARF found locally)")
    check(line_with(err, "0x%x in '%s'" % (leaf, full), "dwarf %s:" % full, "answered") is not None,
          "why_leaf (0x%x): dwarf answered" % leaf)
    check(line_with(err, "0x%x in '%s'" % (nodebug, full), "no DWARF covering the address") is not None,
          "why_nodebug (0x%x): no DWARF covering the address" % nodebug)
    check(line_with(err, "0x%x in '%s'" % (nodebug, full), "symtab %s:" % full, "answered") is not None,
          "why_nodebug (0x%x): symtab answered" % nodebug)
    check(line_with(err, "0x%x in '%s'" % (leaf, full), "no DWARF covering") is None,
          "why_leaf: no 'no DWARF covering' line")

    # 5. stack --verbose of a live stripped fixture: its module once, its build-id path under the default
    # debug directory and the debuginfod URL named; stdout unchanged.
    proc = subprocess.Popen([stripped, "wait"])
    try:
        time.sleep(0.3)
        env = base_env(work, DEBUGINFOD_URLS=url, DEBUGINFOD_TIMEOUT="5")
        outs = []
        for verbose in (False, True):
            r = subprocess.run([args.stackprov, "stack", "--pid", str(proc.pid)] + (["--verbose"] if verbose else []),
                               capture_output=True, env=env, timeout=120)
            outs.append(r)
        err = outs[1].stderr.decode(errors="replace")
        print("--- stack --verbose: stderr\n%s---" % err)
        check(outs[0].returncode == outs[1].returncode == 0,
              "stack exit status %d without --verbose, %d with" % (outs[0].returncode, outs[1].returncode))
        check(outs[0].stdout == outs[1].stdout and outs[0].stdout,
              "stack stdout byte-identical with and without --verbose")
        check(err.count("why '%s'" % stripped) == 1, "stack: the fixture's module explained once")
        check(line_with(err, "dwarf %s:" % build_path("/usr/lib/debug", bid), "missing") is not None,
              "stack: build-id path under /usr/lib/debug named, missing")
        check(line_with(err, "debuginfod %s:" % want_url, "connection refused") is not None,
              "stack: debuginfod URL named, connection refused")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    print("FAIL (%d)" % len(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
