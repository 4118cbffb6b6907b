// SPDX-License-Identifier: Apache-2.0
// Bounds-checked byte cursor and DW_EH_PE constants shared by the CFI parser, interpreter and index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/leb128.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::dwarf::detail {

// Pointer encodings: LSB 5.0 "Linux Standard Base Core Specification", section 10.5.1
// (DWARF Exception Header Encoding). Low nibble = value format, bits 4..6 = application.
constexpr uint8_t kPeAbsptr = 0x00;
constexpr uint8_t kPeUleb128 = 0x01;
constexpr uint8_t kPeUdata2 = 0x02;
constexpr uint8_t kPeUdata4 = 0x03;
constexpr uint8_t kPeUdata8 = 0x04;
constexpr uint8_t kPeSleb128 = 0x09;
constexpr uint8_t kPeSdata2 = 0x0a;
constexpr uint8_t kPeSdata4 = 0x0b;
constexpr uint8_t kPeSdata8 = 0x0c;
constexpr uint8_t kPeFormatMask = 0x0f;
constexpr uint8_t kPePcrel = 0x10;
constexpr uint8_t kPeTextrel = 0x20;
constexpr uint8_t kPeDatarel = 0x30;
constexpr uint8_t kPeFuncrel = 0x40;
constexpr uint8_t kPeAligned = 0x50;
constexpr uint8_t kPeApplMask = 0x70;
constexpr uint8_t kPeIndirect = 0x80;
constexpr uint8_t kPeOmit = 0xff;

/// Forward-only cursor over [data, data + end). Every read checks bounds and
/// leaves the cursor unspecified on failure (callers bail out).
struct ByteReader {
  const uint8_t* data = nullptr;
  size_t end = 0;  ///< one past the last readable byte
  size_t pos = 0;
  bool big_endian = false;

  size_t remaining() const { return pos <= end ? end - pos : 0; }

  bool skip(uint64_t n) {
    if (n > remaining()) return false;
    pos += static_cast<size_t>(n);
    return true;
  }

  bool u8(uint8_t* v) {
    if (pos >= end) return false;
    *v = data[pos++];
    return true;
  }

  /// Unsigned fixed-size read of `n` (1, 2, 4 or 8) bytes in the section's byte order.
  bool uN(unsigned n, uint64_t* v) {
    if (n > remaining()) return false;
    uint64_t r = 0;
    const uint8_t* p = data + pos;
    if (big_endian) {
      for (unsigned i = 0; i < n; ++i) r = (r << 8) | p[i];
    } else {
      for (unsigned i = n; i > 0; --i) r = (r << 8) | p[i - 1];
    }
    pos += n;
    *v = r;
    return true;
  }

  bool u16(uint64_t* v) { return uN(2, v); }
  bool u32(uint64_t* v) { return uN(4, v); }
  bool u64(uint64_t* v) { return uN(8, v); }

  /// ULEB128 (core/leb128.hpp).
  bool uleb(uint64_t* v) {
    if (pos > end) return false;
    const uint8_t* q = read_uleb128(data + pos, data + end, v);
    if (q == nullptr) return false;
    pos = static_cast<size_t>(q - data);
    return true;
  }

  /// SLEB128 (core/leb128.hpp).
  bool sleb(int64_t* v) {
    if (pos > end) return false;
    const uint8_t* q = read_sleb128(data + pos, data + end, v);
    if (q == nullptr) return false;
    pos = static_cast<size_t>(q - data);
    return true;
  }
};

inline uint64_t addr_mask(uint8_t addr_size) {
  return addr_size >= 8 ? ~uint64_t{0} : ((uint64_t{1} << (addr_size * 8)) - 1);
}

/// Reads a DW_EH_PE value through `r`. `base_vaddr` is the link-time address of
/// r.data[0]. `allow_indirect` returns the address of the pointer for
/// DW_EH_PE_indirect (the caller cannot dereference target memory here).
bool read_encoded(ByteReader& r, uint8_t encoding, uint64_t base_vaddr, const CfiSection& sec,
                  uint8_t addr_size, bool allow_indirect, uint64_t* out);

/// Size in bytes of a fixed-size DW_EH_PE value format, 0 for LEB128, -1 if invalid.
int encoded_size(uint8_t encoding, uint8_t addr_size);

/// Header of one CIE/FDE entry (DWARF 5 section 6.4.1; LSB 10.6.1.1).
struct EntryHeader {
  uint64_t offset = 0;      ///< of the length field
  uint64_t id_pos = 0;      ///< of the CIE id / CIE pointer field
  uint64_t body_pos = 0;    ///< first byte after the id field
  uint64_t end = 0;         ///< one past the entry
  bool terminator = false;  ///< zero length
  bool is_cie = false;
  bool dwarf64 = false;
  uint64_t cie_offset = 0;  ///< for FDEs: section offset of the CIE
};

/// Parses the length and id fields of the entry at `offset`.
CfiStatus read_entry_header(const CfiSection& sec, uint64_t offset, EntryHeader* out);

}  // namespace stackprov::dwarf::detail
