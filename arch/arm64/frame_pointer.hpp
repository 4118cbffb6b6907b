// SPDX-License-Identifier: Apache-2.0
// arm64 frame-pointer step: the x29 frame-record chain (AAPCS64 section 6.2.3).
#pragma once

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

/// One step along the frame-record chain. A frame record at x29 holds
/// [x29] = the caller's x29 and [x29 + 8] = x30 (the return address, possibly
/// PAC-signed):
///   cfa = x29 + 16; pc' = x30' = strip(*(x29 + 8)); x29' = *x29; sp' = cfa.
/// sp' is an upper bound guess (GCC puts the record at the bottom of the frame),
/// which only matters for the sp-must-advance check and later CFI steps that use
/// sp as CFA base (those are rare after a frame-pointer step: CFI-less code).
/// Not applicable when x29 is unknown, misaligned or below sp.
template <class Mem>
StepOutcome fp_step(Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kFp) || !regs.has(kSp)) return StepOutcome::kNotApplicable;
  const uint64_t fp = regs.get(kFp);
  if (fp == 0) return StepOutcome::kEnd;
  if ((fp & 7) != 0 || fp < regs.get(kSp)) return StepOutcome::kNotApplicable;
  uint64_t saved_fp, lr;
  if (!read_word(mem, fp, 8, false, &saved_fp) || !read_word(mem, fp + 8, 8, false, &lr))
    return StepOutcome::kMemory;
  lr = Traits::strip_return_address(lr);
  regs.set(kFp, saved_fp);
  regs.set(kLr, lr);
  regs.set(kPc, lr);
  regs.set(kSp, fp + 16);
  *cfa_out = fp + 16;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::arm64
