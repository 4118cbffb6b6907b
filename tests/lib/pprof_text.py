# SPDX-License-Identifier: Apache-2.0
"""A pprof profile decoded independently of stackprov: gunzip + `protoc --decode` with the public
schema (bindings/cli/pprof/profile.proto, upstream's profile.proto), its text format parsed here."""
import collections
import os
import re
import subprocess

PROTO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "bindings", "cli", "pprof", "profile.proto")


def protoc_string(v):
    """A protoc text-format string literal: C escapes (\\n, \\', \\ooo octal bytes of UTF-8)."""
    raw = v[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "replace")


def parse_protoc_text(text):
    """protoc --decode text format -> nested dicts of lists (scalars as str/int)."""
    root, stack = {}, []
    cur = root
    for raw in text.splitlines():
        t = raw.strip()
        if not t:
            continue
        if t == "}":
            cur = stack.pop()
        elif t.endswith("{"):
            node = {}
            cur.setdefault(t[:-1].strip(), []).append(node)
            stack.append(cur)
            cur = node
        else:
            k, _, v = t.partition(": ")
            v = protoc_string(v) if v.startswith('"') else (int(v) if re.match(r"^-?[0-9]+$", v) else v)
            cur.setdefault(k, []).append(v)
    return root


def decode(path, protoc="protoc", proto=PROTO):
    """The gzip'ed profile at `path` as parse_protoc_text gives it."""
    plain = subprocess.run(["gunzip", "-c", path], stdout=subprocess.PIPE, check=True).stdout
    dec = subprocess.run([protoc, "--decode=perftools.profiles.Profile", "-I", os.path.dirname(proto), proto],
                         input=plain, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return parse_protoc_text(dec.stdout.decode())


def folded_stacks(p):
    """A decoded profile's samples as folded stacks (`comm;root;...;leaf` -> summed first value): a
    Location's last Line is its physical function (the ones before it were inlined into it); kernel
    frames are the locations of a "[kernel..." mapping, marked `_[k]` as folded output marks them."""
    strings = p.get("string_table", [])
    funcs = {f["id"][0]: strings[f.get("name", [0])[0]] for f in p.get("function", [])}
    maps = {m["id"][0]: strings[m.get("filename", [0])[0]] for m in p.get("mapping", [])}
    locs = {l["id"][0]: funcs[l["line"][-1]["function_id"][0]] +
            ("_[k]" if maps.get(l.get("mapping_id", [0])[0], "").startswith("[kernel") else "")
            for l in p.get("location", [])}
    stacks = collections.Counter()
    for s in p.get("sample", []):
        comm = [strings[l["str"][0]] for l in s.get("label", []) if strings[l["key"][0]] == "comm"]
        stacks[";".join(comm + [locs[i] for i in reversed(s.get("location_id", []))])] += s["value"][0]
    return stacks
