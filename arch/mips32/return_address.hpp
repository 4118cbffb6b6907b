// SPDX-License-Identifier: Apache-2.0
// mips32 return-address plausibility for stack scanning: jal/jalr/bal at ra - 8.
#pragma once

#include <cstdint>

namespace stackprov::arch::mips32 {

/// JAL: opcode 3; JALR: SPECIAL funct 9; BAL/BGEZAL: REGIMM rt 17 (MIPS32 ISA vol. II).
inline bool is_call(uint32_t insn) {
  return (insn >> 26) == 3 || ((insn >> 26) == 0 && (insn & 0x3f) == 9) ||
         ((insn >> 26) == 1 && ((insn >> 16) & 0x1f) == 17);
}

}  // namespace stackprov::arch::mips32
