// SPDX-License-Identifier: Apache-2.0
// ELF's symbol features reached from a neutral object image (elf_symbols.hpp).
#include "elf/elf_symbols.hpp"

#include <elf.h>
#include <lzma.h>

#include <algorithm>
#include <cstring>

#include "elf/elf_bytes.hpp"
#include "elf/elf_object.hpp"

namespace stackprov::elf {

namespace {

constexpr uint64_t kMaxMiniDebugInfo = uint64_t{256} << 20;

/// The NUL-terminated string at `off` of a string table; empty when outside it or unterminated.
std::string_view table_string(const Section& s, uint64_t off) {
  if (s.data == nullptr || s.size == 0 || off >= s.size) return {};
  const void* z = std::memchr(s.data + off, 0, s.size - off);
  if (z == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(s.data + off), static_cast<const uint8_t*>(z) - (s.data + off));
}

}  // namespace

Result<SymbolTable> load_symbols(const object::ObjectImage& obj, SymbolTable::Kind kind) {
  const std::shared_ptr<ElfImage>* img = ElfObject::image_of(obj);
  if (img == nullptr) return SymbolTable();
  return SymbolTable::load(**img, kind);
}

PltTable load_plt(const object::ObjectImage& obj) {
  const std::shared_ptr<ElfImage>* img = ElfObject::image_of(obj);
  return img != nullptr ? PltTable::load(**img) : PltTable();
}

LlvmSymbolTable load_llvm_symbols(const object::ObjectImage& obj) {
  const std::shared_ptr<ElfImage>* img = ElfObject::image_of(obj);
  return img != nullptr ? LlvmSymbolTable::load(**img) : LlvmSymbolTable();
}

std::shared_ptr<const object::ObjectImage> open_minidebuginfo(const object::ObjectImage& obj) {
  const std::shared_ptr<ElfImage>* img = ElfObject::image_of(obj);
  if (img == nullptr) return nullptr;
  auto sec = (*img)->section(".gnu_debugdata");
  if (!sec || sec->data == nullptr || sec->size == 0) return nullptr;
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, kMaxMiniDebugInfo, 0) != LZMA_OK) return nullptr;
  std::vector<uint8_t> out;
  strm.next_in = sec->data;
  strm.avail_in = sec->size;
  lzma_ret r = LZMA_OK;
  while (r == LZMA_OK) {
    if (out.size() >= kMaxMiniDebugInfo) break;
    const size_t have = out.size();
    out.resize(have + (size_t{1} << 20));
    strm.next_out = out.data() + have;
    strm.avail_out = out.size() - have;
    r = lzma_code(&strm, LZMA_FINISH);
    out.resize(out.size() - strm.avail_out);
  }
  lzma_end(&strm);
  if (r != LZMA_STREAM_END) return nullptr;
  auto mini = ElfImage::from_bytes(std::move(out), (*img)->path() + "[.gnu_debugdata]");
  return mini.ok() ? ElfObject::of(mini.value()) : nullptr;
}

std::vector<LocalFileSymbol> local_file_symbols(const object::ObjectImage& obj) {
  std::vector<LocalFileSymbol> out;
  const std::shared_ptr<ElfImage>* img = ElfObject::image_of(obj);
  if (img == nullptr) return out;
  const ElfImage& f = **img;
  auto sec = f.section(".symtab");
  if (!sec || sec->data == nullptr) return out;
  auto str = f.section_at(sec->link);
  if (!str || str->data == nullptr) return out;
  const bool is64 = f.is_64bit();
  const size_t ent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  const detail::ByteView v(sec->data, sec->size, f.big_endian());
  std::string_view file;
  const size_t n = std::min<size_t>(sec->size / ent, size_t{1} << 26);
  for (size_t i = 0; i < n; i++) {
    // Elf64_Sym: st_name@0 st_info@4 st_value@8; Elf32_Sym: st_name@0 st_value@4 st_info@12 (gABI).
    const size_t b = i * ent;
    const uint32_t name = *v.u32(b);
    const uint8_t info = sec->data[b + (is64 ? 4 : 12)];
    const uint64_t value = *v.word(b + (is64 ? 8 : 4), is64);
    const uint8_t type = ELF64_ST_TYPE(info), bind = ELF64_ST_BIND(info);
    const std::string_view nm = table_string(*str, name);
    if (type == STT_FILE) {
      file = nm;
    } else if (bind == STB_LOCAL && (type == STT_FUNC || type == STT_GNU_IFUNC) && !file.empty()) {
      out.push_back({value, nm, file});
    }
  }
  return out;
}

}  // namespace stackprov::elf
