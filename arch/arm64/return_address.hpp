// SPDX-License-Identifier: Apache-2.0
// arm64 return addresses: plausibility for stack scanning, the caller of a bad pc (is the instruction before ra a BL/BLR?), return pads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/arm64/registers.hpp"
#include "arch/call_sites.hpp"

namespace stackprov::arch::arm64 {

/// Which call an instruction word is (Arm ARM C6.2).
enum class CallKind : uint8_t {
  kNone = 0,
  kBl,    ///< BL: 0b100101 imm26
  kBlr,   ///< BLR: 0xd63f0000 | Rn << 5
  kBlra,  ///< BLRAA/BLRAB, BLRAAZ/BLRABZ: BLR authenticating the target pointer first
};

inline CallKind call_kind(uint32_t insn) {
  if ((insn & 0xfc000000u) == 0x94000000u) return CallKind::kBl;
  if ((insn & 0xfffffc1fu) == 0xd63f0000u) return CallKind::kBlr;
  if ((insn & 0xfefff800u) == 0xd63f0800u) return CallKind::kBlra;
  return CallKind::kNone;
}

/// `code` holds the 4 bytes before the candidate (little-endian instruction): BL or BLR. The
/// BLRA* forms are not taken here (only by preceded_by_indirect_call and the return pads).
inline bool preceded_by_call(const uint8_t code[4]) {
  const CallKind k = call_kind(static_cast<uint32_t>(load_word(code, 4, false)));
  return k == CallKind::kBl || k == CallKind::kBlr;
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
  const CallKind k = call_kind(static_cast<uint32_t>(load_word(code, 4, false)));
  return k == CallKind::kBlr || k == CallKind::kBlra;
}

/// Return pads: every call (BL, BLR, BLRA*) among the 4-byte words of `n` bytes of code at
/// `addr`, as f(CallSite) with pad = call + 4. The words are read in the module's byte order
/// (`big_endian`), as the bundle builder always has: A64 code is little-endian in either data
/// order, but an aarch64_be module (a target the unwinder does not walk) keeps its bundle bytes.
template <class F>
void for_each_call(const uint8_t* code, size_t n, uint64_t addr, bool big_endian, F&& f) {
  for_each_word_call(
      code, n, addr, big_endian, 4, [](uint32_t w) { return call_kind(w) != CallKind::kNone; }, f);
}

}  // namespace stackprov::arch::arm64
