// SPDX-License-Identifier: Apache-2.0
// x86_64 DWARF register names (System V AMD64 ABI figure 3.36).
#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

const char* dwarf_reg_name(int reg) {
  static const char* const kNames[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
                                       "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip"};
  if (reg < 0 || reg >= Traits::kNumRegs) return "?";
  return kNames[reg];
}

}  // namespace stackprov::arch::x86_64
