#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""x64 .pdata unwinding against RtlVirtualUnwind under wine (issue 33, doc/windows.md).

Fabricated states -- a pc at every instruction boundary of the chosen functions (prologs, bodies,
epilogs), random register values pointing into a 4 MiB buffer of seeded random bytes -- in the
fixtures (every unwind operation, chained infos, machine frames, a version-2 info), the harness's
own mingw code and wine's ntdll.dll, kernel32.dll and ucrtbase.dll. One wine process answers every
state with RtlLookupFunctionEntry + RtlVirtualUnwind (rtl_unwind.c); one run of pdata_diff
answers with one step of our unwinder over the same bytes. Every state's rip and sixteen
registers must be identical. The pcs come from llvm-objdump-14's disassembly and the function
table from this script's own reading of .pdata (not lib/pe).
"""
import argparse
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import wine  # noqa: E402

MEM_BASE = 0x200000000
SEED = 0x5EED0F5DA7A
WINE_DLL_DIR = "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Pe:
    """The few headers this test needs, read here (not through lib/pe)."""

    def __init__(self, path):
        self.path = path
        self.data = open(path, "rb").read()
        d = self.data
        pe = struct.unpack_from("<I", d, 0x3C)[0]
        if d[pe:pe + 4] != b"PE\0\0":
            fail(f"{path}: not a PE file")
        nsec, = struct.unpack_from("<H", d, pe + 6)
        self.timestamp, = struct.unpack_from("<I", d, pe + 8)
        opt_size, = struct.unpack_from("<H", d, pe + 20)
        opt = pe + 24
        if struct.unpack_from("<H", d, opt)[0] != 0x20B:
            fail(f"{path}: not PE32+")
        self.image_base, = struct.unpack_from("<Q", d, opt + 24)
        self.size_of_image, = struct.unpack_from("<I", d, opt + 56)
        ndirs, = struct.unpack_from("<I", d, opt + 108)
        self.exc_rva, self.exc_size = struct.unpack_from("<II", d, opt + 112 + 3 * 8) if ndirs > 3 else (0, 0)
        self.sections = []
        sh = opt + opt_size
        for i in range(nsec):
            vsize, va, rsize, roff = struct.unpack_from("<IIII", d, sh + 40 * i + 8)
            self.sections.append((va, vsize, roff, rsize))

    def at(self, rva, n):
        for va, vsize, roff, rsize in self.sections:
            if va <= rva and rva + n <= va + max(vsize, rsize):
                off = roff + (rva - va)
                return self.data[off:off + n].ljust(n, b"\0")
        return None

    def functions(self):
        raw = self.at(self.exc_rva, self.exc_size) if self.exc_size else b""
        return [struct.unpack_from("<III", raw, 12 * i) for i in range(len(raw) // 12)]

    def info_kinds(self, unwind_rva):
        """Kinds of a function's unwind info (for the coverage counts): ops, chained, version."""
        kinds = set()
        for _ in range(32):
            if unwind_rva & 1:
                kinds.add("indirect")
                e = self.at(unwind_rva & ~1, 12)
                if e is None:
                    return kinds
                unwind_rva = struct.unpack_from("<I", e, 8)[0]
                continue
            h = self.at(unwind_rva, 4)
            if h is None:
                return kinds
            ver, flags, count = h[0] & 7, h[0] >> 3, h[2]
            kinds.add(f"v{ver}")
            codes = self.at(unwind_rva + 4, 2 * count) or b""
            names = {0: "push", 1: "alloc_large", 2: "alloc_small", 3: "set_fpreg", 4: "save_nonvol",
                     5: "save_nonvol_far", 6: "epilog", 8: "save_xmm", 9: "save_xmm_far", 10: "machframe"}
            i = 0
            while i < count:
                op, info = codes[2 * i + 1] & 15, codes[2 * i + 1] >> 4
                kinds.add(names.get(op, f"op{op}"))
                i += {1: 2 + (info != 0), 4: 2, 5: 3, 8: 2, 9: 3}.get(op, 1)
            if not flags & 4:
                return kinds
            kinds.add("chained")
            chain = self.at(unwind_rva + 4 + 2 * ((count + 1) & ~1), 12)
            if chain is None:
                return kinds
            unwind_rva = struct.unpack_from("<I", chain, 8)[0]
        return kinds


def boundaries(objdump, path, image_base):
    """Instruction RVAs in disassembly order, and each one's text ("popq\t%rbx")."""
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", path], stdout=subprocess.PIPE, check=True).stdout
    rvas, text = [], {}
    for m in re.finditer(rb"^\s*([0-9a-f]+):\s*(.*)$", out, re.M):
        a = int(m.group(1), 16)
        if a >= image_base:
            rvas.append(a - image_base)
            text[a - image_base] = m.group(2).decode(errors="replace").strip()
    return rvas, text


def mem_word(addr):
    """The 8 bytes at addr of rtl_unwind's buffer (splitmix64 from SEED, word i = the (i+1)th output)."""
    def word(i):
        z = (SEED + (i + 1) * 0x9E3779B97F4A7C15) & (2 ** 64 - 1)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2 ** 64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2 ** 64 - 1)
        return z ^ (z >> 31)
    off = addr - MEM_BASE
    i, r = divmod(off, 8)
    b = struct.pack("<QQ", word(i), word(i + 1))
    return struct.unpack_from("<Q", b, r)[0]


REGS = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi"] + [f"r{i}" for i in range(8, 16)]


def tail_call_epilog(text, order, rva, image_base, begin, end, regs):
    """Known difference: wine 8.0's is_inside_epilog rejects an epilog that ends in a jmp out of the
    function (a tail call), which RtlVirtualUnwind on Windows (and wine from 9.x on) accepts; wine
    8.0 then applies the prolog codes. For such a pc this computes the epilog's answer itself from
    the disassembly: [add $n,%rsp | lea n(%reg),%rsp] pops* jmp <outside> -- (rip, regs) or None."""
    regs = list(regs)
    i = order.index(rva) if rva in order else -1
    if i < 0:
        return None
    first = True
    while i < len(order):
        t = text[order[i]].split("#")[0].strip()
        m_add = re.match(r"addq\s+\$(0x[0-9a-f]+|\d+), %rsp$", t)
        m_lea = re.match(r"leaq\s+(-?0x[0-9a-f]+|-?\d+)\(%(\w+)\), %rsp$", t)
        m_pop = re.match(r"popq\s+%(\w+)$", t)
        m_jmp = re.match(r"jmp\s+0x([0-9a-f]+)", t)
        if first and m_add:
            regs[4] += int(m_add.group(1), 0)
        elif first and m_lea and m_lea.group(2) in REGS:
            regs[4] = regs[REGS.index(m_lea.group(2))] + int(m_lea.group(1), 0)
        elif m_pop and m_pop.group(1) in REGS and m_pop.group(1) != "rsp":
            regs[REGS.index(m_pop.group(1))] = mem_word(regs[4])
            regs[4] += 8
        elif m_jmp:
            target = int(m_jmp.group(1), 16) - image_base
            if begin <= target < end:
                return None
            rip = mem_word(regs[4])
            regs[4] += 8
            return rip, regs
        else:
            return None
        first = False
        i += 1
    return None


ROW_REG = {"RAX": 0, "RCX": 1, "RDX": 2, "RBX": 3, "RSP": 4, "RBP": 5, "RSI": 6, "RDI": 7,
           **{f"R{i}": i for i in range(8, 16)}}


def apply_row(text, regs):
    """One step by a bundle row as `stackprov bundle unwind` prints it ("CFA=RBP+32: RSI=[CFA-24],
    RIP=[CFA-8]"): (rip, 16 registers), or None for a row that is not a compact rule (full, none,
    end-of-stack)."""
    m = re.match(r"CFA=(\w+)([+-]\d+)(?:: (.*))?$", text)
    if not m or m.group(1) not in ROW_REG:
        return None
    cfa = regs[ROW_REG[m.group(1)]] + int(m.group(2))
    out, rip = list(regs), None
    for item in (m.group(3) or "").split(", "):
        r = re.match(r"(\w+)=\[CFA([+-]\d+)?\]$", item)
        if not r:
            return None
        v = mem_word(cfa + int(r.group(2) or 0))
        if r.group(1) == "RIP":
            rip = v
        elif r.group(1) in ROW_REG:
            out[ROW_REG[r.group(1)]] = v
        else:
            return None
    if rip is None:
        return None
    out[4] = cfa
    return [rip] + out


def check_bundles(a, mods, pes, states, state_regs, theirs_res, texts):
    """The fixtures' bundles (`stackprov bundle build`: the pdata rows and the epilog rows found at
    build time) answer every state of those modules, frame-0 style, as RtlVirtualUnwind does: the
    image's code is not read, so an epilog is known only from the bundle's rows."""
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="pdata-bundle-") as work:
        compared = skipped = epilog = 0
        bad = []
        for mi, (name, path) in enumerate(mods):
            if not name.startswith("Z:"):
                continue  # the fixtures (wine's DLLs and the harness have no identity: no bundle)
            bundle = os.path.join(work, os.path.basename(path) + ".sbundle")
            b = subprocess.run([a.stackprov, "bundle", "build", "-o", bundle, path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            if b.returncode != 0:
                fail(f"bundle build {path}: {b.stderr}")
            idx = [i for i, st in enumerate(states) if st[0] == mi]
            rows = subprocess.run([a.stackprov, "bundle", "unwind", bundle] + ["0x%x" % (pes[mi].image_base + states[i][1])
                                                                                for i in idx],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if rows.returncode != 0 or len(rows.stdout.splitlines()) != len(idx):
                fail(f"bundle unwind {bundle}: exit {rows.returncode} {rows.stderr}")
            for i, row in zip(idx, rows.stdout.splitlines()):
                _, rva, cat, kinds, rng_f = states[i]
                got = apply_row(row, state_regs[i])
                if got is None:
                    skipped += 1
                    continue
                tv = [int(x, 16) for x in theirs_res[i].split()[2:]]
                if got != tv and rng_f is not None:
                    tc = tail_call_epilog(texts[mi][1], texts[mi][0], rva, pes[mi].image_base, rng_f[0], rng_f[1],
                                          state_regs[i])
                    if tc is not None:
                        tv = [tc[0]] + tc[1]
                compared += 1
                insn = texts[mi][1].get(rva, "")
                if rng_f is not None and re.match(r"(rep\s+)?ret|pop|jmp", insn):
                    epilog += 1
                if got != tv:
                    bad.append(f"{os.path.basename(path)} rva 0x{rva:x} ({cat}, {insn}): RtlVirtualUnwind "
                               f"{' '.join('%x' % v for v in tv)} / bundle row '{row}' {' '.join('%x' % v for v in got)}")
    print(f"bundles: {compared} states of the fixtures answered by their bundle's rows ({epilog} at a ret, pop or "
          f"jmp inside a function), {skipped} rows not compact (full, none or end-of-stack: no step from the bundle); "
          f"{time.time() - t0:.2f} s")
    if bad:
        print(f"{len(bad)} of {compared} bundle answers differ; first ones:")
        for x in bad[:25]:
            print("  " + x)
        fail("the bundle's rows differ from RtlVirtualUnwind")
    if epilog == 0:
        fail("no bundle state lies in an epilog")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--fixtures", nargs="*", default=[])
    ap.add_argument("--objdump", default="llvm-objdump-14")
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--min-states", type=int, default=10000)
    ap.add_argument("--stackprov", help="also check the fixtures' bundles (their pdata and epilog rows)")
    a = ap.parse_args()
    rng = random.Random(20261129)

    # Modules: (name rtl_unwind loads it by, path of the same file here).
    mods = [("self", a.harness)]
    mods += [("Z:" + os.path.abspath(p).replace("/", "\\"), p) for p in a.fixtures]
    for dll in ("ntdll.dll", "kernel32.dll", "ucrtbase.dll"):
        p = os.path.join(WINE_DLL_DIR, dll)
        if not os.path.exists(p):
            fail(f"{p} missing (wine64 installs it)")
        mods.append((dll, p))
    pes = [Pe(p) for _, p in mods]

    per_dll = max(1, (a.min_states - 2500) // 3)
    states = []  # (module index, rva, category, kinds, function range)
    texts = []
    coverage = {}
    for mi, pe in enumerate(pes):
        funcs = pe.functions()
        insns, text = boundaries(a.objdump, pe.path, pe.image_base)
        texts.append((insns, text))
        by_func = {}
        fi = 0
        funcs_sorted = sorted(funcs)
        for rva in insns:
            while fi < len(funcs_sorted) and funcs_sorted[fi][1] <= rva:
                fi += 1
            if fi < len(funcs_sorted) and funcs_sorted[fi][0] <= rva:
                by_func.setdefault(fi, []).append(rva)
        chosen = list(by_func)
        is_dll = mods[mi][0].endswith(".dll")
        if is_dll:
            # Every function with an unusual info, then random ones up to the budget.
            special = [f for f in chosen if pe.info_kinds(funcs_sorted[f][2]) & {"machframe", "chained", "v2", "indirect", "save_nonvol_far", "save_xmm_far", "alloc_large"}]
            rest = [f for f in chosen if f not in set(special)]
            rng.shuffle(rest)
            chosen = special[:150] + rest
        budget = per_dll if is_dll else (2000 if mi == 0 else 10 ** 9)
        n = 0
        for f in chosen:
            if n >= budget:
                break
            begin, end, unwind = funcs_sorted[f]
            kinds = pe.info_kinds(unwind)
            hdr = pe.at(unwind & ~1, 4) if not unwind & 1 else None
            prolog = hdr[1] if hdr else 0
            for rva in by_func[f]:
                cat = "prolog" if rva - begin < prolog else "body"
                states.append((mi, rva, cat, kinds, (begin, end)))
                n += 1
                for k in kinds | {cat}:
                    coverage[k] = coverage.get(k, 0) + 1
        # A few pcs outside every function: leaves.
        covered = set(r for rs in by_func.values() for r in rs)
        leaves = [r for r in insns if r not in covered][:50]
        for rva in leaves:
            states.append((mi, rva, "leaf", set(), None))
            coverage["leaf"] = coverage.get("leaf", 0) + 1

    lines = [f"module {name}" for name, _ in mods]
    state_regs = []
    for mi, rva, _, _, _ in states:
        regs = [MEM_BASE + 0x10000 + (rng.randrange(0, 0xF0000) & ~7) for _ in range(16)]
        state_regs.append(regs)
        lines.append(f"state {mi} {rva:x} " + " ".join(f"{r:x}" for r in regs))
    commands = "\n".join(lines) + "\n"
    with open(os.path.join(a.build_dir, "pdata-states.txt"), "w") as f:  # for a failure's reader
        f.write(commands)

    t0 = time.time()
    prefix = wine.prefix(a.build_dir)
    t1 = time.time()
    theirs = wine.run(prefix, [a.harness, f"{SEED:x}"], stdin=commands.encode())
    t2 = time.time()
    if theirs.returncode != 0:
        fail(f"rtl_unwind exited {theirs.returncode}: {theirs.stdout.decode(errors='replace')[-1000:]} {theirs.stderr.decode(errors='replace')[-1000:]}")
    tl = theirs.stdout.decode().splitlines()
    bases = {}
    for l in tl:
        if l.startswith("module "):
            _, i, b = l.split()
            bases[int(i)] = int(b, 16)
    if len(bases) != len(mods):
        fail(f"rtl_unwind loaded {len(bases)} of {len(mods)} modules: {tl[:10]}")
    ours_cmd = [f"module {i} {os.path.abspath(p)} {bases[i]:x}" for i, (_, p) in enumerate(mods)] + lines[len(mods):]
    t3 = time.time()
    ours = subprocess.run([a.ours, f"{SEED:x}"], input=("\n".join(ours_cmd) + "\n").encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    t4 = time.time()
    if ours.returncode != 0:
        fail(f"pdata_diff exited {ours.returncode}: {ours.stdout.decode()[-1000:]} {ours.stderr.decode()[-1000:]}")
    theirs_res = [l for l in tl if l.startswith("result ")]
    ours_res = ours.stdout.decode().splitlines()
    if len(theirs_res) != len(states) or len(ours_res) != len(states):
        fail(f"{len(states)} states, {len(theirs_res)} answers from wine, {len(ours_res)} from us")
    bad = []
    known = 0
    for (mi, rva, cat, kinds, rng_f), regs, t, o in zip(states, state_regs, theirs_res, ours_res):
        tv = [int(x, 16) for x in t.split()[2:]]
        ov = o.split()[2:] if o.startswith("result ") else [o]
        ov = [int(x, 16) if x != "?" else None for x in ov] if len(ov) == 17 else None
        if ov == tv:
            continue
        if rng_f is not None:
            tc = tail_call_epilog(texts[mi][1], texts[mi][0], rva, pes[mi].image_base, rng_f[0], rng_f[1], regs)
            if tc is not None and ov == [tc[0]] + tc[1]:
                known += 1
                coverage["tail-call epilog (wine 8.0 differs)"] = coverage.get("tail-call epilog (wine 8.0 differs)", 0) + 1
                continue
        bad.append(f"{os.path.basename(mods[mi][1])} rva 0x{rva:x} ({cat}, {sorted(kinds)}): wine {t} / ours {o}")
    print(f"states: {len(states)} over {len(mods)} modules; wine prefix {t1 - t0:.1f} s, wine run {t2 - t1:.1f} s, ours {t4 - t3:.2f} s")
    print("coverage: " + ", ".join(f"{k} {v}" for k, v in sorted(coverage.items())))
    if bad:
        print(f"{len(bad)} of {len(states)} states differ; first ones:")
        for b in bad[:25]:
            print("  " + b)
        fail("our unwinder differs from RtlVirtualUnwind")
    if len(states) < a.min_states:
        fail(f"only {len(states)} states (want {a.min_states})")
    if a.stackprov:
        check_bundles(a, mods, pes, states, state_regs, theirs_res, texts)
    for need in ("prolog", "body", "leaf", "chained", "machframe", "set_fpreg", "alloc_large", "save_nonvol", "v2"):
        if coverage.get(need, 0) == 0:
            fail(f"no state covers '{need}'")
    print(f"PASS: {len(states) - known} of {len(states)} states identical to RtlVirtualUnwind; {known} tail-call "
          "epilogs (wine 8.0 rejects them, Windows accepts them) equal to the epilog computed from llvm-objdump's text")


if __name__ == "__main__":
    main()
