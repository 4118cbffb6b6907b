#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Resolver chain with provenance: `stackprov symbolize --build-id --resolvers bundle` (no binary) vs llvm-symbolizer-14 and our live DWARF path.
"""Builds bundles with `stackprov bundle build` and puts them into a store (build_bundle: the
one place; `bundle build --store` when the CLI has it, else the store layout by hand), and checks:
- fixtures (C, C++; -O2 -g, inlining): every byte of their executable sections (binutils
  readelf -SW) symbolized through `stackprov symbolize --build-id HEX --resolvers bundle
  --store S` after the binaries were moved away equals llvm-symbolizer-14 --inlining on the
  original binary (function, file:line:column of every inline frame) and our live DWARF path
  (`symbolize --obj BIN --resolvers dwarf,symtab,dynsym`); at addresses llvm names from the
  symbol table alone (one frame, "??:0:0" or "<STT_FILE name>:0:0": _start, .init, .plt) the
  bundle's symbol-table ranges must give llvm's exact answer (our live path there answers from
  the symbol tables with its own policy, so only llvm is the oracle for those); where llvm names
  nothing on a module, its answer on the module's separate debug file (/usr/lib/debug/.build-id);
- 5,000 seeded random addresses each of python3.11, libc.so.6 (DWARF from python3.11-dbg,
  libc6-dbg) and the debug build of libstdc++ (libstdc++6-12-dbg): the same equalities;
- provenance (--output-style=JSON --provenance): Resolver "bundle" ("bundle+symtab" exactly at
  the addresses llvm-symbolizer-14 names from the symbol table alone), Source and Bundle = the
  sha256 of the bundle file (hashlib), SourceBuildId = the build-id readelf -n shows;
- a bundle that does not hold the module is refused, naming both ids; an unknown build-id is
  "no bundle for build-id HEX in store DIR";
- the default policy with a store: resolver "bundle" for a stored module, "dwarf" for one that
  is not stored; without a store: "dwarf" (today's behaviour);
- outside llvm-symbolizer mode (`--debug-symtab`, the naming rule `stack` uses), 1,000 of libc's
  addresses through the bundle alone: the name and offset elfutils gives (`eu-addr2line -S`, one
  process for all; eu-stack's library, the oracle of doc/symbols.md's alias rule — gdb's `info
  symbol` picks other aliases: `calloc` for `__libc_calloc`, `__lttf2` for `__letf2`) and the
  ones `symbolize --obj` gives with the module file;
- `stackprov stack --pid P --json --store S`: frames of the stored program carry resolver
  "bundle", source and bundle = its sha256, and the same function/file/line as without a store.
A missing tool or package fails with its name."""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers  # noqa: E402  (tests/lib: the peers' output parsers)
from toolrun import nm_command  # noqa: E402  (tests/lib: nm without bfd's LLVM plugins)

FIXTURES = os.path.join(os.path.dirname(HERE), "bundle")
TOOLS = ["gcc", "g++", "readelf", "nm", "llvm-symbolizer-14", "strace", "eu-addr2line"]
SYSTEM = [
    ("python3.11", "/usr/bin/python3.11", "python3.11-dbg"),
    ("libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6-dbg"),
    ("libstdc++-debug", "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30", "libstdc++6-12-dbg"),
]
SAMPLES = 5000


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(cmd, check=True, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and p.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd[:8]), p.returncode, p.stderr.strip()[:2000]))
    return p


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def build_id_of(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]).stdout)
    if not m:
        fail("readelf -n shows no build-id in %s" % path)
    return m.group(1)


def store_put(stackprov, store, bundle_file):
    """Puts a bundle file into the store by the layout of lib/symbolize/bundle_store.hpp:
    blobs/sha256/<hh>/<hex> and ids/linux/elf-build-id/<build-id> -> "sha256:<hex>".
    Used only while `stackprov bundle build` has no --store (see build_bundle)."""
    digest = sha256_of(bundle_file)
    hexd = digest[7:]
    info = json.loads(run([stackprov, "bundle", "inspect", bundle_file, "--json"]).stdout)
    for sub in ("blobs/sha256/" + hexd[:2], "ids/linux/elf-build-id", "tmp"):
        os.makedirs(os.path.join(store, sub), exist_ok=True)
    with open(os.path.join(store, "store.json"), "w") as f:
        f.write('{"format":"stackprov-bundle-store","version":1}\n')
    shutil.copyfile(bundle_file, os.path.join(store, "blobs/sha256", hexd[:2], hexd))
    for m in info["modules"]:
        if m["id_kind"] != "elf-build-id":
            fail("bundle %s: unexpected module id kind %r" % (bundle_file, m["id_kind"]))
        with open(os.path.join(store, "ids/linux/elf-build-id", m["id"]), "w") as f:
            f.write(digest + "\n")
    return digest


def build_bundle(stackprov, module, out, store):
    """The one place bundles are built and stored: `stackprov bundle build FILE --store DIR
    --out OUT` when the CLI has --store, else `bundle build FILE --out OUT` + store_put."""
    usage = run([stackprov, "bundle", "--help"], check=False).stdout
    has_store_cli = re.search(r"bundle build [^\n]*--store", usage) is not None
    cmd = [stackprov, "bundle", "build", module, "--out", out] + (["--store", store] if has_store_cli else [])
    p = run(cmd, check=False)
    if p.returncode != 0:
        fail("%s: %s" % (" ".join(cmd[1:]), p.stderr.strip()))
    printed, actual = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "", sha256_of(out)
    if printed != actual:
        fail("bundle build printed %r but the file's sha256 is %s" % (printed, actual))
    if not has_store_cli and store_put(stackprov, store, out) != actual:
        fail("store_put digest differs")
    return actual


def exec_ranges(path):
    """[lo, hi) of SHF_EXECINSTR PROGBITS sections, from binutils readelf."""
    ranges = []
    for line in run(["readelf", "-SW", path]).stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if m and m.group(2) == "PROGBITS" and "X" in m.group(6) and int(m.group(5), 16):
            lo = int(m.group(3), 16)
            ranges.append((lo, lo + int(m.group(5), 16)))
    if not ranges:
        fail("readelf found no executable section in %s" % path)
    return ranges


def split_answers(text, n, who):
    """llvm-symbolizer LLVM-style output -> one tuple of (function, location) frames per address
    (tests/lib/peers.py); exactly n of them, else the test fails naming `who`."""
    try:
        answers = llvm_symbolizer_answers(text)
    except ValueError as e:
        fail("%s: %s" % (who, e))
    if len(answers) != n:
        fail("%s gave %d answers for %d addresses" % (who, len(answers), n))
    return answers


def addr_input(addrs):
    return "".join("0x%x\n" % a for a in addrs)


def llvm_answers(binary, addrs):
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--no-demangle", "--inlining", "--output-style=LLVM"],
              input=addr_input(addrs)).stdout
    return split_answers(out, len(addrs), "llvm-symbolizer-14")


def our_answers(stackprov, args, addrs, who):
    out = run([stackprov, "symbolize", "--no-demangle", "--inlines"] + args, input=addr_input(addrs)).stdout
    return split_answers(out, len(addrs), who)


def our_json(stackprov, args, addrs):
    out = run([stackprov, "symbolize", "--no-demangle", "--output-style=JSON", "--provenance"] + args,
              input=addr_input(addrs)).stdout
    objs = [json.loads(l) for l in out.splitlines() if l.strip()]
    if len(objs) != len(addrs):
        fail("symbolize JSON gave %d objects for %d addresses" % (len(objs), len(addrs)))
    return objs


SYMTAB_ONLY = re.compile(r"(\?\?|[^/]+):0:0")


def compare(name, addrs, llvm, live, via_bundle, provenance, digest, build_id, report):
    """Every address: bundle == llvm; == live DWARF where DWARF answers; provenance "bundle"."""
    gated = symtab_only = inlined = 0
    bad = []
    for a, e, l, g, p in zip(addrs, llvm, live, via_bundle, provenance):
        if e == (("??", "??:0:0"),):
            # llvm names nothing: neither may the bundle.
            if g != e or p["Resolver"] != "none":
                bad.append("0x%x: llvm %r, bundle %r (%s)" % (a, e, g, p["Resolver"]))
            continue
        symtab = len(e) == 1 and SYMTAB_ONLY.fullmatch(e[0][1])
        if symtab:
            symtab_only += 1   # named from the symbol table alone: the bundle's symbol-table range
            if e != g:
                bad.append("0x%x: symbol-table-only address: llvm-symbolizer-14 %r, bundle %r" % (a, e, g))
        else:
            gated += 1
            inlined += len(e) > 1
            if e != g:
                bad.append("0x%x: llvm-symbolizer-14 %r, bundle %r" % (a, e, g))
            elif l != g:
                bad.append("0x%x: live DWARF %r, bundle %r" % (a, l, g))
        # The frame-level note: "bundle+symtab" exactly where llvm has only a symbol-table answer.
        want = {"Resolver": "bundle+symtab" if symtab else "bundle", "Source": digest, "Bundle": digest,
                "SourceBuildId": build_id}
        got = {k: p.get(k) for k in want}
        if got != want:
            bad.append("0x%x: provenance %r, expected %r" % (a, got, want))
    report.append("%s: %d addresses, %d DWARF-described (%d with inline frames), %d named from the symbol table "
                  "only; all answered by the bundle, equal to llvm-symbolizer-14 and the live DWARF path; bundle %s"
                  % (name, len(addrs), gated, inlined, symtab_only, digest) if not bad else "")
    if bad:
        fail("%s: %d addresses differ:\n  %s" % (name, len(bad), "\n  ".join(bad[:15])))
    if gated == 0 or inlined == 0:
        fail("%s: %d gated addresses, %d inlined: the comparison would be empty" % (name, gated, inlined))


def outer_name_offset(objs, addrs):
    """(outermost function, offset from its start or None) per JSON answer of `symbolize`."""
    out = []
    for o, a in zip(objs, addrs):
        sym = (o.get("Symbol") or [{}])[-1]
        start = sym.get("StartAddress") or ""
        fn = sym.get("FunctionName") or "??"
        out.append((fn, a - int(start, 16) if start and fn != "??" else None))
    return out


def eu_addr2line_symbols(binary, addrs):
    """elfutils' symbol and offset per address (`eu-addr2line -S`: dwfl_module_addrinfo over the
    module's and its debug file's tables, found by build-id; eu-stack's library), one process for all
    addresses; ("??", None) where it names nothing ("??" or "()+0x...")."""
    out = run(["eu-addr2line", "-S", "-e", binary] + ["0x%x" % a for a in addrs]).stdout.splitlines()
    if len(out) != 2 * len(addrs):
        fail("eu-addr2line: %d lines for %d addresses on %s" % (len(out), len(addrs), binary))
    res = []
    for line in out[0::2]:
        m = re.match(r"^(.+?)\+0x([0-9a-f]+)$", line)
        if line == "??" or line.startswith("()"):
            res.append(("??", None))
        elif m:
            res.append((m.group(1), int(m.group(2), 16)))
        else:
            res.append((line, 0))
    return res


def check_symbol_names(args, name, binary, addrs, store, report):
    """Outside llvm-symbolizer mode (`--debug-symtab`: the naming rule of `stack`), the bundle alone
    (format 5's symbol names) gives, at every address, the name and offset eu-addr2line -S gives
    (elfutils, the oracle of the alias rule, doc/symbols.md) and `symbolize --obj` with the module file."""
    build_id = build_id_of(binary)
    by_id = our_json(args.stackprov, ["--build-id", build_id, "--resolvers", "bundle", "--store", store,
                                      "--debug-symtab"], addrs)
    live = our_json(args.stackprov, ["--obj", binary, "--resolvers", "dwarf,symtab,dynsym", "--debug-symtab"], addrs)
    got, want = outer_name_offset(by_id, addrs), outer_name_offset(live, addrs)
    bad = ["0x%x: bundle %r, module file %r" % (a, g, w) for a, g, w in zip(addrs, got, want) if g != w]
    named = plt = 0
    for a, g, e in zip(addrs, got, eu_addr2line_symbols(binary, addrs)):
        named += e[0] != "??"
        if g[0].endswith("@plt") and e[0] == "??":
            plt += 1  # elfutils names no PLT stub (objdump's labels are their oracle: symbolize/symbol_names.py)
            continue
        if g != e:
            bad.append("0x%x: bundle %s+%s, eu-addr2line -S %s+%s" % (a, g[0], g[1], e[0], e[1]))
    if bad:
        fail("%s: %d addresses named differently from the bundle alone (--debug-symtab):\n  %s"
             % (name, len(bad), "\n  ".join(bad[:15])))
    if named < len(addrs) * 9 // 10:
        fail("%s: eu-addr2line named only %d of %d addresses: the comparison would be empty" % (name, named, len(addrs)))
    report.append("%s: --debug-symtab from the bundle alone: %d addresses (%d named by eu-addr2line, %d PLT stubs), "
                  "name and offset == eu-addr2line -S and symbolize --obj" % (name, len(addrs), named, plt))


def check_module(args, name, binary, addrs, store, digest, move_away, report):
    build_id = build_id_of(binary)
    llvm = llvm_answers(binary, addrs)
    # Where llvm-symbolizer-14 names nothing on the module, the bundle holds its answer on the
    # module's separate debug file (doc/bundles.md "Symbol-table ranges": the .symtab locals a
    # stripped module lost, e.g. libc's __restore_rt, python3.11's _init over .plt).
    debug_file = "/usr/lib/debug/.build-id/%s/%s.debug" % (build_id[:2], build_id[2:])
    unnamed = [k for k, e in enumerate(llvm) if e == (("??", "??:0:0"),)]
    if unnamed and os.path.exists(debug_file):
        for k, e in zip(unnamed, llvm_answers(debug_file, [addrs[k] for k in unnamed])):
            llvm[k] = e
    live = our_answers(args.stackprov, ["--obj", binary, "--resolvers", "dwarf,symtab,dynsym"], addrs, "live DWARF")
    if move_away:
        # Only the bundle may answer: the binary leaves for a directory nothing refers to.
        os.replace(os.path.dirname(binary), os.path.dirname(binary) + ".moved-away")
    by_id = ["--build-id", build_id, "--resolvers", "bundle", "--store", store]
    got = our_answers(args.stackprov, by_id, addrs, "symbolize --build-id")
    prov = our_json(args.stackprov, by_id, addrs)
    compare(name, addrs, llvm, live, got, prov, digest, build_id, report)
    return llvm


def compile_fixture(work, name, cmd):
    bindir = os.path.join(work, name)
    os.makedirs(bindir)
    binary = os.path.join(bindir, name)
    run(cmd + ["-o", binary], cwd=FIXTURES)
    return binary


def resolver_of(stackprov, extra, addr):
    p = run([stackprov, "symbolize", "--output-style=JSON", "--provenance"] + extra + ["0x%x" % addr])
    return json.loads(p.stdout)[0]


def check_policy(args, store, stored_bin, stored_digest, other_bin):
    """Default policy: bundle for the stored module (even with its DWARF at hand), dwarf otherwise."""
    addr = int(run(nm_command() + [stored_bin]).stdout.split(" T main")[0].split("\n")[-1], 16)
    other = int(run(nm_command() + [other_bin]).stdout.split(" T main")[0].split("\n")[-1], 16)
    r = resolver_of(args.stackprov, ["--obj", stored_bin, "--store", store], addr)
    if (r["Resolver"], r["Bundle"], r["Source"]) != ("bundle", stored_digest, stored_digest):
        fail("default policy with a store, stored module: %r" % r)
    r = resolver_of(args.stackprov, ["--obj", other_bin, "--store", store], other)
    if (r["Resolver"], r["Bundle"], r["Source"]) != ("dwarf", "", other_bin):
        fail("default policy with a store, module not stored: %r" % r)
    r = resolver_of(args.stackprov, ["--obj", stored_bin], addr)
    if (r["Resolver"], r["Bundle"]) != ("dwarf", ""):
        fail("default policy without a store: %r" % r)
    # The order counts: dwarf before bundle answers from DWARF.
    r = resolver_of(args.stackprov, ["--obj", stored_bin, "--store", store, "--resolvers", "dwarf,bundle"], addr)
    if r["Resolver"] != "dwarf":
        fail("--resolvers dwarf,bundle: %r" % r)
    return addr


def check_refusals(args, store, bundle_c, id_c, id_cpp, other_bin):
    cases = [
        # A bundle that does not hold the module: both ids named.
        (["symbolize", "--build-id", id_cpp, "--bundle", bundle_c, "0x1000"], [id_cpp, id_c]),
        (["symbolize", "--obj", other_bin, "--bundle", bundle_c, "0x1000"], [id_cpp, id_c]),
        (["symbolize", "--build-id", "abcdef01", "--store", store, "0x1000"],
         ["no bundle for build-id abcdef01 in store " + store]),
        (["symbolize", "--build-id", "xyz", "0x1000"], ["xyz"]),
        (["symbolize", "--build-id", id_c, "--store", store, "--resolvers", "bundle,frob", "0x1000"], ["frob"]),
        (["symbolize", "--build-id", id_c, "--store", os.path.join(store, "nope"), "0x1000"],
         [os.path.join(store, "nope")]),
    ]
    for argv, musts in cases:
        p = run([args.stackprov] + argv, check=False)
        if p.returncode == 0 or any(m not in p.stderr for m in musts):
            fail("stackprov %s: exit %d, stderr %r (expected a refusal naming %r)"
                 % (" ".join(argv), p.returncode, p.stderr, musts))


def check_offline(args, work, store, module, build_id, digest, addrs, llvm, report):
    """C ABI in an offline context (offline_probe.c): sprov_symbolizer_addr_build_id and
    sprov_symbolizer_frame_ex (hand-built snapshot with the module's build-id) equal
    llvm-symbolizer-14; sprov_symbolizer_addr_ex refuses naming the module; strace shows no
    open of the module (present, under its moved-away name), of a debug directory, and no
    socket."""
    trace = os.path.join(work, "offline.strace")
    p = run(["strace", "-f", "-qq", "-e", "trace=%file,%network", "-o", trace, args.probe, store, build_id, module],
            input=addr_input(addrs))
    if "offline" not in p.stderr or module not in p.stderr:
        fail("offline sprov_symbolizer_addr_ex: refusal %r does not say offline and name %s" % (p.stderr, module))
    m = re.fullmatch(r"(.*)--\n(.*)==\n(.*)", p.stdout, re.S)
    if not m:
        fail("offline probe output lacks its separators")
    provs = set(m.group(3).splitlines())
    want = {"resolver=bundle source=%s bundle=%s build_id=%s" % (digest, digest, build_id)}
    if any(len(e) == 1 and e[0][0] != "??" and SYMTAB_ONLY.fullmatch(e[0][1]) for e in llvm):
        want.add("resolver=bundle+symtab source=%s bundle=%s build_id=%s" % (digest, digest, build_id))
    if any(e == (("??", "??:0:0"),) for e in llvm):
        want.add("resolver=none source= bundle= build_id=")
    if provs != want:
        fail("offline frame_ex provenance %r, expected %r" % (sorted(provs), sorted(want)))
    by_id = split_answers(m.group(1), len(addrs), "offline addr_build_id")
    by_frame = split_answers(m.group(2), len(addrs), "offline frame_ex")
    bad = []
    for a, e, g, h in zip(addrs, llvm, by_id, by_frame):
        want_ans = e  # symbol-table-only addresses too: the bundle's symbol-table ranges
        if g != want_ans or h != want_ans:
            bad.append("0x%x: llvm %r, addr_build_id %r, frame_ex %r" % (a, e, g, h))
    if bad:
        fail("offline C ABI: %d addresses differ:\n  %s" % (len(bad), "\n  ".join(bad[:10])))
    with open(trace) as f:
        calls = f.read().splitlines()
    # The probe unwinds its snapshots between two marks: unwinding (lib/unwind, SPROV_CTX_OFFLINE
    # there is another part of issue 11) is not what this test checks.
    marks = [i for i, c in enumerate(calls) if "offline-probe-unwind-" in c]
    if len(marks) != 2:
        fail("strace shows %d probe marks, expected 2" % len(marks))
    unwind_calls = calls[marks[0]:marks[1] + 1]
    calls = calls[:marks[0]] + calls[marks[1] + 1:]
    opened = [c for c in calls if os.path.dirname(module) in c or "/usr/lib/debug" in c or "debuginfod" in c
              or re.search(r"\b(socket|connect)\(", c)]
    if opened:
        fail("offline context touched files or the network:\n  %s" % "\n  ".join(opened[:10]))
    if not any(store in c for c in calls):
        fail("strace saw no access to the store %s: the trace is not watching the probe" % store)
    report.append("offline C ABI (addr_build_id, frame_ex): %d addresses equal llvm-symbolizer-14; strace: %d "
                  "file/network calls while symbolizing, none on the module, debug dirs or sockets (unwinding: "
                  "%d calls on the module)" % (len(addrs), len(calls),
                                               sum(os.path.dirname(module) in c for c in unwind_calls)))


SLEEPER = r"""
#include <unistd.h>
__attribute__((noinline)) static void leaf(void) { for (;;) pause(); }
__attribute__((noinline)) void middle(void) { leaf(); __asm__ volatile(""); }
int main(void) { middle(); return 0; }
"""


def check_stack(args, work):
    """stack --json frames of a live process: resolver/source/bundle per frame; names equal."""
    d = os.path.join(work, "sleeper")
    os.makedirs(d)
    src = os.path.join(d, "sleeper.c")
    with open(src, "w") as f:
        f.write(SLEEPER)
    binary = os.path.join(d, "sleeper")
    run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-Wl,--build-id", src, "-o", binary])
    store = os.path.join(work, "stack-store")
    bundle = os.path.join(d, "sleeper.sbundle")
    digest = build_bundle(args.stackprov, binary, bundle, store)
    proc = subprocess.Popen([binary])
    proc_root = "/proc/%d/root" % proc.pid
    try:
        time.sleep(0.3)
        plain = json.loads(run([args.stackprov, "stack", "--pid", str(proc.pid), "--json"]).stdout)
        stored = json.loads(run([args.stackprov, "stack", "--pid", str(proc.pid), "--json", "--store", store]).stdout)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    f0 = [f for f in plain["threads"][0]["frames"] if f["module"] == binary]
    f1 = [f for f in stored["threads"][0]["frames"] if f["module"] == binary]
    if len(f0) < 3 or len(f0) != len(f1):
        fail("stack --json: frames of %s: %d without store, %d with" % (binary, len(f0), len(f1)))
    named = 0
    for a, b in zip(f0, f1):
        # A live process's module file is opened through /proc/PID/root.
        if a["bundle"] != "" or a["source"] not in (binary, proc_root + binary):
            fail("stack --json without store: frame %r" % a)
        if a["resolver"] in ("dwarf", "symtab", "dynsym"):
            # DWARF-described frames and symbol-table ones (e.g. _start): the bundle answers both.
            named += a["resolver"] == "dwarf"
            if b["resolver"] != "bundle" or b["bundle"] != digest or b["source"] != digest:
                fail("stack --json with store: frame %r (bundle %s)" % (b, digest))
        elif (b["resolver"], b["bundle"], b["source"]) != (a["resolver"], "", a["source"]):
            fail("stack --json: frame %s: %r without store, %r with" % (a["index"], a, b))
        for k in ("function", "resolved_function", "file", "line", "column", "inlined"):
            if k in ("inlined",):
                ka = [(x["linkage_name"], x["file"], x["line"], x["column"]) for x in a[k]]
                kb = [(x["linkage_name"], x["file"], x["line"], x["column"]) for x in b[k]]
            else:
                ka, kb = a.get(k), b.get(k)
            if ka != kb:
                fail("stack --json: frame %s %s: %r without store, %r from the bundle" % (a["index"], k, ka, kb))
    if named < 3 or not all(f["resolved_function"] for f in f1[:named]):
        fail("stack --json: only %d frames of %s answered from DWARF" % (named, binary))
    others = [f for f in stored["threads"][0]["frames"] if f["module"] != binary and f["resolver"] == "bundle"]
    if others:
        fail("stack --json: frames of modules not in the store answered by a bundle: %r" % others)
    return named


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    args.stackprov = os.path.abspath(args.stackprov)
    args.probe = os.path.abspath(args.probe)
    work = os.path.abspath(args.work)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        fail("missing tool(s): %s (make deps)" % ", ".join(missing))
    for _, path, pkg in SYSTEM:
        if not os.path.exists(path):
            fail("%s is missing (package %s; make deps)" % (path, pkg))
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    os.environ.pop("STACKPROV_STORE", None)
    t0 = time.time()
    store = os.path.join(work, "store")
    report = []

    base = ["-O2", "-g", "-Wl,--build-id"]
    fx_c = compile_fixture(work, "fx_c", ["gcc"] + base + ["fixture_a.c", "fixture_b.c"])
    fx_cpp = compile_fixture(work, "fx_cpp", ["g++", "-std=c++17"] + base + ["fixture.cpp"])
    # A copy of fx_c kept for the policy checks (fx_c itself is moved away); same build-id.
    keep = os.path.join(work, "kept")
    os.makedirs(keep)
    fx_c_kept = os.path.join(keep, "fx_c")
    shutil.copy2(fx_c, fx_c_kept)

    bundle_c = os.path.join(work, "fx_c.sbundle")
    d_c = build_bundle(args.stackprov, fx_c, bundle_c, store)
    id_cpp = build_id_of(fx_cpp)
    addr_main = check_policy(args, store, fx_c_kept, d_c, fx_cpp)
    bundle_cpp = os.path.join(work, "fx_cpp.sbundle")
    d_cpp = build_bundle(args.stackprov, fx_cpp, bundle_cpp, store)

    for name, binary, digest in (("fx_c", fx_c, d_c), ("fx_cpp", fx_cpp, d_cpp)):
        addrs = [a for lo, hi in exec_ranges(binary) for a in range(lo, hi)]
        llvm = check_module(args, name, binary, addrs, store, digest, True, report)
    check_offline(args, work, store, os.path.join(work, "fx_cpp.moved-away", "fx_cpp"), id_cpp, d_cpp, addrs, llvm,
                  report)
    id_c = build_id_of(fx_c_kept)
    # --obj with a mismatching bundle needs a readable module: a copy of fx_cpp.
    shutil.copy2(os.path.join(work, "fx_cpp.moved-away", "fx_cpp"), os.path.join(keep, "fx_cpp"))
    check_refusals(args, store, bundle_c, id_c, id_cpp, os.path.join(keep, "fx_cpp"))

    rnd = random.Random(20261125)
    for name, path, pkg in SYSTEM:
        real = os.path.realpath(path)
        bundle = os.path.join(work, name + ".sbundle")
        digest = build_bundle(args.stackprov, real, bundle, store)
        ranges = exec_ranges(real)
        # SAMPLES distinct addresses, uniform over the executable bytes.
        total = sum(hi - lo for lo, hi in ranges)
        picks = rnd.sample(range(total), SAMPLES)
        addrs = []
        for k in sorted(picks):
            for lo, hi in ranges:
                if k < hi - lo:
                    addrs.append(lo + k)
                    break
                k -= hi - lo
        check_module(args, name, real, addrs, store, digest, False, report)
        if name == "libc.so.6":
            check_symbol_names(args, name, real, addrs[::5], store, report)

    frames = check_stack(args, work)
    report.append("stack --json --store: %d frames of the stored program named by its bundle, equal to DWARF" % frames)
    report.append("default policy: bundle for the stored module at 0x%x, dwarf for the others; wrong-identity "
                  "bundles refused naming both ids; %.1f s" % (addr_main, time.time() - t0))
    print("\n".join(r for r in report if r))
    print("PASS")


if __name__ == "__main__":
    main()
