// SPDX-License-Identifier: Apache-2.0
// Reading a written bundle's section table in the unit tests (doc/bundles.md "Layout": the section
// count at byte 12, 24-byte entries from byte 32: type u32, flags u32, offset u64, length u64), its
// first module's string table, and format 6's coded blocks written out by the layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bundle/entropy.hpp"
#include "bundle/lz.hpp"

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

/// Module 0's decompressed string table split at its NULs (doc/bundles.md "Modules", "Strings",
/// "Format 4": the strings slice is the name, NUL, the coded LZ77 stream); empty when it does not
/// decompress.
inline std::vector<std::string> bundle_module0_strings(const std::vector<uint8_t>& b) {
  const int mods = bundle_section_index(b, 1), strs = bundle_section_index(b, 2);
  if (mods < 0 || strs < 0) return {};
  const size_t rec = static_cast<size_t>(bundle_le64(b, 32 + mods * 24 + 8));
  const size_t sec = static_cast<size_t>(bundle_le64(b, 32 + strs * 24 + 8));
  const size_t first = static_cast<size_t>(bundle_le64(b, rec + 144)), count = static_cast<size_t>(bundle_le64(b, rec + 152));
  const size_t name_len = b[rec + 4] | b[rec + 5] << 8, raw = static_cast<size_t>(bundle_le64(b, rec + 312));
  std::string table;
  if (!stackprov::bundle::lz::decompress_coded(b.data() + sec + first + name_len + 1, count - name_len - 1, raw, &table))
    return {};
  std::vector<std::string> out;
  for (size_t at = 0; at < table.size(); at = table.find('\0', at) + 1) out.emplace_back(table.c_str() + at);
  return out;
}

/// One field of a format-6 block: its context, its value, coded as a symbol or as an integer
/// (signed values zigzag-coded by the caller).
struct BundleField {
  unsigned ctx;
  uint64_t v;
  bool sym = false;
};

/// A format-6 block written out by the layout (doc/bundles.md "Format 6") with the entropy coder's
/// primitives (tests/unit/bundle/entropy_test.cpp checks those): per context the canonical code of its
/// fields' symbols, the codes in context order, zero bits to a byte, the fields, zero bits to a byte.
inline std::vector<uint8_t> bundle_code_block(unsigned ncontexts, const std::vector<BundleField>& fields) {
  namespace e = stackprov::bundle::entropy;
  std::vector<e::Counts> counts(ncontexts, e::Counts{});
  for (const BundleField& f : fields) {
    unsigned n;
    uint64_t x;
    counts[f.ctx][f.sym ? f.v : e::int_symbol(f.v, &n, &x)]++;
  }
  e::BitWriter w;
  std::vector<e::Code> codes(ncontexts);
  for (unsigned i = 0; i < ncontexts; i++) {
    codes[i].assign(e::build_lengths(counts[i]));
    codes[i].write(w);
  }
  w.align();
  for (const BundleField& f : fields) {
    if (f.sym)
      codes[f.ctx].put(w, static_cast<unsigned>(f.v));
    else
      codes[f.ctx].put_uint(w, f.v);
  }
  w.align();
  return w.bytes();
}

/// `good` with its last section (of `type`) replaced by `payload`, zero-padded to 8; the section's
/// length and the file size follow. Empty when that section is not the last.
inline std::vector<uint8_t> bundle_with_last_section(const std::vector<uint8_t>& good, uint32_t type,
                                                     const std::vector<uint8_t>& payload) {
  const int ix = bundle_section_index(good, type);
  if (ix < 0 || ix != static_cast<int>(good[12]) - 1) return {};
  const size_t off = static_cast<size_t>(bundle_le64(good, 32 + ix * 24 + 8));
  std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(off));
  b.insert(b.end(), payload.begin(), payload.end());
  b.resize((b.size() + 7) & ~size_t{7}, 0);
  for (int i = 0; i < 8; i++) {
    b[32 + ix * 24 + 16 + i] = static_cast<uint8_t>(payload.size() >> (8 * i));
    b[16 + i] = static_cast<uint8_t>(b.size() >> (8 * i));
  }
  return b;
}

/// `good` with its last section (of `type`) holding module 0's block alone: a head of the u32 `counts`
/// (the module index 0 first), u64 bytes, then `block` (doc/bundles.md "Symbol names", "Call sites").
inline std::vector<uint8_t> bundle_with_block(const std::vector<uint8_t>& good, uint32_t type,
                                              const std::vector<uint32_t>& counts, const std::vector<uint8_t>& block) {
  std::vector<uint8_t> payload;
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; i++) payload.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(0, 4);
  for (uint32_t c : counts) put(c, 4);
  put(block.size(), 8);
  payload.insert(payload.end(), block.begin(), block.end());
  return bundle_with_last_section(good, type, payload);
}

/// Calls f(bytes) with `good` corrupted at every offset by three single-byte patterns.
template <class F>
void bundle_each_corruption(const std::vector<uint8_t>& good, F f) {
  for (size_t o = 0; o < good.size(); o++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[o] ^= x;
      f(b);
    }
}

}  // namespace stackprov::test
