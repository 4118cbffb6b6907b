// SPDX-License-Identifier: Apache-2.0
// x86_64 frame-pointer step: the rbp chain (push %rbp; mov %rsp,%rbp prologues).
#pragma once

#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

/// One step along the rbp chain:
///   cfa = rbp + 16; ra = *(rbp + 8); rbp' = *rbp; rsp' = cfa.
/// Not applicable when rbp is unknown, misaligned or below sp (it then does
/// not point into the stack frames above us).
template <class Mem>
StepOutcome fp_step(Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kRbp) || !regs.has(kRsp)) return StepOutcome::kNotApplicable;
  const uint64_t rbp = regs.get(kRbp);
  if (rbp == 0) return StepOutcome::kEnd;
  if ((rbp & 7) != 0 || rbp < regs.get(kRsp)) return StepOutcome::kNotApplicable;
  uint64_t saved_rbp, ra;
  if (!read_word(mem, rbp, 8, false, &saved_rbp) || !read_word(mem, rbp + 8, 8, false, &ra))
    return StepOutcome::kMemory;
  regs.set(kRbp, saved_rbp);
  regs.set(kRsp, rbp + 16);
  regs.set(kRip, ra);
  *cfa_out = rbp + 16;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::x86_64
