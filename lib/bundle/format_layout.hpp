// SPDX-License-Identifier: Apache-2.0
// On-disk layout of the bundle file (doc/bundles.md): offsets, record sizes, little-endian codecs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stackprov::bundle::layout {

inline constexpr uint8_t kMagic[8] = {'S', 'P', 'R', 'V', 'B', 'N', 'D', 'L'};

// Header: magic[8] u32 version, u32 section_count, u64 file_size, u32 flags, u32 reserved.
inline constexpr size_t kHeaderSize = 32;
// Section table entry: u32 type, u32 flags, u64 offset, u64 length.
inline constexpr size_t kSectionEntrySize = 24;
inline constexpr size_t kSectionAlign = 8;
/// Section types with this bit set are optional: readers skip the ones they do not know.
inline constexpr uint32_t kSectionOptionalBit = 0x80000000u;

enum SectionType : uint32_t {
  kSecModules = 1,
  kSecStrings = 2,
  kSecRanges = 3,
  kSecPads = 4,
  kSecPadFrames = 5,
  kSecUnwind = 6,
  kSecBlobs = 7,
};
inline constexpr uint32_t kSectionTypeCount = 7;

// Module record (232 bytes), offsets:
inline constexpr size_t kModuleSize = 232;
inline constexpr size_t kModIdKind = 0;      // u8
inline constexpr size_t kModIdLen = 1;       // u8
inline constexpr size_t kModFlags = 2;       // u16, 0
inline constexpr size_t kModName = 4;        // u32 string ref
inline constexpr size_t kModId = 8;          // u8[64], zero past id_len
inline constexpr size_t kModShaFile = 72;    // u8[32]
inline constexpr size_t kModShaDebug = 104;  // u8[32]
inline constexpr size_t kModStrings = 136;   // u64 offset, u64 length (bytes of STRINGS)
inline constexpr size_t kModRanges = 152;    // u64 first, u64 count (records of RANGES)
inline constexpr size_t kModPads = 168;      // u64 first, u64 count
inline constexpr size_t kModPadFrames = 184; // u64 first, u64 count
inline constexpr size_t kModUnwind = 200;    // u64 first, u64 count
inline constexpr size_t kModBlob = 216;      // u64 offset, u64 length (bytes of BLOBS)

// Range record (44 bytes): u64 start, u32 length, u16 depth, u16 flags(0), u32 function,
// u32 file, u32 line, u32 column, u32 call_file, u32 call_line, u32 call_column.
inline constexpr size_t kRangeSize = 44;
// Return pad (16 bytes): u64 addr, u32 first_frame (module-relative), u32 frame_count.
inline constexpr size_t kPadSize = 16;
// Pad frame (16 bytes): u32 function, u32 file, u32 line, u32 column.
inline constexpr size_t kPadFrameSize = 16;
// Unwind row (44 bytes): u64 pc, u8 kind, u8 cfa_reg, u8 ra_kind, u8 ra_reg, i32 cfa_off,
// i8 ra_off, u8 nsaved, u8 flags (bit0 signal frame, bit1 from .debug_frame), u8 reserved(0),
// u8 saved_reg[12], i8 saved_off[12].
inline constexpr size_t kUnwindSize = 44;
inline constexpr uint8_t kRowSignalFrame = 1;
inline constexpr uint8_t kRowFromDebugFrame = 2;

inline uint16_t ld16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t ld32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t ld64(const uint8_t* p) {
  return static_cast<uint64_t>(ld32(p)) | (static_cast<uint64_t>(ld32(p + 4)) << 32);
}
inline void st16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void st32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void st64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace stackprov::bundle::layout
