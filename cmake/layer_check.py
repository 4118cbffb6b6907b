#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layer graph, enforced (issue 32; doc/architecture.md "Layers"): a file of a layer includes
only the layers ranked below it. Run by the build before the library compiles (CMake target
layer_check), so that an upward include fails the build, naming the file, the line and both
layers.

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
    "elf": 3,
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


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = check(sys.argv[1])
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
