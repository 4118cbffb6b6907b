// SPDX-License-Identifier: Apache-2.0
// arm64 signal frames: __kernel_rt_sigreturn recognition and the rt_sigframe / sigcontext register layout.
#pragma once

#include <cstring>

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

/// `mov x8, #139 (__NR_rt_sigreturn); svc #0`: the vDSO's __kernel_rt_sigreturn
/// (arch/arm64/kernel/vdso/sigreturn.S) and qemu-user's sigtramp page
/// (linux-user/aarch64/signal.c setup_sigtramp). glibc has no restorer of its own.
constexpr uint8_t kSigreturnCode[8] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};

/// Sigreturn kinds (Ops::sigreturn_kind): arm64 has only rt_sigreturn.
constexpr int kSigreturnRt = 1;

inline bool is_sigreturn_trampoline(const uint8_t code[8]) {
  return std::memcmp(code, kSigreturnCode, sizeof(kSigreturnCode)) == 0;
}

/// Offset of sigcontext.regs[0] from the rt_sigframe that sp points at when the pc is
/// the trampoline: struct rt_sigframe { struct siginfo info (128); struct ucontext uc; }
/// (arch/arm64/kernel/signal.c; setup_return sets sp = the rt_sigframe and the handler
/// returns to the trampoline with that sp), uc.uc_mcontext at 176, regs after fault_address.
constexpr uint64_t kSigframeRegs = kSiginfoSize + kUcontextMcontext + kSigcontextRegs;  // 312

/// Restores the interrupted context from the rt_sigframe at sp:
///   cfa = sp; x0..x30, sp, pc = uc.uc_mcontext.regs[0..30], .sp, .pc.
/// The new frame's pc is the exact interrupted pc (looked up at pc, not pc - 1).
template <class Mem>
StepOutcome signal_step(Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kSp)) return StepOutcome::kNotApplicable;
  const uint64_t frame = regs.get(kSp);
  uint8_t raw[33 * 8];
  if (!mem.read(frame + kSigframeRegs, raw, sizeof(raw))) return StepOutcome::kMemory;
  for (int i = 0; i < 33; i++) regs.set(i, load_word(raw + 8 * i, 8, false));
  *cfa_out = frame;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::arm64
