// SPDX-License-Identifier: Apache-2.0
// A test-only object format (issue 32: "a format is a plug-in"): a header, an identity, a symbol
// table, code bytes and one unwind table kind ("toy_rows"), in a few dozen lines, registered with
// one call (object::register_format(&kToyFormat)).
//
// Layout, little-endian: "TOYOBJ\0\1", u8 arch, u8 id_len, u16 n_symbols, u32 code_size,
// u64 code_addr, u32 n_rows, id bytes, n_symbols x { u64 addr, u32 size, u8 name_len, name },
// n_rows x { u32 start (link-time, sorted), u32 cfa_offset } (cfa = sp + cfa_offset, the return
// address at cfa - 8), code bytes. The identity is a Mach-O-style UUID (not an ELF build-id).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/module_cache.hpp"
#include "core/open_file.hpp"
#include "object/object_image.hpp"

namespace toy {

using namespace stackprov;

struct Sym {
  uint64_t addr;
  uint32_t size;
  std::string name;
};

class ToyImage final : public object::ObjectImage {
 public:
  std::string_view format_name() const override { return "toy"; }
  const std::string& path() const override { return name_; }
  const ModuleId& id() const override { return id_; }
  Arch arch() const override { return arch_; }
  bool big_endian() const override { return false; }
  std::optional<object::SectionRef> section(std::string_view name) const override {
    if (name == "rows") return rows_;
    if (name == "code") return object::SectionRef{"code", bytes_.data() + code_at_, code_size_, code_addr_};
    return std::nullopt;
  }
  std::vector<object::Symbol> symbols() const override {
    std::vector<object::Symbol> out;
    for (const Sym& s : syms_) out.push_back(object::Symbol{s.addr, s.size, s.name});
    return out;
  }
  std::optional<object::Symbol> symbol_at(uint64_t a) const override {
    for (const Sym& s : syms_)
      if (a >= s.addr && a - s.addr < s.size) return object::Symbol{s.addr, s.size, s.name};
    return std::nullopt;
  }
  bool read_code(uint64_t vaddr, void* buf, size_t len) const override {
    if (vaddr < code_addr_ || vaddr - code_addr_ > code_size_ || len > code_size_ - (vaddr - code_addr_)) return false;
    std::memcpy(buf, bytes_.data() + code_at_ + (vaddr - code_addr_), len);
    return true;
  }
  uint64_t load_bias(uint64_t map_start, uint64_t map_offset) const override { return map_start - map_offset - code_addr_; }
  std::vector<object::UnwindTable> unwind_tables() const override { return {object::UnwindTable{"toy_rows", rows_, {}}}; }
  std::span<const uint8_t> file_bytes() const override { return bytes_; }
  const FileIdentity* file_identity() const override { return file_.known() ? &file_ : nullptr; }

  /// Parses `bytes`; every length checked (a test format is hostile input too).
  static stackprov::Result<std::shared_ptr<object::ObjectImage>> parse(std::vector<uint8_t> bytes, std::string name) {
    auto img = std::make_shared<ToyImage>();
    img->bytes_ = std::move(bytes);
    img->name_ = std::move(name);
    const std::vector<uint8_t>& b = img->bytes_;
    size_t at = 0;
    auto need = [&](size_t n) { return n <= b.size() - at; };
    auto le = [&](int n) {
      uint64_t v = 0;
      for (int i = 0; i < n; i++) v |= uint64_t{b[at + i]} << (8 * i);
      at += n;
      return v;
    };
    auto bad = [&](const char* what) {
      return stackprov::make_error(SPROV_ERR_UNSUPPORTED, "%s: toy image: %s at offset %zu", img->name_.c_str(), what, at);
    };
    if (b.size() < 28) return bad("short header");
    at = 8;
    img->arch_ = static_cast<Arch>(le(1));
    const size_t id_len = le(1), n_syms = le(2);
    img->code_size_ = le(4);
    img->code_addr_ = le(8);
    const size_t n_rows = le(4);
    if (!need(id_len)) return bad("identity past the end");
    img->id_ = ModuleId::from_bytes(b.data() + at, id_len, IdKind::kMachoUuid);
    at += id_len;
    for (size_t i = 0; i < n_syms; i++) {
      if (!need(13)) return bad("symbol past the end");
      Sym s;
      s.addr = le(8);
      s.size = static_cast<uint32_t>(le(4));
      const size_t n = le(1);
      if (!need(n)) return bad("symbol name past the end");
      s.name.assign(reinterpret_cast<const char*>(b.data() + at), n);
      at += n;
      img->syms_.push_back(std::move(s));
    }
    if (n_rows > (b.size() - at) / 8) return bad("rows past the end");
    img->rows_ = object::SectionRef{"rows", b.data() + at, n_rows * 8, 0};
    at += n_rows * 8;
    if (!need(img->code_size_)) return bad("code past the end");
    img->code_at_ = at;
    return std::shared_ptr<object::ObjectImage>(img);
  }

 private:
  friend stackprov::Result<std::shared_ptr<object::ObjectImage>> open(const std::string& path);
  std::vector<uint8_t> bytes_;
  std::string name_;
  FileIdentity file_;
  ModuleId id_;
  Arch arch_ = Arch::kUnknown;
  std::vector<Sym> syms_;
  object::SectionRef rows_;
  size_t code_at_ = 0, code_size_ = 0;
  uint64_t code_addr_ = 0;
};

inline bool sniff(std::span<const uint8_t> h) { return h.size() >= 8 && std::memcmp(h.data(), "TOYOBJ\0\1", 8) == 0; }
inline stackprov::Result<std::shared_ptr<object::ObjectImage>> from_bytes(std::vector<uint8_t> b, std::string name) {
  return ToyImage::parse(std::move(b), std::move(name));
}
/// Opened as every module file is (core/open_file.hpp: inside a target's root, regular files only).
inline stackprov::Result<std::shared_ptr<object::ObjectImage>> open(const std::string& path) {
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0) return stackprov::make_error(-err, "%s: open: %s", path.c_str(), std::strerror(err));
  struct stat st;
  std::vector<uint8_t> b;
  uint8_t buf[4096];
  const bool ok = fstat(fd, &st) == 0 && st.st_size < (1 << 20);
  for (ssize_t n; ok && (n = ::read(fd, buf, sizeof buf)) > 0;) b.insert(b.end(), buf, buf + n);
  ::close(fd);
  if (!ok) return stackprov::make_error(SPROV_ERR_IO, "%s: not a small regular file", path.c_str());
  auto img = ToyImage::parse(std::move(b), path);
  if (img.ok()) static_cast<ToyImage&>(*img.value()).file_ = file_identity_of(st);
  return img;
}
inline const object::Format kToyFormat{"toy", sniff, open, from_bytes, nullptr};

/// Writes a toy image: `syms`, `rows` ({start, cfa_offset}), `code` at `code_addr`.
inline std::vector<uint8_t> build(Arch arch, const std::vector<uint8_t>& id, const std::vector<Sym>& syms,
                                  const std::vector<std::pair<uint32_t, uint32_t>>& rows, uint64_t code_addr,
                                  const std::vector<uint8_t>& code) {
  std::vector<uint8_t> b = {'T', 'O', 'Y', 'O', 'B', 'J', 0, 1};
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; i++) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(static_cast<uint8_t>(arch), 1);
  put(id.size(), 1);
  put(syms.size(), 2);
  put(code.size(), 4);
  put(code_addr, 8);
  put(rows.size(), 4);
  b.insert(b.end(), id.begin(), id.end());
  for (const Sym& s : syms) {
    put(s.addr, 8);
    put(s.size, 4);
    put(s.name.size(), 1);
    b.insert(b.end(), s.name.begin(), s.name.end());
  }
  for (const auto& [start, off] : rows) {
    put(start, 4);
    put(off, 4);
  }
  b.insert(b.end(), code.begin(), code.end());
  return b;
}

}  // namespace toy
