// SPDX-License-Identifier: Apache-2.0
// LEB128 (DWARF 5 section 7.6; protobuf varints are ULEB128): the one reader and writer every parser uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stackprov {

/// Longest accepted encoding: 10 bytes carry 64 bits (padded encodings up to that are legal).
constexpr unsigned kMaxLeb128Bytes = 10;

/// Decodes an unsigned LEB128 at [p, end). Returns the byte after it, or
/// nullptr when it is truncated, longer than 10 bytes or wider than 64 bits.
/// No allocation; async-signal-safe.
inline const uint8_t* read_uleb128(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 7 * kMaxLeb128Bytes; shift += 7) {
    if (p >= end) return nullptr;
    const uint8_t b = *p++;
    const uint64_t part = b & 0x7f;
    if (shift == 63 && part > 1) return nullptr;  // bits beyond 64
    v |= part << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return p;
    }
  }
  return nullptr;
}

/// Decodes a signed LEB128 at [p, end) (sign-extended from its last byte's bit 6).
/// Returns the byte after it, or nullptr when truncated or longer than 10 bytes.
inline const uint8_t* read_sleb128(const uint8_t* p, const uint8_t* end, int64_t* out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 7 * kMaxLeb128Bytes; shift += 7) {
    if (p >= end) return nullptr;
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;  // the 10th byte contributes bit 63 only
    if ((b & 0x80) == 0) {
      if (shift + 7 < 64 && (b & 0x40) != 0) v |= ~uint64_t{0} << (shift + 7);
      *out = static_cast<int64_t>(v);
      return p;
    }
  }
  return nullptr;
}

/// Appends the shortest unsigned LEB128 encoding of `v`.
inline void append_uleb128(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v != 0) b |= 0x80;
    out.push_back(b);
  } while (v != 0);
}

/// Appends the shortest signed LEB128 encoding of `v`.
inline void append_sleb128(std::vector<uint8_t>& out, int64_t v) {
  for (;;) {
    const uint8_t b = v & 0x7f;
    v >>= 7;  // arithmetic shift (C++20)
    if ((v == 0 && (b & 0x40) == 0) || (v == -1 && (b & 0x40) != 0)) {
      out.push_back(b);
      return;
    }
    out.push_back(b | 0x80);
  }
}

}  // namespace stackprov
