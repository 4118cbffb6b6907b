#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The execution oracle of compact unwind (issue 34, doc/macos.md "The execution oracle").

unicorn runs each Mach-O fixture (x86_64 and arm64, built by CMake from fixtures/ with clang-16 and
ld64.lld-16) from its entry to the end. A code hook decodes every call and return from the
instruction bytes into a shadow stack -- the true chain (each frame's pc and CFA) without any unwind
information. At chosen instructions (every function entry, the instructions of every prologue and
epilogue, every return, and a seeded random sample of the rest) it writes the thread's state as a raw
state document (doc/raw-state.md): registers, the stack bytes, the Mach-O module. One
`stackprov stack --raw DIR --json` unwinds them all; each stack must equal the executed chain frame
for frame: pc, sp, CFA, the function llvm-nm-16 names there, every callee-saved register (the
caller's value at its call; our unwinder's steps print them: macho_regs.cpp), every caller found by compact unwind, the walk ending at the entry's
sentinel return address (end_of_stack). Every compact-unwind mode must occur on the executed
chains, by the encodings llvm-objdump-16 --macho --unwind-info lists (not by ours).
"""
import argparse
import base64
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import unicorn
from unicorn import arm64_const as A
from unicorn import x86_const as X

STACK_BASE = 0x7F0000000
STACK_SIZE = 1 << 20
STACK_TOP = STACK_BASE + STACK_SIZE - 0x100
# The images run 0x20000000 above their link-time addresses (ASLR's slide): the module's load bias is
# not 0, so an unwinder mixing runtime and link-time addresses fails.
SLIDE = 0x20000000

X86_REGS = [("rax", X.UC_X86_REG_RAX), ("rdx", X.UC_X86_REG_RDX), ("rcx", X.UC_X86_REG_RCX), ("rbx", X.UC_X86_REG_RBX),
            ("rsi", X.UC_X86_REG_RSI), ("rdi", X.UC_X86_REG_RDI), ("rbp", X.UC_X86_REG_RBP), ("rsp", X.UC_X86_REG_RSP),
            ("r8", X.UC_X86_REG_R8), ("r9", X.UC_X86_REG_R9), ("r10", X.UC_X86_REG_R10), ("r11", X.UC_X86_REG_R11),
            ("r12", X.UC_X86_REG_R12), ("r13", X.UC_X86_REG_R13), ("r14", X.UC_X86_REG_R14), ("r15", X.UC_X86_REG_R15),
            ("rip", X.UC_X86_REG_RIP)]
# Callee-saved registers by DWARF number: x86_64 rbx rbp r12-r15, arm64 x19-x29.
X86_SAVED = {3: X.UC_X86_REG_RBX, 6: X.UC_X86_REG_RBP, 12: X.UC_X86_REG_R12, 13: X.UC_X86_REG_R13,
             14: X.UC_X86_REG_R14, 15: X.UC_X86_REG_R15}
ARM_SAVED = {n: getattr(A, "UC_ARM64_REG_X%d" % n) for n in range(19, 29)}
ARM_SAVED[29] = A.UC_ARM64_REG_FP
ARM_REGS = [("x%d" % i, getattr(A, "UC_ARM64_REG_X%d" % i)) for i in range(29)] + [
    ("fp", A.UC_ARM64_REG_FP), ("lr", A.UC_ARM64_REG_LR), ("sp", A.UC_ARM64_REG_SP), ("pc", A.UC_ARM64_REG_PC)]


def macho_layout(path):
    """(segments [(name, vmaddr, vmsize, fileoff, filesize)], entry address, __TEXT vmaddr) of a thin
    64-bit Mach-O, from its load commands (LC_SEGMENT_64, LC_MAIN)."""
    data = open(path, "rb").read()
    magic, _cpu, _sub, _ft, ncmds, _sz = struct.unpack_from("<IiiIII", data, 0)
    assert magic == 0xFEEDFACF, "%s: not a thin 64-bit Mach-O" % path
    off, segs, entryoff, text = 32, [], None, None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == 0x1B:  # LC_UUID
            uuid_off = off + 8
        if cmd == 0x19:  # LC_SEGMENT_64
            name = data[off + 8:off + 24].rstrip(b"\0").decode()
            vmaddr, vmsize, fileoff, filesize = struct.unpack_from("<QQQQ", data, off + 24)
            segs.append((name, vmaddr, vmsize, fileoff, filesize))
            if name == "__TEXT":
                text = vmaddr
        elif cmd == 0x80000028:  # LC_MAIN
            entryoff = struct.unpack_from("<Q", data, off + 8)[0]
        off += size
    assert text is not None and entryoff is not None, "%s: no __TEXT or LC_MAIN" % path
    return data, segs, text + entryoff, text, uuid_off


def uuid_at(data, off):
    return data[off:off + 16].hex()


def x86_kind(code):
    """'call', 'ret' or None for the x86_64 instruction bytes `code` (E8, FF /2, C3, C2, F3 C3)."""
    i = 0
    while i < len(code) and (0x40 <= code[i] <= 0x4F or code[i] in (0x66, 0x67, 0xF2, 0xF3, 0x2E, 0x3E)):
        if code[i] == 0xF3 and i + 1 < len(code) and code[i + 1] == 0xC3:
            return "ret"
        i += 1
    if i >= len(code):
        return None
    op = code[i]
    if op == 0xE8 or (op == 0xFF and i + 1 < len(code) and (code[i + 1] >> 3) & 7 == 2):
        return "call"
    if op in (0xC3, 0xC2):
        return "ret"
    return None


def arm_kind(code):
    w = struct.unpack("<I", bytes(code[:4]))[0]
    if (w & 0xFC000000) == 0x94000000 or (w & 0xFFFFFC1F) == 0xD63F0000:  # BL, BLR
        return "call"
    if (w & 0xFFFFFC1F) == 0xD65F0000:  # RET
        return "ret"
    return None


class Run:
    """One execution of a fixture with the shadow stack; `chosen` (instruction indices) get their
    state written."""

    def __init__(self, path, arch, slide):
        self.path, self.arch, self.slide = path, arch, slide
        self.data, self.segs, self.entry, self.text, self.uuid_off = macho_layout(path)
        self.uuid = uuid_at(self.data, self.uuid_off)
        # The runtime extent from the mach header (what a module list without the file gives).
        self.size = max(v + n for name, v, n, _o, _f in self.segs if name != "__PAGEZERO") - self.text
        self.gone_path = None  # where the bundle states say the image is (a path that no longer exists)
        self.entry += slide
        self.x86 = arch == "x86_64"

    def execute(self, chosen=None, out_dir=None, tag=""):
        uc = unicorn.Uc(unicorn.UC_ARCH_X86, unicorn.UC_MODE_64) if self.x86 else unicorn.Uc(unicorn.UC_ARCH_ARM64,
                                                                                            unicorn.UC_MODE_ARM)
        for name, vmaddr, vmsize, fileoff, filesize in self.segs:
            if vmsize == 0 or name == "__PAGEZERO":
                continue
            vmaddr += self.slide  # the fixtures hold no pointers to rebase: code is pc-relative
            start, end = vmaddr & ~0xFFF, (vmaddr + vmsize + 0xFFF) & ~0xFFF
            uc.mem_map(start, end - start)
            uc.mem_write(vmaddr, self.data[fileoff:fileoff + filesize])
        uc.mem_map(STACK_BASE, STACK_SIZE)
        sp_reg = X.UC_X86_REG_RSP if self.x86 else A.UC_ARM64_REG_SP
        if self.x86:
            uc.mem_write(STACK_TOP, b"\0" * 8)  # the sentinel return address 0
            uc.reg_write(sp_reg, STACK_TOP)
            bottom_cfa = STACK_TOP + 8
        else:
            uc.reg_write(sp_reg, STACK_TOP)
            uc.reg_write(A.UC_ARM64_REG_LR, 0)
            bottom_cfa = STACK_TOP
        saved_ids = X86_SAVED if self.x86 else ARM_SAVED
        # (return address, CFA of the frame it returns from, the caller's callee-saved registers then)
        shadow = [(0, bottom_cfa, {})]
        trace = []  # per instruction: (address, kind, kind of the instruction before it)
        expected = {}
        state = {"prev": None, "index": 0}
        kind_of = x86_kind if self.x86 else arm_kind
        regs = X86_REGS if self.x86 else ARM_REGS

        def hook(uc_, address, size, _user):
            prev = state["prev"]
            if prev is not None:
                pkind, paddr, psize, psp = prev
                if pkind == "call":  # nothing but the call ran since: the caller's registers are these
                    shadow.append((paddr + psize, psp, {n: uc_.reg_read(r) for n, r in saved_ids.items()}))
                elif pkind == "ret":
                    shadow.pop()
            code = uc_.mem_read(address, size)
            sp = uc_.reg_read(sp_reg)
            kind = kind_of(code)
            i = state["index"]
            trace.append((address, kind, prev[0] if prev else None))
            if chosen is not None and i in chosen:
                frames = [{"pc": address, "sp": sp, "cfa": shadow[-1][1],
                           "saved": {n: uc_.reg_read(r) for n, r in saved_ids.items()}}]
                for k in range(len(shadow) - 1, 0, -1):
                    frames.append({"pc": shadow[k][0], "sp": shadow[k][1], "cfa": shadow[k - 1][1], "saved": shadow[k][2]})
                name = "%s%06d.json" % (tag, i)
                expected[name] = frames
                for k, fr in enumerate(frames):
                    fr["function"] = function_at(self.syms, fr["pc"] - self.slide - (1 if k else 0))
                doc = {
                    "version": 1,
                    "arch": self.arch,
                    "tid": i + 1,
                    "registers": {n: "0x%x" % uc_.reg_read(r) for n, r in regs},
                    "memory": [{"address": "0x%x" % sp,
                                "base64": base64.b64encode(bytes(uc_.mem_read(sp, STACK_BASE + STACK_SIZE - sp))).decode()}],
                    "modules": [{"path": os.path.abspath(self.path), "load_address": "0x%x" % (self.text + self.slide)}],
                }
                with open(os.path.join(out_dir, name), "w") as f:
                    json.dump(doc, f)
                if self.gone_path:  # the same state naming the image by identity, its file gone
                    doc["modules"] = [{"path": self.gone_path, "load_address": "0x%x" % (self.text + self.slide),
                                       "identity": {"kind": "macho-uuid", "hex": self.uuid},
                                       "link_address": "0x%x" % self.text, "size": "0x%x" % self.size}]
                    with open(os.path.join(out_dir + "-bundle", name), "w") as f:
                        json.dump(doc, f)
            state["prev"] = (kind, address, size, sp)
            state["index"] = i + 1

        uc.hook_add(unicorn.UC_HOOK_CODE, hook)
        uc.emu_start(self.entry, 0, timeout=20 * 1000 * 1000)
        assert uc.reg_read(X.UC_X86_REG_RIP if self.x86 else A.UC_ARM64_REG_PC) == 0, "%s did not return to the sentinel" % self.path
        assert len(shadow) == 1, "%s: unbalanced calls and returns (%d left)" % (self.path, len(shadow))
        return trace, expected


def choose(trace, rng, sample):
    """Every function entry and the 8 instructions after it (prologues), every return and the 8
    instructions before it (epilogues), plus `sample` more at random."""
    must = set()
    for i, (_a, kind, prev) in enumerate(trace):
        if prev == "call" or i == 0:
            must.update(range(i, min(i + 9, len(trace))))
        if kind == "ret":
            must.update(range(max(0, i - 8), i + 1))
    rest = [i for i in range(len(trace)) if i not in must]
    return must | set(rng.sample(rest, min(sample, len(rest))))


def unwind_info_modes(objdump, path):
    """({function offset: encoding}, the sentinel's function offset) from llvm-objdump --macho
    --unwind-info (the independent decoder)."""
    out = subprocess.run([objdump, "--macho", "--unwind-info", path], check=True, capture_output=True, text=True).stdout
    enc = {}
    for m in re.finditer(r"function offset=0x([0-9a-f]+), encoding(\[\d+\])?=0x([0-9a-f]+)", out):
        # A compressed page's entries name their encoding's index, a regular page's do not.
        enc[int(m.group(1), 16)] = (int(m.group(3), 16), "compressed" if m.group(2) else "regular")
    sentinel = [int(m.group(1), 16) for m in re.finditer(r"function offset=0x([0-9a-f]+), 2nd level page offset=0x00000000", out)]
    assert enc and sentinel, "%s: llvm-objdump listed no compact-unwind entries" % path
    return enc, sentinel[-1]


def nm_functions(nm, path):
    """[(link-time address, name)] of the text symbols, by llvm-nm -n (names without Mach-O's '_')."""
    out = subprocess.run([nm, "-n", path], check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            syms.append((int(parts[0], 16), parts[2][1:] if parts[2].startswith("_") else parts[2]))
    return syms


def function_at(syms, addr):
    best = ""
    for a, n in syms:
        if a <= addr:
            best = n
    return best


def mode_names(arch, e):
    mode = e & 0x0F000000
    if arch == "x86_64":
        if mode == 0x01000000:
            return {"x86_64 RBP frame" + (" with registers" if e & 0x7FFF else "")}
        if mode == 0x02000000:
            return {"x86_64 frameless immediate"} | ({"x86_64 register permutation"} if (e >> 10) & 7 >= 2 else set())
        if mode == 0x03000000:
            return {"x86_64 frameless indirect"} | ({"x86_64 register permutation"} if (e >> 10) & 7 >= 2 else set())
        if mode == 0x04000000:
            return {"x86_64 DWARF"}
    else:
        if mode == 0x04000000:
            return {"arm64 frame" + (" with pairs" if e & 0xFFF else "")}
        if mode == 0x02000000:
            return {"arm64 frameless" + (" with a stack" if e & 0xFFF000 else "")}
        if mode == 0x03000000:
            return {"arm64 DWARF"}
    if e & 0x0FFFFFFF == 0:
        return {"%s encoding 0" % arch}
    return {"%s encoding 0x%08x" % (arch, e)}


REQUIRED = {"x86_64 RBP frame with registers", "x86_64 frameless immediate", "x86_64 frameless indirect",
            "x86_64 register permutation", "x86_64 DWARF", "arm64 frame with pairs", "arm64 frameless",
            "arm64 frameless with a stack", "arm64 DWARF", "x86_64 encoding 0", "arm64 encoding 0",
            "x86_64 no entry", "arm64 no entry", "a regular second-level page", "a compressed second-level page",
            "personality + LSDA"}


def compare(stdout, expected, caller_method):
    """The stacks of `stack --raw DIR --json` against the executed chains: (failures, frames, methods)."""
    got = {t["name"]: t for t in json.loads(stdout)["threads"]}
    failures, frames, methods = [], 0, {}
    for name, exp in sorted(expected.items()):
        t = got.get(name)
        if t is None:
            failures.append("%s: no stack in stackprov's output" % name)
            continue
        fr = t["frames"]
        why = []
        if len(fr) != len(exp):
            why.append("%d frames, the execution had %d" % (len(fr), len(exp)))
        for k, (g, e) in enumerate(zip(fr, exp)):
            pc, sp, cfa = int(g["pc"], 16), int(g["sp"], 16), int(g.get("cfa", "0x0"), 16)
            if pc != e["pc"] or sp != e["sp"] or (k + 1 < len(exp) and cfa != e["cfa"]):
                why.append("frame %d: pc 0x%x sp 0x%x cfa 0x%x, executed pc 0x%x sp 0x%x cfa 0x%x (%s)" %
                           (k, pc, sp, cfa, e["pc"], e["sp"], e["cfa"], g.get("function", "")))
            # Offline, a bundle names the frame (resolved_function: its DWARF or symbol ranges).
            named = g.get("function", "") or g.get("resolved_function", "")
            if named != e["function"]:
                why.append("frame %d: named %r, llvm-nm names 0x%x %r" % (k, named, e["pc"], e["function"]))
            if k > 0:
                methods[g["method"]] = methods.get(g["method"], 0) + 1
                if g["method"] != caller_method:
                    why.append("frame %d found by %s, not %s" % (k, g["method"], caller_method))
        if t.get("stop_reason") != "end_of_stack":
            why.append("stop %s" % t.get("stop_reason"))
        frames += len(exp)
        if why:
            failures.append("%s: %s\n    stackprov: %s" % (name, "; ".join(why[:4]),
                                                       " ".join("%s@%s" % (g["pc"], g.get("function", "")) for g in fr)))
    return failures, frames, methods


def bundle_check(args, work, gone, state_dir, expected, uuids):
    """Bundles of the images (ranges from the dSYM beside each, compact-unwind rows plus the
    first-frame rows), the images removed, the same states through `stack --raw --offline --store`:
    every stack must equal the executed chain as with the image (pc, sp, CFA, llvm-nm-16's names,
    callers by the bundle's rows, end_of_stack). A dSYM of another build is refused naming both
    UUIDs; a store without the state's UUID is refused naming it."""
    failures = []
    store = os.path.join(work, "store")
    images = sorted(os.path.join(gone, n) for n in os.listdir(gone) if not n.endswith(".dSYM"))
    t0 = time.time()
    b = subprocess.run([args.stackprov, "bundle", "build", "--store", store] + images, capture_output=True, text=True)
    if b.returncode != 0:
        return ["bundle build failed (%d): %s" % (b.returncode, b.stderr.strip())]
    digest = b.stdout.split()[-1]
    ins = subprocess.run([args.stackprov, "bundle", "inspect", digest, "--store", store], capture_output=True,
                         text=True).stdout
    print("bundle %s:" % digest)
    print("  " + "\n  ".join(l for l in ins.splitlines() if l.startswith(("bundle", "module", "  ranges"))))
    for n in os.listdir(gone):  # the images (and dSYMs) are gone
        p = os.path.join(gone, n)
        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    t1 = time.time()
    r = subprocess.run([args.stackprov, "stack", "--raw", state_dir, "--offline", "--store", store, "--json"],
                       capture_output=True, text=True)
    t2 = time.time()
    if r.returncode not in (0, 1) or not r.stdout.strip():
        return ["stack --raw --offline --store failed (%d): %s" % (r.returncode, r.stderr.strip()[:2000])]
    f, frames, methods = compare(r.stdout, expected, "cfi_bundle")
    failures += ["(bundle) " + x for x in f]
    print("bundle: %d states, %d frames compared with the images gone; caller frames by method %s" %
          (len(expected), frames, methods))
    print("time: bundle build %.1f s, stackprov --raw --offline %.1f s" % (t1 - t0, t2 - t1))
    # Another build: chain_x86_64 with its LC_UUID changed, beside the original's dSYM.
    src = [p for p in args.fixture if p.endswith("/chain_x86_64")][0].split("=", 1)[1]
    other = os.path.join(work, "other")
    os.makedirs(other)
    data, _s, _e, _t, uuid_off = macho_layout(src)
    data = bytearray(data)
    data[uuid_off + 15] ^= 0xFF
    other_uuid = bytes(data[uuid_off:uuid_off + 16]).hex()
    with open(os.path.join(other, "chain_x86_64"), "wb") as fh:
        fh.write(data)
    shutil.copytree(src + ".dSYM", os.path.join(other, "chain_x86_64.dSYM"))
    m = subprocess.run([args.stackprov, "bundle", "build", "--store", os.path.join(work, "store2"),
                        os.path.join(other, "chain_x86_64")], capture_output=True, text=True)
    norm = m.stderr.replace("-", "").lower()
    if m.returncode == 0 or other_uuid not in norm or uuids["chain_x86_64"] not in norm:
        failures.append("bundle build of an image beside a dSYM of another build: exit %d, %r (wanted a refusal naming "
                        "%s and %s)" % (m.returncode, m.stderr.strip(), other_uuid, uuids["chain_x86_64"]))
    # Its bundle (no dSYM) in a store of its own: a state of the original build is not unwound from it.
    shutil.rmtree(os.path.join(other, "chain_x86_64.dSYM"))
    m = subprocess.run([args.stackprov, "bundle", "build", "--store", os.path.join(work, "store2"),
                        os.path.join(other, "chain_x86_64")], capture_output=True, text=True)
    if m.returncode != 0:
        failures.append("bundle build of the other build failed: %s" % m.stderr.strip())
    one = sorted(n for n in expected if n.startswith("chain_x86_64_"))[0]
    m = subprocess.run([args.stackprov, "stack", "--raw", os.path.join(state_dir, one), "--offline", "--store",
                        os.path.join(work, "store2"), "--json", "--no-lines"], capture_output=True, text=True)
    text = (m.stdout + m.stderr).replace("-", "").lower()
    if m.returncode == 0 or uuids["chain_x86_64"] not in text:
        failures.append("a state of UUID %s with only a bundle of UUID %s in the store: exit %d, %r" %
                        (uuids["chain_x86_64"], other_uuid, m.returncode, (m.stdout + m.stderr).strip()[:500]))
    print("another build: bundle build refused: %s" % norm.strip()[:300])
    print("another build: stack refused: %s" % (m.stderr.strip() or m.stdout.strip())[:300])
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stackprov", required=True)
    ap.add_argument("--objdump", required=True)
    ap.add_argument("--nm", required=True)
    ap.add_argument("--regs", required=True, help="macho_regs: our unwinder's callee-saved registers per frame")
    ap.add_argument("--fixture", action="append", required=True, help="ARCH=PATH")
    ap.add_argument("--sample", type=int, default=120, help="random instructions per fixture beyond the forced ones")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", help="write the states here and keep them")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    print("seed %d (rerun with --seed %d)" % (seed, seed))
    out_dir = args.keep or tempfile.mkdtemp(prefix="macho-unicorn-")
    os.makedirs(out_dir, exist_ok=True)
    # The bundle check: copies of the images (and their dSYMs) that bundles are built from and that
    # are then removed; the same states naming them by identity go to OUT-bundle.
    work = tempfile.mkdtemp(prefix="macho-unicorn-bundles-")
    gone = os.path.join(work, "gone")
    os.makedirs(gone)
    os.makedirs(out_dir + "-bundle", exist_ok=True)
    expected, modes_seen, t0 = {}, set(), time.time()
    uuids = {}
    for spec in args.fixture:
        arch, path = spec.split("=", 1)
        run = Run(path, arch, SLIDE)
        run.gone_path = os.path.join(gone, os.path.basename(path))
        shutil.copy(path, run.gone_path)
        if os.path.isdir(path + ".dSYM"):
            shutil.copytree(path + ".dSYM", run.gone_path + ".dSYM")
        uuids[os.path.basename(path)] = run.uuid
        run.syms = nm_functions(args.nm, path)
        trace, _ = run.execute()
        chosen = choose(trace, rng, args.sample)
        trace2, exp = run.execute(chosen, out_dir, os.path.basename(path) + "_")
        assert trace2 == trace, "%s: the second execution differs from the first" % path
        expected.update(exp)
        enc, sentinel = unwind_info_modes(args.objdump, path)
        starts = sorted(enc)
        executed = {a - SLIDE - run.text for a, _k, _p in trace}
        for off in executed:
            k = max((s for s in starts if s <= off), default=None)
            if off >= sentinel:
                modes_seen.add("%s no entry" % arch)
            elif k is not None:
                modes_seen |= mode_names(arch, enc[k][0])
                modes_seen.add("a %s second-level page" % enc[k][1])
                if enc[k][0] & 0x40000000:
                    modes_seen.add("personality + LSDA")
        print("%s: %d instructions executed, %d states" % (path, len(trace), len(exp)))
    missing = REQUIRED - modes_seen
    assert not missing, "modes never executed: %s (seen: %s)" % (sorted(missing), sorted(modes_seen))
    t1 = time.time()
    r = subprocess.run([args.stackprov, "stack", "--raw", out_dir, "--json", "--no-lines"], capture_output=True, text=True)
    t2 = time.time()
    if r.returncode not in (0, 1) or not r.stdout.strip():
        sys.exit("stackprov stack --raw failed (%d): %s" % (r.returncode, r.stderr.strip()))
    failures, frames, methods = compare(r.stdout, expected, "compact_unwind")
    # Callee-saved registers: every frame's, as our unwinder's steps restore them (macho_regs).
    rr = subprocess.run([args.regs, out_dir], capture_output=True, text=True)
    if rr.returncode != 0:
        sys.exit("macho_regs failed (%d): %s %s" % (rr.returncode, rr.stdout[-500:], rr.stderr.strip()))
    regs_of = {}
    for line in rr.stdout.splitlines():
        p = line.split()
        if p[0] == "frame":
            regs_of.setdefault(p[1], []).append((int(p[3], 16), {int(kv.split("=")[0]): int(kv.split("=")[1], 16) for kv in p[5:]}))
    reg_checks = 0
    for name, exp in sorted(expected.items()):
        got_regs = regs_of.get(name, [])
        why = []
        if len(got_regs) != len(exp):
            why.append("%d frames stepped, the execution had %d" % (len(got_regs), len(exp)))
        for k, ((pc, regs), e) in enumerate(zip(got_regs, exp)):
            for n, v in sorted(e["saved"].items()):
                reg_checks += 1
                if n not in regs:
                    why.append("frame %d (pc 0x%x): register %d unknown, executed 0x%x" % (k, pc, n, v))
                elif regs[n] != v:
                    why.append("frame %d (pc 0x%x): register %d = 0x%x, executed 0x%x" % (k, pc, n, regs[n], v))
        if why:
            failures.append("%s (registers): %s" % (name, "; ".join(why[:4])))
    print("%d states, %d frames compared, %d callee-saved register values; caller frames by method %s; modes executed: %s" %
          (len(expected), frames, reg_checks, methods, ", ".join(sorted(modes_seen & REQUIRED))))
    print("time: execution + states %.1f s, stackprov %.1f s" % (t1 - t0, t2 - t1))
    failures += bundle_check(args, work, gone, out_dir + "-bundle", expected, uuids)
    if failures:
        print("%d of %d states differ from the execution (states in %s):" % (len(failures), len(expected), out_dir))
        for f in failures[:25]:
            print("  " + f)
        sys.exit(1)
    if not args.keep:
        shutil.rmtree(out_dir)
        shutil.rmtree(out_dir + "-bundle")
        shutil.rmtree(work)
    print("%d passed, 0 failed" % len(expected))


if __name__ == "__main__":
    main()
