// SPDX-License-Identifier: Apache-2.0
// DWARF resolver: debug-file discovery, the llvm-symbolizer frame rules, symbol-table override and fallback.
#include "symbolize/dwarf_resolver.hpp"

#include "symbolize/demangle.hpp"

namespace stackprov::symbolize {

dwarf::DwarfSections dwarf_sections(const elf::ElfImage& image) {
  dwarf::DwarfSections s;
  auto get = [&](std::string_view name) {
    dwarf::SectionBytes b;
    if (auto sec = image.section(name); sec && sec->data != nullptr) {
      b.data = sec->data;
      b.size = sec->size;
    }
    return b;
  };
  s.info = get(".debug_info");
  s.abbrev = get(".debug_abbrev");
  s.line = get(".debug_line");
  s.line_str = get(".debug_line_str");
  s.str = get(".debug_str");
  s.str_offsets = get(".debug_str_offsets");
  s.addr = get(".debug_addr");
  s.ranges = get(".debug_ranges");
  s.rnglists = get(".debug_rnglists");
  s.big_endian = image.big_endian();
  return s;
}

std::shared_ptr<DwarfResolver::Module> DwarfResolver::module(const std::shared_ptr<elf::ElfImage>& image) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = modules_.find(image.get());
  if (it != modules_.end() && it->second->image == image) return it->second;
  auto m = std::make_shared<Module>();
  m->image = image;
  auto try_dwarf = [&](const std::shared_ptr<elf::ElfImage>& f) {
    dwarf::DwarfSections s = dwarf_sections(*f);
    if (s.info.empty()) return false;
    auto ix = dwarf::DwarfIndex::build(s);
    if (!ix.ok()) return false;
    m->index = std::move(ix).value();
    m->dwarf_file = f;
    return true;
  };
  if (!try_dwarf(image)) {
    if (auto dbg = elf::find_debug_file(*image, opts_.debug); dbg.ok()) try_dwarf(dbg.value());
  }
  if (auto t = elf::SymbolTable::load(*image, elf::SymbolTable::Kind::kSymtab); t.ok())
    m->symtab = std::move(t).value();
  if (auto d = elf::SymbolTable::load(*image, elf::SymbolTable::Kind::kDynsym); d.ok())
    m->dynsym = std::move(d).value();
  modules_[image.get()] = m;
  return m;
}

std::string DwarfResolver::display(std::string_view name) const {
  if (!opts_.demangle || name.empty()) return std::string(name);
  return demangle(name);
}

bool DwarfResolver::resolve(const std::shared_ptr<elf::ElfImage>& image, uint64_t addr, Resolution* out) {
  *out = Resolution{};
  std::shared_ptr<Module> m = module(image);
  std::vector<dwarf::DwarfFrame> dframes;
  bool dwarf_hit = false;
  if (m->index) {
    m->index->lookup(addr, &dframes);
    for (auto& f : dframes) dwarf_hit |= f.has_function || f.has_file;
  }
  for (auto& f : dframes) {
    ResolvedFrame r;
    std::string_view raw = !f.linkage_name.empty() ? f.linkage_name : f.name;
    r.linkage_name = std::string(raw);
    r.function = display(raw);
    r.short_function = display(f.name);
    if (f.has_file) r.file = std::move(f.file);
    r.line = f.line;
    r.column = f.column;
    r.discriminator = f.discriminator;
    r.start_file = std::move(f.start_file);
    r.start_line = f.start_line;
    r.has_start_address = f.has_start_address;
    r.start_address = f.start_address;
    out->frames.push_back(std::move(r));
  }
  if (out->frames.empty()) out->frames.emplace_back();
  if (dwarf_hit) {
    out->resolver = ResolvedBy::kDwarf;
    out->source = m->dwarf_file->path();
    out->source_build_id = m->dwarf_file->build_id();
  }
  // The physical function's name from the symbol table (llvm-symbolizer's
  // shouldOverrideWithSymbolTable for --functions=linkage).
  const elf::Symbol* sym = m->symtab.lookup(addr);
  ResolvedBy by = ResolvedBy::kSymtab;
  if (sym == nullptr) {
    sym = m->dynsym.lookup(addr);
    by = ResolvedBy::kDynsym;
  }
  if (sym != nullptr) {
    ResolvedFrame& outer = out->frames.back();
    outer.linkage_name = std::string(sym->name);
    outer.function = display(sym->name);
    outer.has_start_address = true;
    outer.start_address = sym->addr;
    if (!dwarf_hit) {
      outer.short_function = outer.function;
      out->resolver = by;
      out->source = image->path();
      out->source_build_id = image->build_id();
    }
  }
  return out->resolver != ResolvedBy::kNone;
}

}  // namespace stackprov::symbolize
