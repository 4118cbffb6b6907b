// SPDX-License-Identifier: Apache-2.0
// mips32 frame-pointer step: not applicable (frame pointers are unreliable on mips; prologue analysis is planned).
#pragma once

#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

/// mips o32 code rarely keeps a usable $fp chain; the fallback planned with the
/// mips32 issue is prologue analysis (`addiu sp, sp, -N` / `sw ra, M(sp)`).
template <class Mem>
StepOutcome fp_step(Regs&, Mem&, uint64_t*) {
  return StepOutcome::kNotApplicable;
}

}  // namespace stackprov::arch::mips32
