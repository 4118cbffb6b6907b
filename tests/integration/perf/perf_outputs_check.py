#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# perf-import's pprof and SVG outputs against independent answers: the pprof profile decoded with
# `protoc --decode` (schema bindings/cli/pprof/profile.proto): cpu/nanoseconds from the sample periods
# (summed periods = perf script's), samples/count, the period type, each Location's lines (function,
# file, line, inline chain) = llvm-symbolizer-14's, functions' files and declaration lines = the
# fixture's source, the kernel mapping and its build-id = perf buildid-list -k, the first mapping (go
# tool pprof -top's "File:") = the program run, also for /bin/sh -> dash, a thread renamed by prctl and
# `ld.so PROG`. The SVG flame graph's script run under node with a minimal DOM: search highlights the
# matching frames and shows the share of samples under them (computed here from the folded output),
# hover writes the details line, ?s=REGEX searches on load; "1 sample" in titles.
import decimal
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_check import finish, run, script_args  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from peers import llvm_symbolizer_chains  # noqa: E402  (tests/lib: the peers' output parsers)
import pprof_text  # noqa: E402  (tests/lib: pprof decoded with protoc)

NODE_SHIM = r"""
const fs = require('fs'), vm = require('vm');
const dom = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const all = [];
function El(d) {
  this.tag = d.tag; this.attrs = Object.assign({}, d.attrs); this._text = d.text || '';
  this.children = (d.children || []).map(c => new El(c)); this.style = {}; this.handlers = {};
  all.push(this);
}
El.prototype.getAttribute = function (k) { return k in this.attrs ? String(this.attrs[k]) : null; };
El.prototype.setAttribute = function (k, v) { this.attrs[k] = String(v); };
Object.defineProperty(El.prototype, 'textContent', {
  get() { return this._text + this.children.map(c => c.textContent).join(''); },
  set(v) { this._text = String(v); this.children = []; } });
El.prototype.querySelector = function (sel) {
  for (const c of this.children) { if (c.tag === sel) return c; const r = c.querySelector(sel); if (r) return r; }
  return null; };
El.prototype.addEventListener = function (t, f) { (this.handlers[t] = this.handlers[t] || []).push(f); };
El.prototype.fire = function (t) { (this.handlers[t] || []).forEach(f => f({ preventDefault() {} })); };
const root = new El(dom.root);
global.document = {
  getElementById(id) { return all.find(e => e.attrs.id === id) || null; },
  querySelectorAll(sel) {
    const [tag, cls] = sel.split('.');
    return all.filter(e => e.tag === tag && (e.attrs['class'] || '').split(' ').includes(cls)); } };
global.window = { location: { search: process.argv[3] || '' }, addEventListener() {} };
global.prompt = () => null;
vm.runInThisContext(dom.script);
const out = { onload_matched: document.getElementById('matched').textContent };
const frames = document.querySelectorAll('g.f');
const name = g => g.querySelector('title').textContent.replace(/ \([0-9]+ samples?, [0-9.]+%\)$/, '');
if (process.argv[4]) {
  out.pct = search(process.argv[4]);
  out.matched = document.getElementById('matched').textContent;
  out.button = document.getElementById('search').textContent;
  out.highlighted = frames.filter(g => g.querySelector('rect').getAttribute('fill') === 'rgb(230,0,230)').map(name);
  out.not_highlighted = frames.filter(g => g.querySelector('rect').getAttribute('fill') !== 'rgb(230,0,230)').map(name);
  document.getElementById('search').fire('click');  // "Reset Search"
  out.after_reset = document.getElementById('matched').textContent;
  out.restored = frames.every(g => g.querySelector('rect').getAttribute('fill') === g.getAttribute('data-fill'));
  const g = frames[frames.length - 1];
  g.fire('mouseover');
  out.hover = [g.querySelector('title').textContent, document.getElementById('details').textContent];
  g.fire('mouseout');
  out.after_out = document.getElementById('details').textContent;
}
console.log(JSON.stringify(out));
"""



def js_fixed1(x):
    """`x.toFixed(1)` as ECMA-262 defines it for x >= 0: of the two one-decimal neighbours of x's exact
    binary value, the nearer, and the larger on a tie (Python's "%.1f" rounds a tie to even: 99.25 of
    1,985 samples in 2,000 is "99.3" in the page, "99.2" in Python)."""
    return str(decimal.Decimal(x).quantize(decimal.Decimal("0.1"), rounding=decimal.ROUND_HALF_UP))

def file_offset_to_vaddr(path, off):
    """The link-time address of file offset `off` (the PT_LOAD segment that holds it)."""
    with open(path, "rb") as f:
        h = f.read(64)
        phoff, = struct.unpack_from("<Q", h, 32)
        phentsize, phnum = struct.unpack_from("<HH", h, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    for i in range(phnum):
        ptype, flags, p_off, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
        if ptype == 1 and p_off <= off < p_off + p_filesz:
            return off - p_off + p_vaddr
    return None


def llvm_inline_chain(binary, addr):
    """llvm-symbolizer-14's answer for a link-time address: [(function, file, line)], innermost first."""
    out = run(["llvm-symbolizer-14", "--obj=" + binary, "--inlining", "--functions=linkage", hex(addr)]).stdout
    chains = llvm_symbolizer_chains(out)
    # "??": no line table
    return [(fn, "" if file == "??" else file, line) for fn, file, line, _ in (chains[0] if chains else [])]


def decode(path, proto):
    return pprof_text.decode(path, proto=proto)


def check_pprof(sp, perf, workdir, proto, spin, source):
    failures = []
    data = os.path.join(workdir, "spin.data")
    run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf", "-o", data, "--", spin, "1"])
    periods = [int(l.split()[-1]) for l in run([perf, "script", "-i", data, "-F", "tid,period"]).stdout.splitlines()
               if l.strip()]
    out = os.path.join(workdir, "spin.pb.gz")
    run([sp, "perf-import", data, "-f", "pprof", "-o", out, "-q"])
    p = decode(out, proto)
    s = p["string_table"]
    types = [(s[t["type"][0]], s[t["unit"][0]]) for t in p["sample_type"]]
    period_type = (s[p["period_type"][0]["type"][0]], s[p["period_type"][0]["unit"][0]])
    values = [sum(x["value"][i] for x in p["sample"]) for i in range(len(types))]
    print("pprof: sample_type %s, period_type %s, period %s, default %s; totals %s; perf script: %d samples, "
          "periods sum %d" % (types, period_type, p.get("period"), s[p.get("default_sample_type", [0])[0]], values,
                              len(periods), sum(periods)))
    if types != [("samples", "count"), ("cpu", "nanoseconds")] or period_type != ("cpu", "nanoseconds"):
        failures.append("pprof: sample types %s, period type %s" % (types, period_type))
    if p.get("period") != [1000000000 // 999]:
        failures.append("pprof: period %s, want %d (1e9 / 999 Hz)" % (p.get("period"), 1000000000 // 999))
    if values != [len(periods), sum(periods)]:
        failures.append("pprof: totals %s, perf script says %d samples, %d ns" % (values, len(periods), sum(periods)))
    funcs = {f["id"][0]: (s[f["name"][0]], s[f.get("filename", [0])[0]], f.get("start_line", [0])[0])
             for f in p["function"]}
    maps = {m["id"][0]: m for m in p["mapping"]}
    checked = differ = 0
    examples = []
    for loc in p["location"]:
        m = maps.get(loc.get("mapping_id", [0])[0])
        if m is None or s[m["filename"][0]] != spin:
            continue
        pc = loc["address"][0]
        fileoff = pc - m["memory_start"][0] + m.get("file_offset", [0])[0]
        addr = file_offset_to_vaddr(spin, fileoff)  # a caller's Location.address is its return address - 1
        want = llvm_inline_chain(spin, addr)
        mine = [(funcs[l["function_id"][0]][0], funcs[l["function_id"][0]][1], l.get("line", [0])[0]) for l in loc["line"]]
        checked += 1
        if mine != want:
            differ += 1
            if len(examples) < 3:
                examples.append("%#x: pprof %s vs llvm-symbolizer-14 %s" % (addr, mine, want))
    print("pprof: %d locations of the fixture compared with llvm-symbolizer-14, %d differ" % (checked, differ))
    for e in examples:
        print("  example: " + e)
    if checked < 5 or differ:
        failures.append("pprof: %d of %d locations' lines differ from llvm-symbolizer-14" % (differ, checked))
    src = open(source).read().splitlines()
    for fn in ("c_fn", "d_fn", "b_fn", "a_fn"):
        decl = next(i + 1 for i, l in enumerate(src) if re.search(r"\b%s\(unsigned long x" % fn, l))
        got = [(f, sl) for n, f, sl in funcs.values() if n == fn]
        print("pprof: function %s: %s (source: %s line %d)" % (fn, got, os.path.basename(source), decl))
        if got != [(source, decl)]:
            failures.append("pprof: function %s is %s, want %s:%d" % (fn, got, source, decl))
    failures += check_go_pprof_list(out, source, src, values[1])
    failures += check_pprof_main_mapping(sp, perf, workdir, proto, spin, out)
    # A program whose first samples are in libc (memset of a large buffer, then its own loop).
    prog = os.path.join(workdir, "libcfirst")
    with open(prog + ".c", "w") as f:
        f.write("#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n"
                "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
                " return t.tv_sec + t.tv_nsec / 1e9; }\n"
                "__attribute__((noinline)) unsigned long own(unsigned long x) { for (int i = 0; i < 1000000; i++)"
                " x = x * 6364136223846793005ul + 1; return x; }\n"
                "int main(void) { size_t n = 64u << 20; char* b = malloc(n); double t = now();"
                " while (now() - t < 0.4) memset(b, (int)(now() * 1000), n);"
                " unsigned long x = 1; t = now(); while (now() - t < 0.3) x = own(x);"
                " volatile unsigned long sink = x + (unsigned char)b[5]; (void)sink; return 0; }\n")
    subprocess.run(["cc", "-O2", "-g", "-o", prog, prog + ".c"], check=True)
    data2 = os.path.join(workdir, "libcfirst.data")
    run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf", "-o", data2, "--", prog])
    out2 = os.path.join(workdir, "libcfirst.pb.gz")
    run([sp, "perf-import", data2, "-f", "pprof", "-o", out2, "-q"])
    failures += check_pprof_main_mapping(sp, perf, workdir, proto, prog, out2)
    failures += check_pprof_main_mapping_renamed(sp, perf, workdir, proto)
    spin_maps = [m for m in maps.values() if s[m["filename"][0]] == spin]
    if not spin_maps or not all(m.get("has_line_numbers") == ["true"] or m.get("has_line_numbers") == [True]
                                for m in spin_maps):
        failures.append("pprof: the fixture's mapping does not say has_line_numbers: %s" % spin_maps)
    return failures


def check_pprof_main_mapping(sp, perf, workdir, proto, program, profile):
    """Issue 36: the first mapping is the recorded program: pprof tools take it as the profile's
    binary (`go tool pprof -top` prints "File: <its name>"), not the first module a sample touched
    (libc.so.6 before, for a program whose first samples are in libc)."""
    p = decode(profile, proto)
    s = p["string_table"]
    first = s[p["mapping"][0]["filename"][0]] if p.get("mapping") else ""
    go = shutil.which("go")
    if go is None:
        return ["pprof: go is not installed (golang-go; make deps installs it)"]
    top = subprocess.run([go, "tool", "pprof", "-top", profile], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, GOCACHE=os.path.join(workdir, "gocache"), GOFLAGS=""))
    file_line = [l for l in top.stdout.splitlines() if l.startswith("File:")]
    names = [s[m["filename"][0]] for m in p.get("mapping", [])]
    print("pprof of %s (%s): first mapping %s (of %s); go tool pprof -top: %s" % (
        os.path.basename(program), os.path.basename(profile), first, [os.path.basename(n) for n in names], file_line))
    if first != program or file_line != ["File: " + os.path.basename(program)]:
        return ["pprof: first mapping %s, go tool pprof %s; want the recorded program %s" % (first, file_line, program)]
    return []


# Renames its main thread, whose threads inherit the name, and works in a thread: every sample's
# outermost frame is in libc (clone3), none in the program, so no mapping order puts it first.
RENAMED_SOURCE = (
    "#include <pthread.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/prctl.h>\n"
    "#include <time.h>\n"
    "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
    " return t.tv_sec + t.tv_nsec / 1e9; }\n"
    "__attribute__((noinline)) unsigned long own(unsigned long x) { for (int i = 0; i < 1000000; i++)"
    " x = x * 6364136223846793005ul + 1; return x; }\n"
    "static void* work(void* arg) { size_t n = 64u << 20; char* b = malloc(n); double t = now();"
    " while (now() - t < 0.3) memset(b, (int)(now() * 1000), n);"
    " unsigned long x = 1; t = now(); while (now() - t < 0.3) x = own(x);"
    " volatile unsigned long sink = x + (unsigned char)b[5]; (void)sink; return arg; }\n"
    "int main(void) { prctl(PR_SET_NAME, \"renamed\"); pthread_t t;"
    " if (pthread_create(&t, NULL, work, NULL) != 0) return 1; return pthread_join(t, NULL); }\n")


def check_pprof_main_mapping_renamed(sp, perf, workdir, proto):
    """Issue 36: the first mapping is the file the process exec'd, also when the process's name is
    not that file's: /bin/sh (a symlink to dash on Debian: comm "sh"), a program that renames its
    main thread with prctl(PR_SET_NAME, "renamed") and works in a thread (run through a symlink
    "worker", the name its first samples carry), and /bin/sh run by the
    dynamic loader (`ld.so /bin/sh`: comm "ld-linux-x86-64", which the loader's own file name
    begins). Recorded by `stackprov record` (capture file) and, for sh, by perf record (perf.data).
    The independent answer: the program the test ran, with symlinks resolved (readlink -f), never
    ld.so or libc."""
    failures = []
    sh = os.path.realpath("/bin/sh")
    if os.path.basename(sh) == "sh":
        return ["pprof main mapping: /bin/sh is not a symlink to another file name here (%s)" % sh]
    loop = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"
    prog = os.path.join(os.path.realpath(workdir), "prctlprog")
    with open(prog + ".c", "w") as f:
        f.write(RENAMED_SOURCE)
    subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", prog, prog + ".c"], check=True)
    # Run through a link of another name: its samples before the rename (exec, ld.so's startup) carry
    # that name, so no sample's comm names the file.
    link = os.path.join(workdir, "worker")
    os.symlink(prog, link)
    ldso = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    cases = [("sh-cap", sh, "record", ["/bin/sh", "-c", loop], "sh"),
             ("sh-perf", sh, "perf", ["/bin/sh", "-c", loop], "sh"),
             ("renamed", prog, "record", [link], "renamed"),
             ("ldso", sh, "record", [ldso, "/bin/sh", "-c", loop], "ld-linux-x86-64")]
    for name, program, how, cmd, comm in cases:
        data = os.path.join(workdir, name + (".cap" if how == "record" else ".data"))
        if how == "record":
            run([sp, "record", "-o", data, "--"] + cmd, timeout=120)
        else:
            run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf", "-o", data, "--"] + cmd)
        profile = os.path.join(workdir, name + ".pb.gz")
        run([sp, "perf-import", data, "-f", "pprof", "-o", profile, "-q"])
        strings = decode(profile, proto)["string_table"]
        if comm not in strings:  # the premise: the samples carry the process's name, not its file's
            failures.append("pprof of %s: no sample has comm %r (strings %s)" % (name, comm, strings[:20]))
        failures += check_pprof_main_mapping(sp, perf, workdir, proto, program, profile)
    return failures


def check_go_pprof_list(profile, source, src, total_ns):
    """`go tool pprof -list` (Debian's golang-go) lists d_fn's source lines with their costs."""
    go = shutil.which("go")
    if go is None:
        return ["pprof: go is not installed (golang-go; make deps installs it)"]
    env = dict(os.environ, GOCACHE=os.path.join(os.path.dirname(profile), "gocache"), GOFLAGS="")
    # pprof looks for sources under -source_path (default: the working directory, here ctest's
    # build directory) after trimming the recorded path: point it at the fixture's directory.
    r = subprocess.run([go, "tool", "pprof", "-source_path", os.path.dirname(source), "-list", "^d_fn$", profile],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out = r.stdout.splitlines()
    head = [l for l in out if l.startswith("ROUTINE")]
    rows = {}
    for l in out:
        m = re.match(r"^\s*(\S+)\s+(\S+)\s+(\d+):(.*)$", l)
        if m:
            rows[int(m.group(3))] = (m.group(1), m.group(4))
    body = [n for n, (flat, _) in rows.items() if flat != "."]
    total = [l for l in out if l.startswith("Total:")]
    print("go tool pprof -list ^d_fn$: %s %s; lines with samples %s" % (total, head, sorted(body)))
    failures = []
    # pprof names the file as recorded, or trimmed to where -source_path found it.
    if r.returncode != 0 or head not in (["ROUTINE ======================== d_fn in " + source],
                                         ["ROUTINE ======================== d_fn in " + os.path.basename(source)]):
        failures.append("go tool pprof -list: exit %d, %s (%s)" % (r.returncode, head, r.stderr.strip()[:200]))
    elif not body or any(rows[n][1] != src[n - 1] for n in rows) or not all(14 <= n <= 17 for n in body):
        failures.append("go tool pprof -list: listed lines %s do not match %s lines 14-17" % (sorted(body), source))
    # pprof's rendering of the summed cpu/nanoseconds: the largest unit that keeps the value >= 1
    # (measurement.ScaledLabel: ns, us, ms, s), two decimals, trailing ".00" dropped.
    value, unit = float(total_ns), "ns"
    for factor, name in ((1e3, "us"), (1e6, "ms"), (1e9, "s")):
        if total_ns >= factor:
            value, unit = total_ns / factor, name
    label = ("%.2f" % value)
    label = label[:-3] if label.endswith(".00") else label
    want_total = "Total: %s%s" % (label, unit)
    if total != [want_total]:
        failures.append("go tool pprof -list: %s, want %s" % (total, want_total))
    return failures


def check_pprof_kernel(sp, perf, workdir, proto, sysprog):
    """Kernel frames sit in a [kernel.kallsyms] mapping with the running kernel's build-id."""
    data = os.path.join(workdir, "sys.data")
    run([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-o", data, "--", sysprog, "1"])
    out = os.path.join(workdir, "sys.pb.gz")
    run([sp, "perf-import", data, "-f", "pprof", "-o", out, "-q"])
    p = decode(out, proto)
    s = p["string_table"]
    running = run([perf, "buildid-list", "-k"]).stdout.strip()
    kmaps = [m for m in p["mapping"] if s[m["filename"][0]] == "[kernel.kallsyms]"]
    kids = {m["id"][0] for m in kmaps}
    funcs = {f["id"][0]: s[f["name"][0]] for f in p["function"]}
    klocs = [l for l in p["location"] if l.get("mapping_id", [0])[0] in kids]
    named = sum(1 for l in klocs if funcs[l["line"][0]["function_id"][0]] != "[unknown]")
    ids = [s[m["build_id"][0]] for m in kmaps]
    in_range = all(m["memory_start"][0] <= l["address"][0] < m["memory_limit"][0] for m in kmaps for l in klocs)
    comments = [s[c] for c in p.get("comment", [])]
    print("pprof kernel: mappings %s (build-ids %s), %d kernel locations, %d named, comments %s" % (
        len(kmaps), ids, len(klocs), named, comments))
    failures = []
    if ids != [running] or len(klocs) < 20 or named != len(klocs) or not in_range:
        failures.append("pprof kernel: mapping build-ids %s (want [%s]), %d locations, %d named, in range %s" % (
            ids, running, len(klocs), named, in_range))
    if not any(running in c for c in comments):
        failures.append("pprof kernel: no comment names the kernel build-id: %s" % comments)
    return failures


def svg_dom(path):
    root = ET.parse(path).getroot()

    def conv(e):
        return {"tag": e.tag.split("}")[-1], "attrs": dict(e.attrib), "text": e.text or "",
                "children": [conv(c) for c in e if c.tag.split("}")[-1] != "script"]}
    script = "".join(e.text or "" for e in root.iter() if e.tag.split("}")[-1] == "script")
    return {"root": conv(root), "script": script}


def check_svg(sp, workdir, data):
    failures = []
    svg = os.path.join(workdir, "spin.svg")
    run([sp, "perf-import", data, "-f", "svg", "-o", svg, "-q"])
    folded = run([sp, "perf-import", data, "-f", "folded", "-q"]).stdout
    stacks = []
    for l in folded.splitlines():
        st, _, n = l.rpartition(" ")
        stacks.append((st.split(";"), int(n)))
    total = sum(n for _, n in stacks)
    dom = svg_dom(svg)
    titles = []

    def walk(d):
        if d["tag"] == "title":
            titles.append(d["text"])
        for c in d["children"]:
            walk(c)
    walk(dom["root"])
    bad_titles = [t for t in titles if re.search(r"\((1 samples|[02-9] sample|[0-9]{2,} sample),", t)]
    ones = [t for t in titles if "(1 sample," in t]
    print("svg: %d frames, %d with 1 sample; titles in the wrong number: %s" % (len(titles), len(ones), bad_titles[:3]))
    if bad_titles or not all(re.search(r" \([0-9]+ samples?, [0-9.]+%\)$", t) for t in titles):
        failures.append("svg: titles not 'N samples' / '1 sample': %s" % bad_titles[:3])
    if shutil.which("node") is None:
        return failures + ["svg: node is not installed (nodejs; make deps installs it)"]
    dom_path = os.path.join(workdir, "svg-dom.json")
    json.dump(dom, open(dom_path, "w"))
    shim = os.path.join(workdir, "shim.js")
    open(shim, "w").write(NODE_SHIM)
    for regex in ("^c_fn$", "^b_fn$", "_fn$", "b_fn|main", "^no_such_function$"):
        r = run(["node", shim, dom_path, "", regex])
        out = json.loads(r.stdout)
        rx = re.compile(regex)
        want = 100.0 * sum(n for names, n in stacks if any(rx.search(x) for x in names)) / total
        want_hl = sorted({x for names, _ in stacks for x in names if rx.search(x)})
        text = "Matched: %s%%" % js_fixed1(want) + ("" if want_hl else " (no frame matches)")
        print("svg search %r: matched %.4f%% ('%s'); folded says %.4f%%; highlighted %s" % (
            regex, out["pct"], out["matched"], want, sorted(set(out["highlighted"]))))
        if abs(out["pct"] - want) > 1e-9 or out["matched"] != text:
            failures.append("svg search %r: %s / %s, want %.4f%% / %s" % (regex, out["pct"], out["matched"], want, text))
        if sorted(set(out["highlighted"])) != want_hl or any(rx.search(x) for x in out["not_highlighted"]):
            failures.append("svg search %r: highlighted %s, want %s" % (regex, sorted(set(out["highlighted"])), want_hl))
        if out["button"] != "Reset Search" or out["after_reset"] != "" or not out["restored"]:
            failures.append("svg search %r: reset: button %r, matched %r, colours restored %s" % (
                regex, out["button"], out["after_reset"], out["restored"]))
        if out["hover"][1] != "Function: " + out["hover"][0] or out["after_out"].strip():
            failures.append("svg hover: details %r for title %r (after: %r)" % (out["hover"][1], out["hover"][0],
                                                                                 out["after_out"]))
    r = json.loads(run(["node", shim, dom_path, "?s=d_fn", ""]).stdout)
    want = 100.0 * sum(n for names, n in stacks if any("d_fn" in x for x in names)) / total
    print("svg ?s=d_fn on load: %r (folded says %.1f%%)" % (r["onload_matched"], want))
    if r["onload_matched"] != "Matched: %s%%" % js_fixed1(want):
        failures.append("svg ?s=d_fn: %r, want Matched: %s%%" % (r["onload_matched"], js_fixed1(want)))
    return failures


def main():
    args = script_args()
    for tool in ("perf", "protoc", "llvm-symbolizer-14", "gunzip"):
        if shutil.which(tool) is None:
            print("FAIL: %s is not installed (make deps installs it)" % tool)
            return 1
    perf = shutil.which("perf")
    proto = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                         "bindings", "cli", "pprof", "profile.proto")
    workdir = tempfile.mkdtemp(prefix="stackprov-perfout-")
    source = os.path.abspath(os.path.join(args.source_dir, "fixture_spin.c"))
    spin = os.path.join(workdir, "spin")
    sysprog = os.path.join(workdir, "sys")
    run(["cc", "-O2", "-g", "-pthread", "-o", spin, source])
    run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", sysprog, os.path.join(args.source_dir, "fixture_sys.c")])
    failures = check_pprof(args.stackprov, perf, workdir, proto, spin, source)
    failures += check_pprof_kernel(args.stackprov, perf, workdir, proto, sysprog)
    failures += check_svg(args.stackprov, workdir, os.path.join(workdir, "spin.data"))
    return finish(failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
