#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `stackprov bundle export`: every symbfile message decoded by protoc, symbol_index.json by python, both vs bundle lookup and llvm-symbolizer-14.
"""Compiles the bundle test's fixtures (C with gcc, C++ with g++ and clang++-14; -O2 -g, so with
inlining), builds a bundle of each, and exports it as symbfile and as symbol_index.json.

symbfile: the framing (magic, varint length, varint type) is split here; EVERY message is decoded
by protoc (protobuf-compiler) against lib/bundle/symbfile.proto -- the Header and the string table
one by one, the RangeV1/ReturnPadV1 messages framed verbatim as fields of a test-only Batch message
(batch.proto) so that one protoc run decodes thousands. Each decoded record must equal the
symbol_index.json record at the same position (address through the setElfVA/deltaElfVA chain,
length, function, file, line, depth, call line and call file through the string table).

symbol_index.json (doc/symbol-index.md): at the first and the last byte of every range record,
the inline chain the JSON describes (ranges covering the address at depths 0..D; positions per
doc/symbol-index.md) must equal `stackprov bundle lookup` (the bundle reader) and
llvm-symbolizer-14 --inlining --no-demangle on the original binary (an independent DWARF reader),
frame by frame: function, file, line, column. Return pads (when the builder writes them): the
chain at addr - 1 must equal llvm-symbolizer's there, and the symbfile ReturnPadV1 the JSON pad.
Depth-0 records with "symbol_table": true are exactly those where llvm-symbolizer-14 has only a
symbol-table answer (one named frame, "??:0:0" or "<STT_FILE name>:0:0") at both ends.
The system libc.so.6 (DWARF from libc6-dbg) too: every symbfile message, and the chains at the
ends of 3,000 seeded ranges.
Also: identity fields vs `bundle inspect --json`, exports are byte-identical when repeated,
and `export sha256:HEX --store DIR` (or $STACKPROV_STORE) gives the bytes of the file export.
A missing tool fails with its name."""
import argparse
import bisect
import json
import random
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from peers import llvm_symbolizer_answers  # noqa: E402  (tests/lib: the peers' output parsers)

TOOLS = ["gcc", "g++", "clang++-14", "protoc", "llvm-symbolizer-14"]
MT_HEADER, MT_RANGE, MT_PAD, MT_STRINGS = 1, 2, 3, 4


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(cmd, input_bytes=None, text=True, **kw):
    p = subprocess.run(cmd, input=input_bytes, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(map(str, cmd[:6])), p.returncode, p.stderr.decode(errors="replace")[:2000]))
    return p.stdout.decode() if text else p.stdout


# ---- symbfile framing (the only part not left to protoc)
def varint(buf, pos):
    v, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            fail("symbfile: truncated or overlong varint at %d" % pos)
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


def split_symbfile(data):
    if data[:8] != b"symbfile":
        fail("symbfile: magic %r" % data[:8])
    pos, msgs = 8, []
    while pos < len(data):
        n, pos = varint(data, pos)
        t, pos = varint(data, pos)
        if pos + n > len(data):
            fail("symbfile: message of %d bytes at %d runs past the end (%d)" % (n, pos, len(data)))
        msgs.append((t, data[pos:pos + n]))
        pos += n
    return msgs


def put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# ---- protoc text format -> nested dicts of lists
def unescape(s):
    if "\\" not in s:
        return s  # what the loop below makes of it, without a step per character
    out, i = bytearray(), 0
    simple = {"n": 10, "t": 9, "r": 13, '"': 34, "'": 39, "\\": 92, "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = s[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < len(s) and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(int(s[i + 1:j], 8))
            i = j
        elif e == "x":
            j = i + 2
            while j < len(s) and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(s[i + 2:j], 16))
            i = j
        else:
            fail("protoc output: unknown escape \\%s" % e)
    return out.decode("utf-8")


def parse_text(text):
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
        elif line.endswith("{"):
            d = {}
            stack[-1].setdefault(line[:-1].strip(), []).append(d)
            stack.append(d)
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            stack[-1].setdefault(k, []).append(unescape(v[1:-1]) if v.startswith('"') else int(v))
    if len(stack) != 1:
        fail("protoc output: unbalanced braces")
    return root


def protoc_decode(args, type_name, data, proto="symbfile.proto", extra_dirs=()):
    cmd = ["protoc", "-I", args.proto_dir] + [x for d in extra_dirs for x in ("-I", d)]
    return parse_text(run(cmd + ["--decode=" + type_name, proto], input_bytes=data))


def one(d, k, default=None):
    v = d.get(k, [])
    if len(v) > 1:
        fail("field %s repeated: %r" % (k, v))
    return v[0] if v else default


# ---- symbolizer answers (tests/lib/peers.py): list of ((function, "file:line:col"), ...) innermost first
def llvm_answers(binary, addrs):
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--no-demangle", "--inlining", "--output-style=LLVM"],
              input_bytes="".join("0x%x\n" % a for a in addrs).encode())
    ans = llvm_symbolizer_answers(out)
    if len(ans) != len(addrs):
        fail("llvm-symbolizer-14 gave %d answers for %d addresses" % (len(ans), len(addrs)))
    return ans


def lookup_answers(stackprov, bundle, addrs):
    ans = []
    for k in range(0, len(addrs), 4000):
        chunk = addrs[k:k + 4000]
        got = llvm_symbolizer_answers(run([stackprov, "bundle", "lookup", bundle] + ["0x%x" % a for a in chunk]))
        if len(got) != len(chunk):
            fail("bundle lookup gave %d answers for %d addresses" % (len(got), len(chunk)))
        ans += got
    return ans


def json_chain(by_depth, addr):
    """The inline chain at addr from symbol_index.json ranges, innermost first (doc/symbol-index.md)."""
    hits = []
    for recs, starts in by_depth:  # ranges of one depth sorted by start, non-overlapping
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or addr >= recs[i]["_start"] + recs[i]["length"]:
            break
        hits.append(recs[i])
    frames = []
    for d, r in enumerate(hits):
        pos = hits[d + 1] if d + 1 < len(hits) else None
        if pos is None:
            loc = "%s:%d:%d" % (r["file"] or "??", r["line"], r["column"])
        else:
            loc = "%s:%d:%d" % (pos["call_file"] or "??", pos["call_line"], pos["call_column"])
        frames.append((r["function"] or "??", loc))
    return tuple(reversed(frames)) if frames else (("??", "??:0:0"),)


def check_symbfile(args, data, mod, name):
    msgs = split_symbfile(data)
    if not msgs or msgs[0] != (MT_HEADER, b""):
        fail("%s: first symbfile message is %r, expected an empty Header" % (name, msgs[:1]))
    if protoc_decode(args, "symbfile.Header", msgs[0][1]) != {}:
        fail("%s: Header decodes to fields" % name)
    if len(msgs) < 2 or msgs[1][0] != MT_STRINGS:
        fail("%s: second message is not a StringTableV1" % name)
    strings = protoc_decode(args, "symbfile.StringTableV1", msgs[1][1]).get("strings", [])
    if strings != sorted(set(strings), key=lambda s: s.encode()):
        fail("%s: string table is not sorted and unique" % name)
    types = [t for t, _ in msgs[2:]]
    ranges, pads = mod["ranges"], mod["return_pads"]
    if types != [MT_RANGE] * len(ranges) + [MT_PAD] * len(pads):
        fail("%s: message types %s..., expected %d RangeV1 then %d ReturnPadV1" % (name, types[:8], len(ranges),
                                                                                     len(pads)))
    batch = bytearray()
    for t, body in msgs[2:]:
        batch += put_varint(((1 if t == MT_RANGE else 2) << 3) | 2) + put_varint(len(body)) + body
    dec = protoc_decode(args, "symbfile_test.Batch", bytes(batch), proto="batch.proto", extra_dirs=(HERE,))
    drs, dps = dec.get("range", []), dec.get("pad", [])
    if len(drs) != len(ranges) or len(dps) != len(pads):
        fail("%s: protoc decoded %d ranges / %d pads, json has %d / %d" % (name, len(drs), len(dps), len(ranges),
                                                                         len(pads)))
    va, first, bad = 0, True, []

    def next_va(d, set_key):
        nonlocal va, first
        s, delta = one(d, set_key), one(d, "deltaElfVA")
        if first != (s is not None) or (s is None) == (delta is None):
            fail("%s: record %r: setElfVA must be set in the first record only, deltaElfVA in every other" % (name, d))
        va = s if s is not None else va + delta
        first = False
        return va

    def ref(d, k):
        i = one(d, k)
        if i is None or i >= len(strings):
            fail("%s: %s %r outside the string table of %d" % (name, k, i, len(strings)))
        return strings[i]

    for d, r in zip(drs, ranges):
        got = {"va": next_va(d, "setElfVA"), "length": one(d, "length", 0), "function": ref(d, "funcRef"),
               "file": ref(d, "fileRef"), "depth": one(d, "depth", 0), "call_line": one(d, "callLine", 0),
               "call_file": ref(d, "callFileRef") if r["depth"] > 0 else one(d, "callFileRef"),
               "lines": (one(d, "lineTable", {}).get("offset"), one(d, "lineTable", {}).get("lineNumber"))}
        want = {"va": r["_start"], "length": r["length"], "function": r["function"], "file": r["file"],
                "depth": r["depth"], "call_line": r.get("call_line", 0),
                "call_file": r["call_file"] if r["depth"] > 0 else None, "lines": ([0], [r["line"]])}
        if got != want and len(bad) < 10:
            bad.append("range: symbfile %r json %r" % (got, want))
    for d, p in zip(dps, pads):
        got = {"va": next_va(d, "setElfVA"), "frames": [(strings[f], strings[fi], ln) for f, fi, ln in
                                                        zip(d.get("func", []), d.get("file", []), d.get("line", []))],
               "n": (len(d.get("func", [])), len(d.get("file", [])), len(d.get("line", [])))}
        fr = p["frames"]
        want = {"va": int(p["addr"], 16) - 1, "frames": [(f["function"], f["file"], f["line"]) for f in fr],
                "n": (len(fr),) * 3}
        if got != want and len(bad) < 10:
            bad.append("pad: symbfile %r json %r" % (got, want))
    if bad:
        fail("%s: symbfile records differ from symbol_index.json:\n  %s" % (name, "\n  ".join(bad)))
    return len(msgs)


def check_fixture(args, name, compile_cmd, report):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    binary = os.path.join(work, name)
    run(compile_cmd + ["-o", binary], cwd=args.fixtures)
    check_binary(args, name, binary, report)


def check_binary(args, name, binary, report, sample=None):
    """sample: compare the JSON's chains at the ends of this many seeded ranges (None: all)."""
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    bundle = os.path.join(work, name + ".sbundle")
    digest = run([args.stackprov, "bundle", "build", binary, "--out", bundle]).strip()

    jtext = run([args.stackprov, "bundle", "export", bundle, "--format", "symbol-index-json"])
    sym = os.path.join(work, name + ".symb")
    run([args.stackprov, "bundle", "export", bundle, "--format", "symbfile", "--out", sym])
    sym2 = os.path.join(work, name + ".again.symb")
    run([args.stackprov, "bundle", "export", bundle, "--format", "symbfile", "--out", sym2])
    jtext2 = run([args.stackprov, "bundle", "export", bundle, "--format", "symbol-index-json"])
    if jtext != jtext2 or open(sym, "rb").read() != open(sym2, "rb").read():
        fail("%s: repeated exports differ" % name)

    idx = json.loads(jtext)
    insp = json.loads(run([args.stackprov, "bundle", "inspect", bundle, "--json"]))
    if idx.get("format") != "stackprov-symbol-index" or idx.get("version") != 1 or idx.get("bundle") != digest:
        fail("%s: json header %r (bundle %s)" % (name, {k: idx.get(k) for k in ("format", "version", "bundle")},
                                                 digest))
    if len(idx["modules"]) != 1 or len(insp["modules"]) != 1:
        fail("%s: expected one module" % name)
    mod, im = idx["modules"][0], insp["modules"][0]
    for k in ("id_kind", "id", "name", "sha256_file", "sha256_debug"):
        if mod[k] != im[k]:
            fail("%s: json %s %r, inspect %r" % (name, k, mod[k], im[k]))
    if (len(mod["ranges"]), len(mod["return_pads"])) != (im["ranges"], im["return_pads"]):
        fail("%s: json has %d ranges / %d pads, inspect %d / %d" % (name, len(mod["ranges"]), len(mod["return_pads"]),
                                                                    im["ranges"], im["return_pads"]))
    if not mod["ranges"]:
        fail("%s: no ranges exported" % name)
    by_depth = []
    for r in mod["ranges"]:
        r["_start"] = int(r["start"], 16)
        while len(by_depth) <= r["depth"]:
            by_depth.append([])
        by_depth[r["depth"]].append(r)

    nmsg = check_symbfile(args, open(sym, "rb").read(), mod, name)
    by_depth = [(sorted(recs, key=lambda r: r["_start"]), sorted(r["_start"] for r in recs)) for recs in by_depth]

    picked = mod["ranges"] if sample is None else random.Random(20261125).sample(mod["ranges"], sample)
    addrs = sorted({a for r in picked for a in (r["_start"], r["_start"] + r["length"] - 1)})
    expected = [json_chain(by_depth, a) for a in addrs]
    via_lookup = lookup_answers(args.stackprov, bundle, addrs)
    pad_addrs = [int(p["addr"], 16) - 1 for p in mod["return_pads"]]
    # One llvm-symbolizer run for the range ends and the pads: each run reads the binary's DWARF again
    # (libc's: ~0.6 CPU-s).
    both = llvm_answers(binary, addrs + pad_addrs)
    via_llvm, pad_llvm = both[:len(addrs)], both[len(addrs):]
    bad = []
    agree_lookup = agree_llvm = 0
    for a, e, g, l in zip(addrs, expected, via_lookup, via_llvm):
        agree_lookup += e == g
        agree_llvm += e == l
        if (e != g or e != l) and len(bad) < 10:
            bad.append("0x%x: json %r lookup %r llvm %r" % (a, e, g, l))
    # "symbol_table": true marks exactly the depth-0 records where llvm-symbolizer-14 has only a
    # symbol-table answer (one frame, a name, "??:0:0" or "<STT_FILE name>:0:0") at both ends.
    llvm_at = dict(zip(addrs, via_llvm))
    n_symtab = 0
    for r in picked:
        if r["depth"] != 0:
            continue
        ends = [llvm_at[r["_start"]], llvm_at[r["_start"] + r["length"] - 1]]
        want = all(len(l) == 1 and l[0][0] != "??" and re.fullmatch(r"[^/]*:0:0", l[0][1]) for l in ends)
        n_symtab += want
        if r.get("symbol_table", False) != want and len(bad) < 10:
            bad.append("range %s: symbol_table %r, llvm-symbolizer-14 at its ends %r" % (r["start"],
                                                                                      r.get("symbol_table"), ends))
    if any(r.get("symbol_table") not in (None, True) or (r.get("symbol_table") and r["depth"] != 0)
           for r in mod["ranges"]):
        bad.append("symbol_table must be true on depth-0 records only, else absent")
    if sample is None and n_symtab == 0:
        bad.append("no symbol-table range (_start, _init) in a whole fixture: the flag is not exercised")
    agree_pads = 0
    for p, l in zip(mod["return_pads"], pad_llvm):
        e = tuple(reversed([(f["function"], "%s:%d:%d" % (f["file"], f["line"], f["column"])) for f in p["frames"]]))
        agree_pads += e == l
        if e != l and len(bad) < 20:
            bad.append("pad %s: json %r llvm(addr-1) %r" % (p["addr"], e, l))
    report.append("%s: %d symbol-table ranges sampled, flagged exactly where llvm-symbolizer-14 answers from the "
                  "symbol table" % (name, n_symtab))
    report.append("%s: %d ranges (depth <= %d), %d pads, %d symbfile messages decoded by protoc; range ends: "
                  "json = bundle lookup %d/%d, json = llvm-symbolizer-14 %d/%d; pads = llvm %d/%d"
                  % (name, len(mod["ranges"]), len(by_depth) - 1, len(mod["return_pads"]), nmsg, agree_lookup,
                     len(addrs), agree_llvm, len(addrs), agree_pads, len(pad_addrs)))
    if bad:
        fail("%s: symbol_index.json disagrees:\n  %s" % (name, "\n  ".join(bad)))


def check_store(args):
    """`export sha256:HEX --store DIR` gives the same bytes as the bundle's file; a digest that is
    not in the store fails naming it. The store is laid out by hand as lib/symbolize/bundle_store.hpp
    documents it (store.json, blobs/sha256/<hh>/<hex>) until `bundle build --store` lands."""
    import hashlib
    bundle = os.path.join(args.work, "fx_c", "fx_c.sbundle")
    data = open(bundle, "rb").read()
    hexd = hashlib.sha256(data).hexdigest()
    store = os.path.join(args.work, "store")
    os.makedirs(os.path.join(store, "blobs", "sha256", hexd[:2]))
    with open(os.path.join(store, "store.json"), "w") as f:
        f.write('{"format":"stackprov-bundle-store","version":1}\n')
    shutil.copy(bundle, os.path.join(store, "blobs", "sha256", hexd[:2], hexd))
    for fmt in ("symbfile", "symbol-index-json"):
        via_file = run([args.stackprov, "bundle", "export", bundle, "--format", fmt], text=False)
        via_store = run([args.stackprov, "bundle", "export", "sha256:" + hexd, "--store", store, "--format", fmt],
                        text=False)
        env = dict(os.environ, STACKPROV_STORE=store)
        via_env = run([args.stackprov, "bundle", "export", "sha256:" + hexd, "--format", fmt], text=False, env=env)
        if not (via_file == via_store == via_env):
            fail("export %s: sha256:%s from the store differs from the bundle file" % (fmt, hexd))
    absent = "sha256:" + "0" * 64
    p = subprocess.run([args.stackprov, "bundle", "export", absent, "--store", store, "--format", "symbfile"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode == 0 or absent not in p.stderr:
        fail("export of a digest not in the store exited %d with %r, expected an error naming it"
             % (p.returncode, p.stderr))


def check_errors(args):
    p = subprocess.run([args.stackprov, "bundle", "export", "x", "--format", "xml"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 2:
        fail("export --format xml exited %d, expected 2 (usage)" % p.returncode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        fail("missing tool(s): %s (make deps)" % ", ".join(missing))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    report = []
    base = ["-O2", "-g", "-Wl,--build-id"]
    check_fixture(args, "fx_c", ["gcc"] + base + ["fixture_a.c", "fixture_b.c"], report)
    check_fixture(args, "fx_cpp", ["g++", "-std=c++17"] + base + ["fixture.cpp"], report)
    check_fixture(args, "fx_cpp_clang", ["clang++-14", "-std=c++17"] + base + ["fixture.cpp"], report)
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"  # DWARF from libc6-dbg, which we did not build
    if not os.path.exists(libc):
        fail("%s is missing" % libc)
    check_binary(args, "libc.so.6", libc, report, sample=3000)
    check_store(args)
    check_errors(args)
    print("\n".join(report))
    print("bundle export: symbfile and symbol_index.json agree with protoc, bundle lookup and llvm-symbolizer-14")


if __name__ == "__main__":
    main()
