// SPDX-License-Identifier: Apache-2.0
// SymbolTable: reads .symtab/.dynsym by hand, keeps code symbols, collapses aliases, looks up by address.
#include "elf/symtab.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>

#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

/// How far lookup() walks back over symbols that start below the address
/// (nested or overlapping symbols); keeps hostile tables from costing O(n).
constexpr size_t kMaxBackscan = 64;

struct Candidate {
  Symbol sym;
  uint32_t index = 0;  // position in the ELF table, the final tie-break
};

int bind_rank(uint8_t bind) {
  switch (bind) {
    case STB_GLOBAL:
    case STB_GNU_UNIQUE:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

/// The alias rule of doc/symbols.md: true when `a` is the better name for an
/// address than `b`. Sized beats zero-sized; then GLOBAL/UNIQUE > WEAK >
/// LOCAL; then larger st_size; then the lower symbol-table index.
bool better_alias(const Candidate& a, const Candidate& b) {
  const bool a_sized = a.sym.size != 0, b_sized = b.sym.size != 0;
  if (a_sized != b_sized) return a_sized;
  const int ra = bind_rank(a.sym.bind), rb = bind_rank(b.sym.bind);
  if (ra != rb) return ra < rb;
  if (a.sym.size != b.sym.size) return a.sym.size > b.sym.size;
  return a.index < b.index;
}

}  // namespace

Result<SymbolTable> SymbolTable::load(const ElfImage& image, Kind kind) {
  SymbolTable table;
  table.kind_ = kind;
  const uint32_t want = kind == Kind::kSymtab ? SHT_SYMTAB : SHT_DYNSYM;
  const char* want_name = kind == Kind::kSymtab ? ".symtab" : ".dynsym";
  size_t tab_index = 0;
  for (size_t i = 1; i < image.section_count() && tab_index == 0; i++) {
    if (image.section_type(i) == want) tab_index = i;
  }
  if (tab_index == 0) return table;
  auto tab_or = image.section_at_or_error(tab_index);
  if (!tab_or.ok()) return std::move(tab_or).error();
  const Section tab = tab_or.value();
  const char* path = image.path().c_str();

  const bool is64 = image.is_64bit();
  const size_t ent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  if (tab.entsize != 0 && tab.entsize != ent) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): sh_entsize %llu, expected %zu", path,
                      want_name, tab.index, static_cast<unsigned long long>(tab.entsize), ent);
  }
  if (tab.link == 0 || tab.link >= image.section_count()) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): bad sh_link %u to its string table",
                      path, want_name, tab.index, tab.link);
  }
  auto str_or = image.section_at_or_error(tab.link);
  if (!str_or.ok()) return std::move(str_or).error();
  const Section str = str_or.value();
  if (str.type != SHT_STRTAB) {
    return make_error(SPROV_ERR_ELF, "%s: %s (section %u): sh_link %u is not SHT_STRTAB", path,
                      want_name, tab.index, tab.link);
  }

  const detail::ByteView v(tab.data, tab.size, image.big_endian());
  const size_t count = tab.size / ent;
  std::vector<Candidate> cands;
  for (size_t i = 1; i < count; i++) {
    const uint64_t b = i * ent;
    // Elf64_Sym: st_name@0 st_info@4 st_other@5 st_shndx@6 st_value@8 st_size@16;
    // Elf32_Sym: st_name@0 st_value@4 st_size@8 st_info@12 st_other@13 st_shndx@14 (gABI).
    const uint32_t st_name = *v.u32(b);
    const uint8_t st_info = tab.data[b + (is64 ? 4 : 12)];
    const uint16_t shndx = *v.u16(b + (is64 ? 6 : 14));
    const uint64_t value = *v.word(b + (is64 ? 8 : 4), is64);
    const uint64_t size = *v.word(b + (is64 ? 16 : 8), is64);
    const uint8_t type = ELF64_ST_TYPE(st_info);
    const uint8_t bind = ELF64_ST_BIND(st_info);
    if (shndx == SHN_UNDEF) continue;
    bool keep = type == STT_FUNC || type == STT_GNU_IFUNC;
    if (type == STT_NOTYPE && size != 0 && (image.section_flags(shndx) & SHF_EXECINSTR) != 0) {
      keep = true;  // assembly functions with .size but no .type
    }
    if (!keep) continue;
    if (st_name >= str.size) {
      return make_error(SPROV_ERR_ELF, "%s: %s (section %u) symbol %zu: name offset %u outside "
                        "string table (%zu bytes)", path, want_name, tab.index, i, st_name,
                        str.size);
    }
    const auto* start = reinterpret_cast<const char*>(str.data) + st_name;
    const void* nul = std::memchr(start, 0, str.size - st_name);
    if (nul == nullptr) {
      return make_error(SPROV_ERR_ELF, "%s: %s (section %u) symbol %zu: unterminated name", path,
                        want_name, tab.index, i);
    }
    const size_t len = static_cast<size_t>(static_cast<const char*>(nul) - start);
    if (len == 0) continue;
    Candidate c;
    c.sym = Symbol{value, size, std::string_view(start, len), type, bind};
    c.index = static_cast<uint32_t>(i);
    cands.push_back(c);
  }

  // Sort small integer keys instead of the candidates (tables of 10k+ symbols
  // are loaded on every `stackprov stack`): (address, candidate position), with
  // aliases at one address then ordered by better_alias in a short pass.
  struct Key {
    uint64_t addr;
    uint32_t pos;
  };
  std::vector<Key> keys(cands.size());
  for (size_t i = 0; i < cands.size(); i++) keys[i] = Key{cands[i].sym.addr, static_cast<uint32_t>(i)};
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.pos < b.pos;
  });
  table.syms_.reserve(cands.size());
  for (size_t i = 0; i < keys.size();) {
    size_t best = keys[i].pos;
    size_t j = i + 1;
    for (; j < keys.size() && keys[j].addr == keys[i].addr; j++)
      if (better_alias(cands[keys[j].pos], cands[best])) best = keys[j].pos;
    table.syms_.push_back(cands[best].sym);
    table.max_size_ = std::max(table.max_size_, cands[best].sym.size);
    i = j;
  }
  return table;
}

const Symbol* SymbolTable::lookup(uint64_t a) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), a,
                             [](uint64_t x, const Symbol& s) { return x < s.addr; });
  // Walk back over symbols starting at or below `a`: the nearest one may be a
  // small function nested in a larger one, so continue while a symbol could
  // still reach `a` (max_size_) — bounded by kMaxBackscan.
  for (size_t steps = 0; it != syms_.begin() && steps < kMaxBackscan; steps++) {
    --it;
    const uint64_t off = a - it->addr;
    if (it->size == 0 ? off == 0 : off < it->size) return &*it;
    if (off >= max_size_) break;
  }
  return nullptr;
}

}  // namespace stackprov::elf
