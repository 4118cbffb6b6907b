// SPDX-License-Identifier: Apache-2.0
// Mapped files of a core without NT_FILE (qemu-user cores), from the dynamic linker's r_debug/link_map.
#include "elf/core_link_map.hpp"

#include <elf.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace stackprov::elf {

namespace {

constexpr uint64_t kPage = 4096;
constexpr int kMaxObjects = 512;
constexpr size_t kMaxName = 4096;
constexpr uint64_t kMaxDynEntries = 4096;
// mips dynamic tags (glibc elf/elf.h; the MIPS psABI): the address of a word
// that ld.so sets to &r_debug (DT_DEBUG lives in a read-only .dynamic there).
constexpr uint64_t kDtMipsRldMap = 0x70000016;
constexpr uint64_t kDtMipsRldMapRel = 0x70000035;

struct Reader {
  const CoreFile& core;
  int w;  // word size: 8 or 4
  uint64_t decode(const uint8_t* b) const {
    uint64_t x = 0;
    for (int i = 0; i < w; i++) x = core.big_endian() ? (x << 8) | b[i] : x | uint64_t{b[i]} << (8 * i);
    return x;
  }
  bool word(uint64_t addr, uint64_t* out) const {
    uint8_t b[8];
    if (!core.read(addr, b, static_cast<size_t>(w))) return false;
    *out = decode(b);
    return true;
  }
};

uint64_t page_down(uint64_t x) { return x & ~(kPage - 1); }
uint64_t page_up(uint64_t x) { return (x + kPage - 1) & ~(kPage - 1); }

void add_loads(const std::vector<ProgramHeader>& phdrs, uint64_t bias, const std::string& path,
               std::vector<CoreMappedFile>* out) {
  for (const ProgramHeader& p : phdrs) {
    if (p.type != PT_LOAD || p.filesz == 0) continue;
    // A hostile header may wrap the range's end: that segment is left out (the module's others
    // stay), instead of a reversed range that fails the whole capture. (bias + vaddr itself wraps
    // legitimately for a library loaded below its link address.)
    const uint64_t lo = bias + p.vaddr;
    if (lo > UINT64_MAX - kPage || p.filesz > UINT64_MAX - kPage - lo) continue;
    CoreMappedFile f;
    f.start = page_down(lo);
    f.end = page_up(lo + p.filesz);
    f.file_offset = page_down(p.offset);
    f.path = path;
    out->push_back(std::move(f));
  }
}

/// &r_debug from the program's dynamic section, 0 when there is none (a static
/// program). Entries are read from the core's memory, else from the file's copy
/// (tags and DT_MIPS_RLD_MAP* values are link-time constants).
uint64_t find_r_debug(const Reader& rd, const LinkMapFile& exe, uint64_t bias) {
  for (const ProgramHeader& p : exe.phdrs) {
    if (p.type != PT_DYNAMIC) continue;
    const uint64_t dyn = bias + p.vaddr;
    const uint64_t n = std::min<uint64_t>(p.memsz / (2 * rd.w), kMaxDynEntries);
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t at = dyn + i * 2 * rd.w;
      uint64_t tag, val;
      if (!rd.word(at, &tag) || !rd.word(at + rd.w, &val)) {
        const uint64_t off = i * 2 * rd.w;
        if (off + 2 * rd.w > exe.dynamic.size()) break;
        tag = rd.decode(exe.dynamic.data() + off);
        val = rd.decode(exe.dynamic.data() + off + rd.w);
      }
      if (tag == DT_NULL) break;
      uint64_t ptr = 0;
      if (tag == DT_DEBUG && val != 0) return val;
      if (tag == kDtMipsRldMap) ptr = val;
      if (tag == kDtMipsRldMapRel) ptr = at + val;  // relative to the tag's own address
      uint64_t r;
      if (ptr != 0 && rd.word(ptr, &r) && r != 0) return r;
    }
  }
  return 0;
}

}  // namespace

std::vector<CoreMappedFile> mapped_files_from_link_map(const CoreFile& core, const std::string& exe_path,
                                                       const OpenLinkMapFile& open_file) {
  std::vector<CoreMappedFile> out;
  const Reader rd{core, core.is_64bit() ? 8 : 4};
  auto exe = open_file(exe_path);
  if (!exe) return out;
  uint64_t bias = 0;
  for (const ProgramHeader& p : exe->phdrs)
    if (p.type == PT_PHDR && core.auxv().phdr != 0) bias = core.auxv().phdr - p.vaddr;
  add_loads(exe->phdrs, bias, exe_path, &out);

  const uint64_t r_debug = find_r_debug(rd, *exe, bias);
  uint64_t lm = 0;
  if (r_debug == 0 || !rd.word(r_debug + rd.w, &lm)) return out;  // int r_version, then r_map
  std::set<uint64_t> seen;
  // One open per file: a hostile link map may name one large file in all of its entries.
  std::map<std::string, std::optional<std::vector<ProgramHeader>>> opened;
  for (int i = 0; i < kMaxObjects && lm != 0 && seen.insert(lm).second; i++) {
    // struct link_map { l_addr; l_name; l_ld; l_next; l_prev; }
    uint64_t l_addr, l_name, l_next;
    if (!rd.word(lm, &l_addr) || !rd.word(lm + rd.w, &l_name) || !rd.word(lm + 3 * rd.w, &l_next)) break;
    lm = l_next;
    auto name = l_name ? core.read_string(l_name, kMaxName) : std::nullopt;
    if (!name || name->empty() || (*name)[0] != '/') continue;  // the program itself, the vDSO
    auto it = opened.find(*name);
    if (it == opened.end()) {
      auto f = open_file(*name);
      it = opened.emplace(*name, f ? std::optional(std::move(f->phdrs)) : std::nullopt).first;
    }
    if (it->second) add_loads(*it->second, l_addr, *name, &out);
  }
  return out;
}

}  // namespace stackprov::elf
