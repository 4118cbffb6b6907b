// SPDX-License-Identifier: Apache-2.0
// arm64 return-address plausibility for stack scanning: is the instruction before ra a BL/BLR?
#pragma once

#include <cstdint>

namespace stackprov::arch::arm64 {

/// `code` holds the 4 bytes before the candidate (little-endian instruction).
/// BL: 0b100101 imm26; BLR: 0xd63f0000 | Rn << 5 (Arm ARM C6.2).
inline bool preceded_by_call(const uint8_t code[4]) {
  const uint32_t insn = code[0] | code[1] << 8 | code[2] << 16 | static_cast<uint32_t>(code[3]) << 24;
  return (insn & 0xfc000000u) == 0x94000000u || (insn & 0xfffffc1fu) == 0xd63f0000u;
}

}  // namespace stackprov::arch::arm64
