#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layer graph, enforced (issue 32; doc/architecture.md "Layers"): a file of a layer includes
only the layers ranked below it, and the C ABI shims (lib/capi/*.cpp) call no exported function
(a name declared SPROV_API in include/stackprov/*.h): a shim checks, converts and hands off to the
layers below, never back into the exported API. Run by the build before the library compiles
(CMake target layer_check), so that an upward include or a call back into the C ABI fails the
build, naming the file, the line and the layers or the function.

  layer_check.py SOURCE_DIR [--stamp FILE]
"""
import os
import re
import sys

# Rank of each folder of lib/ (and arch/): a layer may include layers of a lower rank only.
RANKS = {
    "core": 0,
    "evidence": 1, "bundle": 1,
    "object": 2,
    "elf": 3, "pe": 3, "pdb": 3, "minidump": 3, "macho": 3,
    "dwarf": 4,
    "arch": 5,
    "memory": 6,
    "runtime": 7, "perf": 7,
    "symbolize": 8,
    "unwind": 9,
    "trace": 10,
    "pipeline": 11,
    "capi": 12,
}
# The one place a lower layer names a higher one: the object-format registration list, the glue
# that names each format's implementation (doc/architecture.md "Adding an object format").
GLUE = {"lib/object/formats.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/', re.M)
# An exported function's declaration in a public header, and a name followed by a call's parenthesis.
EXPORTED = re.compile(r'\bSPROV_API\b[^;{(]*?\b(sprov_[a-z0-9_]+)\s*\(')
CALL = re.compile(r'\b(sprov_[a-z0-9_]+)\s*\(')
# Comments, string and character literals (kept as blanks of the same length: lines keep their numbers).
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def layer_of(rel):
    parts = rel.split("/")
    if parts[0] == "arch":
        return "arch"
    if parts[0] == "lib" and len(parts) > 2:
        return parts[1]
    return None


def check(src):
    bad = []
    for top in ("lib", "arch"):
        for dirpath, _, names in os.walk(os.path.join(src, top)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src)
                layer = layer_of(rel)
                if layer not in RANKS:
                    bad.append("%s: folder '%s' has no rank in cmake/layer_check.py" % (rel, layer))
                    continue
                if rel in GLUE:
                    continue
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    dst = m.group(1)
                    if dst == layer or dst not in RANKS:
                        continue  # its own layer, the public headers (stackprov/), system headers
                    if RANKS[dst] >= RANKS[layer]:
                        line = text.count("\n", 0, m.start()) + 1
                        bad.append("%s:%d: layer '%s' (rank %d) includes '%s/' (rank %d): only lower layers may be "
                                   "included" % (rel, line, layer, RANKS[layer], dst, RANKS[dst]))
    return bad


def exported_functions(src):
    """Every name declared SPROV_API in include/stackprov/*.h."""
    names = set()
    inc = os.path.join(src, "include", "stackprov")
    if not os.path.isdir(inc):
        return names
    for name in sorted(os.listdir(inc)):
        if name.endswith(".h"):
            text = NOT_CODE.sub(lambda m: " " * len(m.group(0)), open(os.path.join(inc, name), encoding="utf-8").read())
            names.update(EXPORTED.findall(text))
    return names


def check_capi_calls(src):
    """Calls of an exported function from lib/capi/*.cpp (definitions and `new sprov_xxx(...)` aside)."""
    exported = exported_functions(src)
    bad = []
    capi = os.path.join(src, "lib", "capi")
    if not exported or not os.path.isdir(capi):
        return bad
    for name in sorted(os.listdir(capi)):
        if not name.endswith(".cpp"):
            continue
        rel = "lib/capi/" + name
        raw = open(os.path.join(capi, name), encoding="utf-8", errors="replace").read()
        text = NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), raw)
        for m in CALL.finditer(text):
            fn = m.group(1)
            if fn not in exported:
                continue
            # The statement so far: a definition (SPROV_API ...) or a handle construction is no call.
            start = max(text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start()), text.rfind("{", 0, m.start()))
            head = text[start + 1:m.start()]
            if "SPROV_API" in head or re.search(r"\bnew\s*$", head):
                continue
            line = text.count("\n", 0, m.start()) + 1
            bad.append("%s:%d: calls the exported function %s(): a C ABI shim hands off to lib/pipeline and the "
                       "layers below, never back into the C ABI" % (rel, line, fn))
    return bad


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = check(sys.argv[1]) + check_capi_calls(sys.argv[1])
    for b in bad:
        print("layer_check: " + b, file=sys.stderr)
    if bad:
        return 1
    if len(sys.argv) == 4 and sys.argv[2] == "--stamp":
        with open(sys.argv[3], "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
