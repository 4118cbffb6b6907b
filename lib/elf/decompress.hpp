// SPDX-License-Identifier: Apache-2.0
// Decompression of ELF sections: SHF_COMPRESSED (zlib, zstd) and legacy .zdebug_* (internal to lib/elf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace stackprov::elf::detail {

/// ch_type values (System V gABI, "Compressed sections"; ELFCOMPRESS_ZSTD was
/// added in 2022 and is missing from libelf 0.188's elf.h).
inline constexpr uint32_t kCompressZlib = 1;
inline constexpr uint32_t kCompressZstd = 2;

/// Largest decompressed section we accept, and the largest expansion ratio
/// (zlib's own maximum is about 1032:1). The ratio is not applied below
/// kRatioFloor bytes of output so tiny sections of zeros still decompress.
inline constexpr uint64_t kMaxDecompressed = uint64_t{4} << 30;
inline constexpr uint64_t kMaxRatio = 1000;
inline constexpr uint64_t kRatioFloor = uint64_t{1} << 20;

enum class CompressionFormat : uint8_t { kShfCompressed, kZdebug };

/// An allocator that leaves new elements uninitialised: a decompressed section's buffer
/// is written whole by the decompressor, and zero-filling tens of MB first costs as much
/// as a third of the inflate.
template <class T>
struct NoInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <class U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialisation: no zeroing
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using SectionBuffer = std::vector<uint8_t, NoInitAllocator<uint8_t>>;

/// Decompresses one section's raw bytes. `path` and `section` only name the
/// input in error messages (SPROV_ERR_DECOMPRESS, SPROV_ERR_LIMIT).
Result<SectionBuffer> decompress_section(const uint8_t* data, size_t size,
                                                CompressionFormat format, bool is64,
                                                bool big_endian, const std::string& path,
                                                std::string_view section);

}  // namespace stackprov::elf::detail
