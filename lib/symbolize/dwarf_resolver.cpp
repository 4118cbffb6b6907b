// SPDX-License-Identifier: Apache-2.0
// DWARF resolver: debug-file discovery (local, debuginfod), split DWARF, dwz, MiniDebugInfo, llvm's frame rules.
#include "symbolize/dwarf_resolver.hpp"

#include <lzma.h>

#include <algorithm>
#include <cstring>

#include "core/open_file.hpp"
#include "symbolize/demangle.hpp"

namespace stackprov::symbolize {

namespace {

constexpr uint64_t kMaxMiniDebugInfo = uint64_t{256} << 20;

std::string dir_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

/// .gnu_debugdata (MiniDebugInfo): an xz-compressed ELF holding .symtab.
std::shared_ptr<elf::ElfImage> open_minidebuginfo(const elf::ElfImage& image) {
  auto sec = image.section(".gnu_debugdata");
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
  auto img = elf::ElfImage::from_bytes(std::move(out), image.path() + "[.gnu_debugdata]");
  return img.ok() ? std::move(img).value() : nullptr;
}

/// (address, name, STT_FILE name) of the local function symbols of `f`'s
/// .symtab, from the closest preceding STT_FILE symbol in table order.
void collect_file_symbols(const elf::ElfImage& f, bool from_debug_file,
                          std::vector<DwarfResolver::FileSymEntry>* out) {
  auto sec = f.section(".symtab");
  if (!sec || sec->data == nullptr) return;
  auto str = f.section_at(sec->link);
  if (!str || str->data == nullptr) return;
  const bool is64 = f.is_64bit(), be = f.big_endian();
  const size_t ent = is64 ? 24 : 16;
  dwarf::Cursor c(dwarf::SectionBytes{sec->data, sec->size}, 0, be);
  std::string_view file;
  const size_t n = std::min<size_t>(sec->size / ent, size_t{1} << 26);
  for (size_t i = 0; i < n; i++) {
    c.pos = i * ent;
    uint32_t name = c.u32();
    uint64_t value = 0;
    uint8_t info = 0;
    if (is64) {
      info = c.u8();
      c.u8();
      c.u16();
      value = c.u64();
    } else {
      value = c.u32();
      c.u32();
      info = c.u8();
    }
    if (!c.ok) break;
    const uint8_t type = info & 0xf, bind = info >> 4;
    const std::string_view nm = dwarf::section_string(dwarf::SectionBytes{str->data, str->size}, name);
    if (type == 4 /* STT_FILE */) {
      file = nm;
    } else if (bind == 0 /* STB_LOCAL */ && (type == 2 || type == 10) && !file.empty()) {
      out->push_back({value, nm, file, from_debug_file});
    }
  }
}

}  // namespace

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

// dwz: .gnu_debugaltlink = file name NUL build-id. The name (absolute, or
// relative to the debug file's directory), then the build-id path under the
// debug directories, then debuginfod; the build-id must match.
std::shared_ptr<elf::ElfImage> DwarfResolver::find_alt(const elf::ElfImage& f, std::string* err) {
  auto sec = f.section(".gnu_debugaltlink");
  if (!sec || sec->data == nullptr || sec->size == 0) return nullptr;
  const char* p = reinterpret_cast<const char*>(sec->data);
  const size_t nlen = strnlen(p, sec->size);
  if (nlen >= sec->size) {
    *err = f.path() + ": malformed .gnu_debugaltlink";
    return nullptr;
  }
  const std::string name(p, nlen);
  const ModuleId want = ModuleId::from_bytes(sec->data + nlen + 1, sec->size - nlen - 1);
  // The supplementary file must be the one the link names by build-id: a link without one
  // would make any file at the named path (a host file, for a target's module) an input.
  if (want.empty()) {
    *err = f.path() + ": .gnu_debugaltlink names '" + name + "' without a build-id: not opened";
    return nullptr;
  }
  // A target's debug file names paths in the target's root (under_root_of), never the host's.
  std::vector<std::string> cands;
  const std::string& root = f.target_root();
  if (!name.empty() && name.front() == '/') cands.push_back(root + name);
  else if (!name.empty() && relative_names_stay_in_root(dir_of(f.path())))  // not from a target's map_files
    cands.push_back(dir_of(f.path()) + "/" + name);
  {
    const std::string h = want.hex();
    for (const auto& d : opts_.debug.debug_dirs)
      cands.push_back((root.empty() ? opts_.debug.sysroot : root) + d + "/.build-id/" + h.substr(0, 2) + "/" +
                      h.substr(2) + ".debug");
  }
  for (const auto& c : cands) {
    auto img = elf::ElfImage::open(c);
    if (!img.ok()) continue;
    if ((*img)->build_id() != want) {
      *err = "dwz supplementary file " + c + " has build-id " + (*img)->build_id().hex() + ", expected " + want.hex();
      continue;
    }
    return std::move(img).value();
  }
  if (opts_.debuginfod && debuginfod_.enabled()) {
    auto r = debuginfod_.find_debuginfo(want);
    if (r.ok()) return r->image;
  }
  if (err->empty()) *err = "dwz supplementary file " + name + " not found";
  return nullptr;
}

bool DwarfResolver::attach_dwarf(Module* m, const std::shared_ptr<elf::ElfImage>& f) {
  dwarf::DwarfSections s = dwarf_sections(*f);
  if (s.info.empty()) return false;
  auto ix = dwarf::DwarfIndex::build(s);
  if (!ix.ok()) {
    m->error = ix.error().message;
    return false;
  }
  m->index = std::move(ix).value();
  m->dwarf_file = f;
  if (auto alt = find_alt(*f, &m->error)) {
    dwarf::DwarfSections as = dwarf_sections(*alt);
    if (auto aix = dwarf::DwarfIndex::build(as); aix.ok()) {
      m->alt_file = alt;
      m->index->set_supplementary(std::move(aix).value());
      m->error.clear();
    }
  }
  if (m->index->skeleton_units() > 0) {
    std::vector<std::string> dwp{m->image->path() + ".dwp"};
    if (f != m->image) dwp.push_back(f->path() + ".dwp");
    m->split = std::make_shared<dwarf::SplitDwarfFiles>(m->image->path(), std::move(dwp));
    std::weak_ptr<dwarf::SplitDwarfFiles> w = m->split;
    m->index->set_dwo_loader([w](uint64_t id, std::string_view name, std::string_view dir, dwarf::DwoSections* out) {
      auto sp = w.lock();
      return sp && sp->load(id, name, dir, out);
    });
  }
  return true;
}

std::shared_ptr<DwarfResolver::Module> DwarfResolver::module(const std::shared_ptr<elf::ElfImage>& image) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = modules_.find(image.get());
  if (it != modules_.end() && it->second->image == image) return it->second;
  auto m = std::make_shared<Module>();
  m->image = image;
  std::shared_ptr<elf::ElfImage> debug_file;
  if (!opts_.dwarf) {
    // Symbol tables only: the debug file still lends its .symtab.
    if (auto dbg = elf::find_debug_file(*image, opts_.debug); dbg.ok()) debug_file = dbg.value();
  } else if (!attach_dwarf(m.get(), image)) {
    auto dbg = elf::find_debug_file(*image, opts_.debug);
    if (dbg.ok()) {
      debug_file = dbg.value();
      attach_dwarf(m.get(), debug_file);
    } else {
      m->error = dbg.error().message;
    }
    // debuginfod only when the local discovery failed.
    if (!m->index && opts_.debuginfod && debuginfod_.enabled() && !image->build_id().empty()) {
      auto r = debuginfod_.find_debuginfo(image->build_id());
      if (r.ok()) {
        m->url = r->url;
        if (attach_dwarf(m.get(), r->image)) {
          m->via_debuginfod = true;
          debug_file = r->image;
        }
      } else {
        m->error += "; " + r.error().message;
      }
    }
  }
  // Symbol tables. llvm-symbolizer overrides the physical function's name
  // from the module's own .symtab, else its .dynsym; we do the same, and
  // count MiniDebugInfo's .symtab as the module's. The debug file's .symtab
  // answers only addresses that neither DWARF nor those describe.
  auto load_symtab = [&](const std::shared_ptr<elf::ElfImage>& f, elf::SymbolTable* into) {
    if (!f) return false;
    auto t = elf::SymbolTable::load(*f, elf::SymbolTable::Kind::kSymtab);
    if (!t.ok() || t->empty()) return false;
    *into = std::move(t).value();
    return true;
  };
  if (load_symtab(image, &m->symtab)) {
    m->symtab_file = image;
  } else if (auto mini = open_minidebuginfo(*image); load_symtab(mini, &m->symtab)) {
    m->symtab_file = mini;
    m->minidebuginfo = true;
  }
  // The separate debug file's .symtab (also when it has no DWARF).
  std::shared_ptr<elf::ElfImage> symtab_debug = m->dwarf_file != image ? m->dwarf_file : nullptr;
  if (!symtab_debug) symtab_debug = debug_file;
  // Read on first use (load_fallback): most addresses never need the debug file's symbols.
  if (symtab_debug && symtab_debug != image) m->fallback_candidate = symtab_debug;
  if (auto d = elf::SymbolTable::load(*image, elf::SymbolTable::Kind::kDynsym); d.ok())
    m->dynsym = std::move(d).value();
  modules_[image.get()] = m;
  return m;
}

void DwarfResolver::load_fallback(const Module& m) const {
  stackprov::call_once(m.fallback_once, [&] {
    if (!m.fallback_candidate) return;
    auto t = elf::SymbolTable::load(*m.fallback_candidate, elf::SymbolTable::Kind::kSymtab);
    if (!t.ok() || t->empty()) return;
    m.fallback = std::move(t).value();
    m.fallback_file = m.fallback_candidate;
  });
}

void DwarfResolver::load_file_syms(const Module& m) const {
  stackprov::call_once(m.file_syms_once, [&] {
    if (m.symtab_file && !m.symtab.empty()) collect_file_symbols(*m.symtab_file, false, &m.file_syms);
    load_fallback(m);
    if (m.fallback_file) collect_file_symbols(*m.fallback_file, true, &m.file_syms);
    std::stable_sort(m.file_syms.begin(), m.file_syms.end(),
                     [](const FileSymEntry& a, const FileSymEntry& b) { return a.addr < b.addr; });
  });
}

ModuleReport DwarfResolver::report(const std::shared_ptr<elf::ElfImage>& image) {
  std::shared_ptr<Module> m = module(image);
  ModuleReport r;
  if (m->dwarf_file) r.dwarf_file = m->dwarf_file->path();
  if (m->via_debuginfod) r.debuginfod_url = m->url;
  if (m->alt_file) r.alt_file = m->alt_file->path();
  if (m->minidebuginfo) r.minidebuginfo = "yes";
  r.error = m->index ? std::string() : m->error;
  if (m->index) {
    r.skeleton_units = m->index->skeleton_units();
    r.dwo_loaded = m->index->dwo_loaded();
    r.dwo_missing = m->index->dwo_missing();
  }
  return r;
}

void DwarfResolver::assign_display(std::string_view name, std::string* out) const {
  if (!opts_.demangle || !maybe_mangled(name)) out->assign(name);
  else *out = demangle(name);
}

bool DwarfResolver::resolve(const std::shared_ptr<elf::ElfImage>& image, uint64_t addr, Resolution* out,
                            SymtabPolicy policy) {
  // Reset `out`, keeping the buffers of its strings (the warm path allocates nothing).
  {
    std::vector<ResolvedFrame> keep = std::move(out->frames);
    std::string source = std::move(out->source), provenance = std::move(out->provenance);
    source.clear();
    provenance.clear();
    *out = Resolution{};
    out->frames = std::move(keep);
    out->source = std::move(source);
    out->provenance = std::move(provenance);
  }
  std::shared_ptr<Module> m = module(image);
  thread_local std::vector<dwarf::DwarfFrame> dframes;  // reused: its strings keep their capacity
  bool dwarf_hit = false;
  if (m->index) {
    m->index->lookup(addr, &dframes);
    for (auto& f : dframes) dwarf_hit |= f.has_function || f.has_file;
  } else {
    dframes.clear();
  }
  out->frames.resize(dframes.size());
  for (size_t i = 0; i < dframes.size(); i++) {
    const dwarf::DwarfFrame& f = dframes[i];
    ResolvedFrame& r = out->frames[i];
    std::string_view raw = !f.linkage_name.empty() ? f.linkage_name : f.name;
    r.linkage_name.assign(raw);
    assign_display(raw, &r.function);
    assign_display(f.name, &r.short_function);
    if (f.has_file) r.file.assign(f.file);
    else r.file.clear();
    r.line = f.line;
    r.column = f.column;
    r.discriminator = f.discriminator;
    r.start_file.assign(f.start_file);
    r.start_file_implicit_const = f.start_file_implicit_const;
    // llvm-symbolizer-14 reads no DW_FORM_implicit_const DW_AT_decl_file
    // (StartFileName ""); the compatible mode prints what it prints.
    if (policy == SymtabPolicy::kModuleOnly && r.start_file_implicit_const) r.start_file.clear();
    r.start_line = f.start_line;
    r.has_start_address = f.has_start_address;
    r.start_address = f.start_address;
  }
  if (out->frames.empty()) out->frames.emplace_back();
  if (dwarf_hit) {
    if (m->via_debuginfod) {
      out->resolver = ResolvedBy::kDebuginfod;
      out->source = m->url;
      out->provenance = "debuginfod+dwarf";
    } else {
      out->resolver = ResolvedBy::kDwarf;
      out->source = m->dwarf_file->path();
      out->provenance = "dwarf";
    }
    out->source_build_id = m->dwarf_file->build_id();
  }
  if (policy == SymtabPolicy::kModuleOnly) {
    name_like_llvm(*m, image, addr, dwarf_hit, out);
  } else {
    name_from_tables(*m, image, addr, dwarf_hit, out);
  }
  if (out->provenance.empty()) out->provenance = "none";
  return out->resolver != ResolvedBy::kNone;
}

void DwarfResolver::name_from_tables(const Module& mod, const std::shared_ptr<elf::ElfImage>& image, uint64_t addr,
                                     bool dwarf_hit, Resolution* out) const {
  const Module* m = &mod;
  // The physical function is named as `stackprov stack` and perf-import name
  // it (symbolize::Symbolizer): PLT stubs (objdump, perf, gdb: sym@plt), then
  // the module's .symtab, else the separate debug file's (a superset: what
  // perf, gdb and eu-stack read), then .dynsym. This overrides DWARF's name,
  // as llvm-symbolizer's shouldOverrideWithSymbolTable does.
  stackprov::call_once(m->plt_once, [&] { m->plt = elf::PltTable::load(*image); });
  const elf::Symbol* sym = m->plt.lookup(addr);
  ResolvedBy by = ResolvedBy::kSymtab;
  const elf::ElfImage* sym_file = image.get();
  if (sym == nullptr && !m->symtab.empty()) {
    sym = m->symtab.lookup(addr);
    sym_file = m->symtab_file.get();
  } else if (sym == nullptr) {
    load_fallback(*m);
    sym = m->fallback.lookup(addr);
    sym_file = m->fallback_file.get();
  }
  if (sym == nullptr) {
    sym = m->dynsym.lookup(addr);
    by = ResolvedBy::kDynsym;
    sym_file = image.get();
  }
  if (sym != nullptr) {
    out->symbol_named = true;
    ResolvedFrame& outer = out->frames.back();
    out->before_symbol = {outer.has_start_address, outer.start_address, false, dwarf_hit};
    outer.linkage_name.assign(sym->name);
    assign_display(sym->name, &outer.function);
    outer.has_start_address = true;
    outer.start_address = sym->addr;
    if (!dwarf_hit) {
      outer.short_function = outer.function;
      out->resolver = by;
      const bool mini = by == ResolvedBy::kSymtab && m->minidebuginfo && sym_file == m->symtab_file.get();
      out->source = mini || sym_file == nullptr ? image->path() : sym_file->path();
      out->source_build_id = sym_file != nullptr && !mini ? sym_file->build_id() : image->build_id();
      out->provenance = by == ResolvedBy::kDynsym ? "dynsym" : mini ? "minidebuginfo+symtab" : "symtab";
    }
    // Without a line, llvm prints the STT_FILE preceding a local symbol as FileName.
    if (outer.file.empty() && by == ResolvedBy::kSymtab) {
      load_file_syms(*m);
      auto it = std::lower_bound(m->file_syms.begin(), m->file_syms.end(), sym->addr,
                                 [](const FileSymEntry& e, uint64_t a) { return e.addr < a; });
      for (; it != m->file_syms.end() && it->addr == sym->addr; ++it)
        if (it->name == sym->name) {
          outer.file = std::string(it->file);
          out->before_symbol.file_from_symbol = true;
          break;
        }
    }
  }
}

void DwarfResolver::name_like_llvm(const Module& m, const std::shared_ptr<elf::ElfImage>& image, uint64_t addr,
                                   bool dwarf_hit, Resolution* out) const {
  // SymbolizableObjectFile::symbolizeInlinedCode with --functions=linkage: the
  // outermost frame takes name and start address from getNameFromSymbolTable,
  // and FileName from the STT_FILE before a local symbol when there is no line.
  stackprov::call_once(m.llvm_once, [&] { m.llvm = elf::LlvmSymbolTable::load(*image); });
  const elf::LlvmSymbol* sym = m.llvm.lookup(addr);
  if (sym == nullptr) return;
  out->symbol_named = true;
  ResolvedFrame& outer = out->frames.back();
  out->before_symbol = {outer.has_start_address, outer.start_address, false, dwarf_hit};
  outer.linkage_name.assign(sym->name);
  assign_display(sym->name, &outer.function);
  outer.has_start_address = true;
  outer.start_address = sym->addr;
  if (outer.file.empty()) {
    outer.file.assign(m.llvm.file_of(*sym));
    out->before_symbol.file_from_symbol = !outer.file.empty();
  }
  if (!dwarf_hit) {
    outer.short_function = outer.function;
    out->resolver = m.llvm.from_dynsym() ? ResolvedBy::kDynsym : ResolvedBy::kSymtab;
    out->source = image->path();
    out->source_build_id = image->build_id();
    out->provenance = m.llvm.from_dynsym() ? "dynsym" : "symtab";
  }
}

}  // namespace stackprov::symbolize
