# SPDX-License-Identifier: Apache-2.0
# stackprov.symbolize against llvm-symbolizer-14 (function, file:line:column of every frame of the
# inline chain), over the demo workload (C, -g -O2: inlined callees) and Debian's python3.11.
import os
import re
import subprocess

import stackprov
from conftest import need_env, need_tool
from peers import llvm_symbolizer_answers, llvm_symbolizer_chains, llvm_symbolizer_verbose  # tests/lib, on the path through conftest


def func_addresses(path, step):
    """Link-time addresses inside every sized FUNC symbol of `path` (readelf -s), every `step` bytes."""
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True, check=True).stdout
    addrs = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[3] == "FUNC":
            value, size = int(f[1], 16), int(f[2], 0)
            if value and size:
                addrs.update(range(value, value + size, step))
    return sorted(addrs)


def llvm_chains(path, addrs):
    """llvm-symbolizer-14 --obj PATH ADDR...: per address, [(function, file, line, column)]."""
    r = subprocess.run([need_tool("llvm-symbolizer-14"), "--obj=" + path] + ["0x%x" % a for a in addrs],
                       capture_output=True, text=True, check=True, timeout=120)
    chains = llvm_symbolizer_chains(r.stdout)
    assert len(chains) == len(addrs)
    return chains


def ours(chains):
    # llvm prints "??" for an unknown function or file and 0 for an unknown line or column (ours: None)
    return [[(f.function or "??", f.file or "??", f.line or 0, f.column or 0) for f in c] for c in chains]


def test_symbolize_matches_llvm_symbolizer_with_inline_chains():
    demo = need_env("STACKPROV_DEMO")
    addrs = func_addresses(demo, 1)
    got = stackprov.symbolize(demo, addrs, llvm_compat=True)
    assert ours(got) == llvm_chains(demo, addrs)
    assert any(len(c) > 1 for c in got), "the -O2 workload has inlined callees"
    assert all(f.resolver == "dwarf" for c in got for f in c if f.file)


def test_symbolize_default_names_match_llvm_for_c():
    # For a C program without clones the default naming is llvm's too.
    demo = need_env("STACKPROV_DEMO")
    addrs = func_addresses(demo, 7)
    assert ours(stackprov.symbolize(demo, addrs)) == llvm_chains(demo, addrs)


def test_symbolize_python_binary_matches_llvm_symbolizer():
    exe = os.path.realpath("/usr/bin/python3.11")
    addrs = func_addresses(exe, 4099)[:400]
    assert len(addrs) > 100
    assert ours(stackprov.symbolize(exe, addrs, llvm_compat=True)) == llvm_chains(exe, addrs)


def test_no_inlines_is_llvm_no_inlines():
    demo = need_env("STACKPROV_DEMO")
    addrs = func_addresses(demo, 3)
    r = subprocess.run([need_tool("llvm-symbolizer-14"), "--no-inlines", "--obj=" + demo] +
                       ["0x%x" % a for a in addrs], capture_output=True, text=True, check=True)
    want = [[s for frame in answer for s in frame] for answer in llvm_symbolizer_answers(r.stdout)]
    got = stackprov.symbolize(demo, addrs, inlines=False, llvm_compat=True)
    assert [len(c) for c in got] == [1] * len(addrs)
    assert [[c[0].function or "??", "%s:%d:%d" % (c[0].file or "??", c[0].line or 0, c[0].column or 0)]
            for c in got] == want


def test_symbolizer_object_and_uncovered_address():
    demo = need_env("STACKPROV_DEMO")
    with stackprov.Context() as ctx, ctx.symbolizer() as sym:
        # far past the file's last section: no symbol covers it, not an error
        [[f]] = sym.symbolize(demo, [0x7fffffff])
        assert (f.function, f.resolver, f.file, f.line, f.column) == ("", "none", None, None, None)
        # llvm's nearest-symbol rule names it after the last symbol (_end); llvm_compat does too
        assert ours(sym.symbolize(demo, [0x7fffffff], llvm_compat=True)) == llvm_chains(demo, [0x7fffffff])


def symbol_value(path, name):
    """st_value of the FUNC symbol `name` of `path` (readelf -s)."""
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True, check=True).stdout
    [value] = {int(f[1], 16) for f in (line.split() for line in out.splitlines())
               if len(f) >= 8 and f[3] == "FUNC" and f[7] == name}
    return value


def test_unknown_source_position_is_none(tmp_path):
    """issue 36: InlineFrame.file/.line/.column were ''/0 when unknown (Frame.file None): None
    where llvm-symbolizer-14 prints "??" or 0 -- the stripped /bin/true (no symbol, no line), a
    program with a symbol table and no DWARF (a function, no line) and one built with
    -gno-column-info (a line, column 0)."""
    src = tmp_path / "t.c"
    src.write_text("int main(void) { return 0; }\n")
    nodebug, nocolumn = str(tmp_path / "nodebug"), str(tmp_path / "nocolumn")
    subprocess.run([need_tool("cc"), "-O0", "-o", nodebug, str(src)], check=True)
    subprocess.run([need_tool("cc"), "-O0", "-g", "-gno-column-info", "-o", nocolumn, str(src)], check=True)
    true = os.path.realpath("/bin/true")
    header = subprocess.run(["readelf", "-hW", true], capture_output=True, text=True, check=True).stdout
    entry = int(re.search(r"Entry point address:\s+0x([0-9a-f]+)", header).group(1), 16)
    answers = {}
    for path, addr in ((true, entry), (nodebug, symbol_value(nodebug, "main")),
                       (nocolumn, symbol_value(nocolumn, "main"))):
        [want] = llvm_chains(path, [addr])
        [got] = stackprov.symbolize(path, [addr], llvm_compat=True)
        assert ours([got]) == [want]
        for f, (_, file, line, column) in zip(got, want):
            assert (f.file, f.line, f.column) == (None if file == "??" else file, line or None, column or None)
        answers[path] = want[-1]
    # each program is the case it stands for, by llvm-symbolizer's answer
    assert answers[true] == ("??", "??", 0, 0)
    assert answers[nodebug] == ("main", "??", 0, 0)
    assert answers[nocolumn][0] == "main" and answers[nocolumn][1].endswith("t.c") and \
        answers[nocolumn][2:] == (1, 0)


def test_unknown_start_position_is_none(tmp_path):
    """issue 36: InlineFrame.start_file/.start_line were ''/0 when unknown: None where
    llvm-symbolizer-14 --verbose prints no "Function start filename"/"Function start line", and
    llvm's values where it prints them -- every address of a -g program with an inlined callee
    from a header (its crt functions have no DWARF), a program without DWARF, the stripped
    /bin/true."""
    (tmp_path / "t.h").write_text("static inline __attribute__((always_inline)) int twice(int x) {\n"
                                  "  int r = x;\n  for (int i = 0; i < x; i++) r += i * r;\n  return r;\n}\n")
    src = tmp_path / "t.c"
    src.write_text('#include "t.h"\nint __attribute__((noinline)) work(int x) { return twice(x) + 1; }\n'
                   "int main(int argc, char **argv) { (void)argv; return work(argc); }\n")
    debug, nodebug = str(tmp_path / "debug"), str(tmp_path / "nodebug")
    # DWARF 4: llvm-symbolizer-14 prints an empty "Function start filename" for GCC 12's optimized
    # DWARF 5 (a start line without its file), which would be no answer to compare with
    subprocess.run([need_tool("cc"), "-O2", "-gdwarf-4", "-o", debug, str(src)], check=True)
    subprocess.run([need_tool("cc"), "-O2", "-o", nodebug, str(src)], check=True)
    true = os.path.realpath("/bin/true")
    header = subprocess.run(["readelf", "-hW", true], capture_output=True, text=True, check=True).stdout
    entry = int(re.search(r"Entry point address:\s+0x([0-9a-f]+)", header).group(1), 16)
    starts = {}
    for path, addrs in ((debug, func_addresses(debug, 1)), (nodebug, [symbol_value(nodebug, "main")]),
                        (true, [entry])):
        r = subprocess.run([need_tool("llvm-symbolizer-14"), "--verbose", "--obj=" + path] +
                           ["0x%x" % a for a in addrs], capture_output=True, text=True, check=True, timeout=120)
        want = llvm_symbolizer_verbose(r.stdout)
        got = stackprov.symbolize(path, addrs, llvm_compat=True)
        assert [len(c) for c in got] == [len(c) for c in want]
        for gc, wc in zip(got, want):
            for f, w in zip(gc, wc):
                expect = (w.get("Function start filename"),
                          int(w["Function start line"]) if "Function start line" in w else None)
                assert (f.start_file, f.start_line) == expect, (path, w)
                starts.setdefault(path, set()).add(expect)
    # each program is the case it stands for, by llvm-symbolizer's answer
    assert (str(src), 2) in starts[debug] and (str(tmp_path / "t.h"), 1) in starts[debug]
    assert (None, None) in starts[debug]  # _start and the other crt code
    assert starts[nodebug] == {(None, None)} and starts[true] == {(None, None)}
