// SPDX-License-Identifier: Apache-2.0
// arm64 arch_ops: DWARF register numbering and traits (unwinding arm64 is the arm64/mips32 issue).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::arch::arm64 {

/// DWARF register numbers, "DWARF for the Arm 64-bit Architecture" (aadwarf64) table 1.
enum DwarfReg : uint16_t { kX0 = 0, kFp = 29, kLr = 30, kSp = 31, kPc = 32 };

struct Traits {
  static constexpr Arch kArch = Arch::kArm64;
  static constexpr int kNumRegs = 33;  ///< x0..x30, sp, pc
  static constexpr uint16_t kSpReg = kSp;
  static constexpr uint16_t kFpReg = kFp;
  static constexpr uint16_t kPcReg = kPc;
  static constexpr uint16_t kRaReg = kLr;  ///< CIE return_address_register
  static constexpr int kAddrSize = 8;
  static constexpr bool kBigEndian = false;
  static constexpr uint64_t kCalleeSaved = 0x7ff80000ull;  ///< x19..x30
  static constexpr uint64_t kCallInsnMin = 4;
  /// Strips pointer-authentication bits (48-bit user VA).
  static uint64_t strip_return_address(uint64_t ra) { return ra & 0x0000ffffffffffffull; }
};

using Regs = RegState<Traits::kNumRegs>;

const char* dwarf_reg_name(int reg);

/// From `struct user_pt_regs` (asm/ptrace.h): x[31], sp, pc, pstate (272 bytes);
/// also the NT_PRSTATUS regset and perf/eBPF layouts once the arm64 issue lands.
Status regs_from_user_regs(const void* data, size_t len, Regs* out);
Status regs_from_pt_regs(const void* data, size_t len, Regs* out);
Status regs_from_ucontext(const void* data, size_t len, Regs* out);
Status regs_from_prstatus(const void* data, size_t len, Regs* out);
Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out);

}  // namespace stackprov::arch::arm64
