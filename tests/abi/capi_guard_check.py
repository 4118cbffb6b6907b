#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No exception crosses the C ABI (issue 18): every SPROV_API function defined in lib/capi/ either
runs its body inside guard()/guard_value() (lib/capi/internal.hpp) or calls only functions that
cannot throw: the allowlist below (accessors, casts), functions declared noexcept in lib/, and
other sprov_* entry points (each checked on its own). Prints each offender with its file
and line; exit 1 when there is one."""
import os
import re
import sys

# Calls that never throw: casts, container accessors, atomics, the noexcept error accessors.
NOTHROW = {
    "static_cast", "reinterpret_cast", "const_cast", "size", "empty", "c_str", "data", "load",
    "get", "last_error_code", "last_error_message", "error_message", "sizeof", "offsetof",
    "guard", "guard_value", "free", "strlen", "memcpy", "memset", "return", "if", "while", "for",
    "switch", "sprov_free",
}
DEF = re.compile(r"SPROV_API\s+[^;{()]*?\b(sprov_\w+)\s*\(")


def body_at(text, i):
    """The balanced {...} body starting at the first '{' at or after i (comments and literals skipped)."""
    j = text.index("{", i)
    depth, k = 0, j
    while k < len(text):
        c = text[k]
        if text.startswith("//", k):
            k = text.index("\n", k)
            continue
        if c in "\"'":
            k += 1
            while text[k] != c:
                k += 2 if text[k] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[j:k + 1]
        k += 1
    raise ValueError("unbalanced body")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "capi")
    bad, checked = [], 0
    # Functions the library declares noexcept (lib/**/*.hpp and the capi files' own helpers).
    nothrow_decl = set()
    lib = os.path.join(root, "..")
    for d, _, files in os.walk(lib):
        for f in files:
            if f.endswith((".hpp", ".cpp")):
                t = open(os.path.join(d, f)).read()
                nothrow_decl |= set(re.findall(r"\b(\w+)\s*\([^;{()]*\)\s*(?:const\s*)?noexcept\b", t))
    for name in sorted(os.listdir(root)):
        if not name.endswith(".cpp"):
            continue
        text = open(os.path.join(root, name)).read()
        for m in DEF.finditer(text):
            # A declaration (ends with ';' before any '{') is not a definition.
            semi, brace = text.find(";", m.end()), text.find("{", m.end())
            if brace < 0 or (0 <= semi < brace):
                continue
            checked += 1
            body = body_at(text, m.end())
            if re.search(r"\breturn\s+(?:[\w:]*::)?guard(_value)?\s*[(<]", body) or re.match(r"\{\s*guard\s*\(", body):
                continue
            calls = {c for c in re.findall(r"([A-Za-z_]\w*)\s*\(", body)} - NOTHROW - nothrow_decl
            calls -= {c for c in calls if c.isupper()}  # macros such as SPROV_OPTS_GET
            calls -= {c for c in calls if c.startswith("sprov_")}  # entry points: each checked here
            if calls:
                line = text.count("\n", 0, m.start()) + 1
                bad.append("lib/capi/%s:%d: %s is not guarded and calls %s" %
                           (name, line, m.group(1), ", ".join(sorted(calls))))
    for b in bad:
        print(b)
    print("%d SPROV_API definitions, %d unguarded" % (checked, len(bad)))
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
