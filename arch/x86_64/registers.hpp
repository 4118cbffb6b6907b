// SPDX-License-Identifier: Apache-2.0
// x86_64 arch_ops: DWARF register numbering, traits the unwinder is templated on, conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::arch::x86_64 {

/// DWARF register numbers, System V AMD64 ABI (version 1.0) figure 3.36.
enum DwarfReg : uint16_t {
  kRax = 0, kRdx = 1, kRcx = 2, kRbx = 3, kRsi = 4, kRdi = 5, kRbp = 6, kRsp = 7,
  kR8 = 8, kR9 = 9, kR10 = 10, kR11 = 11, kR12 = 12, kR13 = 13, kR14 = 14, kR15 = 15,
  kRip = 16,  ///< the return-address column
};

struct Traits {
  static constexpr Arch kArch = Arch::kX86_64;
  static constexpr int kNumRegs = 17;
  static constexpr uint16_t kSpReg = kRsp;
  static constexpr uint16_t kFpReg = kRbp;
  static constexpr uint16_t kPcReg = kRip;
  static constexpr uint16_t kRaReg = kRip;  ///< CIE return_address_register on x86_64
  static constexpr int kAddrSize = 8;
  static constexpr bool kBigEndian = false;
  /// rbx, rbp, r12-r15: kept across an unwind step when CFI gives no rule.
  static constexpr uint64_t kCalleeSaved =
      (1ull << kRbx) | (1ull << kRbp) | (1ull << kR12) | (1ull << kR13) | (1ull << kR14) | (1ull << kR15);
  /// Architecture-specific DW_CFA opcodes in this arch's CFI (dwarf::CfiVendorOps).
  static constexpr dwarf::CfiVendorOps kCfiVendorOps = dwarf::CfiVendorOps::kNone;
  /// Return addresses point after the call; lookups use ra - 1.
  static constexpr uint64_t kCallInsnMin = 1;
  static uint64_t strip_return_address(uint64_t ra) { return ra; }
  /// User space ends here: the lower canonical half of 4-level paging (128 TiB). A trace replay
  /// relocates modules below it (lib/capi/trace_replay.cpp).
  static constexpr uint64_t kUserAddrEnd = uint64_t{1} << 47;
  /// The farthest a trace replay moves a module: 1 GiB, small against user space so that most
  /// per-module draws fit.
  static constexpr uint64_t kMaxReplayShift = uint64_t{1} << 30;
};

using Regs = RegState<Traits::kNumRegs>;

const char* dwarf_reg_name(int reg);

// ---- conversions into DWARF numbering (conversions.cpp)

/// From `struct user_regs_struct` (ptrace PTRACE_GETREGS / NT_PRSTATUS regset),
/// <sys/user.h>: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi
/// orig_rax rip cs eflags rsp ss … (27 words, 216 bytes).
Status regs_from_user_regs(const void* data, size_t len, Regs* out);
/// From the kernel's `struct pt_regs` (eBPF programs; arch/x86/include/asm/ptrace.h):
/// the same order as user_regs_struct for its first 21 words (168 bytes).
Status regs_from_pt_regs(const void* data, size_t len, Regs* out);
/// From `ucontext_t` (glibc sys/ucontext.h: uc_mcontext.gregs at offset 40,
/// REG_R8=0 … REG_RIP=16).
Status regs_from_ucontext(const void* data, size_t len, Regs* out);
/// From an ELF core NT_PRSTATUS note descriptor (struct elf_prstatus: pr_reg at
/// offset 112, see linux/elfcore.h).
Status regs_from_prstatus(const void* data, size_t len, Regs* out);
/// From perf PERF_SAMPLE_REGS_USER values (packed in mask bit order,
/// arch/x86/include/uapi/asm/perf_regs.h: AX BX CX DX SI DI BP SP IP FLAGS CS SS
/// DS ES FS GS R8..R15 at bits 0..23).
Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out);
/// The perf sample_regs_user mask that captures every register the unwinder uses.
constexpr uint64_t kPerfRegsMask = 0xff0fffull;

/// Captures the caller's registers: pc = the return address of this call, sp =
/// the caller's sp after the call returns, callee-saved registers as the caller
/// had them. Async-signal-safe (capture.cpp, hand-written assembly).
extern "C" void stackprov_x86_64_capture_regs(uint64_t out[17]);

}  // namespace stackprov::arch::x86_64
