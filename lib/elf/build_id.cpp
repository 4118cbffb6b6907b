// SPDX-License-Identifier: Apache-2.0
// Fast build-id reader (pread of ELF/program/section headers and notes, no libelf) and file CRC32.
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/open_file.hpp"
#include "elf/elf_bytes.hpp"
#include "elf/elf_image.hpp"

namespace stackprov::elf {

namespace {

/// Largest note area we read while looking for a build-id; real ones are a
/// few hundred bytes.
constexpr uint64_t kMaxNoteBytes = 1u << 20;
/// Largest program/section header table we read.
constexpr uint64_t kMaxHeaderTable = 4u << 20;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Reads exactly `len` bytes at `off`; false on a short read or error.
bool pread_exact(int fd, void* buf, size_t len, uint64_t off) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = pread(fd, p, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    off += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return true;
}

std::optional<ModuleId> notes_at(int fd, uint64_t off, uint64_t size, uint64_t align, bool big,
                                uint64_t file_size) {
  if (size == 0 || size > kMaxNoteBytes || off > file_size || size > file_size - off) {
    return std::nullopt;
  }
  std::vector<uint8_t> buf(size);
  if (!pread_exact(fd, buf.data(), buf.size(), off)) return std::nullopt;
  return detail::find_gnu_build_id(detail::ByteView(buf.data(), buf.size(), big), align);
}

}  // namespace

Result<ModuleId> read_build_id(const std::string& path) {
  int open_err = 0;
  Fd fd(open_regular_file(path, &open_err));  // no device's open, no FIFO wait (core/open_file.hpp)
  if (fd.get() < 0) {
    if (open_err == EINVAL) return make_error(SPROV_ERR_ELF, "%s: not a regular file", path.c_str());
    return make_error(-open_err, "%s: open: %s", path.c_str(), strerror(open_err));
  }
  const off_t end = lseek(fd.get(), 0, SEEK_END);
  if (end < 0) {
    const int err = errno;
    return make_error(-err, "%s: lseek: %s", path.c_str(), strerror(err));
  }
  const uint64_t file_size = static_cast<uint64_t>(end);
  uint8_t eh[sizeof(Elf64_Ehdr)] = {};
  const bool have_ident = file_size >= EI_NIDENT && pread_exact(fd.get(), eh, EI_NIDENT, 0);
  if (!have_ident || std::memcmp(eh, ELFMAG, SELFMAG) != 0) {
    return make_error(SPROV_ERR_ELF, "%s: not an ELF file (bad magic)", path.c_str());
  }
  const bool is64 = eh[EI_CLASS] == ELFCLASS64;
  const bool big = eh[EI_DATA] == ELFDATA2MSB;
  if ((eh[EI_CLASS] != ELFCLASS32 && !is64) || (eh[EI_DATA] != ELFDATA2LSB && !big)) {
    return make_error(SPROV_ERR_ELF, "%s: unknown ELF class %u or data encoding %u", path.c_str(),
                      eh[EI_CLASS], eh[EI_DATA]);
  }
  const size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (file_size < ehsize || !pread_exact(fd.get(), eh, ehsize, 0)) {
    return make_error(SPROV_ERR_ELF, "%s: truncated ELF header", path.c_str());
  }
  const detail::ByteView h(eh, ehsize, big);
  // Field offsets from the gABI Elf32_Ehdr / Elf64_Ehdr layouts (elf.h).
  const uint64_t phoff = *h.word(is64 ? 32 : 28, is64);
  const uint64_t shoff = *h.word(is64 ? 40 : 32, is64);
  const uint16_t phentsize = *h.u16(is64 ? 54 : 42);
  const uint16_t phnum = *h.u16(is64 ? 56 : 44);
  const uint16_t shentsize = *h.u16(is64 ? 58 : 46);
  const uint16_t shnum = *h.u16(is64 ? 60 : 48);
  const size_t min_ph = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  const size_t min_sh = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);

  // 1. PT_NOTE segments. Elf64_Phdr: p_type@0 p_offset@8 p_filesz@32 p_align@48;
  //    Elf32_Phdr: p_type@0 p_offset@4 p_filesz@16 p_align@28.
  const uint64_t ph_bytes = uint64_t{phnum} * phentsize;
  if (phnum != 0 && phnum != PN_XNUM && phentsize >= min_ph && ph_bytes <= kMaxHeaderTable &&
      phoff <= file_size && ph_bytes <= file_size - phoff) {
    std::vector<uint8_t> tab(ph_bytes);
    if (pread_exact(fd.get(), tab.data(), tab.size(), phoff)) {
      const detail::ByteView t(tab.data(), tab.size(), big);
      for (uint64_t i = 0; i < phnum; i++) {
        const uint64_t b = i * phentsize;
        if (*t.u32(b) != PT_NOTE) continue;
        const uint64_t off = *t.word(b + (is64 ? 8 : 4), is64);
        const uint64_t sz = *t.word(b + (is64 ? 32 : 16), is64);
        const uint64_t al = *t.word(b + (is64 ? 48 : 28), is64);
        if (auto id = notes_at(fd.get(), off, sz, al, big, file_size)) return *id;
      }
    }
  }
  // 2. SHT_NOTE sections (separate debug files keep notes as sections).
  //    Elf64_Shdr: sh_type@4 sh_flags@8 sh_offset@24 sh_size@32 sh_addralign@48;
  //    Elf32_Shdr: sh_type@4 sh_flags@8 sh_offset@16 sh_size@20 sh_addralign@32.
  const uint64_t sh_bytes = uint64_t{shnum} * shentsize;
  if (shnum != 0 && shentsize >= min_sh && sh_bytes <= kMaxHeaderTable && shoff <= file_size &&
      sh_bytes <= file_size - shoff) {
    std::vector<uint8_t> tab(sh_bytes);
    if (pread_exact(fd.get(), tab.data(), tab.size(), shoff)) {
      const detail::ByteView t(tab.data(), tab.size(), big);
      for (uint64_t i = 0; i < shnum; i++) {
        const uint64_t b = i * shentsize;
        if (*t.u32(b + 4) != SHT_NOTE) continue;
        const uint64_t flags = *t.word(b + 8, is64);
        if ((flags & SHF_COMPRESSED) != 0) continue;
        const uint64_t off = *t.word(b + (is64 ? 24 : 16), is64);
        const uint64_t sz = *t.word(b + (is64 ? 32 : 20), is64);
        const uint64_t al = *t.word(b + (is64 ? 48 : 32), is64);
        if (auto id = notes_at(fd.get(), off, sz, al, big, file_size)) return *id;
      }
    }
  }
  return ModuleId{};
}

Result<uint32_t> file_crc32(const std::string& path) {
  int open_err = 0;
  Fd fd(open_regular_file(path, &open_err));  // no device's open, no FIFO wait (core/open_file.hpp)
  if (fd.get() < 0) {
    if (open_err == EINVAL) return make_error(SPROV_ERR_ELF, "%s: not a regular file", path.c_str());
    return make_error(-open_err, "%s: open: %s", path.c_str(), strerror(open_err));
  }
  std::vector<uint8_t> buf(1 << 16);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (;;) {
    const ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return make_error(-err, "%s: read: %s", path.c_str(), strerror(err));
    }
    if (n == 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace stackprov::elf
