// SPDX-License-Identifier: Apache-2.0
// Fuzz input split into sections: { u32 length (little-endian), bytes }*, the layout scripts/fuzz-corpus.py writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dwarf/dwarf_index_reader.hpp"

namespace stackprov::fuzz {

/// Splits `data` into `n` sections in order; a section past the end of the input is empty and a
/// length past the end is cut to what remains. Views into `data`.
inline void split_sections(const uint8_t* data, size_t size, dwarf::SectionBytes* out, size_t n) {
  size_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    out[i] = {};
    if (size - pos < 4) continue;
    size_t len = static_cast<size_t>(data[pos]) | static_cast<size_t>(data[pos + 1]) << 8 |
                 static_cast<size_t>(data[pos + 2]) << 16 | static_cast<size_t>(data[pos + 3]) << 24;
    pos += 4;
    if (len > size - pos) len = size - pos;
    out[i].data = len ? data + pos : nullptr;
    out[i].size = len;
    pos += len;
  }
}

/// Little-endian u64 at `i` of `data` (bytes past the end read as zero).
inline uint64_t word_at(const uint8_t* data, size_t size, size_t i) {
  uint64_t v = 0;
  for (size_t k = 0; k < 8 && i + k < size; k++) v |= static_cast<uint64_t>(data[i + k]) << (8 * k);
  return v;
}

}  // namespace stackprov::fuzz
