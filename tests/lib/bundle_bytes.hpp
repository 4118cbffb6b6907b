// SPDX-License-Identifier: Apache-2.0
// Reading a written bundle's section table in the unit tests (doc/bundles.md "Layout": the section
// count at byte 12, 24-byte entries from byte 32: type u32, flags u32, offset u64, length u64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stackprov::test {

/// The index of the first section of `type` in the bundle's table, or -1.
inline int bundle_section_index(const std::vector<uint8_t>& b, uint32_t type) {
  for (uint32_t i = 0; i < b[12]; i++) {
    const size_t e = 32 + i * 24;
    const uint32_t t = b[e] | b[e + 1] << 8 | b[e + 2] << 16 | static_cast<uint32_t>(b[e + 3]) << 24;
    if (t == type) return static_cast<int>(i);
  }
  return -1;
}

/// The little-endian u64 at `off`.
inline uint64_t bundle_le64(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[off + i];
  return v;
}

}  // namespace stackprov::test
