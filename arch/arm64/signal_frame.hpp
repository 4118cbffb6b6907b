// SPDX-License-Identifier: Apache-2.0
// arm64 signal frames: __kernel_rt_sigreturn recognition (restore is planned with the arm64 issue).
#pragma once

#include <cstring>

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

/// vDSO __kernel_rt_sigreturn: `mov x8, #139; svc #0` (arch/arm64/kernel/vdso/sigreturn.S).
constexpr uint8_t kSigreturnCode[8] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};

inline bool is_sigreturn_trampoline(const uint8_t code[8]) {
  return std::memcmp(code, kSigreturnCode, sizeof(kSigreturnCode)) == 0;
}

/// Not yet implemented: restoring from struct rt_sigframe (arch/arm64/kernel/signal.c).
template <class Mem>
StepOutcome signal_step(Regs&, Mem&, uint64_t*) {
  return StepOutcome::kNotApplicable;
}

}  // namespace stackprov::arch::arm64
