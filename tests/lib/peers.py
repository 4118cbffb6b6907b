# SPDX-License-Identifier: Apache-2.0
# The peers' output read one way for every test: llvm-symbolizer, perf script, eu-stack and gdb.
"""Parsers of what the tools the tests compare stackprov with print (one copy each, issue 32).

    sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
    from peers import llvm_symbolizer_answers, parse_perf_script  # noqa: E402

Text in, Python values out: no parser here runs a tool (each test keeps its command line, its
timeout and its way of failing) and none normalizes names (symbol versions, clone suffixes, "??")
beyond what its docstring says: that belongs to each comparison.

  llvm-symbolizer  llvm_symbolizer_answers (LLVM style, the default), llvm_symbolizer_chains (the
                   same, locations split by llvm_location), llvm_symbolizer_verbose (--verbose: also
                   the function's start file, line and address), llvm_symbolizer_json
                   (--output-style=JSON).
                   `stackprov symbolize` and `stackprov bundle lookup` print the same styles.
  perf script      perf_script_samples (every frame of every sample), parse_perf_script (user frames,
                   kernel frames apart), perf_addr_delta (how its addresses of an ET_EXEC differ).
  eu-stack         parse_eu_stack (-m; also `stackprov stack`'s text).
  llvm-readobj     parse_readobj_coff_symbols (--symbols of a PE/COFF file).
  nm               parse_nm (llvm-nm, binutils nm: "ADDR TYPE NAME" lines).
  gdb              parse_gdb_bt (`bt`, `thread apply all bt`), parse_gdb_info_symbol (`info symbol`),
                   gdb_frames_script and parse_gdb_frames (every thread's frames through gdb's Python API),
                   gdb_frame_details_script and parse_gdb_frame_details (per frame: its kind, and
                   `info registers` and/or `info args` in that frame).
  stackprov        real_frames (`stack --json` frames without the inferred tail-call frames).
"""
import json
import re
import struct

# ------------------------------------------------------------------ llvm-symbolizer

_LOCATION = re.compile(r"^(.*):(\d+):(\d+)$")


def llvm_symbolizer_answers(text):
    """llvm-symbolizer's LLVM-style output -> a list with one tuple per address, in input order, of its
    frames innermost first (the inlined ones, then the function holding them), each (function,
    location) as printed: "??" for an unknown function, location "file:line:column" ("??:0:0").
    Answers are separated by empty lines. Raises ValueError on an answer with an odd number of lines
    (a function without its location: truncated output)."""
    answers, block = [], []
    for line in text.split("\n") + [""]:
        if line:
            block.append(line)
            continue
        if block:
            if len(block) % 2:
                raise ValueError("truncated symbolizer output near %r" % block[-1])
            answers.append(tuple(zip(block[0::2], block[1::2])))
            block = []
    return answers


def llvm_location(location):
    """An LLVM-style location "file:line:column" -> (file, line, column); ("??", 0, 0) for anything
    else. An unknown file stays "??" (llvm-symbolizer prints "??:0:0")."""
    m = _LOCATION.match(location)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else ("??", 0, 0)


def llvm_symbolizer_chains(text):
    """llvm_symbolizer_answers with each location split by llvm_location -> a list with one list per
    address of (function, file, line, column) tuples, innermost first ("??" kept as printed)."""
    return [[(function,) + llvm_location(location) for function, location in answer]
            for answer in llvm_symbolizer_answers(text)]


def llvm_symbolizer_verbose(text):
    """llvm-symbolizer --verbose output -> a list with one list per address, in input order, of its
    frames innermost first, each a dict: "function" (the unindented line, "??" kept) and every
    indented "  Key: value" line below it under its key as printed ("Filename", "Function start
    filename", "Function start line", "Function start address", "Line", "Column", ...), values as
    strings. A key llvm leaves out (e.g. "Function start line" without DWARF) is absent. Answers are
    separated by empty lines."""
    answers, block = [], []
    for line in text.split("\n") + [""]:
        if not line:
            if block:
                answers.append(block)
                block = []
        elif line.startswith("  "):
            if not block:
                raise ValueError("verbose symbolizer output starts with a field: %r" % line)
            key, _, value = line.strip().partition(":")
            block[-1][key] = value.strip()
        else:
            block.append({"function": line})
    return answers


def llvm_symbolizer_json(text):
    """llvm-symbolizer --output-style=JSON output -> a list with one dict per address, in input order
    (its "Address", "ModuleName" and "Symbol": the frames innermost first, each with "FunctionName",
    "FileName", "Line", "Column", ...), as json.loads reads each non-empty line."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------ llvm-readobj, nm

_READOBJ_FIELD = re.compile(r"^\s{4}(Name|Value|Section|ComplexType|StorageClass|AuxSymbolCount): (.*)$")
_READOBJ_NUM = re.compile(r"\((?:0x)?([0-9a-fA-F]+)\)\s*$")


def parse_readobj_coff_symbols(text):
    """llvm-readobj --symbols of a PE/COFF file -> a list of dicts in table order, one per symbol
    record (auxiliary records are not symbols): "name", "value" (int, section-relative), "section"
    (the section's name as printed, e.g. ".text"; "IMAGE_SYM_UNDEFINED" and the like for the
    reserved numbers), "section_number" (int, from "(1)"; None for the reserved ones), "complex_type"
    and "storage_class" (ints, from "(0x2)"), "aux" (AuxSymbolCount)."""
    syms, cur = [], None
    for line in text.splitlines():
        if line == "  Symbol {":
            cur = {}
            syms.append(cur)
            continue
        m = _READOBJ_FIELD.match(line)
        if not m or cur is None:
            continue
        key, val = m.group(1), m.group(2).strip()
        if key == "Name":
            cur["name"] = val
        elif key == "Value":
            cur["value"] = int(val)
        elif key == "Section":
            n = re.match(r"^(.*) \((\d+)\)$", val)
            cur["section"] = n.group(1) if n else val
            cur["section_number"] = int(n.group(2)) if n else None
        elif key == "AuxSymbolCount":
            cur["aux"] = int(val)
        else:
            n = _READOBJ_NUM.search(val)
            cur["complex_type" if key == "ComplexType" else "storage_class"] = int(n.group(1), 16) if n else None
    return syms


def parse_nm(text):
    """nm output (binutils or llvm-nm, default format) -> a list of (address or None, type letter, name)
    in the order printed; an undefined symbol has no address."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and len(parts[1]) == 1:
            out.append((int(parts[0], 16), parts[1], parts[2]))
        elif len(parts) == 2 and len(parts[0]) == 1:
            out.append((None, parts[0], parts[1]))
    return out


# ------------------------------------------------------------------ perf script

_PERF_HEAD = re.compile(r"^(.*?)\s+(\d+)\s+(\d+)\.(\d{6}):")
_PERF_HEAD_ONE_LINE = re.compile(r"^\s*(.*?)\s+(\d+)\s+(\d+)\.(\d{6}):\s*(.*)$")
_PERF_FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")
_PERF_SYMOFF = re.compile(r"^(.*)\+0x([0-9a-f]+)$")


def _perf_frame(text):
    """One "ADDR SYM[+0xOFF] (DSO)" frame -> (addr, sym, symoff or None, dso), or None."""
    m = _PERF_FRAME.match(text)
    if not m:
        return None
    sym, off = m.group(2), None
    sm = _PERF_SYMOFF.match(sym)
    if sm:
        sym, off = sm.group(1), int(sm.group(2), 16)
    return (int(m.group(1), 16), sym, off, m.group(3))


def perf_script_samples(text, one_line=False):
    """`perf script -F comm,tid,time,ip,sym[,symoff],dso` output -> {(tid, time_us): (comm,
    [(addr, sym, symoff, dso), ...])}, in the order printed, frames leaf first with the kernel's
    included; symoff is None where perf printed none (no symoff field, or no symbol).

    By default the callchain form (a sample's header line, its frames on the indented lines below):
    a header is an unindented line, an unindented line that is not one ends the sample, and two
    samples with the same key share one frame list (appended in order; comm is the later one's).
    one_line=True also reads the one-line form perf prints for samples without a callchain (the frame
    on the header line, comm padded with spaces): a header may be indented by spaces (not by a tab),
    any other line while in a sample is tried as a frame, and a later sample with the same key
    replaces the earlier one."""
    samples, cur = {}, None
    for line in text.splitlines():
        if not line.strip():
            cur = None
            continue
        if one_line:
            m = _PERF_HEAD_ONE_LINE.match(line) if not line.startswith("\t") else None
            if m:
                cur = []
                samples[(int(m.group(2)), int(m.group(3)) * 1000000 + int(m.group(4)))] = (m.group(1).strip(), cur)
                if m.group(5).strip() and (frame := _perf_frame(m.group(5).strip())):
                    cur.append(frame)
                continue
        elif not line.startswith(("\t", " ")):
            m = _PERF_HEAD.match(line)
            if not m:
                cur = None
                continue
            key = (int(m.group(2)), int(m.group(3)) * 1000000 + int(m.group(4)))
            cur = samples[key][1] if key in samples else []
            samples[key] = (m.group(1).strip(), cur)
            continue
        if cur is not None and (frame := _perf_frame(line)):
            cur.append(frame)
    return samples


def parse_perf_script(text, comms=None, kernel_names=None):
    """perf_script_samples (callchain form) with the kernel's frames apart -> (samples, kernel_keys):
    samples {(tid, time_us): [(addr, sym, dso, sym_start), ...]} user frames only, leaf first
    (sym_start: addr - symoff, None without symoff); kernel_keys the set of the keys of samples with
    a kernel frame (dso "[kernel.kallsyms]" or another "[kernel..."). comms / kernel_names (optional
    dicts) receive each sample's comm and the names of its kernel frames, leaf first (only samples
    that have some)."""
    samples, kernel = {}, set()
    for key, (comm, frames) in perf_script_samples(text).items():
        user = samples[key] = []
        if comms is not None:
            comms[key] = comm
        for addr, sym, off, dso in frames:
            if dso.startswith("[kernel"):
                kernel.add(key)
                if kernel_names is not None:
                    kernel_names.setdefault(key, []).append(sym)
                continue
            user.append((addr, sym, dso, addr - off if off is not None else None))
    return samples, kernel


_DELTA = {}


def perf_addr_delta(path):
    """perf script prints ET_EXEC addresses relative to the mapping (file offsets); stackprov's
    module_offset is the link-time address. Their difference is p_vaddr - p_offset of the text segment."""
    if path not in _DELTA:
        d = 0
        try:
            with open(path, "rb") as f:
                h = f.read(64)
                if h[:4] == b"\x7fELF" and struct.unpack_from("<H", h, 16)[0] == 2:  # ET_EXEC
                    phoff, = struct.unpack_from("<Q", h, 32)
                    phentsize, phnum = struct.unpack_from("<HH", h, 54)
                    f.seek(phoff)
                    ph = f.read(phentsize * phnum)
                    for i in range(phnum):
                        ptype, flags, off, vaddr = struct.unpack_from("<IIQQ", ph, i * phentsize)
                        if ptype == 1 and flags & 1:
                            d = vaddr - off
                            break
        except OSError:
            pass
        _DELTA[path] = d
    return _DELTA[path]


# ------------------------------------------------------------------ eu-stack

_EU_TID = re.compile(r'^TID (\d+)(?: "[^"]*")?(?: \(python thread "(?:[^"\\]|\\.)*"\))?:$')
_EU_FRAME = re.compile(r"^#(\d+)\s+0x([0-9a-f]+)(.*)$")
_INFERRED = re.compile(r" \[[^]]*\binferred\]$")


def real_frames(frames):
    """`stackprov stack --json` frames without the inferred ones ("flags":["inferred"]: tail-call
    frames from DWARF call sites, not on the stack), for comparisons with eu-stack and perf, which
    show only the frames on the stack."""
    return [f for f in frames if "inferred" not in f.get("flags", ())]


def parse_eu_stack(text):
    """eu-stack -m output (or `stackprov stack`'s text: "TID n "name":" with the thread's comm, and
    ' (python thread "NAME")' before the colon for a Python thread with a threading name) ->
    {tid: [(pc, name, module), ...]}, frames innermost first; name as printed ("??" kept, "" when
    none), module "" without -m. stackprov's inferred frames ("[tail_call, inferred]": not on the
    stack, from DWARF call sites) are left out: eu-stack shows only the frames on the stack."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = _EU_TID.match(line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        m = _EU_FRAME.match(line)
        if m and cur is not None and not _INFERRED.search(m.group(3)):
            rest = m.group(3)
            module = ""
            if " - " in rest:
                rest, module = rest.rsplit(" - ", 1)
            cur.append((int(m.group(2), 16), rest.strip(), module.strip()))
    return threads


# ------------------------------------------------------------------ gdb

_GDB_THREAD = re.compile(r"^Thread (\d+) \((?:Thread 0x[0-9a-f]+ \(LWP (\d+)\)|LWP (\d+))")
_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+)")
_GDB_INFO_SYMBOL = re.compile(r"^(\S+)( \+ \d+)? in section ")


def parse_gdb_bt(text):
    """gdb's `bt` or `thread apply all bt` text -> {lwp: [frame, ...]}, frames in the order printed
    under the "Thread N (Thread 0x... (LWP n))" / "Thread N (LWP n)" header above them (a header
    printed again starts its list anew); frame lines before any header (a plain `bt`, the frame gdb
    prints when it loads a core) under None. A frame is a dict: "index" (the #N), "pc" (None where
    gdb prints no address: a frame at the start of a line, <signal handler called>), "function" (the
    first word after the address: the name, "??" when gdb has none; None for <signal handler
    called>) and "marker" (True for <signal handler called>)."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = _GDB_THREAD.match(line)
        if m:
            cur = threads[int(m.group(2) or m.group(3))] = []
            continue
        m = _GDB_FRAME.match(line)
        if m:
            if cur is None:
                cur = threads.setdefault(None, [])
            marker = "<signal handler called>" in line
            cur.append({"index": int(m.group(1)), "pc": int(m.group(2), 16) if m.group(2) else None,
                        "function": None if marker else m.group(3), "marker": marker})
    return threads


def parse_gdb_info_symbol(text):
    """gdb's `info symbol ADDR` output (of one command or several) -> one name per answer, in order:
    the symbol ("f" of "f + 12 in section .text of FILE"; gdb's spelling, e.g. "f[cold]"), "??" for
    "No symbol matches ..."."""
    names = []
    for line in text.splitlines():
        if line.startswith("No symbol matches"):
            names.append("??")
            continue
        m = _GDB_INFO_SYMBOL.match(line)
        if m:
            names.append(m.group(1))
    return names


_GDB_FRAMES_PY = r"""
import gdb, json
out = {}
for inf in gdb.inferiors():
    for t in inf.threads():
        t.switch()
        frames = []
        f = gdb.newest_frame()
        while f is not None and len(frames) < 512:
            if f.type() not in SKIP:
                frames.append([f.pc(), f.name() or ""])
            try:
                f = f.older()
            except gdb.error:
                break
        out[t.ptid[1]] = frames
print("GDBJSON " + json.dumps(out))
"""


def gdb_frames_script(tailcall=True):
    """A gdb Python script (`-ex "source FILE"`) that prints one line "GDBJSON {lwp: [[pc, name], ...]}"
    of every thread of every inferior, innermost first, at most 512 frames, name "" where gdb has
    none. Inline frames are skipped (they share their caller's pc); with tailcall=False tail-call
    frames too (gdb's reconstruction from DWARF call-site info: no frame on the stack).
    parse_gdb_frames reads what it prints."""
    skip = "(gdb.INLINE_FRAME,)" if tailcall else "(gdb.INLINE_FRAME, gdb.TAILCALL_FRAME)"
    return _GDB_FRAMES_PY.replace("SKIP", skip)


def parse_gdb_frames(text):
    """gdb's stdout with gdb_frames_script's line -> {lwp: [[pc, name], ...]}; None without that line."""
    for line in text.splitlines():
        if line.startswith("GDBJSON "):
            return {int(k): v for k, v in json.loads(line[8:]).items()}
    return None


_GDB_FRAME_DETAILS_PY = r"""
import gdb, json
KINDS = {gdb.NORMAL_FRAME: "normal", gdb.TAILCALL_FRAME: "tailcall", gdb.SIGTRAMP_FRAME: "sigtramp"}
REGS = "@REGS@"
ARGS = @ARGS@
out = {}
for inf in gdb.inferiors():
    for t in inf.threads():
        t.switch()
        frames = []
        f = gdb.newest_frame()
        while f is not None and len(frames) < 512:
            if f.type() != gdb.INLINE_FRAME:
                f.select()
                d = {"pc": f.pc(), "name": f.name() or "", "kind": KINDS.get(f.type(), "other")}
                if REGS:
                    d["info_registers"] = gdb.execute("info registers " + REGS, to_string=True)
                if ARGS:
                    types = []
                    try:
                        b = f.block()
                        while b is not None and b.function is None:
                            b = b.superblock
                        types = [[s.name, str(s.type)] for s in (b or []) if s.is_argument]
                    except RuntimeError:
                        pass
                    d["types"] = types
                    d["info_args"] = gdb.execute("info args", to_string=True)
                frames.append(d)
            try:
                f = f.older()
            except gdb.error:
                break
        out[t.ptid[1]] = frames
print("GDBFRAMES " + json.dumps(out))
"""

_GDB_INFO_REG = re.compile(r"^(\w+)\s+(<not saved>|<unavailable>|0x[0-9a-f]+|-?\d+)")
_GDB_INFO_ARG = re.compile(r"^(\w+) = (.*)$")


def gdb_frame_details_script(regs=(), args=False):
    """A gdb Python script (`-ex "source FILE"`) that prints one line "GDBFRAMES {lwp: [frame, ...]}":
    every thread's frames innermost first (inline frames skipped: they share their caller's pc and
    registers; tail-call frames kept, kind "tailcall"; a signal trampoline "sigtramp"; others
    "normal"), at most 512, each {"pc", "name", "kind"} and, in that frame (`frame N` selected),
    with `regs` (names, e.g. ["rip", "rsp", "rbx"]) the text of `info registers REGS`, with
    args=True the text of `info args` and each argument's type (gdb's Python API).
    parse_gdb_frame_details reads what it prints. One script for the tests of `stack --regs`,
    `stack --args` and tail-call frames (tests/integration/tailcall, tests/integration/args)."""
    return _GDB_FRAME_DETAILS_PY.replace("@REGS@", " ".join(regs)).replace("@ARGS@", "True" if args else "False")


def parse_gdb_frame_details(text):
    """gdb's stdout with gdb_frame_details_script's line -> {lwp: [{"pc", "name", "kind", and "regs":
    {name: value or None} (None where gdb prints <not saved>) when registers were asked for, "args":
    [{"name", "type", "value"}] when arguments were: each value as `info args` prints it ("<optimized
    out>" included), its type from gdb's Python API}]}; None without that line."""
    for line in text.splitlines():
        if line.startswith("GDBFRAMES "):
            out = {}
            for k, frames in json.loads(line[10:]).items():
                for f in frames:
                    if "info_registers" in f:
                        f["regs"] = parse_gdb_info_registers(f.pop("info_registers"))
                    if "info_args" in f:
                        types = dict((n, t) for n, t in f.pop("types"))
                        args = []
                        for l in f.pop("info_args").splitlines():
                            m = _GDB_INFO_ARG.match(l)
                            if m:
                                args.append({"name": m.group(1), "type": types.get(m.group(1)), "value": m.group(2)})
                        f["args"] = args
                out[int(k)] = frames
            return out
    return None


def parse_gdb_info_registers(text):
    """gdb's `info registers` text -> {name: value or None}: None where gdb prints <not saved> (or
    <unavailable>): the unwinder does not know it in that frame."""
    regs = {}
    for line in text.splitlines():
        m = _GDB_INFO_REG.match(line)
        if m:
            v = m.group(2)
            regs[m.group(1)] = None if v.startswith("<") else int(v, 0) & (2**64 - 1)
    return regs
