// SPDX-License-Identifier: Apache-2.0
// arm64 arch_ops: DWARF register numbering, traits the unwinder is templated on, conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::arch::arm64 {

/// DWARF register numbers, "DWARF for the Arm 64-bit Architecture" (aadwarf64)
/// table 1: x0..x30 = 0..30, sp = 31. The pc has no DWARF number in the table
/// (32 is reserved for it by GCC/LLVM's ELR_mode column) and is kept in 32.
enum DwarfReg : uint16_t {
  kX0 = 0, kX8 = 8, kX16 = 16, kX19 = 19, kX28 = 28,
  kFp = 29,  ///< x29, the frame-record pointer (AAPCS64 6.2.3)
  kLr = 30,  ///< x30, the link register: the CIE return-address column
  kSp = 31,
  kPc = 32,
};

struct Traits {
  static constexpr Arch kArch = Arch::kArm64;
  static constexpr int kNumRegs = 33;  ///< x0..x30, sp, pc
  static constexpr uint16_t kSpReg = kSp;
  static constexpr uint16_t kFpReg = kFp;
  static constexpr uint16_t kPcReg = kPc;
  static constexpr uint16_t kRaReg = kLr;  ///< CIE return_address_register
  static constexpr int kAddrSize = 8;
  static constexpr bool kBigEndian = false;
  static constexpr uint64_t kCalleeSaved = 0x7ff80000ull;  ///< x19..x30 (AAPCS64 6.1.1)
  /// Architecture-specific DW_CFA opcodes in this arch's CFI (dwarf::CfiVendorOps).
  static constexpr dwarf::CfiVendorOps kCfiVendorOps = dwarf::CfiVendorOps::kAarch64;
  /// Return addresses point after the BL; lookups use ra - 1 (inside the BL).
  static constexpr uint64_t kCallInsnMin = 1;
  /// Strips pointer-authentication bits: a PAC-signed x30 (PACIASP) carries the
  /// signature above the 48-bit user VA (Arm ARM D8.8, "Pointer authentication"),
  /// the same as XPACLRI. Applied to every unwound return address, signed or not:
  /// user addresses never use bits 48..63 with the default 48-bit VA.
  static uint64_t strip_return_address(uint64_t ra) { return ra & kVaMask; }
  static constexpr uint64_t kVaMask = 0x0000ffffffffffffull;
  /// Where a trace replay's relocated modules must end (lib/capi/trace_replay.cpp): 128 TiB,
  /// within the 256 TiB user space of the default 48-bit VA (and the bound replays have used).
  static constexpr uint64_t kUserAddrEnd = uint64_t{1} << 47;
  /// The farthest a trace replay moves a module: 1 GiB, small against user space so that most
  /// per-module draws fit.
  static constexpr uint64_t kMaxReplayShift = uint64_t{1} << 30;
};

using Regs = RegState<Traits::kNumRegs>;

const char* dwarf_reg_name(int reg);

// ---- conversions into DWARF numbering (conversions.cpp)

/// From `struct user_pt_regs` (ptrace NT_PRSTATUS regset, arch/arm64/include/uapi/asm/ptrace.h):
/// u64 regs[31]; u64 sp; u64 pc; u64 pstate — 272 bytes, the DWARF order.
Status regs_from_user_regs(const void* data, size_t len, Regs* out);
/// From the kernel's `struct pt_regs` (eBPF programs, arch/arm64/include/asm/ptrace.h):
/// it starts with a user_pt_regs (regs[31], sp, pc, pstate).
Status regs_from_pt_regs(const void* data, size_t len, Regs* out);
/// From `ucontext_t` (glibc sysdeps/unix/sysv/linux/aarch64/sys/ucontext.h and the
/// kernel's struct ucontext, arch/arm64/include/uapi/asm/ucontext.h): uc_flags, uc_link,
/// uc_stack (24), uc_sigmask padded to 128 bytes, then uc_mcontext aligned to 16 at
/// offset 176 = struct sigcontext { fault_address; regs[31]; sp; pc; pstate }.
Status regs_from_ucontext(const void* data, size_t len, Regs* out);
/// From an ELF core NT_PRSTATUS descriptor (struct elf_prstatus, include/linux/elfcore.h:
/// pr_reg, a user_pt_regs, at offset 112 on LP64).
Status regs_from_prstatus(const void* data, size_t len, Regs* out);
/// From perf PERF_SAMPLE_REGS_USER values packed in mask bit order
/// (arch/arm64/include/uapi/asm/perf_regs.h: X0..X28, X29 (fp), LR, SP, PC at bits 0..32).
Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out);
/// The perf sample_regs_user mask that captures every register the unwinder uses.
constexpr uint64_t kPerfRegsMask = (1ull << 33) - 1;

/// Offsets shared by the conversions and the signal-frame restore.
constexpr size_t kPrstatusRegOffset = 112;   ///< struct elf_prstatus.pr_reg (LP64)
constexpr size_t kUserPtRegsSize = 34 * 8;   ///< regs[31], sp, pc, pstate
constexpr size_t kUcontextMcontext = 176;    ///< offsetof(ucontext_t, uc_mcontext)
constexpr size_t kSigcontextRegs = 8;        ///< after fault_address
constexpr size_t kSiginfoSize = 128;         ///< struct siginfo (SI_MAX_SIZE)

/// Captures the caller's registers: pc = the return address of this call, sp =
/// the caller's sp, callee-saved registers as the caller had them (capture.cpp,
/// hand-written assembly, only on arm64 hosts).
extern "C" void stackprov_arm64_capture_regs(uint64_t out[33]);

}  // namespace stackprov::arch::arm64
