// SPDX-License-Identifier: Apache-2.0
// PltTable: decodes PLT entries (x86_64, AArch64) to their GOT slot and names them after the slot's relocation.
#include "elf/plt.hpp"

#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_map>

#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

/// Entries read from one relocation or PLT section at most (hostile sizes).
constexpr size_t kMaxEntries = size_t{1} << 22;

struct Slot {
  uint32_t type = 0;
  uint32_t sym = 0;
  int64_t addend = 0;
  size_t rela_section = 0;  // whose sh_link names the symbol table
};

// Relocation types (x86-64 psABI §4.4, AArch64 ELF ABI §5.7.10).
constexpr uint32_t kX86JumpSlot = 7, kX86GlobDat = 6, kX86Irelative = 37;
constexpr uint32_t kA64JumpSlot = 1026, kA64GlobDat = 1025, kA64Irelative = 1032;

/// GOT slot of the x86_64 PLT entry at [p, p+n): `jmp *disp32(%rip)` (ff 25),
/// optionally `bnd`-prefixed (f2) and preceded by `endbr64` (f3 0f 1e fa).
std::optional<uint64_t> x86_slot(const uint8_t* p, size_t n, uint64_t addr) {
  static constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  size_t at = 0;
  if (n >= 4 && std::memcmp(p, kEndbr64, 4) == 0) at = 4;
  if (at < n && p[at] == 0xf2) at++;
  if (at + 6 > n || p[at] != 0xff || p[at + 1] != 0x25) return std::nullopt;
  // Little-endian whatever the host (a big-endian mips host may symbolize x86_64 images).
  const uint32_t u = uint32_t{p[at + 2]} | uint32_t{p[at + 3]} << 8 | uint32_t{p[at + 4]} << 16 |
                     uint32_t{p[at + 5]} << 24;
  return addr + at + 6 + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(u)));
}

/// An AArch64 instruction: always stored little-endian, also in big-endian images (Arm ARM B2.6.2).
uint32_t a64_insn(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

constexpr uint32_t kA64BtiC = 0xd503245f;

/// GOT slot of `adrp x16, page; ldr x17, [x16, #off]` at p (8 bytes), the core of every AArch64
/// PLT stub (binutils and lld, 16-byte entries, 24-byte BTI/PAC entries).
std::optional<uint64_t> a64_slot(const uint8_t* p, uint64_t addr) {
  const uint32_t adrp = a64_insn(p), ldr = a64_insn(p + 4);
  if ((adrp & 0x9f00001f) != 0x90000010) return std::nullopt;  // adrp x16
  if ((ldr & 0xffc003ff) != 0xf9400211) return std::nullopt;   // ldr x17, [x16, #imm12*8]
  int64_t imm = static_cast<int64_t>(((adrp >> 5) & 0x7ffff) << 2 | ((adrp >> 29) & 3));
  if (imm & (int64_t{1} << 20)) imm -= int64_t{1} << 21;
  const uint64_t page = (addr & ~uint64_t{0xfff}) + static_cast<uint64_t>(imm * 4096);
  return page + ((ldr >> 10) & 0xfff) * 8;
}

}  // namespace

PltTable PltTable::load(const ElfImage& image) {
  PltTable t;
  const uint16_t machine = image.machine();
  if (!image.is_64bit() || (machine != EM_X86_64 && machine != EM_AARCH64)) return t;
  // Without dynamic symbols (static executables: IRELATIVE slots only)
  // objdump synthesises no PLT names, and neither do we.
  bool dynamic = false;
  for (size_t i = 1; i < image.section_count() && !dynamic; i++) dynamic = image.section_type(i) == SHT_DYNSYM;
  if (!dynamic) return t;
  const bool x86 = machine == EM_X86_64;
  const bool be = image.big_endian();

  // Hostile headers may name one block many times: each block is read once, and the entries of
  // all sections together stay within kMaxEntries.
  std::set<std::pair<uint64_t, uint64_t>> seen;  // (file offset, size) of the sections read
  auto first_time = [&seen](const Section& s) { return seen.emplace(s.offset, s.size).second; };
  // GOT slot -> relocation, from every SHT_RELA section (.rela.plt, .rela.dyn, .rela.iplt).
  std::unordered_map<uint64_t, Slot> slots;
  for (size_t i = 1; i < image.section_count(); i++) {
    if (image.section_type(i) != SHT_RELA) continue;
    auto s = image.section_at(i);
    if (!s || s->data == nullptr || !first_time(*s)) continue;
    const detail::ByteView v(s->data, s->size, be);
    const size_t n = std::min(s->size / sizeof(Elf64_Rela), kMaxEntries);
    for (size_t k = 0; k < n; k++) {
      const uint64_t b = k * sizeof(Elf64_Rela);
      const uint64_t info = *v.u64(b + 8);
      const uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(info));
      const bool want = x86 ? (type == kX86JumpSlot || type == kX86GlobDat || type == kX86Irelative)
                            : (type == kA64JumpSlot || type == kA64GlobDat || type == kA64Irelative);
      if (!want) continue;
      Slot sl{type, static_cast<uint32_t>(ELF64_R_SYM(info)), static_cast<int64_t>(*v.u64(b + 16)), i};
      slots.emplace(*v.u64(b), sl);
    }
  }
  if (slots.empty()) return t;

  auto sym_name = [&](const Slot& sl) -> std::string {
    const bool irel = sl.type == (x86 ? kX86Irelative : kA64Irelative);
    if (irel) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "*ABS*+0x%llx", static_cast<unsigned long long>(sl.addend));
      return buf;
    }
    auto rela = image.section_at(sl.rela_section);
    if (!rela || sl.sym == 0) return {};
    auto tab = image.section_at(rela->link);
    if (!tab || tab->data == nullptr) return {};
    auto str = image.section_at(tab->link);
    if (!str || str->data == nullptr) return {};
    const detail::ByteView v(tab->data, tab->size, be);
    auto st_name = v.u32(uint64_t{sl.sym} * sizeof(Elf64_Sym));
    if (!st_name || *st_name >= str->size) return {};
    const char* s = reinterpret_cast<const char*>(str->data) + *st_name;
    return std::string(s, strnlen(s, str->size - *st_name));
  };

  for (size_t i = 1; i < image.section_count(); i++) {
    const std::string_view name = image.section_name(i);
    if (name != ".plt" && name != ".plt.sec" && name != ".plt.got" && name != ".iplt") continue;
    if ((image.section_flags(i) & SHF_EXECINSTR) == 0 || t.syms_.size() >= kMaxEntries) continue;
    auto s = image.section_at(i);
    if (!s || s->data == nullptr || !first_time(*s)) continue;
    auto add = [&](uint64_t addr, uint64_t size, uint64_t slot) {
      if (t.syms_.size() >= kMaxEntries) return;
      auto it = slots.find(slot);
      if (it == slots.end()) return;  // the PLT header's jump to the resolver
      std::string nm = sym_name(it->second);
      if (nm.empty()) return;
      const std::string& stored = t.names_.emplace_back(nm + "@plt");
      t.syms_.push_back(Symbol{addr, size, stored, STT_FUNC, STB_LOCAL});
    };
    if (x86) {
      const uint64_t ent = (s->entsize == 8 || s->entsize == 16) ? s->entsize : 16;
      const size_t n = std::min<size_t>(s->size / ent, kMaxEntries);
      for (size_t k = 0; k < n; k++)
        if (auto slot = x86_slot(s->data + k * ent, ent, s->addr + k * ent))
          add(s->addr + k * ent, ent, *slot);
      continue;
    }
    // AArch64: entries are 16 bytes, or 24 with BTI/PAC (binutils PLT_BTI_SMALL_ENTRY_SIZE,
    // after a 32-byte PLT0, so not a stride from the section start): find each stub by its
    // adrp x16/ldr x17 pair, starting at a `bti c` before it; it ends where the next begins.
    struct Stub {
      uint64_t off;
      uint64_t slot;
    };
    std::vector<Stub> stubs;
    const uint64_t words = std::min<uint64_t>(s->size / 4, kMaxEntries);
    for (uint64_t w = 0; w + 2 <= words; w++) {
      const uint64_t off = w * 4;
      auto slot = a64_slot(s->data + off, s->addr + off);
      if (!slot) continue;
      const uint64_t start = off >= 4 && a64_insn(s->data + off - 4) == kA64BtiC ? off - 4 : off;
      stubs.push_back({start, *slot});
      w++;  // the ldr
    }
    for (size_t k = 0; k < stubs.size(); k++) {
      // The last stub is as long as the one before it (16 or 24 bytes), within the section.
      uint64_t last = (s->entsize == 16 || s->entsize == 24) ? s->entsize : 16;
      if (stubs.size() >= 2 && stubs.back().off - stubs[stubs.size() - 2].off <= 24)
        last = stubs.back().off - stubs[stubs.size() - 2].off;
      const uint64_t end = k + 1 < stubs.size() ? stubs[k + 1].off : std::min<uint64_t>(s->size, stubs[k].off + last);
      add(s->addr + stubs[k].off, end - stubs[k].off, stubs[k].slot);
    }
  }
  // Stable: two PLT sections at one address (hostile) keep their section order.
  std::stable_sort(t.syms_.begin(), t.syms_.end(), [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
  return t;
}

const Symbol* PltTable::lookup(uint64_t a) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), a, [](uint64_t x, const Symbol& s) { return x < s.addr; });
  if (it == syms_.begin()) return nullptr;
  --it;
  return a - it->addr < it->size ? &*it : nullptr;
}

}  // namespace stackprov::elf
