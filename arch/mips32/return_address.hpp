// SPDX-License-Identifier: Apache-2.0
// mips32 return addresses: plausibility for stack scanning, and the caller of a bad pc: jal/jalr/bal at ra - 8.
#pragma once

#include <cstdint>

#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

/// JAL: opcode 3; JALR: SPECIAL funct 9; BAL/BGEZAL: REGIMM rt 17 (MIPS32 ISA vol. II).
inline bool is_call(uint32_t insn) {
  return (insn >> 26) == 3 || ((insn >> 26) == 0 && (insn & 0x3f) == 9) ||
         ((insn >> 26) == 1 && ((insn >> 16) & 0x1f) == 17);
}

/// Only JALR (SPECIAL funct 9): a call through a register, the only way to reach a pc outside
/// every module.
inline bool is_indirect_call(uint32_t insn) { return (insn >> 26) == 0 && (insn & 0x3f) == 9; }

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
