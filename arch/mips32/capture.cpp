// SPDX-License-Identifier: Apache-2.0
// mips32 (o32, both byte orders): capture the calling thread's registers in DWARF numbering
// (hand-written assembly).
#include "arch/mips32/registers.hpp"

#if defined(__mips__) && defined(_ABIO32) && _MIPS_SIM == _ABIO32
// Slots are 32-bit words in DWARF numbering: $0..$31 = 0..31, 32..36 ($f0..$f4,
// not tracked) are zero, the pc (37) is the return address of this call ($ra).
// $sp is the caller's sp (no frame is allocated before it is stored).
asm(R"(
  .text
  .set push
  .set noreorder
  .set noat
  .set nomips16
  .globl stackprov_mips32_capture_regs
  .hidden stackprov_mips32_capture_regs
  .type stackprov_mips32_capture_regs, @function
  .ent stackprov_mips32_capture_regs
stackprov_mips32_capture_regs:
  .cfi_startproc
  sw $0, 0($4)
  sw $1, 4($4)
  sw $2, 8($4)
  sw $3, 12($4)
  sw $4, 16($4)
  sw $5, 20($4)
  sw $6, 24($4)
  sw $7, 28($4)
  sw $8, 32($4)
  sw $9, 36($4)
  sw $10, 40($4)
  sw $11, 44($4)
  sw $12, 48($4)
  sw $13, 52($4)
  sw $14, 56($4)
  sw $15, 60($4)
  sw $16, 64($4)
  sw $17, 68($4)
  sw $18, 72($4)
  sw $19, 76($4)
  sw $20, 80($4)
  sw $21, 84($4)
  sw $22, 88($4)
  sw $23, 92($4)
  sw $24, 96($4)
  sw $25, 100($4)
  sw $26, 104($4)
  sw $27, 108($4)
  sw $28, 112($4)
  sw $29, 116($4)
  sw $30, 120($4)
  sw $31, 124($4)
  sw $0, 128($4)
  sw $0, 132($4)
  sw $0, 136($4)
  sw $0, 140($4)
  sw $0, 144($4)
  sw $31, 148($4)
  jr $31
  nop
  .cfi_endproc
  .end stackprov_mips32_capture_regs
  .size stackprov_mips32_capture_regs, .-stackprov_mips32_capture_regs

# int sprov_snapshot_capture_self(ctx, opts, out): stores the registers as the
# caller has them at this call (38 u32 slots, above the o32 16-byte argument
# area) and passes them, as a fourth argument, to stackprov_capture_self_impl
# (lib/capi/snapshot.cpp). Frame 0 of the snapshot is the caller, with
# pc = $ra = the return address of this call and sp = the caller's sp. The
# caller's $gp is stored before this function sets up its own (o32 abicalls:
# entered with its address in $t9) and is restored on return.
  .globl sprov_snapshot_capture_self
  .type sprov_snapshot_capture_self, @function
  .ent sprov_snapshot_capture_self
sprov_snapshot_capture_self:
  .cfi_startproc
  addiu $sp, $sp, -176
  .cfi_def_cfa_offset 176
  sw $28, 128($sp)
  sw $0, 16($sp)
  sw $1, 20($sp)
  sw $2, 24($sp)
  sw $3, 28($sp)
  sw $4, 32($sp)
  sw $5, 36($sp)
  sw $6, 40($sp)
  sw $7, 44($sp)
  sw $8, 48($sp)
  sw $9, 52($sp)
  sw $10, 56($sp)
  sw $11, 60($sp)
  sw $12, 64($sp)
  sw $13, 68($sp)
  sw $14, 72($sp)
  sw $15, 76($sp)
  sw $16, 80($sp)
  sw $17, 84($sp)
  sw $18, 88($sp)
  sw $19, 92($sp)
  sw $20, 96($sp)
  sw $21, 100($sp)
  sw $22, 104($sp)
  sw $23, 108($sp)
  sw $24, 112($sp)
  sw $25, 116($sp)
  sw $26, 120($sp)
  sw $27, 124($sp)
  sw $30, 136($sp)
  sw $31, 140($sp)
  sw $0, 144($sp)
  sw $0, 148($sp)
  sw $0, 152($sp)
  sw $0, 156($sp)
  sw $0, 160($sp)
  sw $31, 164($sp)
  addiu $8, $sp, 176
  sw $8, 132($sp)
  sw $31, 168($sp)
  .cfi_offset 31, -8
  # $gp for this PIC function: _gp_disp is relative to the lui; $25 holds the entry
  lui $28, %hi(_gp_disp)
  addiu $28, $28, %lo(_gp_disp)
  addu $28, $28, $25
  addiu $28, $28, 164
  addiu $7, $sp, 16
  lw $25, %call16(stackprov_capture_self_impl)($28)
  jalr $25
  nop
  lw $28, 128($sp)
  lw $31, 168($sp)
  .cfi_restore 31
  jr $31
  addiu $sp, $sp, 176
  .cfi_def_cfa_offset 0
  .cfi_endproc
  .end sprov_snapshot_capture_self
  .size sprov_snapshot_capture_self, .-sprov_snapshot_capture_self
  .set pop
)");
#endif
