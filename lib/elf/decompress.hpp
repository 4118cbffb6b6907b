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

/// Buffers of at least this many bytes come from huge_buffer_alloc (2 MiB-aligned, MADV_HUGEPAGE).
inline constexpr size_t kHugeBufferMin = size_t{2} << 20;
/// `bytes` (>= kHugeBufferMin) of heap memory aligned to 2 MiB and advised MADV_HUGEPAGE, so that
/// writing it takes a fault per 2 MiB instead of per 4 KiB page (THP "madvise" mode, Debian's default;
/// on this project's VMs a page fault costs ~2-3 us: python3.11's 16.5 MB of inflated DWARF spent more
/// time faulting than inflating). Throws std::bad_alloc when malloc fails.
void* huge_buffer_alloc(size_t bytes);
void huge_buffer_free(void* p, size_t bytes) noexcept;

/// An allocator that leaves new elements uninitialised: a decompressed section's buffer
/// is written whole by the decompressor, and zero-filling tens of MB first costs as much
/// as a third of the inflate. Buffers of kHugeBufferMin bytes or more come from
/// huge_buffer_alloc.
template <class T>
struct NoInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <class U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n >= kHugeBufferMin / sizeof(T) && n <= SIZE_MAX / sizeof(T))
      return static_cast<T*>(huge_buffer_alloc(n * sizeof(T)));
    return std::allocator<T>::allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n >= kHugeBufferMin / sizeof(T) && n <= SIZE_MAX / sizeof(T)) huge_buffer_free(p, n * sizeof(T));
    else std::allocator<T>::deallocate(p, n);
  }
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
