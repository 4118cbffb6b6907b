// SPDX-License-Identifier: Apache-2.0
// Bounds-checked, byte-order-aware reads of ELF structures and the ELF note walker (internal to lib/elf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/types.hpp"

namespace stackprov::elf::detail {

/// A view of bytes with checked, byte-order-aware loads. Never reads outside [data, data+size).
class ByteView {
 public:
  ByteView() = default;
  ByteView(const uint8_t* data, size_t size, bool big_endian)
      : data_(data), size_(size), big_(big_endian) {}

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool big_endian() const { return big_; }

  /// True when [off, off+len) lies inside the view (overflow-safe).
  bool in_range(uint64_t off, uint64_t len) const {
    return off <= size_ && len <= size_ - off;
  }

  std::optional<uint16_t> u16(uint64_t off) const { return load<uint16_t>(off); }
  std::optional<uint32_t> u32(uint64_t off) const { return load<uint32_t>(off); }
  std::optional<uint64_t> u64(uint64_t off) const { return load<uint64_t>(off); }
  /// 4- or 8-byte word depending on the ELF class.
  std::optional<uint64_t> word(uint64_t off, bool is64) const {
    if (is64) return u64(off);
    auto v = u32(off);
    if (!v) return std::nullopt;
    return *v;
  }

 private:
  template <class T>
  std::optional<T> load(uint64_t off) const {
    if (!in_range(off, sizeof(T))) return std::nullopt;
    T v = 0;
    for (size_t i = 0; i < sizeof(T); i++) {
      const uint8_t b = data_[off + i];
      const size_t shift = big_ ? (sizeof(T) - 1 - i) * 8 : i * 8;
      v = static_cast<T>(v | (static_cast<T>(b) << shift));
    }
    return v;
  }

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool big_ = false;
};

/// NT_GNU_BUILD_ID (elf.h; "GNU" owner). Value 3 per the GNU note type list.
inline constexpr uint32_t kNoteGnuBuildId = 3;

/// Walks the notes of one PT_NOTE segment or SHT_NOTE section and returns the
/// descriptor of the first note with owner "GNU" and type NT_GNU_BUILD_ID.
/// Note layout (System V gABI "Note Section"): namesz, descsz, type (4-byte
/// words), then name and descriptor, each padded to `align` (4, or 8 for
/// notes in 8-byte aligned segments such as .note.gnu.property).
inline std::optional<ModuleId> find_gnu_build_id(const ByteView& notes, uint64_t align) {
  if (align != 8) align = 4;
  auto pad = [align](uint64_t v) -> uint64_t { return (v + align - 1) & ~(align - 1); };
  uint64_t off = 0;
  // Each iteration consumes at least 12 bytes, so the loop is bounded by size/12.
  while (notes.in_range(off, 12)) {
    const uint32_t namesz = *notes.u32(off);
    const uint32_t descsz = *notes.u32(off + 4);
    const uint32_t type = *notes.u32(off + 8);
    const uint64_t name_off = off + 12;
    const uint64_t desc_off = name_off + pad(namesz);
    if (!notes.in_range(name_off, pad(namesz)) || !notes.in_range(desc_off, descsz)) break;
    if (type == kNoteGnuBuildId && namesz == 4 &&
        std::memcmp(notes.data() + name_off, "GNU\0", 4) == 0 && descsz > 0 &&
        descsz <= ModuleId::kMax) {
      return ModuleId::from_bytes(notes.data() + desc_off, descsz);
    }
    const uint64_t next = desc_off + pad(descsz);
    if (next <= off) break;
    off = next;
  }
  return std::nullopt;
}

}  // namespace stackprov::elf::detail
