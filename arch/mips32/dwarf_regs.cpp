// SPDX-License-Identifier: Apache-2.0
// mips32 DWARF register names (o32 ABI register names; 37 is the pc column).
#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

const char* dwarf_reg_name(int reg) {
  static const char* const kNames[] = {"zero", "at", "v0", "v1", "a0", "a1", "a2", "a3", "t0", "t1",
                                       "t2",   "t3", "t4", "t5", "t6", "t7", "s0", "s1", "s2", "s3",
                                       "s4",   "s5", "s6", "s7", "t8", "t9", "k0", "k1", "gp", "sp",
                                       "fp",   "ra"};
  if (reg == kPc) return "pc";
  if (reg < 0 || reg > 31) return "?";
  return kNames[reg];
}

}  // namespace stackprov::arch::mips32
