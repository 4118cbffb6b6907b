#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cmake/layer_check.py accepts the project's tree and refuses planted upward includes (a lower
layer including a higher one; two layers of one rank), naming the file, the line and the layers,
and C ABI shims that call an exported function (a name declared SPROV_API in include/stackprov/),
naming the file, the line and the function.

  layer_check_test.py LAYER_CHECK SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

checker, src = sys.argv[1], sys.argv[2]
failures = 0


def expect(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += not cond


def run(tree):
    p = subprocess.run([sys.executable, checker, tree], capture_output=True, text=True)
    return p.returncode, p.stderr


rc, err = run(src)
expect(rc == 0, "the project's tree passes (%s)" % err.strip()[:300])

with tempfile.TemporaryDirectory(prefix="sprov-layers-") as t:
    def put(rel, text):
        path = os.path.join(t, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write(text)
    put("lib/unwind/walk.hpp", '#include "core/types.hpp"\n#include "stackprov/stackprov.h"\n#include <vector>\n')
    put("lib/core/types.hpp", "// nothing\n")
    rc, err = run(t)
    expect(rc == 0, "downward includes, public and system headers pass (%s)" % err.strip())
    put("lib/core/types.hpp", '// a comment\n#include "unwind/walk.hpp"\n')
    rc, err = run(t)
    expect(rc == 1 and "lib/core/types.hpp:2: layer 'core' (rank 0) includes 'unwind/' (rank 9)" in err,
           "core including unwind fails, naming file, line and layers (%s)" % err.strip())
    put("lib/core/types.hpp", "// nothing\n")
    put("lib/perf/a.cpp", '#include "runtime/python.hpp"\n')
    rc, err = run(t)
    expect(rc == 1 and "layer 'perf' (rank 7) includes 'runtime/' (rank 7)" in err, "two layers of one rank fail")
    os.remove(os.path.join(t, "lib/perf/a.cpp"))
    put("lib/newlayer/x.cpp", "int x;\n")
    rc, err = run(t)
    expect(rc == 1 and "folder 'newlayer' has no rank" in err, "a new folder needs a rank")
    os.remove(os.path.join(t, "lib/newlayer/x.cpp"))

    # lib/capi calls no exported function: definitions, handle constructions, comments, strings and
    # internal functions pass; a call (also across lines, also of a void function) fails.
    put("include/stackprov/stackprov.h", "SPROV_API int sprov_thing_new(int a,\n    int b);\n"
        "SPROV_API void\nsprov_thing_free(struct sprov_thing* t);\nstruct sprov_thing;\n")
    put("lib/capi/thing.cpp", '#include "core/types.hpp"\n'
        "SPROV_API int sprov_thing_new(int a, int b) { return make(a, b); }\n"
        "SPROV_API void sprov_thing_free(struct sprov_thing* t) { delete t; }\n"
        "int make(int a, int b) { auto* t = new sprov_thing(a); // sprov_thing_free(t)\n"
        '  log("sprov_thing_new(1, 2)"); return sprov_thing_internal(a); }\n')
    rc, err = run(t)
    expect(rc == 0, "definitions, constructions, comments, strings and internal calls pass (%s)" % err.strip())
    put("lib/capi/thing.cpp", '#include "core/types.hpp"\n'
        "SPROV_API int sprov_thing_new(int a, int b) { return 0; }\n"
        "int make(int a) {\n  if (sprov_thing_new (a,\n 2) != 0) return 1;\n  sprov_thing_free(nullptr);\n  return 0;\n}\n")
    rc, err = run(t)
    expect(rc == 1 and "lib/capi/thing.cpp:4: calls the exported function sprov_thing_new()" in err and
           "lib/capi/thing.cpp:6: calls the exported function sprov_thing_free()" in err,
           "a shim calling exported functions fails, naming file, line and function (%s)" % err.strip())

sys.exit(1 if failures else 0)
