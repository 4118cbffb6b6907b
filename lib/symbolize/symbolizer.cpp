// SPDX-License-Identifier: Apache-2.0
// Symbol-table resolver chain and demangled-name interning.
#include "symbolize/symbolizer.hpp"

#include "symbolize/demangle.hpp"

namespace stackprov::symbolize {

Symbolizer::ModuleSyms& Symbolizer::module_syms(const std::shared_ptr<const object::ObjectImage>& image) {
  auto it = modules_.find(image.get());
  if (it != modules_.end()) return *it->second;
  auto ms = std::make_unique<ModuleSyms>();
  ms->image = image;
  ms->image_path = image->path();
  if (auto t = elf::load_symbols(*image, elf::SymbolTable::Kind::kSymtab); t.ok() && !t->empty()) {
    ms->symtab = std::move(t).value();
    ms->symtab_source = image->path();
  } else if (auto dbg = image->find_debug_file(debug_opts_); dbg.ok()) {
    ms->debug = dbg.value();
    if (auto dt = elf::load_symbols(*ms->debug, elf::SymbolTable::Kind::kSymtab); dt.ok()) {
      ms->symtab = std::move(dt).value();
      ms->symtab_source = ms->debug->path();
    }
  }
  if (auto d = elf::load_symbols(*image, elf::SymbolTable::Kind::kDynsym); d.ok())
    ms->dynsym = std::move(d).value();
  auto& ref = *ms;
  modules_.emplace(image.get(), std::move(ms));
  return ref;
}

std::string_view Symbolizer::display_name(std::string_view linkage) {
  if (!demangle_) return linkage;
  auto it = demangled_.find(linkage);
  if (it != demangled_.end()) return it->second;
  std::string d = demangle(linkage);
  std::string_view v = *strings_.insert(std::move(d)).first;
  demangled_.emplace(linkage, v);
  return v;
}

bool Symbolizer::lookup(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, SymbolInfo* out) {
  ModuleSyms& ms = module_syms(image);
  if (!ms.plt_loaded) {
    ms.plt = elf::load_plt(*image);
    ms.plt_loaded = true;
  }
  // PLT stubs have no symbol of their own; name them as objdump, perf and gdb do.
  const elf::Symbol* s = ms.plt.lookup(addr);
  Resolver res = Resolver::kSymtab;
  std::string_view source = ms.image_path;
  if (s == nullptr) {
    s = ms.symtab.lookup(addr);
    source = ms.symtab_source;
  }
  if (s == nullptr) {
    s = ms.dynsym.lookup(addr);
    res = Resolver::kDynsym;
    source = ms.image_path;
  }
  if (s == nullptr) {
    *out = SymbolInfo{};
    return false;
  }
  out->linkage = s->name;
  out->name = display_name(s->name);
  out->addr = s->addr;
  out->size = s->size;
  out->offset = addr - s->addr;
  out->resolver = res;
  out->source = source;
  return true;
}

}  // namespace stackprov::symbolize
