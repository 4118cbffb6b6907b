#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Live stacks under wine (issue 33, doc/windows.md): walk_self.exe walks its own four threads
(three workers and the main thread, each down a chain with a frame register, a large allocation and
xmm saves) with RtlCaptureContext + RtlLookupFunctionEntry + RtlVirtualUnwind and prints, for each,
its registers, its stack bytes and every frame. Our unwinder walks the same registers and bytes with
the modules' files (the exe, wine's DLLs, each checked against the loaded image's size and
timestamp): every frame's pc and sp must equal wine's, frame for frame, to the end of the stack.
"""
import argparse
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import wine  # noqa: E402

WINE_DLL_DIR = "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def pe_size_and_stamp(path):
    d = open(path, "rb").read(4096)
    pe = struct.unpack_from("<I", d, 0x3C)[0]
    stamp, = struct.unpack_from("<I", d, pe + 8)
    size, = struct.unpack_from("<I", d, pe + 24 + 56)
    return size, stamp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    prefix = wine.prefix(a.build_dir)
    r = wine.run(prefix, [a.program])
    if r.returncode != 0:
        fail(f"walk_self exited {r.returncode}: {r.stdout.decode(errors='replace')[-500:]} {r.stderr.decode(errors='replace')[-500:]}")
    threads, modules, cur = [], [], None
    for line in r.stdout.decode().splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "thread":
            cur = {"id": int(w[1]), "memory": [], "frames": []}
            threads.append(cur)
        elif w[0] == "context":
            cur["context"] = w[1:]
        elif w[0] == "memory":
            cur["memory"].append(line)
        elif w[0] == "frame":
            cur["frames"].append((int(w[1], 16), int(w[2], 16)))
        elif w[0] == "module":
            modules.append((int(w[1], 16), int(w[2], 16), int(w[3], 16), line.split(None, 4)[4]))
        elif w[0] == "error":
            fail(line)
    if len(threads) != 4:
        fail(f"walk_self printed {len(threads)} threads, want 4")
    mod_lines = []
    for base, size, stamp, winpath in modules:
        name = winpath.replace("\\", "/").split("/")[-1]
        if winpath.lower().endswith(os.path.basename(a.program).lower()):
            path = a.program
        else:
            path = os.path.join(WINE_DLL_DIR, name.lower())
            if not os.path.exists(path):
                fail(f"no file for the loaded module {winpath}")
        if pe_size_and_stamp(path) != (size, stamp):
            fail(f"{path} is not the image loaded as {winpath} (size, timestamp {pe_size_and_stamp(path)} vs {(size, stamp)})")
        mod_lines.append(f"module {len(mod_lines)} {os.path.abspath(path)} {base:x}")
    total = 0
    for t in threads:
        cmd = "\n".join(mod_lines + t["memory"] + ["walk " + " ".join(t["context"])]) + "\n"
        o = subprocess.run([a.ours, "0"], input=cmd.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if o.returncode != 0:
            fail(f"pdata_diff exited {o.returncode}: {o.stdout.decode()[-500:]} {o.stderr.decode()[-500:]}")
        ours = [(int(x.split()[1], 16), int(x.split()[2], 16)) for x in o.stdout.decode().splitlines() if x.startswith("frame ")]
        methods = [int(x.split()[3]) for x in o.stdout.decode().splitlines() if x.startswith("frame ")]
        end = [x for x in o.stdout.decode().splitlines() if x.startswith("end ")]
        if ours != t["frames"]:
            print(f"thread {t['id']}: wine {len(t['frames'])} frames, ours {len(ours)} ({end})")
            for i in range(max(len(ours), len(t["frames"]))):
                w_ = t["frames"][i] if i < len(t["frames"]) else None
                o_ = ours[i] if i < len(ours) else None
                print(f"  {i}: wine {w_ and tuple(map(hex, w_))} ours {o_ and tuple(map(hex, o_))} {'' if w_ == o_ else '<--'}")
            fail(f"thread {t['id']}: our walk differs from RtlVirtualUnwind's")
        if any(m != 7 for m in methods[1:]):
            fail(f"thread {t['id']}: frames not found by the pdata table (methods {methods})")
        total += len(ours)
        print(f"thread {t['id']}: {len(ours)} frames equal ({end[0] if end else ''})")
    print(f"PASS: 4 threads, {total} frames equal to RtlVirtualUnwind's walk, every caller by cfi_pdata")


if __name__ == "__main__":
    main()
