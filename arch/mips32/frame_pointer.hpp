// SPDX-License-Identifier: Apache-2.0
// mips32 fallback steps: no $fp chain (unreliable on mips), prologue analysis of `addiu sp` / `sw ra`.
#pragma once

#include "arch/mips32/registers.hpp"
#include "arch/mips32/return_address.hpp"

namespace stackprov::arch::mips32 {

/// mips o32 code keeps no usable $fp chain (GCC omits it from -O1 on, and
/// -O0 frames put the saved $fp at a frame-size-dependent offset), so this
/// rung never applies; prologue_step below is the fallback.
template <class Mem>
StepOutcome fp_step(Regs&, Mem&, uint64_t*) {
  return StepOutcome::kNotApplicable;
}

/// MIPS32 encodings used by the prologue analysis (MIPS32 ISA vol. II).
constexpr uint32_t kAddiuSpSp = 0x27bd0000u;  ///< addiu sp, sp, imm16 (opcode 9, rs = rt = 29)
constexpr uint32_t kSwToSp = 0xafa00000u;     ///< sw rt, off16(sp) (opcode 0x2b, base 29)
constexpr uint32_t kJrRa = 0x03e00008u;       ///< jr ra
constexpr uint32_t kMoveFpSp = 0x03a0f025u;   ///< move fp, sp (or fp, sp, zero)
constexpr uint32_t kMoveFpSpAddu = 0x03a0f021u;  ///< move fp, sp (addu fp, sp, zero)
constexpr uint32_t kMoveRaZero = 0x0000f825u;      ///< move ra, zero (or ra, zero, zero)
constexpr uint32_t kMoveRaZeroAddu = 0x0000f821u;  ///< move ra, zero (addu ra, zero, zero)
/// Instructions scanned backwards for the frame allocation, and forwards from it for saves.
constexpr int kPrologueScanBack = 1024;
constexpr int kPrologueScanForward = 64;

/// Prologue analysis, the mips fallback when no CFI covers the pc. Scans backwards
/// from the pc (bounded) for the frame allocation `addiu sp, sp, -N`, stopping at a
/// `jr ra` (the end of the previous function: this one has no frame), then forwards
/// from the allocation up to the pc for `sw $r, M(sp)` of $s0..$s7, $fp, $ra and a
/// `move fp, sp` (then $fp, not sp, is the frame base: alloca may have moved sp):
///   base = fp after `move fp, sp`, else sp;  cfa = sp' = base + N;
///   ra = *(base + M) if `sw ra, M(sp)` ran before the pc, else $ra (only for a leaf
///   at an exact pc: a caller frame made a call, so it must have saved $ra);
///   saved $s*/$fp = *(base + off).
/// The outermost frame: a caller frame that never saved $ra but cleared it (`move ra, zero`)
/// before the pc is the mips end-of-stack mark (glibc's start.S: `move $31, $0` before calling
/// __libc_start_main; gdb stops there too). Its return address is that zero: pc = 0, which the
/// walk reports as end_of_stack, as CFI's undefined return address does on x86_64.
/// `code(addr, buf, len)` reads code bytes at a runtime address (the module file);
/// `exact_pc`: the pc is not a return address (frame 0 or a signal-interrupted frame).
/// Instructions at addresses below the pc have run in both cases (for a return
/// address the call and its delay slot are below it).
///
/// analyze_prologue reads only code: its result is cached per pc by the unwinder;
/// apply_prologue turns it into the caller's registers.
template <bool BigEndian, class Code>
PrologueInfo analyze_prologue(uint64_t pc_reg, bool exact_pc, const Code& code) {
  PrologueInfo info;
  const uint64_t pc = pc_reg & ~3ull;
  auto insn_at = [&](uint64_t a, uint32_t* out) {
    uint8_t b[4];
    if (!code(a, b, 4)) return false;
    *out = static_cast<uint32_t>(load_word(b, 4, BigEndian));
    return true;
  };
  uint64_t alloc_at = 0;
  for (int i = 1; i <= kPrologueScanBack && pc >= 4ull * i; i++) {
    const uint64_t a = pc - 4ull * i;
    uint32_t insn;
    if (!insn_at(a, &insn)) return info;
    if ((insn & 0xffff0000u) == kAddiuSpSp && (insn & 0x8000u)) {
      alloc_at = a;
      info.frame_size = -static_cast<int32_t>(static_cast<int16_t>(insn & 0xffff));
      break;
    }
    if (insn == kJrRa) break;  // previous function's return: this one allocated no frame
  }
  if (alloc_at == 0) {
    // No frame: a leaf, $ra still holds the return address.
    if (exact_pc) info.kind = PrologueInfo::kLeaf;
    return info;
  }
  for (int i = 1; i <= kPrologueScanForward; i++) {
    const uint64_t a = alloc_at + 4ull * i;
    if (a >= pc) break;
    uint32_t insn;
    if (!insn_at(a, &insn)) break;
    if ((insn & 0xffe00000u) == kSwToSp) {
      const int rt = (insn >> 16) & 31;
      const bool callee_saved = (rt >= kS0 && rt <= kS7) || rt == kFp || rt == kRa;
      if (callee_saved && !((info.saved_mask >> rt) & 1)) {
        info.saved_mask |= 1u << rt;
        info.saved_off[rt] = static_cast<int16_t>(insn & 0xffff);
      }
    } else if (insn == kMoveFpSp || insn == kMoveFpSpAddu) {
      info.moves_fp = true;
    } else if (insn == kJrRa) {
      break;
    }
  }
  if (!((info.saved_mask >> kRa) & 1) && !exact_pc) {
    // The function cleared $ra before the pc and never saved it: the outermost frame. Scanned
    // backwards from before the call at pc - 8 (and its delay slot) to the previous function's
    // `jr ra` or to any earlier write of $ra — a call (jal, jalr, bal) or `lw ra` — so that the
    // clearing is the last write of $ra before this call (bounded, like the search above).
    for (int i = 3; i <= kPrologueScanBack && pc >= 4ull * i; i++) {
      uint32_t insn;
      if (!insn_at(pc - 4ull * i, &insn) || insn == kJrRa) break;
      const bool lw_ra = (insn >> 26) == 0x23 && ((insn >> 16) & 0x1f) == kRa;
      if (is_call(insn) || lw_ra) break;
      if (insn == kMoveRaZero || insn == kMoveRaZeroAddu) {
        info.kind = PrologueInfo::kEndOfStack;
        return info;
      }
    }
    return info;  // kNotApplicable
  }
  info.kind = PrologueInfo::kFrame;
  return info;
}

/// The caller's registers from an analysis of the frame's code (see analyze_prologue).
template <bool BigEndian, class Mem>
StepOutcome apply_prologue(const PrologueInfo& info, Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kPc) || !regs.has(kSp)) return StepOutcome::kNotApplicable;
  const uint64_t sp = regs.get(kSp);
  switch (info.kind) {
    case PrologueInfo::kLeaf: {
      if (!regs.has(kRa)) return StepOutcome::kNotApplicable;
      const uint64_t ra = regs.get(kRa);
      if (ra == regs.get(kPc)) return StepOutcome::kNotApplicable;
      regs.set(kPc, ra);
      *cfa_out = sp;
      return StepOutcome::kOk;
    }
    case PrologueInfo::kEndOfStack:
      regs.set(kPc, 0);
      regs.set(kSp, (sp + static_cast<uint64_t>(static_cast<int64_t>(info.frame_size))) & 0xffffffffull);
      *cfa_out = (sp + static_cast<uint64_t>(static_cast<int64_t>(info.frame_size))) & 0xffffffffull;
      return StepOutcome::kOk;
    case PrologueInfo::kFrame:
      break;
    default:
      return StepOutcome::kNotApplicable;
  }
  const uint64_t base = info.moves_fp && regs.has(kFp) ? regs.get(kFp) : sp;
  const uint64_t cfa = (base + static_cast<uint64_t>(static_cast<int64_t>(info.frame_size))) & 0xffffffffull;
  Regs next = regs;
  for (int r = 0; r < 32; r++) {
    if (!((info.saved_mask >> r) & 1)) continue;
    uint64_t v;
    if (!read_word(mem, (base + static_cast<int64_t>(info.saved_off[r])) & 0xffffffffull, 4, BigEndian, &v))
      return StepOutcome::kMemory;
    next.set(r, v);
  }
  if (!next.has(kRa)) return StepOutcome::kNotApplicable;
  next.set(kPc, next.get(kRa));
  next.set(kSp, cfa);
  regs = next;
  *cfa_out = cfa;
  return StepOutcome::kOk;
}

/// analyze_prologue then apply_prologue, uncached.
template <bool BigEndian, class Mem, class Code>
StepOutcome prologue_step(Regs& regs, Mem& mem, const Code& code, bool exact_pc, uint64_t* cfa_out) {
  if (!regs.has(kPc) || !regs.has(kSp)) return StepOutcome::kNotApplicable;
  return apply_prologue<BigEndian>(analyze_prologue<BigEndian>(regs.get(kPc), exact_pc, code), regs, mem, cfa_out);
}

}  // namespace stackprov::arch::mips32
