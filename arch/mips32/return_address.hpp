// SPDX-License-Identifier: Apache-2.0
// mips32 return addresses: plausibility for stack scanning, the caller of a bad pc (jal/jalr/bal at ra - 8), return pads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/call_sites.hpp"
#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

/// Which call an instruction word is (MIPS32 ISA vol. II).
enum class CallKind : uint8_t {
  kNone = 0,
  kJal,     ///< JAL: opcode 3
  kJalr,    ///< JALR: SPECIAL funct 9
  kBgezal,  ///< BGEZAL: REGIMM rt 17 (BAL is BGEZAL $zero)
  kBltzal,  ///< BLTZAL: REGIMM rt 16
};

inline CallKind call_kind(uint32_t insn) {
  const uint32_t op = insn >> 26;
  if (op == 3) return CallKind::kJal;
  if (op == 0 && (insn & 0x3f) == 9) return CallKind::kJalr;
  if (op == 1 && ((insn >> 16) & 0x1f) == 17) return CallKind::kBgezal;
  if (op == 1 && ((insn >> 16) & 0x1f) == 16) return CallKind::kBltzal;
  return CallKind::kNone;
}

/// JAL, JALR, BGEZAL/BAL: the calls scan plausibility and the prologue analysis stop at
/// (BLTZAL is counted by the return pads only).
inline bool is_call(uint32_t insn) {
  const CallKind k = call_kind(insn);
  return k == CallKind::kJal || k == CallKind::kJalr || k == CallKind::kBgezal;
}

/// Only JALR (SPECIAL funct 9): a call through a register, the only way to reach a pc outside
/// every module.
inline bool is_indirect_call(uint32_t insn) { return call_kind(insn) == CallKind::kJalr; }

/// Return pads: every call (JAL, JALR, BGEZAL/BAL, BLTZAL) among the 4-byte words of `n`
/// bytes of code at `addr` in the given byte order, as f(CallSite) with pad = call + 8 (the
/// delay slot executes first). microMIPS/MIPS16 code is not decoded.
template <class F>
void for_each_call(const uint8_t* code, size_t n, uint64_t addr, bool big_endian, F&& f) {
  for_each_word_call(
      code, n, addr, big_endian, 8, [](uint32_t w) { return call_kind(w) != CallKind::kNone; }, f);
}

/// The caller of a frame whose pc is 0 or unmapped, entered by JALR through a
/// bad pointer: the return address is still in $ra and $sp is the caller's
/// (o32 ABI). The caller's own $ra is unknown (JALR overwrote it):
///   pc' = $ra; sp' = sp; cfa = sp; $ra' = unknown.
template <class Mem>
StepOutcome bad_pc_step(Regs& regs, Mem&, uint64_t* cfa_out) {
  if (!regs.has(kRa) || !regs.has(kSp)) return StepOutcome::kNotApplicable;
  regs.set(kPc, regs.get(kRa));
  regs.clear(kRa);
  *cfa_out = regs.get(kSp);
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::mips32
