// SPDX-License-Identifier: Apache-2.0
// Sticky-error byte cursor and the DWARF 2–5 constants used by the line-table decoder and the DIE index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/leb128.hpp"

namespace stackprov::dwarf {

/// A borrowed byte range of one section (decompressed, owned by the object image it came from).
struct SectionBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool empty() const { return data == nullptr || size == 0; }
};

/// Cursor over [data, data + end). A failed read sets `ok = false`, returns 0
/// and parks the cursor at `end`, so loops that test `ok` (or `at_end()`)
/// always terminate.
struct Cursor {
  const uint8_t* data = nullptr;
  size_t end = 0;
  size_t pos = 0;
  bool big_endian = false;
  bool ok = true;

  Cursor() = default;
  Cursor(SectionBytes s, size_t start, bool be) : data(s.data), end(s.size), pos(start), big_endian(be) {
    if (start > end) fail();
  }

  size_t remaining() const { return pos <= end ? end - pos : 0; }
  bool at_end() const { return !ok || pos >= end; }
  void fail() {
    ok = false;
    pos = end;
  }
  bool skip(uint64_t n) {
    if (n > remaining()) {
      fail();
      return false;
    }
    pos += static_cast<size_t>(n);
    return true;
  }
  uint64_t fixed(unsigned n) {
    if (n > 8 || n > remaining()) {
      fail();
      return 0;
    }
    uint64_t r = 0;
    const uint8_t* p = data + pos;
    if (big_endian) {
      for (unsigned i = 0; i < n; i++) r = (r << 8) | p[i];
    } else {
      for (unsigned i = n; i > 0; i--) r = (r << 8) | p[i - 1];
    }
    pos += n;
    return r;
  }
  uint8_t u8() { return static_cast<uint8_t>(fixed(1)); }
  uint16_t u16() { return static_cast<uint16_t>(fixed(2)); }
  uint32_t u32() { return static_cast<uint32_t>(fixed(4)); }
  uint64_t u64() { return fixed(8); }
  int8_t s8() { return static_cast<int8_t>(u8()); }
  uint64_t uleb() {
    uint64_t v = 0;
    const uint8_t* q = pos < end ? read_uleb128(data + pos, data + end, &v) : nullptr;
    if (q == nullptr) {
      fail();
      return 0;
    }
    pos = static_cast<size_t>(q - data);
    return v;
  }
  int64_t sleb() {
    int64_t v = 0;
    const uint8_t* q = pos < end ? read_sleb128(data + pos, data + end, &v) : nullptr;
    if (q == nullptr) {
      fail();
      return 0;
    }
    pos = static_cast<size_t>(q - data);
    return v;
  }
  /// NUL-terminated string; fails when the terminator is missing.
  std::string_view cstr() {
    if (pos >= end) {
      fail();
      return {};
    }
    const void* z = std::memchr(data + pos, 0, end - pos);
    if (z == nullptr) {
      fail();
      return {};
    }
    size_t len = static_cast<const uint8_t*>(z) - (data + pos);
    std::string_view s(reinterpret_cast<const char*>(data + pos), len);
    pos += len + 1;
    return s;
  }
  /// Reads an initial length (DWARF 7.4): sets *is64 and returns the length.
  uint64_t initial_length(bool* is64) {
    uint64_t l = u32();
    *is64 = false;
    if (l == 0xffffffffu) {
      *is64 = true;
      l = u64();
    } else if (l >= 0xfffffff0u) {
      fail();
      return 0;
    }
    return l;
  }
  uint64_t offset(bool is64) { return fixed(is64 ? 8 : 4); }
};

/// String at `off` in a string section (.debug_str, .debug_line_str); empty on a bad offset.
inline std::string_view section_string(SectionBytes s, uint64_t off) {
  if (s.empty() || off >= s.size) return {};
  const void* z = std::memchr(s.data + off, 0, s.size - off);
  if (z == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(s.data + off),
                          static_cast<const uint8_t*>(z) - (s.data + off));
}

// DWARF 5 spec, section 7.5.6 (forms) and 7.5.4 (attributes), 7.5.3 (tags);
// GNU extensions from binutils include/dwarf2.def.
enum Form : uint16_t {
  kFormAddr = 0x01, kFormBlock2 = 0x03, kFormBlock4 = 0x04, kFormData2 = 0x05, kFormData4 = 0x06,
  kFormData8 = 0x07, kFormString = 0x08, kFormBlock = 0x09, kFormBlock1 = 0x0a, kFormData1 = 0x0b,
  kFormFlag = 0x0c, kFormSdata = 0x0d, kFormStrp = 0x0e, kFormUdata = 0x0f, kFormRefAddr = 0x10,
  kFormRef1 = 0x11, kFormRef2 = 0x12, kFormRef4 = 0x13, kFormRef8 = 0x14, kFormRefUdata = 0x15,
  kFormIndirect = 0x16, kFormSecOffset = 0x17, kFormExprloc = 0x18, kFormFlagPresent = 0x19,
  kFormStrx = 0x1a, kFormAddrx = 0x1b, kFormRefSup4 = 0x1c, kFormStrpSup = 0x1d, kFormData16 = 0x1e,
  kFormLineStrp = 0x1f, kFormRefSig8 = 0x20, kFormImplicitConst = 0x21, kFormLoclistx = 0x22,
  kFormRnglistx = 0x23, kFormRefSup8 = 0x24, kFormStrx1 = 0x25, kFormStrx2 = 0x26, kFormStrx3 = 0x27,
  kFormStrx4 = 0x28, kFormAddrx1 = 0x29, kFormAddrx2 = 0x2a, kFormAddrx3 = 0x2b, kFormAddrx4 = 0x2c,
  kFormGnuAddrIndex = 0x1f01, kFormGnuStrIndex = 0x1f02, kFormGnuRefAlt = 0x1f20, kFormGnuStrpAlt = 0x1f21,
};

enum Attr : uint16_t {
  kAtSibling = 0x01, kAtName = 0x03, kAtStmtList = 0x10, kAtLowPc = 0x11, kAtHighPc = 0x12,
  kAtCompDir = 0x1b, kAtAbstractOrigin = 0x31, kAtDeclFile = 0x3a, kAtDeclLine = 0x3b,
  kAtSpecification = 0x47, kAtRanges = 0x55, kAtCallColumn = 0x57, kAtCallFile = 0x58,
  kAtCallLine = 0x59, kAtLinkageName = 0x6e, kAtStrOffsetsBase = 0x72, kAtAddrBase = 0x73,
  kAtRnglistsBase = 0x74, kAtDwoName = 0x76, kAtMipsLinkageName = 0x2007,
  kAtGnuDiscriminator = 0x2136, kAtGnuDwoName = 0x2130, kAtGnuDwoId = 0x2131, kAtGnuRangesBase = 0x2132,
  kAtGnuAddrBase = 0x2133,
  // Call sites (DWARF 5 section 3.4; GNU: binutils include/dwarf2.def).
  kAtDeclaration = 0x3c, kAtCallAllCalls = 0x7a, kAtCallAllTailCalls = 0x7c, kAtCallReturnPc = 0x7d,
  kAtCallOrigin = 0x7f, kAtCallTailCall = 0x82, kAtCallTarget = 0x83, kAtGnuCallSiteTarget = 0x2113,
  kAtGnuTailCall = 0x2115, kAtGnuAllTailCallSites = 0x2116, kAtGnuAllCallSites = 0x2117,
  // Parameters and types (`stack --args`).
  kAtByteSize = 0x0b, kAtLocation = 0x02, kAtConstValue = 0x1c, kAtEncoding = 0x3e, kAtFrameBase = 0x40,
  kAtType = 0x49, kAtLoclistsBase = 0x8c,
};

enum Tag : uint16_t {
  kTagCompileUnit = 0x11, kTagInlinedSubroutine = 0x1d, kTagSubprogram = 0x2e,
  kTagPartialUnit = 0x3c, kTagCallSite = 0x48, kTagSkeletonUnit = 0x4a, kTagGnuCallSite = 0x4109,
  kTagEnumerationType = 0x04, kTagFormalParameter = 0x05, kTagPointerType = 0x0f, kTagReferenceType = 0x10,
  kTagStructureType = 0x13, kTagSubroutineType = 0x15, kTagTypedef = 0x16, kTagUnionType = 0x17,
  kTagClassType = 0x02, kTagArrayType = 0x01, kTagBaseType = 0x24, kTagConstType = 0x26, kTagEnumerator = 0x28,
  kTagVolatileType = 0x35, kTagRestrictType = 0x37, kTagAtomicType = 0x47, kTagRvalueReferenceType = 0x42,
};

}  // namespace stackprov::dwarf
