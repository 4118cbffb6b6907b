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

/// glibc's mips __start_context (sysdeps/unix/sysv/linux/mips/makecontext.S, o32), where a function
/// started by makecontext returns: makecontext sets ra to it, s0 to uc_link and s1 to gp, so it is
/// `move gp, s1; beqz s0, 1f; move a0, zero; move a0, s0; lw t9, %got(__setcontext)(gp); jalr t9;
/// nop; move gp, s1; move a0, v0; 1: lw t9, %got(exit)(gp); jalr t9` in the target's byte order (the
/// branch and GOT offsets vary). Debian 12's: llvm-objdump-14 of /usr/mipsel-linux-gnu/lib/libc.so.6
/// at 0x3df3c (makecontext + 0xcc, the `addiu t9, t9, 204` makecontext stores as ra).
constexpr int kStartContextLen = 44;
inline bool is_start_context(const uint8_t* code, bool big_endian) {
  // `move` is `or rd, rs, zero` (funct 0x25) in Debian 12's binutils, `addu` (0x21) in older ones: the
  // mask drops the bit that tells them apart.
  static constexpr uint32_t kMove = 0xfffffffb;
  static constexpr uint32_t kMask[11] = {kMove, 0xffff0000, kMove,      kMove, 0xffff0000, 0xffffffff,
                                         0xffffffff, kMove,  kMove,      0xffff0000, 0xffffffff};
  static constexpr uint32_t kWant[11] = {
      0x0220e021,  // move gp, s1 (or/addu gp, s1, zero)
      0x12000000,  // beqz s0, <imm16>
      0x00002021,  // move a0, zero
      0x02002021,  // move a0, s0
      0x8f990000,  // lw t9, <imm16>(gp)
      0x0320f809,  // jalr t9
      0x00000000,  // nop
      0x0220e021,  // move gp, s1
      0x00402021,  // move a0, v0
      0x8f990000,  // lw t9, <imm16>(gp)
      0x0320f809,  // jalr t9
  };
  for (int i = 0; i < 11; i++)
    if ((static_cast<uint32_t>(load_word(code + 4 * i, 4, big_endian)) & kMask[i]) != kWant[i]) return false;
  return true;
}

/// uc_link at a coroutine entry: makecontext keeps it in s0, callee-saved, so the walk's s0 at the
/// entry is uc_link itself.
inline bool coroutine_uc_link(const Regs& regs, uint64_t* uc_link) {
  if (!regs.has(kS0)) return false;
  *uc_link = regs.get(kS0);
  return true;
}

/// ucontext_t offsets (o32, glibc's sys/ucontext.h: uc_mcontext at 24 = { u32 regmask, u32 status,
/// u64 pc, u64 gregs[32], ... }) of the pc and gregs[29] (sp) as 32-bit words: the low half of each
/// 64-bit slot, at +4 in big-endian.
template <bool BigEndian>
constexpr uint64_t kUcontextPcT = kUcontextMcontext + 8 + (BigEndian ? 4 : 0);
template <bool BigEndian>
constexpr uint64_t kUcontextSpT = kUcontextMcontext + kSigcontextRegs + 8 * kSp + (BigEndian ? 4 : 0);

/// The registers a swapcontext/getcontext saved in the ucontext_t at `uc` that a walk needs: s0-s7,
/// gp, sp, fp, ra and pc (getcontext stores its return address as the pc). `regs` is replaced.
/// False when unreadable or pc or sp is 0.
template <bool BigEndian, class Mem>
bool ucontext_resume_regs(Mem& mem, uint64_t uc, Regs& regs) {
  uint8_t raw[kSigcontextRegs + 32 * 8];
  if (uc + kUcontextMcontext < uc || !mem.read(uc + kUcontextMcontext, raw, sizeof(raw))) return false;
  Regs all{};
  regs_from_sigcontext(raw, BigEndian, &all);
  if (!all.has(kSp) || !all.has(kPc) || all.get(kSp) == 0 || all.get(kPc) == 0) return false;
  regs = Regs{};
  for (int i : {16, 17, 18, 19, 20, 21, 22, 23, int{kGp}, int{kSp}, int{kFp}, int{kRa}, int{kPc}})
    if (all.has(i)) regs.set(i, all.get(i));
  return true;
}

}  // namespace stackprov::arch::mips32
