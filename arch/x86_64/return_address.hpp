// SPDX-License-Identifier: Apache-2.0
// x86_64 return addresses: plausibility for stack scanning, the caller of a bad pc (is the instruction before ra a call?), return pads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/call_sites.hpp"
#include "arch/x86_64/insn_length.hpp"
#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

/// True when the 7 bytes before a candidate return address (`code`, code[6] is the byte at
/// ra - 1) end with one whole instruction that is a call of a kind `accept` takes: some suffix
/// of 2..7 bytes is exactly one instruction by insn_length (the decoder the return pads use),
/// so a call's prefixes, REX, ModRM, SIB and displacement are sized as it sizes them.
template <class Accept>
inline bool ends_with_call(const uint8_t code[7], Accept&& accept) {
  for (size_t len = 2; len <= 7; len++) {
    CallKind kind;
    if (insn_length(code + 7 - len, len, &kind) == len && accept(kind)) return true;
  }
  return false;
}

/// Scan plausibility: a near call, E8 rel32 or FF /2 with a register or memory operand (a far
/// call, FF /3, also pushes CS above the return address: not the frame the scan assumes).
inline bool preceded_by_call(const uint8_t code[7]) {
  return ends_with_call(code, [](CallKind k) { return k == CallKind::kDirect || k == CallKind::kIndirect; });
}

/// Only the FF /2 forms: a call through a register or memory operand — the only way to reach a
/// pc outside every module (a direct call's target is in its own module or its PLT).
inline bool preceded_by_indirect_call(const uint8_t code[7]) {
  return ends_with_call(code, [](CallKind k) { return k == CallKind::kIndirect; });
}

/// Return pads: the calls in `n` bytes of code at address `addr`, decoded linearly from the
/// first byte (an instruction boundary), as f(CallSite) with pad = the call's end: E8, FF /2
/// and FF /3, with any prefixes (`bnd`, `notrack`, ...). A byte that starts no valid encoding
/// is skipped and counted in `*undecoded` (when not null).
template <class F>
void for_each_call(const uint8_t* code, size_t n, uint64_t addr, size_t* undecoded, F&& f) {
  for (size_t i = 0; i < n;) {
    CallKind kind;
    const size_t len = insn_length(code + i, n - i, &kind);
    if (len == 0) {
      if (undecoded) ++*undecoded;
      i++;
      continue;
    }
    if (kind != CallKind::kNone) f(CallSite{addr + i, static_cast<uint32_t>(len), addr + i + len});
    i += len;
  }
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
