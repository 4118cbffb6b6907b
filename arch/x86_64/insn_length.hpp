// SPDX-License-Identifier: Apache-2.0
// x86_64 instruction lengths: the one decoder of where an instruction ends and whether it is a call (return pads, scan plausibility).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stackprov::arch::x86_64 {

/// Which call an instruction is (Intel SDM vol. 2A, CALL).
enum class CallKind : uint8_t {
  kNone = 0,
  kDirect,    ///< E8 rel32 (rel16 with 0x66 is still rel32 in 64-bit mode)
  kIndirect,  ///< FF /2: through a register or a memory operand
  kFar,       ///< FF /3: far call through a memory operand
};

namespace insn_detail {

// One-byte opcode map, 64-bit mode. Bits: kM ModRM follows; kI8/kI16/kIz/kIv immediate
// (kIz: 2 with 0x66 else 4; kIv: kIz, or 8 with REX.W); kX invalid in 64-bit mode.
enum : uint8_t { kM = 1, kI8 = 2, kI16 = 4, kIz = 8, kIv = 16, kX = 32, kMoffs = 64 };

constexpr uint8_t one_byte(unsigned op) {
  if (op < 0x40) {
    const unsigned lo = op & 7;
    if (op == 0x06 || op == 0x07 || op == 0x0e || op == 0x16 || op == 0x17 || op == 0x1e || op == 0x1f ||
        op == 0x27 || op == 0x2f || op == 0x37 || op == 0x3f)
      return kX;
    if (lo <= 3) return kM;
    if (lo == 4) return kI8;
    if (lo == 5) return kIz;
    return 0;  // prefixes (26 2e 36 3e) and 0f are handled before
  }
  if (op < 0x60) return 0;  // REX (handled before), push/pop
  switch (op) {
    case 0x60: case 0x61: case 0x62: case 0x82: case 0x9a: case 0xce: case 0xd4: case 0xd5: case 0xd6: case 0xea:
      return kX;
    case 0x63: return kM;
    case 0x68: return kIz;
    case 0x69: return kM | kIz;
    case 0x6a: return kI8;
    case 0x6b: return kM | kI8;
    case 0x80: case 0x83: case 0xc0: case 0xc1: case 0xc6: return kM | kI8;
    case 0x81: case 0xc7: return kM | kIz;
    case 0xa0: case 0xa1: case 0xa2: case 0xa3: return kMoffs;
    case 0xa8: return kI8;
    case 0xa9: return kIz;
    case 0xc2: case 0xca: return kI16;
    case 0xc8: return kI16 | kI8;
    case 0xcd: return kI8;
    case 0xe8: case 0xe9: return kIz;
    case 0xe0: case 0xe1: case 0xe2: case 0xe3: case 0xe4: case 0xe5: case 0xe6: case 0xe7: case 0xeb: return kI8;
    case 0xf6: case 0xf7: return kM;  // immediate only for /0 and /1 (below)
    case 0xfe: case 0xff: return kM;
    default: break;
  }
  if (op >= 0x70 && op <= 0x7f) return kI8;
  if (op >= 0x84 && op <= 0x8f) return kM;
  if (op >= 0xb0 && op <= 0xb7) return kI8;
  if (op >= 0xb8 && op <= 0xbf) return kIv;
  if (op >= 0xd0 && op <= 0xd3) return kM;
  if (op >= 0xd8 && op <= 0xdf) return kM;
  return 0;
}

constexpr uint8_t two_byte(unsigned op) {
  switch (op) {
    case 0x04: case 0x0a: case 0x0c: case 0x24: case 0x25: case 0x26: case 0x27: case 0x36: case 0x39: case 0x3b:
    case 0x3c: case 0x3d: case 0x3e: case 0x3f: case 0x7a: case 0x7b: case 0xa6: case 0xa7:
      return kX;
    case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0b: case 0x0e: case 0x30: case 0x31: case 0x32:
    case 0x33: case 0x34: case 0x35: case 0x37: case 0x77: case 0xa0: case 0xa1: case 0xa2: case 0xa8: case 0xa9:
    case 0xaa:
      return 0;
    case 0x0f: return kM | kI8;  // 3DNow!
    case 0x70: case 0x71: case 0x72: case 0x73: case 0xa4: case 0xac: case 0xba: case 0xc2: case 0xc4: case 0xc5:
    case 0xc6:
      return kM | kI8;
    default: break;
  }
  if (op >= 0x80 && op <= 0x8f) return kIz;
  if (op >= 0xc8 && op <= 0xcf) return 0;
  return kM;
}

/// ModRM (+ SIB + displacement) length at p; 0 when truncated.
inline size_t modrm_length(const uint8_t* p, size_t n) {
  if (n < 1) return 0;
  const unsigned mod = p[0] >> 6, rm = p[0] & 7;
  size_t len = 1;
  if (mod == 3) return len;
  if (rm == 4) {
    if (n < 2) return 0;
    len++;
    if (mod == 0 && (p[1] & 7) == 5) len += 4;
  } else if (mod == 0 && rm == 5) {
    len += 4;  // RIP-relative
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len <= n ? len : 0;
}

}  // namespace insn_detail

/// Length of the x86-64 instruction at `p` (at most `n` bytes), 0 when it is not a valid
/// 64-bit-mode encoding or does not fit in `n`: legacy prefixes, REX, the one-byte, 0F, 0F38
/// and 0F3A maps, VEX2/VEX3/EVEX, ModRM/SIB/displacement and immediate sizes. `*call` tells
/// which call it is (CallKind::kNone for every other instruction).
inline size_t insn_length(const uint8_t* p, size_t n, CallKind* call) {
  using namespace insn_detail;
  *call = CallKind::kNone;
  size_t i = 0;
  bool opsize = false, addrsize = false, rex_w = false;
  for (; i < n && i < 14; i++) {
    const uint8_t b = p[i];
    if (b == 0x66) opsize = true;
    else if (b == 0x67) addrsize = true;
    else if (b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 ||
             b == 0x65)
      continue;
    else
      break;
  }
  if (i < n && (p[i] & 0xf0) == 0x40) {
    rex_w = (p[i] & 8) != 0;
    i++;
  }
  if (i >= n || i >= 15) return 0;
  const uint8_t op = p[i++];
  const size_t iz = opsize ? 2 : 4;
  auto finish = [&](size_t len) { return len <= 15 && len <= n ? len : 0; };
  if (op == 0xc4 || op == 0xc5 || op == 0x62) {  // VEX3, VEX2, EVEX: map, opcode, ModRM
    const size_t payload = op == 0xc5 ? 1 : op == 0xc4 ? 2 : 3;
    if (i + payload + 1 > n) return 0;
    const unsigned map = op == 0xc5 ? 1 : (p[i] & (op == 0x62 ? 7 : 0x1f));
    i += payload;
    const uint8_t vop = p[i++];
    if (map == 0 || map == 4 || map == 7 || (op == 0xc4 && map > 3)) return 0;
    const size_t m = modrm_length(p + i, n - i);
    if (m == 0) return 0;
    i += m;
    if (map == 3 || (map == 1 && ((vop >= 0x70 && vop <= 0x73) || vop == 0xc2 || vop == 0xc4 || vop == 0xc5 ||
                                  vop == 0xc6)))
      i += 1;
    return finish(i);
  }
  uint8_t f;
  if (op == 0x0f) {
    if (i >= n) return 0;
    const uint8_t op2 = p[i++];
    if (op2 == 0x38 || op2 == 0x3a) {
      if (i >= n) return 0;
      i++;  // third opcode byte
      const size_t m = modrm_length(p + i, n - i);
      if (m == 0) return 0;
      i += m + (op2 == 0x3a ? 1 : 0);
      return finish(i);
    }
    f = two_byte(op2);
  } else {
    f = one_byte(op);
  }
  if (f & kX) return 0;
  uint8_t reg = 0;
  if (f & kM) {
    if (i >= n) return 0;
    reg = (p[i] >> 3) & 7;
    const size_t m = modrm_length(p + i, n - i);
    if (m == 0) return 0;
    i += m;
  }
  if (f & kI8) i += 1;
  if (f & kI16) i += 2;
  if (f & kIz) i += iz;
  if (f & kIv) i += rex_w ? 8 : iz;
  if (f & kMoffs) i += addrsize ? 4 : 8;
  if ((op == 0xf6 || op == 0xf7) && reg <= 1) i += op == 0xf6 ? 1 : iz;
  if (op == 0xe8) *call = CallKind::kDirect;
  if (op == 0xff && reg == 2) *call = CallKind::kIndirect;
  if (op == 0xff && reg == 3) *call = CallKind::kFar;
  // Near call/jmp/jcc rel32 ignore 0x66 in 64-bit mode (Intel; what objdump decodes): keep rel32.
  if (opsize && (op == 0xe8 || op == 0xe9 || (op == 0x0f && (f & kIz) != 0))) i += 2;
  return finish(i);
}

}  // namespace stackprov::arch::x86_64
