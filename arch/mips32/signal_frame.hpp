// SPDX-License-Identifier: Apache-2.0
// mips32 signal frames: sigreturn trampoline recognition and the sigframe / rt_sigframe layouts (o32).
#pragma once

#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

/// Sigreturn kinds (Ops::sigreturn_kind).
constexpr int kSigreturnRt = 1;   ///< `li v0, 4193 (__NR_rt_sigreturn); syscall`
constexpr int kSigreturnOld = 2;  ///< `li v0, 4119 (__NR_sigreturn); syscall` (no SA_SIGINFO)

constexpr uint32_t kLiV0RtSigreturn = 0x24021061u;  ///< addiu v0, zero, 4193
constexpr uint32_t kLiV0Sigreturn = 0x24021017u;    ///< addiu v0, zero, 4119
constexpr uint32_t kSyscall = 0x0000000cu;

/// The trampolines of arch/mips/vdso/sigreturn.S (and the older on-stack
/// sf_code/rs_code of arch/mips/kernel/signal.c, and qemu-user's sigtramp page),
/// in the target's byte order. Returns kSigreturnRt, kSigreturnOld or 0.
inline int sigreturn_kind(const uint8_t code[8], bool big_endian) {
  const uint32_t w0 = static_cast<uint32_t>(load_word(code, 4, big_endian));
  const uint32_t w1 = static_cast<uint32_t>(load_word(code + 4, 4, big_endian));
  if (w1 != kSyscall) return 0;
  if (w0 == kLiV0RtSigreturn) return kSigreturnRt;
  if (w0 == kLiV0Sigreturn) return kSigreturnOld;
  return 0;
}

inline bool is_sigreturn_trampoline(const uint8_t code[8], bool big_endian) {
  return sigreturn_kind(code, big_endian) != 0;
}

/// Where struct sigcontext is, from the frame sp points at on return to the
/// trampoline (arch/mips/kernel/signal.c, o32; setup_frame/setup_rt_frame set
/// sp = the frame and the handler restores it):
///   struct sigframe    { u32 sf_ass[4]; u32 sf_pad[2]; struct sigcontext sf_sc; … }     -> 24
///   struct rt_sigframe { u32 rs_ass[4]; u32 rs_pad[2]; struct siginfo rs_info (128);
///                        struct ucontext rs_uc; }  uc_mcontext at 24 in rs_uc            -> 176
constexpr uint64_t kSigframeSigcontext = 24;
constexpr uint64_t kRtSigframeSigcontext = 24 + 128 + kUcontextMcontext;

/// Restores the interrupted context:
///   cfa = sp; $0..$31 = sc_regs[i] (low halves); pc = sc_pc.
template <bool BigEndian, class Mem>
StepOutcome signal_step(Regs& regs, Mem& mem, int kind, uint64_t* cfa_out) {
  if (!regs.has(kSp)) return StepOutcome::kNotApplicable;
  const uint64_t frame = regs.get(kSp);
  const uint64_t sc = frame + (kind == kSigreturnRt ? kRtSigframeSigcontext : kSigframeSigcontext);
  uint8_t raw[kSigcontextRegs + 32 * 8];
  if (!mem.read(sc, raw, sizeof(raw))) return StepOutcome::kMemory;
  Regs r{};
  regs_from_sigcontext(raw, BigEndian, &r);
  regs = r;
  *cfa_out = frame;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::mips32
