// SPDX-License-Identifier: Apache-2.0
// mips32 signal frames: sigreturn trampoline recognition (restore planned with the mips32 issue).
#pragma once

#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

/// `li v0, 4193 (__NR_rt_sigreturn, o32); syscall` = 0x24021061, 0x0000000c
/// (arch/mips/kernel/signal.c), in the target's byte order.
inline bool is_sigreturn_trampoline(const uint8_t code[8], bool big_endian) {
  auto word = [&](int i) -> uint32_t {
    const uint8_t* p = code + i * 4;
    return big_endian ? (uint32_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3])
                      : (uint32_t(p[3]) << 24 | p[2] << 16 | p[1] << 8 | p[0]);
  };
  return word(0) == 0x24021061u && word(1) == 0x0000000cu;
}

template <class Mem>
StepOutcome signal_step(Regs&, Mem&, uint64_t*) {
  return StepOutcome::kNotApplicable;
}

}  // namespace stackprov::arch::mips32
