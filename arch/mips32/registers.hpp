// SPDX-License-Identifier: Apache-2.0
// mips32 arch_ops: DWARF register numbering and traits (unwinding mips32 is the arm64/mips32 issue).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::arch::mips32 {

/// DWARF numbers: $0..$31 = 0..31 (GCC's mips DWARF_FRAME_REGNUM); pc is kept
/// in an extra column 37 (GCC's DWARF_FRAME_RETURN_COLUMN is 31 = $ra).
enum DwarfReg : uint16_t { kZero = 0, kSp = 29, kFp = 30, kRa = 31, kPc = 37 };

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
  /// Return addresses point past the call's delay slot: lookups use ra - 1
  /// like other arches (the call itself is at ra - 8).
  static constexpr uint64_t kCallInsnMin = 1;
  static uint64_t strip_return_address(uint64_t ra) { return ra & 0xffffffffull; }
};
using TraitsBE = TraitsT<true>;
using TraitsLE = TraitsT<false>;

using Regs = RegState<38>;

const char* dwarf_reg_name(int reg);

/// Conversions are planned with the mips32 issue; they return SPROV_ERR_UNSUPPORTED.
Status regs_from_user_regs(const void* data, size_t len, bool big_endian, Regs* out);
Status regs_from_pt_regs(const void* data, size_t len, bool big_endian, Regs* out);
Status regs_from_ucontext(const void* data, size_t len, bool big_endian, Regs* out);
Status regs_from_prstatus(const void* data, size_t len, bool big_endian, Regs* out);
Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out);

}  // namespace stackprov::arch::mips32
