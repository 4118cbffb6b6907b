// SPDX-License-Identifier: Apache-2.0
// Compressed sections against zlib's and zstd's own encoders: small ones, and ones of several MiB
// whose buffers come from huge_buffer_alloc (2 MiB-aligned mappings advised MADV_HUGEPAGE).
#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "elf/decompress.hpp"

namespace {

using stackprov::elf::detail::CompressionFormat;
using stackprov::elf::detail::decompress_section;
using stackprov::elf::detail::kCompressZlib;
using stackprov::elf::detail::kCompressZstd;

/// Bytes that compress (a few repeated words with a counter), like a debug section.
std::vector<uint8_t> sample_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    if (i % 64 == 0) x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>((i % 7 == 0) ? (x >> 16) : "DW_TAG_subprogram"[i % 17]);
  }
  return v;
}

/// An SHF_COMPRESSED section: Elf64_Chdr (ch_type, reserved, ch_size, ch_addralign), then the stream.
std::vector<uint8_t> chdr64(uint32_t type, uint64_t size, const std::vector<uint8_t>& stream) {
  std::vector<uint8_t> s(24, 0);
  std::memcpy(s.data(), &type, 4);
  std::memcpy(s.data() + 8, &size, 8);
  const uint64_t align = 1;
  std::memcpy(s.data() + 16, &align, 8);
  s.insert(s.end(), stream.begin(), stream.end());
  return s;
}

std::vector<uint8_t> zlib_stream(const std::vector<uint8_t>& in) {
  uLongf n = compressBound(in.size());
  std::vector<uint8_t> out(n);
  REQUIRE(compress2(out.data(), &n, in.data(), in.size(), 6) == Z_OK);
  out.resize(n);
  return out;
}

std::vector<uint8_t> zstd_stream(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE("compressed sections of several MiB inflate to the encoder's input in 2 MiB-aligned buffers",
          "[elf][decompress]") {
  // Little-endian host layout of Elf64_Chdr (the tests run on x86_64 and the cross targets read it
  // with the host's order: ELFDATA of the image is passed as big_endian=false here).
  const bool zstd = GENERATE(false, true);
  const size_t n = GENERATE(size_t{1} << 20, (size_t{5} << 20) + 12345, size_t{2} << 20);
  INFO((zstd ? "zstd " : "zlib ") << n << " bytes");
  const std::vector<uint8_t> in = sample_bytes(n);
  const std::vector<uint8_t> sec = chdr64(zstd ? kCompressZstd : kCompressZlib, n, zstd ? zstd_stream(in) : zlib_stream(in));
  auto out = decompress_section(sec.data(), sec.size(), CompressionFormat::kShfCompressed, true, false, "test",
                                ".debug_info");
  REQUIRE(out.ok());
  REQUIRE(out->size() == n);
  CHECK(std::memcmp(out->data(), in.data(), n) == 0);
  if (n >= stackprov::elf::detail::kHugeBufferMin) {
    // Its own mapping, aligned for transparent huge pages.
    CHECK(reinterpret_cast<uintptr_t>(out->data()) % (uintptr_t{2} << 20) == 0);
  }
  // Copies and moves keep the bytes (a copy allocates through the same allocator).
  auto copy = out.value();
  CHECK(std::memcmp(copy.data(), in.data(), n) == 0);
  auto moved = std::move(copy);
  CHECK(moved.size() == n);
}

TEST_CASE("huge_buffer_alloc: aligned, writable to its last byte, freed", "[elf][decompress]") {
  using stackprov::elf::detail::huge_buffer_alloc;
  using stackprov::elf::detail::huge_buffer_free;
  for (size_t bytes : {size_t{2} << 20, (size_t{2} << 20) + 1, (size_t{7} << 20) - 3}) {
    INFO(bytes);
    auto* p = static_cast<uint8_t*>(huge_buffer_alloc(bytes));
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % (uintptr_t{2} << 20) == 0);
    std::memset(p, 0xa5, bytes);
    CHECK(p[bytes - 1] == 0xa5);
    huge_buffer_free(p, bytes);
  }
  CHECK_THROWS_AS(huge_buffer_alloc(SIZE_MAX - 1), std::bad_alloc);
}
