// SPDX-License-Identifier: Apache-2.0
// LlvmSymbolTable: llvm-symbolizer-14's symbol selection (filter, stable sort by address and size, last alias wins).
#include "elf/llvm_symtab.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "elf/elf_bytes.hpp"

namespace stackprov::elf {

namespace {

/// Upper bound on the entries read from one table (2^26 × 24 B = 1.5 GiB of
/// symbols), so a hostile sh_size cannot make the loop unbounded in practice.
constexpr size_t kMaxEntries = size_t{1} << 26;

size_t first_section_of_type(const ElfImage& image, uint32_t type) {
  for (size_t i = 1; i < image.section_count(); i++)
    if (image.section_type(i) == type) return i;
  return 0;
}

/// SymbolRef::SF_FormatSpecific for the names LLVM 14's
/// ELFObjectFile::getSymbolFlags marks per machine (mapping symbols, and the
/// empty names ARM and RISC-V use for label differences).
bool format_specific_name(uint16_t machine, std::string_view name) {
  auto starts = [&](const char* p) { return name.substr(0, 2) == p; };
  switch (machine) {
    case EM_AARCH64:
      return starts("$d") || starts("$x");
    case EM_ARM:
      return name.empty() || starts("$d") || starts("$t") || starts("$a");
    case EM_RISCV:
      return name.empty();
    default:
      return false;
  }
}

}  // namespace

LlvmSymbolTable LlvmSymbolTable::load(const ElfImage& image) {
  LlvmSymbolTable t;
  const bool is64 = image.is_64bit();
  const size_t ent = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  // computeSymbolSizes: symbols(), or the dynamic symbols when there are none.
  size_t tab_index = first_section_of_type(image, SHT_SYMTAB);
  std::optional<Section> tab;
  if (tab_index != 0) tab = image.section_at(tab_index);
  if (!tab || tab->data == nullptr || tab->size / ent == 0) {
    tab_index = first_section_of_type(image, SHT_DYNSYM);
    tab = tab_index != 0 ? image.section_at(tab_index) : std::nullopt;
    t.from_dynsym_ = true;
  }
  if (!tab || tab->data == nullptr || tab->size / ent == 0) return t;
  auto str = image.section_at(tab->link);
  if (tab->link == 0 || !str || str->data == nullptr || str->type != SHT_STRTAB) return t;

  // Extended section indices (SHN_XINDEX) of this table.
  detail::ByteView shndx_tab;
  for (size_t i = 1; i < image.section_count(); i++) {
    if (image.section_type(i) != SHT_SYMTAB_SHNDX) continue;
    auto s = image.section_at(i);
    if (s && s->link == tab_index && s->data != nullptr) {
      shndx_tab = detail::ByteView(s->data, s->size, image.big_endian());
      break;
    }
  }

  const uint16_t machine = image.machine();
  const bool rel = image.elf_type() == ET_REL;
  const detail::ByteView v(tab->data, tab->size, image.big_endian());
  const auto* strtab = reinterpret_cast<const char*>(str->data);
  const size_t count = std::min(tab->size / ent, kMaxEntries);
  t.syms_.reserve(count);
  // A string table whose last byte is NUL holds a terminator after every offset inside it, so
  // a name's length needs finding only for the symbols kept (most of a .symtab is not).
  const bool terminated = str->size != 0 && strtab[str->size - 1] == '\0';
  for (size_t i = 0; i < count; i++) {
    const uint64_t b = i * ent;
    // Elf64_Sym: st_name@0 st_info@4 st_other@5 st_shndx@6 st_value@8 st_size@16;
    // Elf32_Sym: st_name@0 st_value@4 st_size@8 st_info@12 st_other@13 st_shndx@14 (gABI).
    const uint32_t st_name = *v.u32(b);
    const uint8_t st_info = tab->data[b + (is64 ? 4 : 12)];
    const uint16_t st_shndx = *v.u16(b + (is64 ? 6 : 14));
    uint64_t value = *v.word(b + (is64 ? 8 : 4), is64);
    const uint64_t size = *v.word(b + (is64 ? 16 : 8), is64);
    const uint8_t type = ELF64_ST_TYPE(st_info), bind = ELF64_ST_BIND(st_info);
    // getName: a name outside the string table makes llvm's whole table fail.
    if (st_name >= str->size) return LlvmSymbolTable{};
    auto name_of = [&]() -> std::string_view {
      return {strtab + st_name, strnlen(strtab + st_name, str->size - st_name)};
    };
    std::string_view name;
    if (!terminated) {
      name = name_of();
      if (st_name + name.size() >= str->size) return LlvmSymbolTable{};
    }

    // getSection: SHN_UNDEF, reserved indices and indices past the section
    // table mean "no section"; SHN_XINDEX reads SHT_SYMTAB_SHNDX.
    uint32_t sec = st_shndx;
    if (st_shndx == SHN_XINDEX) {
      auto x = shndx_tab.u32(uint64_t{i} * 4);
      sec = x ? *x : 0;
    } else if (st_shndx >= SHN_LORESERVE) {
      sec = 0;
    }
    if (sec == 0 || sec >= image.section_count()) {
      if (type == STT_FILE) t.files_.emplace_back(static_cast<uint32_t>(i), terminated ? name_of() : name);
      continue;
    }
    if (type != STT_NOTYPE && type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC) continue;
    if (i == 0) continue;  // SF_FormatSpecific: entry 0 of either table
    if (terminated) name = name_of();
    if (format_specific_name(machine, name)) continue;  // and machine-specific names
    // getSymbolValue clears the Thumb / microMIPS bit of functions; ET_REL adds sh_addr.
    if ((machine == EM_ARM || machine == EM_MIPS) && type == STT_FUNC) value &= ~uint64_t{1};
    if (rel) value += image.section_range(sec).first;
    t.syms_.push_back(LlvmSymbol{value, size, name, bind == STB_LOCAL ? static_cast<uint32_t>(i) : 0u,
                                 static_cast<uint32_t>(t.syms_.size())});
  }
  t.sort_and_collapse();
  return t;
}

LlvmSymbolTable LlvmSymbolTable::from_symbols(const std::vector<object::Symbol>& syms) {
  LlvmSymbolTable t;
  t.syms_.reserve(syms.size());
  for (const object::Symbol& s : syms)
    t.syms_.push_back(LlvmSymbol{s.addr, s.size, s.name, 0, static_cast<uint32_t>(t.syms_.size())});
  t.sort_and_collapse();
  return t;
}

void LlvmSymbolTable::sort_and_collapse() {
  // llvm::stable_sort by SymbolDesc::operator< (address, then size), then of
  // each run of one address keep the last element. Sorted in place by (address, size, input
  // position): the stable sort's order (equal keys keep their input order) without its buffer.
  // Positions are unique below 2^32 (a table holds at most kMaxEntries symbols; from_symbols'
  // vectors are far smaller).
  std::sort(syms_.begin(), syms_.end(), [](const LlvmSymbol& a, const LlvmSymbol& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.size != b.size ? a.size < b.size : a.order < b.order;
  });
  size_t out = 0;
  for (size_t i = 0; i < syms_.size();) {
    size_t j = i + 1;
    while (j < syms_.size() && syms_[j].addr == syms_[i].addr) j++;
    syms_[out++] = syms_[j - 1];
    i = j;
  }
  syms_.resize(out);
  syms_.shrink_to_fit();
}

const LlvmSymbol* LlvmSymbolTable::lookup(uint64_t a) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), a,
                             [](uint64_t x, const LlvmSymbol& s) { return x < s.addr; });
  if (it == syms_.begin()) return nullptr;
  --it;
  // llvm: `Addr + Size <= Address` in 64-bit arithmetic (wrapping as there).
  if (it->size != 0 && it->addr + it->size <= a) return nullptr;
  return &*it;
}

std::string_view LlvmSymbolTable::file_of(const LlvmSymbol& s) const {
  if (s.local_index == 0) return {};
  auto it = std::upper_bound(files_.begin(), files_.end(), s.local_index,
                             [](uint32_t x, const std::pair<uint32_t, std::string_view>& f) { return x < f.first; });
  if (it == files_.begin()) return {};
  return std::prev(it)->second;
}

}  // namespace stackprov::elf
