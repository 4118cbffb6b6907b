// SPDX-License-Identifier: Apache-2.0
// mips32 (o32) arch_ops: DWARF register numbering, traits for both byte orders, conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::arch::mips32 {

/// DWARF numbers: $0..$31 = 0..31 (GCC's mips DWARF_FRAME_REGNUM, the MIPS psABI);
/// 32..63 are $f0..$f31, which the unwinder does not track. The pc has no DWARF
/// number; it is kept in column 37 (never a callee-saved register: $f5). The CIE
/// return-address column is 31 ($ra).
enum DwarfReg : uint16_t {
  kZero = 0, kV0 = 2, kA0 = 4, kS0 = 16, kS7 = 23, kT9 = 25, kGp = 28,
  kSp = 29, kFp = 30, kRa = 31, kPc = 37,
};

template <bool BigEndian>
struct TraitsT {
  static constexpr Arch kArch = Arch::kMips32;
  static constexpr int kNumRegs = 38;
  static constexpr uint16_t kSpReg = kSp;
  static constexpr uint16_t kFpReg = kFp;
  static constexpr uint16_t kPcReg = kPc;
  static constexpr uint16_t kRaReg = kRa;
  static constexpr int kAddrSize = 4;
  static constexpr bool kBigEndian = BigEndian;
  static constexpr uint64_t kCalleeSaved = 0xc0ff0000ull;  ///< $s0..$s7, $fp, $ra
  /// Architecture-specific DW_CFA opcodes in this arch's CFI (dwarf::CfiVendorOps).
  static constexpr dwarf::CfiVendorOps kCfiVendorOps = dwarf::CfiVendorOps::kNone;
  /// Return addresses point past the call's delay slot: lookups use ra - 1
  /// like other arches (the delay slot belongs to the caller; the call is at ra - 8).
  static constexpr uint64_t kCallInsnMin = 1;
  static uint64_t strip_return_address(uint64_t ra) { return ra & 0xffffffffull; }
  /// User space ends here: kuseg, the lower 2 GiB (MIPS32 PRA, the o32 user address space).
  /// A trace replay relocates modules below it (lib/capi/trace_replay.cpp).
  static constexpr uint64_t kUserAddrEnd = 0x80000000ull;
  /// The farthest a trace replay moves a module: 8 MiB, small against a 2 GiB space crowded with
  /// libraries and stacks so that most per-module draws fit.
  static constexpr uint64_t kMaxReplayShift = uint64_t{1} << 23;
};
using TraitsBE = TraitsT<true>;
using TraitsLE = TraitsT<false>;

using Regs = RegState<38>;

const char* dwarf_reg_name(int reg);

// ---- conversions into DWARF numbering (conversions.cpp); `big_endian` is the target's order

/// From an o32 `elf_gregset_t` (ptrace PTRACE_GETREGSET NT_PRSTATUS, the core
/// pr_reg): 45 32-bit words, arch/mips/include/asm/reg.h: EF_R0 = 6 (six padding
/// words first), EF_R31 = 37, EF_LO 38, EF_HI 39, EF_CP0_EPC 40 (the pc).
Status regs_from_user_regs(const void* data, size_t len, bool big_endian, Regs* out);
/// From the kernel's o32 `struct pt_regs` (eBPF programs, arch/mips/include/asm/ptrace.h):
/// pad0[8], regs[32] at 32, cp0_status 160, hi 164, lo 168, cp0_badvaddr 172,
/// cp0_cause 176, cp0_epc 180 (kernels without CONFIG_CPU_HAS_SMARTMIPS).
Status regs_from_pt_regs(const void* data, size_t len, bool big_endian, Regs* out);
/// From an o32 `ucontext_t` (arch/mips/include/uapi/asm/ucontext.h, glibc
/// sysdeps/unix/sysv/linux/mips/sys/ucontext.h): uc_flags, uc_link, stack_t (12),
/// uc_mcontext aligned to 8 at 24 = struct sigcontext { u32 sc_regmask, sc_status;
/// u64 sc_pc; u64 sc_regs[32]; … } — 64-bit slots, the value in the low half.
Status regs_from_ucontext(const void* data, size_t len, bool big_endian, Regs* out);
/// From an ELF core NT_PRSTATUS descriptor: struct elf_prstatus (include/linux/elfcore.h)
/// with pr_reg, an elf_gregset_t, at offset 72 on o32.
Status regs_from_prstatus(const void* data, size_t len, bool big_endian, Regs* out);
/// From perf PERF_SAMPLE_REGS_USER values (u64, host order) in mask bit order,
/// arch/mips/include/uapi/asm/perf_regs.h: PC at bit 0, $1..$31 at bits 1..31.
Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out);
/// The perf sample_regs_user mask that captures every register the unwinder uses.
constexpr uint64_t kPerfRegsMask = 0xffffffffull;

/// Layout constants shared by the conversions and the signal-frame restore.
constexpr size_t kPrstatusRegOffset = 72;  ///< struct elf_prstatus.pr_reg (o32)
constexpr int kElfNGreg = 45;              ///< ELF_NGREG (arch/mips/include/asm/elf.h)
constexpr int kEfR0 = 6;                   ///< arch/mips/include/asm/reg.h (o32)
constexpr int kEfCp0Epc = 40;
constexpr size_t kSigcontextPc = 8;        ///< sc_pc after sc_regmask, sc_status
constexpr size_t kSigcontextRegs = 16;     ///< sc_regs[32] of u64
constexpr size_t kUcontextMcontext = 24;   ///< offsetof(struct ucontext, uc_mcontext) on o32

/// Reads a struct sigcontext (o32) at `p` into `out`: pc = sc_pc, $0..$31 = sc_regs.
void regs_from_sigcontext(const uint8_t* p, bool big_endian, Regs* out);

/// Captures the caller's registers (capture.cpp, hand-written assembly, only on
/// mips hosts): pc = the return address of this call, sp = the caller's sp.
extern "C" void stackprov_mips32_capture_regs(uint32_t out[38]);

}  // namespace stackprov::arch::mips32
