// SPDX-License-Identifier: Apache-2.0
// zlib and zstd decompression of SHF_COMPRESSED and .zdebug_* sections with size and ratio caps.
#include "elf/decompress.hpp"

#include <sys/mman.h>
#include <zlib.h>
#include <zstd.h>
#ifdef STACKPROV_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <new>

#include "elf/elf_bytes.hpp"

namespace stackprov::elf::detail {
namespace {

Error fail(const std::string& path, std::string_view section, const char* reason) {
  return make_error(SPROV_ERR_DECOMPRESS, "%s: section %.*s: %s", path.c_str(),
                    static_cast<int>(section.size()), section.data(), reason);
}

Status inflate_zlib(const uint8_t* in, size_t in_size, SectionBuffer& out,
                    const std::string& path, std::string_view section) {
#ifdef STACKPROV_HAVE_LIBDEFLATE
  // The whole section at once (its size is declared): libdeflate inflates 2-3x as fast as
  // zlib. Any failure goes on to zlib below, which reports what is wrong with the stream.
  if (libdeflate_decompressor* d = libdeflate_alloc_decompressor()) {
    size_t used_in = 0, made_out = 0;
    const libdeflate_result r =
        libdeflate_zlib_decompress_ex(d, in, in_size, out.data(), out.size(), &used_in, &made_out);
    libdeflate_free_decompressor(d);
    if (r == LIBDEFLATE_SUCCESS && made_out == out.size()) return {};
  }
#endif
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) return fail(path, section, "zlib inflateInit failed");
  size_t in_pos = 0, out_pos = 0;
  int rc = Z_OK;
  // avail_in/avail_out are 32-bit; feed in chunks so sections above 4 GiB of
  // input cannot wrap. Every iteration consumes input or produces output, or stops.
  while (rc == Z_OK) {
    const size_t in_chunk = std::min<size_t>(in_size - in_pos, 1u << 30);
    const size_t out_chunk = std::min<size_t>(out.size() - out_pos, 1u << 30);
    zs.next_in = const_cast<Bytef*>(in + in_pos);
    zs.avail_in = static_cast<uInt>(in_chunk);
    Bytef none = 0;  // zlib refuses a null next_out even with avail_out 0 (an empty section)
    zs.next_out = out.empty() ? &none : out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(out_chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    const size_t used_in = in_chunk - zs.avail_in;
    const size_t made_out = out_chunk - zs.avail_out;
    in_pos += used_in;
    out_pos += made_out;
    if (rc == Z_OK && used_in == 0 && made_out == 0) rc = Z_BUF_ERROR;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return fail(path, section, rc == Z_BUF_ERROR ? "zlib stream truncated or larger than declared"
                                                 : "zlib data corrupt");
  }
  if (out_pos != out.size()) return fail(path, section, "zlib stream shorter than declared size");
  return {};
}

Status inflate_zstd(const uint8_t* in, size_t in_size, SectionBuffer& out,
                    const std::string& path, std::string_view section) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (dctx == nullptr) return fail(path, section, "zstd context allocation failed");
  ZSTD_inBuffer ib{in, in_size, 0};
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  size_t rc = 1;
  // Bounded: each call either consumes input, produces output, or we stop.
  while (ib.pos < ib.size) {
    const size_t before_in = ib.pos, before_out = ob.pos;
    rc = ZSTD_decompressStream(dctx, &ob, &ib);
    if (ZSTD_isError(rc)) break;
    if (ib.pos == before_in && ob.pos == before_out) break;
  }
  ZSTD_freeDCtx(dctx);
  if (ZSTD_isError(rc)) return fail(path, section, ZSTD_getErrorName(rc));
  if (ib.pos != ib.size || rc != 0) {
    return fail(path, section, "zstd stream truncated or larger than declared");
  }
  if (ob.pos != out.size()) return fail(path, section, "zstd stream shorter than declared size");
  return {};
}

}  // namespace

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

// From malloc (so that the heap's own accounting, mallinfo2 in bench/symbolize, still counts the
// buffer), one huge page larger than asked so that a 2 MiB-aligned start with room for malloc's
// pointer before it exists; the slack is address space, never touched.
void* huge_buffer_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - kHugePage - sizeof(void*)) throw std::bad_alloc();
  void* raw = std::malloc(bytes + kHugePage + sizeof(void*));
  if (raw == nullptr) throw std::bad_alloc();
  const uintptr_t start =
      (reinterpret_cast<uintptr_t>(raw) + sizeof(void*) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  std::memcpy(reinterpret_cast<void*>(start - sizeof(void*)), &raw, sizeof raw);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // advice only: its failure changes nothing
#endif
  return reinterpret_cast<void*>(start);
}

void huge_buffer_free(void* p, size_t) noexcept {
  if (p == nullptr) return;
  void* raw = nullptr;
  std::memcpy(&raw, static_cast<char*>(p) - sizeof(void*), sizeof raw);
  std::free(raw);
}

Result<SectionBuffer> decompress_section(const uint8_t* data, size_t size,
                                                CompressionFormat format, bool is64,
                                                bool big_endian, const std::string& path,
                                                std::string_view section) {
  const ByteView v(data, size, big_endian);
  uint32_t type = kCompressZlib;
  uint64_t out_size = 0;
  size_t header = 0;
  if (format == CompressionFormat::kZdebug) {
    // GNU legacy format: "ZLIB" then the uncompressed size as 8-byte big-endian
    // (binutils bfd/compress.c, bfd_is_section_compressed_info).
    if (size < 12 || std::memcmp(data, "ZLIB", 4) != 0) {
      return fail(path, section, "missing ZLIB header of a .zdebug section");
    }
    out_size = *ByteView(data, size, true).u64(4);
    header = 12;
  } else if (is64) {
    // Elf64_Chdr: ch_type(4) ch_reserved(4) ch_size(8) ch_addralign(8) — gABI.
    if (size < 24) return fail(path, section, "truncated Elf64_Chdr");
    type = *v.u32(0);
    out_size = *v.u64(8);
    header = 24;
  } else {
    // Elf32_Chdr: ch_type(4) ch_size(4) ch_addralign(4) — gABI.
    if (size < 12) return fail(path, section, "truncated Elf32_Chdr");
    type = *v.u32(0);
    out_size = *v.u32(4);
    header = 12;
  }
  if (type != kCompressZlib && type != kCompressZstd) {
    return make_error(SPROV_ERR_DECOMPRESS, "%s: section %.*s: unknown ch_type %u", path.c_str(),
                      static_cast<int>(section.size()), section.data(), type);
  }
  const uint64_t in_size = size - header;
  const uint64_t ratio_cap = std::max(kRatioFloor, in_size * kMaxRatio);
  if (out_size > kMaxDecompressed || out_size > ratio_cap) {
    return make_error(SPROV_ERR_LIMIT,
                      "%s: section %.*s: declared decompressed size %llu exceeds the limit "
                      "(4 GiB, %llux the compressed size)",
                      path.c_str(), static_cast<int>(section.size()), section.data(),
                      static_cast<unsigned long long>(out_size),
                      static_cast<unsigned long long>(kMaxRatio));
  }
  SectionBuffer out;
  try {
    out.resize(static_cast<size_t>(out_size));
  } catch (const std::bad_alloc&) {
    return make_error(SPROV_ERR_NOMEM, "%s: section %.*s: cannot allocate %llu bytes",
                      path.c_str(), static_cast<int>(section.size()), section.data(),
                      static_cast<unsigned long long>(out_size));
  }
  const Status st = type == kCompressZlib
                        ? inflate_zlib(data + header, in_size, out, path, section)
                        : inflate_zstd(data + header, in_size, out, path, section);
  if (!st) return st.error();
  return out;
}

}  // namespace stackprov::elf::detail
