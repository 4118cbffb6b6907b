// SPDX-License-Identifier: Apache-2.0
// x86_64 signal frames: __restore_rt recognition and the rt_sigframe / ucontext register layout.
#pragma once

#include <cstring>

#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

/// glibc and musl __restore_rt: `mov $15, %rax; syscall` (15 = __NR_rt_sigreturn),
/// glibc sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c.
constexpr uint8_t kSigreturnCode[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

/// True when the 9 code bytes at the pc are the rt_sigreturn trampoline.
inline bool is_sigreturn_trampoline(const uint8_t code[9]) {
  return std::memcmp(code, kSigreturnCode, sizeof(kSigreturnCode)) == 0;
}

/// glibc's __start_context (sysdeps/unix/sysv/linux/x86_64/__start_context.S), where a function
/// started by makecontext returns: `mov %rbx,%rsp; mov (%rsp),%rdi; test %rdi,%rdi` (rbx holds the
/// stack slot of uc_link; a zero uc_link exits the thread, another context is resumed).
constexpr uint8_t kStartContextCode[10] = {0x48, 0x89, 0xdc, 0x48, 0x8b, 0x3c, 0x24, 0x48, 0x85, 0xff};

/// True when the 10 code bytes at a return address are __start_context: the frame is a
/// coroutine's entry, the end of the coroutine's own stack.
inline bool is_start_context(const uint8_t code[10]) {
  return std::memcmp(code, kStartContextCode, sizeof(kStartContextCode)) == 0;
}

/// Offset of uc_mcontext.gregs in ucontext_t (uc_flags, uc_link, stack_t).
constexpr uint64_t kUcontextGregs = 40;
/// gregs indices (glibc sys/ucontext.h REG_*; the kernel's sigcontext order).
constexpr uint64_t kGregRsp = 15, kGregRip = 16;

/// makecontext's uc_link slot at a coroutine entry (glibc sysdeps/unix/sysv/linux/x86_64/
/// makecontext.c: rbx = &sp[idx_uc_link], idx_uc_link = 1 + the arguments past the sixth, which
/// __start_context loads with `mov %rbx,%rsp; mov (%rsp),%rdi`). `entry_sp` is the trampoline
/// frame's sp (&sp[1]). rbx is callee-saved, so the walk's rbx at that frame is the slot unless a
/// function lost it; it must lie in [entry_sp, entry_sp + 8 * 64), 8-aligned (at most 64 stack
/// arguments), else the slot is unknown. Reads uc_link from it.
template <class Mem>
bool coroutine_uc_link(const Regs& regs, uint64_t entry_sp, Mem& mem, uint64_t* slot, uint64_t* uc_link) {
  if (!regs.has(kRbx)) return false;
  const uint64_t rbx = regs.get(kRbx);
  if (rbx < entry_sp || rbx - entry_sp >= 8 * 64 || (rbx & 7) != 0) return false;
  *slot = rbx;
  return mem.read(rbx, uc_link, 8);
}

/// The registers a swapcontext/getcontext saved in the ucontext_t at `uc` that a walk needs:
/// rip (swapcontext's return address), rsp (after that return), rbp, rbx, r12-r15 (glibc
/// sysdeps/unix/sysv/linux/x86_64/swapcontext.S saves these and rdi..r9, which no caller reads).
/// `regs` is replaced. False when unreadable, or rip or rsp is 0.
template <class Mem>
bool ucontext_resume_regs(Mem& mem, uint64_t uc, Regs& regs) {
  uint64_t g[17];
  if (uc + kUcontextGregs < uc || !mem.read(uc + kUcontextGregs, g, sizeof(g))) return false;
  if (g[kGregRip] == 0 || g[kGregRsp] == 0) return false;
  regs = Regs{};
  constexpr int kGregToDwarf[17] = {kR8,  kR9,  kR10, kR11, kR12, kR13, kR14, kR15, kRdi,
                                    kRsi, kRbp, kRbx, kRdx, kRax, kRcx, kRsp, kRip};
  for (int i : {4, 5, 6, 7, 10, 11, 15, 16}) regs.set(kGregToDwarf[i], g[i]);
  return true;
}

/// Restores the interrupted registers from the ucontext that rsp points at
/// when the pc is __restore_rt (the handler's `ret` popped pretcode, leaving
/// rsp = &rt_sigframe.uc; arch/x86/include/asm/sigframe.h).
///   cfa = rsp; every general register = uc.uc_mcontext.gregs[REG_*].
template <class Mem>
StepOutcome signal_step(Regs& regs, Mem& mem, uint64_t* cfa_out) {
  if (!regs.has(kRsp)) return StepOutcome::kNotApplicable;
  const uint64_t uc = regs.get(kRsp);
  uint64_t g[17];
  if (!mem.read(uc + kUcontextGregs, g, sizeof(g))) return StepOutcome::kMemory;
  constexpr int kGregToDwarf[17] = {kR8,  kR9,  kR10, kR11, kR12, kR13, kR14, kR15, kRdi,
                                    kRsi, kRbp, kRbx, kRdx, kRax, kRcx, kRsp, kRip};
  for (int i = 0; i < 17; i++) regs.set(kGregToDwarf[i], g[i]);
  *cfa_out = uc;
  return StepOutcome::kOk;
}

}  // namespace stackprov::arch::x86_64
