// SPDX-License-Identifier: Apache-2.0
// x86_64 return addresses: plausibility for stack scanning, and the caller of a bad pc: is the instruction before ra a call?
#pragma once

#include <cstdint>

#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

/// `code` holds the 7 bytes before a candidate return address (code[6] is the
/// byte at ra - 1). True when they end with a call: E8 rel32 (5 bytes) or
/// FF /2 with a register, [reg], [reg+disp8], [reg+disp32] or SIB operand
/// (Intel SDM vol. 2A, CALL).
inline bool preceded_by_indirect_call(const uint8_t code[7]);

inline bool preceded_by_call(const uint8_t code[7]) {
  if (code[2] == 0xE8) return true;  // call rel32: opcode at ra-5 = code[2]
  return preceded_by_indirect_call(code);
}

/// Only the FF /2 forms: a call through a register or memory operand — the only way to reach a
/// pc outside every module (a direct call's target is in its own module or its PLT).
inline bool preceded_by_indirect_call(const uint8_t code[7]) {
  for (int len = 2; len <= 7; len++) {
    const uint8_t* p = code + 7 - len;
    int i = 0;
    if (len >= 3 && (p[0] & 0xF0) == 0x40) i = 1;  // REX prefix
    if (p[i] != 0xFF) continue;
    const uint8_t modrm = p[i + 1];
    if (((modrm >> 3) & 7) != 2) continue;
    const int mod = modrm >> 6, rm = modrm & 7;
    int need = i + 2;
    if (mod != 3 && rm == 4) need++;  // SIB
    if (mod == 1) need += 1;
    else if (mod == 2 || (mod == 0 && rm == 5)) need += 4;
    if (need == len) return true;
  }
  return false;
}

/// The caller of a frame whose pc is 0 or unmapped, entered by a call through
/// a bad pointer: the call pushed the return address and jumped, so nothing
/// has touched the stack since (as gdb's amd64 frameless-function fallback):
///   ra = *rsp; rsp' = rsp + 8; cfa = rsp'.
template <class Mem>
StepOutcome bad_pc_step(Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kRsp)) return StepOutcome::kNotApplicable;
  const uint64_t rsp = regs.get(kRsp);
  uint64_t ra;
  if (!read_word(mem, rsp, 8, false, &ra)) return StepOutcome::kMemory;
  regs.set(kRip, ra);
  regs.set(kRsp, rsp + 8);
  *cfa_out = rsp + 8;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::x86_64
