// SPDX-License-Identifier: Apache-2.0
// The headers of a PE image as loaded in memory, read by RVA (a minidump's copy of a module).
#include "pe/loaded_image.hpp"

#include <cinttypes>
#include <cstring>
#include <vector>

#include "pe/pe_bytes.hpp"

namespace stackprov::pe {

namespace {
constexpr uint32_t kLfanewAt = 0x3c;
constexpr uint32_t kCoffHeader = 20;
constexpr uint32_t kDebugEntrySize = 28;
constexpr uint32_t kMaxOptHeader = 4096;
constexpr uint32_t kMaxCodeView = 4096 + 24;
}  // namespace

Result<LoadedHeaders> read_loaded_headers(const LoadedReader& read, const std::string& name) {
  const char* p = name.c_str();
  auto missing = [&](const char* what, uint64_t rva) {
    return make_error(SPROV_ERR_MEMORY_UNREADABLE, "%s: %s at RVA 0x%" PRIx64 " is not in memory", p, what, rva);
  };
  auto bad = [&](const char* what, uint64_t v) {
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: %s (0x%" PRIx64 ")", p, what, v);
  };
  uint8_t dos[0x40];
  if (!read(0, dos, sizeof dos)) return missing("the DOS header", 0);
  if (dos[0] != 'M' || dos[1] != 'Z') return bad("no MZ header at the image base", le16(dos));
  const uint32_t lfanew = le32(dos + kLfanewAt);
  if (lfanew > (1u << 20)) return bad("PE header offset too large", lfanew);
  uint8_t nt[4 + kCoffHeader];
  if (!read(lfanew, nt, sizeof nt)) return missing("the PE header", lfanew);
  if (std::memcmp(nt, "PE\0\0", 4) != 0) return bad("no PE signature at the header offset", lfanew);
  LoadedHeaders h;
  h.machine = le16(nt + 4);
  h.timestamp = le32(nt + 8);
  const uint32_t opt_size = le16(nt + 20);
  if (opt_size < 2 || opt_size > kMaxOptHeader) return bad("optional header size", opt_size);
  std::vector<uint8_t> opt(opt_size);
  if (!read(uint64_t{lfanew} + sizeof nt, opt.data(), opt.size())) return missing("the optional header", lfanew + sizeof nt);
  const uint16_t magic = le16(opt.data());
  if (magic != 0x20b && magic != 0x10b) return bad("optional header magic is neither PE32+ 0x20b nor PE32 0x10b", magic);
  const bool plus = magic == 0x20b;
  const uint32_t dirs_at = plus ? 112 : 96;
  if (opt_size < dirs_at) return bad("optional header too short", opt_size);
  h.image_base = plus ? le64(opt.data() + 24) : le32(opt.data() + 28);
  h.size_of_image = le32(opt.data() + 56);
  const uint32_t ndirs = le32(opt.data() + dirs_at - 4);
  if (ndirs > 16 || dirs_at + uint64_t{ndirs} * 8 > opt_size)
    return bad("data directory count beyond the optional header (at most 16)", ndirs);
  if (ndirs <= kDirDebug) return h;
  const uint32_t dd_rva = le32(opt.data() + dirs_at + 8 * kDirDebug);
  const uint32_t dd_size = le32(opt.data() + dirs_at + 8 * kDirDebug + 4);
  if (dd_size == 0) return h;
  const uint32_t n = dd_size / kDebugEntrySize;
  if (n > kMaxDebugEntries) return bad("debug directory has more than 64 entries", n);
  std::vector<uint8_t> dir(size_t{n} * kDebugEntrySize);
  if (!read(dd_rva, dir.data(), dir.size())) return missing("the debug directory", dd_rva);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* e = dir.data() + i * kDebugEntrySize;
    const uint32_t type = le32(e + 12), size = le32(e + 16), rva = le32(e + 20);
    if (type != kDebugTypeCodeView || rva == 0 || size < 24 || size > kMaxCodeView) continue;
    std::vector<uint8_t> r(size);
    if (!read(rva, r.data(), r.size()) || std::memcmp(r.data(), "RSDS", 4) != 0) continue;
    CodeView cv;
    std::memcpy(cv.guid, r.data() + 4, 16);
    cv.age = le32(r.data() + 20);
    cv.pdb_path.assign(reinterpret_cast<const char*>(r.data() + 24), strnlen(reinterpret_cast<const char*>(r.data() + 24), size - 24));
    h.id = pdb_id(cv);
    h.codeview = std::move(cv);
    break;
  }
  return h;
}

}  // namespace stackprov::pe
