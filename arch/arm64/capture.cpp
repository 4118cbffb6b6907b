// SPDX-License-Identifier: Apache-2.0
// arm64: capture the calling thread's registers in DWARF numbering (hand-written assembly).
#include "arch/arm64/registers.hpp"

#if defined(__aarch64__)
// void stackprov_arm64_capture_regs(uint64_t out[33]) — out in x0.
// x0..x30 as the caller has them, sp = the caller's sp, pc (slot 32) = the
// return address of this call (x30).
asm(R"(
  .text
  .globl stackprov_arm64_capture_regs
  .hidden stackprov_arm64_capture_regs
  .type stackprov_arm64_capture_regs, %function
  .p2align 2
stackprov_arm64_capture_regs:
  .cfi_startproc
  stp x0, x1, [x0, #0]
  stp x2, x3, [x0, #16]
  stp x4, x5, [x0, #32]
  stp x6, x7, [x0, #48]
  stp x8, x9, [x0, #64]
  stp x10, x11, [x0, #80]
  stp x12, x13, [x0, #96]
  stp x14, x15, [x0, #112]
  stp x16, x17, [x0, #128]
  stp x18, x19, [x0, #144]
  stp x20, x21, [x0, #160]
  stp x22, x23, [x0, #176]
  stp x24, x25, [x0, #192]
  stp x26, x27, [x0, #208]
  stp x28, x29, [x0, #224]
  str x30, [x0, #240]
  mov x1, sp
  str x1, [x0, #248]
  str x30, [x0, #256]
  ldr x1, [x0, #8]
  ret
  .cfi_endproc
  .size stackprov_arm64_capture_regs, .-stackprov_arm64_capture_regs

// int sprov_snapshot_capture_self(ctx, opts, out): stores the registers as the
// caller has them at this call (33 u64 slots, DWARF numbering, on this frame)
// and passes them, as a fourth argument, to stackprov_capture_self_impl
// (lib/capi/snapshot.cpp). Frame 0 of the snapshot is the caller, with
// pc = x30 = the return address of this call and sp = the caller's sp.
  .globl sprov_snapshot_capture_self
  .type sprov_snapshot_capture_self, %function
  .p2align 2
sprov_snapshot_capture_self:
  .cfi_startproc
  sub sp, sp, #288
  .cfi_def_cfa_offset 288
  stp x0, x1, [sp, #0]
  stp x2, x3, [sp, #16]
  stp x4, x5, [sp, #32]
  stp x6, x7, [sp, #48]
  stp x8, x9, [sp, #64]
  stp x10, x11, [sp, #80]
  stp x12, x13, [sp, #96]
  stp x14, x15, [sp, #112]
  stp x16, x17, [sp, #128]
  stp x18, x19, [sp, #144]
  stp x20, x21, [sp, #160]
  stp x22, x23, [sp, #176]
  stp x24, x25, [sp, #192]
  stp x26, x27, [sp, #208]
  stp x28, x29, [sp, #224]
  str x30, [sp, #240]
  add x9, sp, #288
  str x9, [sp, #248]
  str x30, [sp, #256]
  stp x29, x30, [sp, #272]
  .cfi_offset x29, -16
  .cfi_offset x30, -8
  add x29, sp, #272
  mov x3, sp
  bl stackprov_capture_self_impl
  ldp x29, x30, [sp, #272]
  .cfi_restore x29
  .cfi_restore x30
  add sp, sp, #288
  .cfi_def_cfa_offset 0
  ret
  .cfi_endproc
  .size sprov_snapshot_capture_self, .-sprov_snapshot_capture_self
)");
#endif
