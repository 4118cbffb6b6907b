// SPDX-License-Identifier: Apache-2.0
// x86_64: capture the calling thread's registers in DWARF numbering (hand-written assembly).
#include "arch/x86_64/registers.hpp"

#if defined(__x86_64__)
// void stackprov_x86_64_capture_regs(uint64_t out[17]) — out in %rdi.
// rsp/rip are stored as the caller sees them after this call returns.
asm(R"(
  .text
  .globl stackprov_x86_64_capture_regs
  .hidden stackprov_x86_64_capture_regs
  .type stackprov_x86_64_capture_regs, @function
stackprov_x86_64_capture_regs:
  .cfi_startproc
  movq %rax, 0(%rdi)
  movq %rdx, 8(%rdi)
  movq %rcx, 16(%rdi)
  movq %rbx, 24(%rdi)
  movq %rsi, 32(%rdi)
  movq %rdi, 40(%rdi)
  movq %rbp, 48(%rdi)
  leaq 8(%rsp), %rax
  movq %rax, 56(%rdi)
  movq %r8, 64(%rdi)
  movq %r9, 72(%rdi)
  movq %r10, 80(%rdi)
  movq %r11, 88(%rdi)
  movq %r12, 96(%rdi)
  movq %r13, 104(%rdi)
  movq %r14, 112(%rdi)
  movq %r15, 120(%rdi)
  movq (%rsp), %rax
  movq %rax, 128(%rdi)
  movq 0(%rdi), %rax
  ret
  .cfi_endproc
  .size stackprov_x86_64_capture_regs, .-stackprov_x86_64_capture_regs

# int sprov_snapshot_capture_self(ctx, opts, out): captures the registers as
# the caller has them at this call and passes them, as a fourth argument, to
# stackprov_capture_self_impl (lib/capi/snapshot.cpp). Frame 0 of the snapshot
# is therefore the caller, with pc = the return address of this call.
  .globl sprov_snapshot_capture_self
  .type sprov_snapshot_capture_self, @function
sprov_snapshot_capture_self:
  .cfi_startproc
  subq $152, %rsp
  .cfi_adjust_cfa_offset 152
  movq %rax, 0(%rsp)
  movq %rdx, 8(%rsp)
  movq %rcx, 16(%rsp)
  movq %rbx, 24(%rsp)
  movq %rsi, 32(%rsp)
  movq %rdi, 40(%rsp)
  movq %rbp, 48(%rsp)
  leaq 160(%rsp), %rax
  movq %rax, 56(%rsp)
  movq %r8, 64(%rsp)
  movq %r9, 72(%rsp)
  movq %r10, 80(%rsp)
  movq %r11, 88(%rsp)
  movq %r12, 96(%rsp)
  movq %r13, 104(%rsp)
  movq %r14, 112(%rsp)
  movq %r15, 120(%rsp)
  movq 152(%rsp), %rax
  movq %rax, 128(%rsp)
  movq %rsp, %rcx
  call stackprov_capture_self_impl
  addq $152, %rsp
  .cfi_adjust_cfa_offset -152
  ret
  .cfi_endproc
  .size sprov_snapshot_capture_self, .-sprov_snapshot_capture_self
)");
#endif
