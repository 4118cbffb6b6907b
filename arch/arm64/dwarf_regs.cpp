// SPDX-License-Identifier: Apache-2.0
// arm64 DWARF register names (aadwarf64 table 1; 32 is the pc column).
#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

const char* dwarf_reg_name(int reg) {
  static const char* const kNames[] = {"x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",
                                       "x9",  "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17",
                                       "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
                                       "x27", "x28", "x29", "x30", "sp",  "pc"};
  if (reg < 0 || reg >= Traits::kNumRegs) return "?";
  return kNames[reg];
}

}  // namespace stackprov::arch::arm64
