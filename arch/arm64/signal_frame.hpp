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

/// glibc's __startcontext (sysdeps/unix/sysv/linux/aarch64/setcontext.S), where a function started
/// by makecontext returns (makecontext sets x30 to it and x19 to uc_link): `mov x0, x19;
/// cbnz x0, __setcontext; b exit`, little-endian words (the branch targets vary), after the landing
/// pad ENTRY puts first: `bti c` in BTI builds, a `nop` in Debian 12's (llvm-objdump-14 of its
/// aarch64 libc.so.6: 0x3f980 nop, 0x3f984 mov x0, x19), none in older ones.
constexpr int kStartContextLen = 16;
inline bool is_start_context(const uint8_t code[16]) {
  auto body = [](const uint8_t* c) {
    const uint64_t w0 = load_word(c, 4, false), w1 = load_word(c + 4, 4, false), w2 = load_word(c + 8, 4, false);
    return w0 == 0xaa1303e0 &&                 // mov x0, x19 (orr x0, xzr, x19)
           (w1 & 0xff00001f) == 0xb5000000 &&  // cbnz x0, <imm19>
           (w2 & 0xfc000000) == 0x14000000;    // b <imm26>
  };
  const uint64_t pad = load_word(code, 4, false);
  return body(code) || ((pad == 0xd503201f || pad == 0xd503245f) && body(code + 4));  // nop, bti c
}

/// uc_link at a coroutine entry: makecontext keeps it in x19, callee-saved (glibc
/// sysdeps/unix/sysv/linux/aarch64/makecontext.c), so the walk's x19 at the entry is uc_link itself.
inline bool coroutine_uc_link(const Regs& regs, uint64_t* uc_link) {
  if (!regs.has(19)) return false;
  *uc_link = regs.get(19);
  return true;
}

/// ucontext_t offsets of uc_mcontext.regs[0], .sp and .pc (glibc's ucontext_i.sym: oX0 184, oSP 432,
/// oPC 440; the kernel's sigcontext after fault_address, at uc_mcontext 176).
constexpr uint64_t kUcontextX0 = kUcontextMcontext + kSigcontextRegs;  // 184
constexpr uint64_t kUcontextSp = kUcontextX0 + 31 * 8;                // 432
constexpr uint64_t kUcontextPc = kUcontextSp + 8;                     // 440

/// The registers a swapcontext/getcontext saved in the ucontext_t at `uc` that a walk needs: x19-x30
/// (x30 the return address), sp, and pc (= x30: getcontext stores its return address there; glibc
/// sysdeps/unix/sysv/linux/aarch64/getcontext.S). `regs` is replaced. False when unreadable or pc or
/// sp is 0.
template <class Mem>
bool ucontext_resume_regs(Mem& mem, uint64_t uc, Regs& regs) {
  uint8_t raw[(31 + 2) * 8];
  if (uc + kUcontextX0 < uc || !mem.read(uc + kUcontextX0, raw, sizeof(raw))) return false;
  const uint64_t sp = load_word(raw + 31 * 8, 8, false), pc = load_word(raw + 32 * 8, 8, false);
  if (sp == 0 || pc == 0) return false;
  regs = Regs{};
  for (int i = 19; i <= 30; i++) regs.set(i, load_word(raw + 8 * i, 8, false));
  regs.set(kSp, sp);
  regs.set(kPc, pc);
  return true;
}

}  // namespace stackprov::arch::arm64
