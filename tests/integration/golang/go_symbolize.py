#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The "gopclntab" resolver vs Go's own tools: function and file:line vs `go tool addr2line`, inline chains vs
# the DWARF of the unstripped binary (llvm-symbolizer-14), on a fixture built here, stripped copies included.
"""Builds tests/integration/golang/fixture_go.go offline (std lib only; GOCACHE: $STACKPROV_GOCACHE or under --work) as

  fx           default build (symbols and DWARF)
  fx_stripped  -ldflags='-s -w' (no .symtab, no DWARF: only the pclntab is left)
  fx_pie       -buildmode=pie -ldflags='-s -w' (the table sits in .data.rel.ro.gopclntab; addresses
               from go tool objdump of fx_pie_full, the same PIE with symbols)
  fx_hidden    fx_stripped with .gopclntab renamed (objcopy): found by its header magic alone

and checks, for every function entry (from `go tool objdump`'s TEXT lines) and 3,000 seeded
random instruction addresses (objdump's instruction lines):

1. `stackprov symbolize --resolvers gopclntab` on fx, and the default chain on fx_stripped, fx_pie and
   fx_hidden (Resolver must be "gopclntab" there: nothing else is left), give the same physical function
   (outermost frame) and innermost file:line as `go tool addr2line` of the same binary (fx_hidden:
   of fx_stripped, which go tool addr2line can read; same addresses).
2. Inline chains: on fx, every address where llvm-symbolizer-14 (DWARF DW_TAG_inlined_subroutine)
   reports inlined frames, our chain has the same function names, innermost first, and the same
   call-site lines; where DWARF has one frame we have one. At least 50 addresses must be inlined
   ones (the fixture's addSquare -> mixTwice -> outerCompute chain).
A missing tool (go, llvm-symbolizer-14, objcopy) fails naming it."""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_json  # noqa: E402  (tests/lib: the peers' output parsers)


def need(tool):
    p = shutil.which(tool)
    if not p:
        sys.exit("missing tool: %s (scripts/install-deps.sh installs it)" % tool)
    return p


def go_env(work):
    # STACKPROV_GOCACHE (set by ctest): one build cache for this test and fuzz_gopclntab_smoke, which
    # build the same fixture -buildmode=pie; go 1.19 ships no -shared std library, so the first PIE
    # build compiles it (~20 CPU-s), once instead of once per test.
    env = dict(os.environ)
    env.update(GOCACHE=os.environ.get("STACKPROV_GOCACHE") or os.path.join(work, "gocache"), GOFLAGS="-mod=mod",
               GOPROXY="off", GO111MODULE="on", CGO_ENABLED="0", GOTOOLCHAIN="local", HOME=work)
    return env


def build_one(work, label, flags):
    """Builds fixture_go.go offline into work/label with `go build` flags; returns the path."""
    need("go")
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    shutil.copy(os.path.join(HERE, "fixture_go.go"), src)
    with open(os.path.join(src, "go.mod"), "w") as f:
        f.write("module stackprovfixture\n\ngo 1.18\n")
    path = os.path.join(work, label)
    subprocess.run(["go", "build", "-o", path] + flags + ["."], cwd=src, env=go_env(work), check=True)
    return path


def build(work):
    """Builds the fixtures; returns {label: path}."""
    out = {}
    for label, flags in (("fx", []), ("fx_stripped", ["-ldflags=-s -w"]),
                         ("fx_pie", ["-buildmode=pie", "-ldflags=-s -w"]), ("fx_pie_full", ["-buildmode=pie"])):
        out[label] = build_one(work, label, flags)
    hidden = os.path.join(work, "fx_hidden")
    subprocess.run([need("objcopy"), "--rename-section", ".gopclntab=.hidden_tab", out["fx_stripped"], hidden],
                   check=True)
    out["fx_hidden"] = hidden
    return out


def objdump_addrs(binary, env):
    """(function entries, every instruction address) from `go tool objdump`; every instruction of the
    fixture's own main.* functions is among the entries (they hold its inline chains)."""
    entries, insns = [], []
    in_main = False
    text = subprocess.run(["go", "tool", "objdump", binary], env=env, check=True, stdout=subprocess.PIPE,
                          text=True).stdout
    want_entry = False
    for line in text.splitlines():
        if line.startswith("TEXT "):
            want_entry = True
            in_main = line.startswith("TEXT main.")
            continue
        m = re.match(r"^\s+\S*:\d+\s+0x([0-9a-f]+)\s", line)
        if m:
            a = int(m.group(1), 16)
            insns.append(a)
            if want_entry or in_main:
                entries.append(a)
                want_entry = False
    return entries, insns


def addr2line(binary, addrs, env):
    """[(function, file, line)] from `go tool addr2line` (function: the physical one; file:line: innermost)."""
    inp = "".join("0x%x\n" % a for a in addrs)
    out = subprocess.run(["go", "tool", "addr2line", binary], input=inp, env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout.splitlines()
    assert len(out) == 2 * len(addrs), (binary, len(out), len(addrs))
    res = []
    for i in range(len(addrs)):
        fn, loc = out[2 * i], out[2 * i + 1]
        file, _, line = loc.rpartition(":")
        res.append((fn, file, int(line)))
    return res


def ours(stackprov, binary, addrs, resolvers):
    cmd = [stackprov, "symbolize", "--obj", binary, "--output-style=JSON", "--provenance"]
    if resolvers:
        cmd += ["--resolvers", resolvers]
    inp = "".join("0x%x\n" % a for a in addrs)
    out = subprocess.run(cmd, input=inp, check=True, stdout=subprocess.PIPE, text=True).stdout
    res = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(res) == len(addrs), (binary, len(res), len(addrs))
    return res


def llvm_chains(binary, addrs):
    llvm = need("llvm-symbolizer-14")
    inp = "".join("0x%x\n" % a for a in addrs)
    out = subprocess.run([llvm, "--obj", binary, "--output-style=JSON", "--inlines"], input=inp, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    res = llvm_symbolizer_json(out)
    assert len(res) == len(addrs)
    return [[(f["FunctionName"], f["Line"]) for f in r["Symbol"]] for r in res]


def chain_check(stackprov, binary, dwarf_binary, addrs, label, bad):
    """Our chains on `binary` (default chain: Resolver gopclntab) vs DWARF of `dwarf_binary`; returns
    the number of inlined addresses compared."""
    dwarf = llvm_chains(dwarf_binary, addrs)
    got = ours(stackprov, binary, addrs, "")
    inlined = wrappers = 0
    fixture_chain = ["main.addSquare", "main.mixTwice", "main.outerCompute"]
    if not any([f["FunctionName"] for f in g["Symbol"][:3]] == fixture_chain for g in got):
        bad.append("%s: no address with the fixture's inline chain %s" % (label, " <- ".join(fixture_chain)))
    for a, d, g in zip(addrs, dwarf, got):
        if d[0][0] in ("??", ""):
            continue  # no DWARF there (padding between functions)
        if g["Symbol"][-1]["FileName"] == "<autogenerated>":
            # Compiler-made wrappers ((*T).M calling T.M): the Go linker writes no DW_TAG_inlined_subroutine
            # for them, the pclntab's inline tree (and the runtime's traceback) has the inlined T.M.
            wrappers += 1
            continue
        # The physical function's name is checked against go tool addr2line above (llvm takes it from
        # .symtab, where assembly functions carry ".abi0" and types are spelled out): compare the inlined
        # names and every line.
        mine = [(f["FunctionName"], f["Line"]) for f in g["Symbol"]]
        mine[-1] = (d[-1][0], mine[-1][1])
        if len(d) > 1:
            inlined += 1
        if mine != d or g["Resolver"] != "gopclntab":
            bad.append("%s inline chain 0x%x: DWARF (llvm-symbolizer-14 on %s) %s, stackprov %s (%s)" %
                       (label, a, os.path.basename(dwarf_binary), d, mine, g["Resolver"]))
    print("%s inline chains: %d addresses compared with DWARF, %d of them inlined (%d in autogenerated wrappers "
          "not compared)" % (label, len(addrs) - wrappers, inlined, wrappers))
    return inlined


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    env = go_env(args.work)
    bins = build(args.work)
    entries, insns = objdump_addrs(bins["fx"], env)
    rng = random.Random(17)
    addrs = sorted(set(entries + rng.sample(insns, min(3000, len(insns)))))
    print("%d function entries, %d addresses" % (len(entries), len(addrs)))
    bad = []
    for label, binary, oracle, resolvers in (
            ("fx --resolvers gopclntab", bins["fx"], bins["fx"], "gopclntab"),
            ("fx_stripped (default chain)", bins["fx_stripped"], bins["fx_stripped"], ""),
            ("fx_hidden (default chain, magic search)", bins["fx_hidden"], bins["fx_stripped"], "")):
        want = addr2line(oracle, addrs, env)
        got = ours(args.stackprov, binary, addrs, resolvers)
        n = 0
        for a, w, g in zip(addrs, want, got):
            sym = g["Symbol"]
            mine = (sym[-1]["FunctionName"], sym[0]["FileName"], sym[0]["Line"])
            if w[0] == "?":
                continue  # addr2line has no function there (padding): not compared
            n += 1
            if mine != w or g["Resolver"] != "gopclntab":
                bad.append("%s 0x%x: go tool addr2line %s, stackprov %s (%s)" % (label, a, w, mine, g["Resolver"]))
        print("%s: %d addresses compared with go tool addr2line" % (label, n))
    # Inline chains vs DWARF (llvm-symbolizer-14 on the unstripped binary), on the stripped non-PIE build and
    # on the stripped PIE (go tool addr2line/objdump of Go 1.19 answer "?" on internally linked PIEs).
    inlined = chain_check(args.stackprov, bins["fx_stripped"], bins["fx"], addrs, "fx_stripped", bad)
    pie_entries, _ = objdump_addrs(bins["fx_pie_full"], env)
    pie_addrs = sorted(set(pie_entries + [rng.randrange(pie_entries[0], pie_entries[-1]) for _ in range(3000)]))
    pie_inlined = chain_check(args.stackprov, bins["fx_pie"], bins["fx_pie_full"], pie_addrs, "fx_pie", bad)
    if min(inlined, pie_inlined) < 50:
        bad.append("only %d/%d inlined addresses among the samples (want >= 50)" % (inlined, pie_inlined))
    if bad:
        print("%d mismatches:" % len(bad))
        for b in bad[:60]:
            print("  " + b)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
