// SPDX-License-Identifier: Apache-2.0
// arm64 return addresses: plausibility for stack scanning, and the caller of a bad pc: is the instruction before ra a BL/BLR?
#pragma once

#include <cstdint>

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

/// `code` holds the 4 bytes before the candidate (little-endian instruction).
/// BL: 0b100101 imm26; BLR: 0xd63f0000 | Rn << 5 (Arm ARM C6.2).
inline bool preceded_by_call(const uint8_t code[4]) {
  const uint32_t insn = code[0] | code[1] << 8 | code[2] << 16 | static_cast<uint32_t>(code[3]) << 24;
  return (insn & 0xfc000000u) == 0x94000000u || (insn & 0xfffffc1fu) == 0xd63f0000u;
}

/// The caller of a frame whose pc is 0 or unmapped, entered by BLR through a
/// bad pointer: the return address is still in x30 and sp is the caller's
/// (AAPCS64 5.3). The caller's own x30 is unknown (BLR overwrote it):
///   pc' = x30; sp' = sp; cfa = sp; x30' = unknown.
template <class Mem>
StepOutcome bad_pc_step(Regs& regs, Mem&, uint64_t* cfa_out) {
  if (!regs.has(kLr) || !regs.has(kSp)) return StepOutcome::kNotApplicable;
  const uint64_t ra = Traits::strip_return_address(regs.get(kLr));
  regs.set(kPc, ra);
  regs.clear(kLr);
  *cfa_out = regs.get(kSp);
  return StepOutcome::kOk;
}

/// Only BLR and its pointer-authenticating forms BLRAA/BLRAB/BLRAAZ/BLRABZ (Arm ARM C6.2): a
/// call through a register, the only way to reach a pc outside every module.
inline bool preceded_by_indirect_call(const uint8_t code[4]) {
  const uint32_t insn = code[0] | code[1] << 8 | code[2] << 16 | static_cast<uint32_t>(code[3]) << 24;
  return (insn & 0xfffffc1fu) == 0xd63f0000u || (insn & 0xfefff800u) == 0xd63f0800u;
}

}  // namespace stackprov::arch::arm64
