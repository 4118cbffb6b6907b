// SPDX-License-Identifier: Apache-2.0
// DWARF resolver: debug-file discovery (local, debuginfod), split DWARF, dwz, MiniDebugInfo, llvm's frame rules.
#include "symbolize/dwarf_resolver.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/open_file.hpp"
#include "dwarf/object_sections.hpp"
#include "symbolize/demangle.hpp"

namespace stackprov::symbolize {

namespace {

std::string dir_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

DwarfResolver::FileName name_of(const object::ObjectImage& f) { return {&f.path(), &f.id()}; }

AttemptOutcome outcome_of(object::DebugFileCandidate::Outcome o) {
  using O = object::DebugFileCandidate::Outcome;
  switch (o) {
    case O::kUsed: return AttemptOutcome::kFound;
    case O::kMissing: return AttemptOutcome::kMissing;
    case O::kIdentityMismatch: return AttemptOutcome::kIdentityMismatch;
    case O::kCrcMismatch: return AttemptOutcome::kCrcMismatch;
    case O::kUnreadable: return AttemptOutcome::kUnreadable;
    case O::kSelf: return AttemptOutcome::kSkipped;
  }
  return AttemptOutcome::kUnreadable;
}

}  // namespace

// dwz: the supplementary file (ObjectImage::supplementary_link). The name (absolute, or relative
// to the debug file's directory), then the build-id path under the debug directories, then
// debuginfod; the build-id must match.
std::shared_ptr<const object::ObjectImage> DwarfResolver::find_alt(const object::ObjectImage& f, std::string* err) {
  auto link = f.supplementary_link();
  if (!link.ok()) {
    *err = link.error().message;
    return nullptr;
  }
  if (!link.value()) return nullptr;
  const std::string& name = (*link)->name;
  const ModuleId& want = (*link)->id;
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
    auto img = object::open(c);
    if (!img.ok()) continue;
    if ((*img)->id() != want) {
      *err = "dwz supplementary file " + c + " has build-id " + (*img)->id().hex() + ", expected " + want.hex();
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

bool DwarfResolver::attach_dwarf(Module* m, const std::shared_ptr<const object::ObjectImage>& f) {
  dwarf::DwarfSections s = dwarf::dwarf_sections(*f);
  if (s.info.empty()) return false;
  auto ix = dwarf::DwarfIndex::build(s);
  if (!ix.ok()) {
    m->error = ix.error().message;
    return false;
  }
  m->index = std::move(ix).value();
  m->dwarf_file = f;
  m->dwarf_name = name_of(*f);
  if (auto alt = find_alt(*f, &m->error)) {
    dwarf::DwarfSections as = dwarf::dwarf_sections(*alt);
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

bool DwarfResolver::attach_recorded(Module* m, const std::shared_ptr<const object::ObjectImage>& f,
                                    const std::string& resolver, const std::string& found) {
  const bool ok = attach_dwarf(m, f);
  if (!opts_.record_attempts) return ok;
  const std::string& where = resolver == "debuginfod" ? m->url : f->path();
  if (ok) m->attempts.push_back({resolver, where, AttemptOutcome::kFound, found});
  else if (dwarf::dwarf_sections(*f).info.empty())
    m->attempts.push_back({resolver, where, AttemptOutcome::kNoDwarf, "no .debug_info in " + f->path()});
  else
    m->attempts.push_back({resolver, where, AttemptOutcome::kUnreadable, m->error});
  return ok;
}

void DwarfResolver::find_by_debuginfod(Module* m, std::shared_ptr<const object::ObjectImage>* debug_file) {
  if (!opts_.debuginfod) return;  // not in the policy: nothing to say either
  const bool rec = opts_.record_attempts;
  const ModuleId& id = m->image->id();
  // debuginfod only when the local discovery failed.
  if (m->index) {
    if (rec) m->attempts.push_back({"debuginfod", "", AttemptOutcome::kSkipped, "not asked: DWARF was found locally"});
    return;
  }
  if (!debuginfod_.enabled()) {
    if (rec) m->attempts.push_back({"debuginfod", "", AttemptOutcome::kSkipped, "DEBUGINFOD_URLS is not set"});
    return;
  }
  if (id.empty()) {
    if (rec) m->attempts.push_back({"debuginfod", "", AttemptOutcome::kSkipped, "the module has no build-id to ask for"});
    return;
  }
  if (id.kind != IdKind::kElfBuildId) {  // debuginfod serves files by ELF build-id only
    if (rec)
      m->attempts.push_back({"debuginfod", "", AttemptOutcome::kSkipped,
                             "the module's identity is not an ELF build-id (debuginfod serves by build-id)"});
    return;
  }
  int query_errno = 0;
  auto r = debuginfod_.find_debuginfo(id, &query_errno);
  if (r.ok()) {
    m->url = r->url;
    if (attach_recorded(m, r->image, "debuginfod", "DWARF of " + r->cache_path + " (libdebuginfod's cache)")) {
      m->via_debuginfod = true;
      *debug_file = r->image;
    }
    return;
  }
  m->error += "; " + r.error().message;
  if (!rec) return;
  // libdebuginfod asks every server at once and reports one errno: each URL gets that reason.
  AttemptOutcome o = AttemptOutcome::kFetchFailed;
  std::string why = query_errno != 0 ? strerror(-query_errno) : r.error().message;
  if (query_errno == -ENOENT) {
    o = AttemptOutcome::kMissing;
    why = "no server has build-id " + id.hex() + " (" + why + ")";
  } else if (r.error().code == SPROV_ERR_BUILD_ID_MISMATCH) {
    o = AttemptOutcome::kIdentityMismatch;
  } else if (query_errno == 0) {
    o = AttemptOutcome::kUnreadable;
  }
  for (const std::string& url : debuginfod_.query_urls(id)) m->attempts.push_back({"debuginfod", url, o, why});
}

std::shared_ptr<DwarfResolver::Module> DwarfResolver::module(const std::shared_ptr<const object::ObjectImage>& image) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = modules_.find(image.get());
  if (it != modules_.end() && it->second->image == image) return it->second;
  auto m = std::make_shared<Module>();
  m->image = image;
  m->image_name = name_of(*image);
  m->elf = image->format_name() == "elf";
  if (!m->elf) m->object_syms = image->symbols();
  std::shared_ptr<const object::ObjectImage> debug_file;
  if (!opts_.dwarf) {
    // Symbol tables only: the debug file still lends its .symtab.
    if (auto dbg = image->find_debug_file(opts_.debug); dbg.ok()) debug_file = dbg.value();
  } else if (!attach_recorded(m.get(), image, "dwarf", "DWARF in the module itself")) {
    const bool rec = opts_.record_attempts;
    std::vector<object::DebugFileCandidate> looked_at;
    auto dbg = image->find_debug_file(opts_.debug, rec ? &looked_at : nullptr);
    std::string rule;
    for (const object::DebugFileCandidate& c : looked_at) {
      if (c.outcome == object::DebugFileCandidate::Outcome::kUsed) rule = c.rule;  // recorded by attach_recorded
      else m->attempts.push_back({"dwarf", c.path, outcome_of(c.outcome), c.rule + " path: " + c.reason});
    }
    if (dbg.ok()) {
      debug_file = dbg.value();
      attach_recorded(m.get(), debug_file, "dwarf", "DWARF of the separate debug file (" + rule + " path)");
    } else {
      m->error = dbg.error().message;
      if (rec && looked_at.empty()) m->attempts.push_back({"dwarf", "", AttemptOutcome::kMissing, m->error});
    }
    find_by_debuginfod(m.get(), &debug_file);
  } else {
    find_by_debuginfod(m.get(), &debug_file);  // only says that it was not asked
  }
  // No DWARF in the module nor a debug file: the linker's debug map, where the image has one
  // (Mach-O N_OSO: DWARF left in the object files, as dsymutil reads them).
  if (opts_.dwarf && !m->index) {
    m->map = image->debug_map_ranges();
    if (!m->map.empty()) {
      uint32_t n = 0;
      for (const object::DebugMapRange& r : m->map) n = std::max(n, r.object + 1);
      m->map_objects = std::make_unique<Module::MapObject[]>(n);
      // --verbose: each object now (under the resolver's lock: a diagnostic mode), so that every one
      // holding a function of the map is accounted for; otherwise each on first use.
      if (opts_.record_attempts) {
        for (uint32_t i = 0; i < n; i++) {
          const Module::MapObject& o = load_map_object(*m, i);
          const std::string path = o.file.image ? o.file.image->path() : image->debug_map_object_path(i);
          m->attempts.push_back({"dwarf", path, o.outcome,
                                 o.index ? "DWARF of a debug map (N_OSO) object" : "debug map (N_OSO) object: " + o.error});
        }
      }
    }
  }
  // The separate debug file's .symtab (also when it has no DWARF).
  std::shared_ptr<const object::ObjectImage> symtab_debug = m->dwarf_file != image ? m->dwarf_file : nullptr;
  if (!symtab_debug) symtab_debug = debug_file;
  // Read on first use (load_fallback): most addresses never need the debug file's symbols.
  if (symtab_debug && symtab_debug != image) m->fallback_candidate = symtab_debug;
  modules_[image.get()] = m;
  return m;
}

void DwarfResolver::load_tables(const Module& m) const {
  stackprov::call_once(m.tables_once, [&] {
    // Symbol tables. llvm-symbolizer overrides the physical function's name
    // from the module's own .symtab, else its .dynsym; we do the same, and
    // count MiniDebugInfo's .symtab as the module's. The debug file's .symtab
    // answers only addresses that neither DWARF nor those describe. Read on first use:
    // llvm-compatible naming (name_like_llvm) reads its own table and never these.
    auto load_symtab = [&](const std::shared_ptr<const object::ObjectImage>& f, elf::SymbolTable* into) {
      if (!f) return false;
      auto t = elf::load_symbols(*f, elf::SymbolTable::Kind::kSymtab);
      if (!t.ok() || t->empty()) return false;
      *into = std::move(t).value();
      return true;
    };
    if (load_symtab(m.image, &m.symtab)) {
      m.symtab_file = m.image;
    } else if (auto mini = elf::open_minidebuginfo(*m.image); load_symtab(mini, &m.symtab)) {
      m.symtab_file = mini;
      m.minidebuginfo = true;
    }
    if (m.symtab_file) m.symtab_name = name_of(*m.symtab_file);
    if (auto d = elf::load_symbols(*m.image, elf::SymbolTable::Kind::kDynsym); d.ok()) m.dynsym = std::move(d).value();
  });
}

void DwarfResolver::load_fallback(const Module& m) const {
  stackprov::call_once(m.fallback_once, [&] {
    if (!m.fallback_candidate) return;
    auto t = elf::load_symbols(*m.fallback_candidate, elf::SymbolTable::Kind::kSymtab);
    if (!t.ok() || t->empty()) return;
    m.fallback = std::move(t).value();
    m.fallback_file = m.fallback_candidate;
    m.fallback_name = name_of(*m.fallback_file);
  });
}

DwarfResolver::Module::MapObject& DwarfResolver::load_map_object(const Module& m, uint32_t i) const {
  Module::MapObject& o = m.map_objects[i];
  stackprov::call_once(o.once, [&] {
    if (m.map_opened.fetch_add(1, std::memory_order_relaxed) >= kMaxMapObjects) {
      o.error = "more than " + std::to_string(kMaxMapObjects) + " debug map objects of " + m.image->path() +
                " opened (the limit): " + m.image->debug_map_object_path(i) + " is not read";
      o.outcome = AttemptOutcome::kSkipped;
      return;
    }
    auto f = m.image->open_debug_map_object(i);
    if (!f.ok()) {
      o.error = f.error().message;
      o.outcome = f.error().code == SPROV_ERR_BUILD_ID_MISMATCH ? AttemptOutcome::kIdentityMismatch
                  : f.error().code == -ENOENT                  ? AttemptOutcome::kMissing
                                                               : AttemptOutcome::kUnreadable;
      return;
    }
    o.file = std::move(f).value();
    o.name = name_of(*o.file.image);
    dwarf::DwarfSections s = dwarf::dwarf_sections(*o.file.image);
    if (s.info.empty()) {
      o.error = "no .debug_info in " + o.file.image->path();
      o.outcome = AttemptOutcome::kNoDwarf;
      return;
    }
    auto ix = dwarf::DwarfIndex::build(s);
    if (!ix.ok()) {
      o.error = ix.error().message;
      o.outcome = AttemptOutcome::kUnreadable;
      return;
    }
    o.index = std::move(ix).value();
  });
  return o;
}

bool DwarfResolver::map_lookup(const Module& m, uint64_t addr, std::vector<dwarf::DwarfFrame>* out,
                               const FileName** src) const {
  out->clear();
  auto it = std::upper_bound(m.map.begin(), m.map.end(), addr,
                             [](uint64_t a, const object::DebugMapRange& r) { return a < r.addr; });
  if (it == m.map.begin()) return false;
  const object::DebugMapRange& r = *std::prev(it);
  if (addr - r.addr >= r.size) return false;
  const Module::MapObject& o = load_map_object(m, r.object);
  if (!o.index || r.symbol >= o.file.symbol_addrs.size()) return false;
  const uint64_t base = o.file.symbol_addrs[r.symbol];
  if (base == object::DebugMapObjectFile::kNoAddress) return false;
  // Only inside the object's subprogram of that function (its DW_AT_low_pc..high_pc), as dsymutil
  // links it: the object's line table also covers the padding after a function, which the linked
  // image may fill up to its next function.
  const uint64_t at = base + (addr - r.addr);
  uint64_t entry = 0;
  if (!o.index->function_entry(at, &entry) || entry != base) return false;
  o.index->lookup(at, out);
  // The object's addresses are the function's place in the object: back to the image's.
  for (dwarf::DwarfFrame& f : *out)
    if (f.has_start_address) f.start_address = f.start_address - base + r.addr;
  *src = &o.name;
  return !out->empty();
}

void DwarfResolver::load_file_syms(const Module& m) const {
  stackprov::call_once(m.file_syms_once, [&] {
    // (address, name, STT_FILE name) of the local function symbols of each .symtab.
    auto collect = [&](const object::ObjectImage& f, bool from_debug_file) {
      for (const elf::LocalFileSymbol& e : elf::local_file_symbols(f))
        m.file_syms.push_back({e.addr, e.name, e.file, from_debug_file});
    };
    load_tables(m);
    if (m.symtab_file && !m.symtab.empty()) collect(*m.symtab_file, false);
    load_fallback(m);
    if (m.fallback_file) collect(*m.fallback_file, true);
    std::stable_sort(m.file_syms.begin(), m.file_syms.end(),
                     [](const FileSymEntry& a, const FileSymEntry& b) { return a.addr < b.addr; });
  });
}

ModuleReport DwarfResolver::report(const std::shared_ptr<const object::ObjectImage>& image) {
  std::shared_ptr<Module> m = module(image);
  ModuleReport r;
  if (m->dwarf_file) r.dwarf_file = m->dwarf_file->path();
  if (m->via_debuginfod) r.debuginfod_url = m->url;
  if (m->alt_file) r.alt_file = m->alt_file->path();
  load_tables(*m);
  if (m->minidebuginfo) r.minidebuginfo = "yes";
  r.error = m->index ? std::string() : m->error;
  if (m->index) {
    r.skeleton_units = m->index->skeleton_units();
    r.dwo_loaded = m->index->dwo_loaded();
    r.dwo_missing = m->index->dwo_missing();
  }
  return r;
}

std::vector<ResolveAttempt> DwarfResolver::dwarf_attempts(const std::shared_ptr<const object::ObjectImage>& image) {
  return module(image)->attempts;
}

std::string DwarfResolver::dwarf_file(const std::shared_ptr<const object::ObjectImage>& image) {
  std::shared_ptr<Module> m = module(image);
  return m->index && m->dwarf_file ? m->dwarf_file->path() : std::string();
}

bool DwarfResolver::call_site_at(const std::shared_ptr<const object::ObjectImage>& image, uint64_t ret,
                                 dwarf::CallSiteInfo* out) {
  std::shared_ptr<Module> m = module(image);
  return m->index && m->index->call_site_at(ret, out);
}

bool DwarfResolver::function_entry(const std::shared_ptr<const object::ObjectImage>& image, uint64_t pc,
                                   uint64_t* entry) {
  std::shared_ptr<Module> m = module(image);
  return m->index && m->index->function_entry(pc, entry);
}

bool DwarfResolver::tail_calls_of(const std::shared_ptr<const object::ObjectImage>& image, uint64_t entry,
                                  std::vector<dwarf::CallSiteInfo>* out) {
  std::shared_ptr<Module> m = module(image);
  return m->index && m->index->tail_calls_of(entry, out);
}

bool DwarfResolver::export_call_sites(const std::shared_ptr<const object::ObjectImage>& image,
                                      dwarf::DwarfIndex::CallSiteExport* out) {
  std::shared_ptr<Module> m = module(image);
  if (!m->index) return false;
  m->index->export_call_sites(out);
  return true;
}

bool DwarfResolver::parameters(const std::shared_ptr<const object::ObjectImage>& image, uint64_t pc,
                               dwarf::FrameParams* out) {
  std::shared_ptr<Module> m = module(image);
  return m->index && m->index->parameters(pc, out);
}

void DwarfResolver::symbol_names_at(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                                    std::vector<std::string_view>* out) {
  std::shared_ptr<Module> m = module(image);
  load_tables(*m);
  load_fallback(*m);
  const size_t first = out->size();
  for (const elf::SymbolTable* t : {&m->symtab, &m->dynsym, &m->fallback}) t->names_at(addr, out);
  for (size_t i = first; i < out->size(); i++) (*out)[i] = (*out)[i].substr(0, (*out)[i].find('@'));
}

bool DwarfResolver::symbol_address(const std::shared_ptr<const object::ObjectImage>& image, std::string_view name,
                                   uint64_t* addr, bool* global) {
  std::shared_ptr<Module> m = module(image);
  // gdb's objfiles: the module's own tables (.symtab, .dynsym, where every version of a name is
  // the plain name) first, then its separate debug file's .symtab (an objfile of its own).
  bool found = false;
  auto consider = [&](const elf::SymbolTable& t) {
    uint64_t a = 0;
    bool g = false;
    if (!t.find_by_name(name, &a, &g) || a == 0) return;
    if (!found || (g && !*global) || (g == *global && g && a > *addr)) {
      *addr = a;
      *global = g;
      found = true;
    }
  };
  load_tables(*m);
  consider(m->symtab);
  consider(m->dynsym);
  if (found && *global) return true;
  load_fallback(*m);
  const bool had_local = found;
  const uint64_t local = *addr;
  found = false;
  consider(m->fallback);
  if (found && *global) return true;
  if (had_local) {
    *addr = local;
    *global = false;
    return true;
  }
  return found;
}

std::vector<ResolveAttempt> DwarfResolver::table_attempts(const std::shared_ptr<const object::ObjectImage>& image,
                                                          bool dynsym) {
  std::shared_ptr<Module> m = module(image);
  std::vector<ResolveAttempt> out;
  const std::string& path = image->path();
  load_tables(*m);
  if (dynsym) {
    if (!m->elf)
      out.push_back({"dynsym", path, AttemptOutcome::kNoSymbols,
                     "not an ELF file (a " + std::string(image->format_name()) + " file has no .dynsym)"});
    else if (m->dynsym.empty()) out.push_back({"dynsym", path, AttemptOutcome::kNoSymbols, "no function symbols in .dynsym"});
    else out.push_back({"dynsym", path, AttemptOutcome::kFound, std::to_string(m->dynsym.size()) + " .dynsym symbols"});
    return out;
  }
  if (m->minidebuginfo)
    out.push_back({"symtab", path, AttemptOutcome::kFound,
                   std::to_string(m->symtab.size()) + " symbols in its MiniDebugInfo (.gnu_debugdata)"});
  else if (m->symtab_file)
    out.push_back({"symtab", path, AttemptOutcome::kFound, std::to_string(m->symtab.size()) + " .symtab symbols"});
  else if (!m->object_syms.empty())
    out.push_back({"symtab", path, AttemptOutcome::kFound,
                   std::to_string(m->object_syms.size()) + " function symbols of its " +
                       std::string(image->format_name()) + " symbol table"});
  else
    out.push_back({"symtab", path, AttemptOutcome::kNoSymbols, "no .symtab (stripped)"});
  // The separate debug file's .symtab names only what the module's tables do not, and never
  // in the llvm-symbolizer-compatible naming.
  load_fallback(*m);
  if (m->fallback_file)
    out.push_back({"symtab", m->fallback_file->path(), AttemptOutcome::kFound,
                   std::to_string(m->fallback.size()) +
                       " .symtab symbols of the separate debug file (not read by llvm-compatible naming)"});
  return out;
}

void DwarfResolver::assign_display(std::string_view name, std::string* out) const {
  if (!opts_.demangle || !maybe_mangled(name)) out->assign(name);
  else *out = demangle(name);
}

bool DwarfResolver::resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out,
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
  const FileName* dwarf_src = &m->dwarf_name;
  if (m->index) {
    m->index->lookup(addr, &dframes);
    for (auto& f : dframes) dwarf_hit |= f.has_function || f.has_file;
  } else if (!m->map.empty() && map_lookup(*m, addr, &dframes, &dwarf_src)) {
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
    if (policy != SymtabPolicy::kWithDebugFile && r.start_file_implicit_const) r.start_file.clear();
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
      out->source = *dwarf_src->path;
      out->provenance = "dwarf";
    }
    out->source_build_id = *dwarf_src->id;
  }
  if (policy != SymtabPolicy::kWithDebugFile) {
    name_like_llvm(*m, image, addr, dwarf_hit, policy == SymtabPolicy::kModuleThenDebugFile, out);
  } else {
    name_from_tables(*m, image, addr, dwarf_hit, out);
  }
  if (out->provenance.empty()) out->provenance = "none";
  return out->resolver != ResolvedBy::kNone;
}

void DwarfResolver::name_from_tables(const Module& mod, const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                                     bool dwarf_hit, Resolution* out) const {
  const Module* m = &mod;
  // The physical function is named as `stackprov stack` and perf-import name
  // it (symbolize::Symbolizer): PLT stubs (objdump, perf, gdb: sym@plt), then
  // the module's .symtab, else the separate debug file's (a superset: what
  // perf, gdb and eu-stack read), then .dynsym. This overrides DWARF's name,
  // as llvm-symbolizer's shouldOverrideWithSymbolTable does.
  stackprov::call_once(m->plt_once, [&] { m->plt = elf::load_plt(*image); });
  load_tables(*m);
  const elf::Symbol* sym = m->plt.lookup(addr);
  ResolvedBy by = ResolvedBy::kSymtab;
  const FileName* sym_file = &m->image_name;
  if (sym == nullptr && !m->symtab.empty()) {
    sym = m->symtab.lookup(addr);
    sym_file = &m->symtab_name;
  } else if (sym == nullptr) {
    load_fallback(*m);
    sym = m->fallback.lookup(addr);
    sym_file = m->fallback_file ? &m->fallback_name : nullptr;
  }
  if (sym == nullptr) {
    sym = m->dynsym.lookup(addr);
    by = ResolvedBy::kDynsym;
    sym_file = &m->image_name;
  }
  elf::Symbol other;  // another format's function symbol (ObjectImage::symbols())
  if (sym == nullptr && !m->object_syms.empty()) {
    auto it = std::upper_bound(m->object_syms.begin(), m->object_syms.end(), addr,
                               [](uint64_t a, const object::Symbol& s) { return a < s.addr; });
    if (it != m->object_syms.begin() && addr - std::prev(it)->addr < std::prev(it)->size) {
      --it;
      other.addr = it->addr;
      other.size = it->size;
      other.name = it->name;
      sym = &other;
      by = ResolvedBy::kSymtab;
    }
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
      const bool mini = by == ResolvedBy::kSymtab && m->minidebuginfo && sym_file == &m->symtab_name;
      out->source = mini || sym_file == nullptr ? *m->image_name.path : *sym_file->path;
      out->source_build_id = sym_file != nullptr && !mini ? *sym_file->id : *m->image_name.id;
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

void DwarfResolver::name_like_llvm(const Module& m, const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                                   bool dwarf_hit, bool debug_file, Resolution* out) const {
  // SymbolizableObjectFile::symbolizeInlinedCode with --functions=linkage: the
  // outermost frame takes name and start address from getNameFromSymbolTable,
  // and FileName from the STT_FILE before a local symbol when there is no line.
  stackprov::call_once(m.llvm_once, [&] {
    m.llvm = m.elf ? elf::load_llvm_symbols(*image) : elf::LlvmSymbolTable::from_symbols(image->symbolizer_symbols());
  });
  const elf::LlvmSymbolTable* table = &m.llvm;
  const FileName* from = &m.image_name;
  const elf::LlvmSymbol* sym = m.llvm.lookup(addr);
  if (sym == nullptr && debug_file && !dwarf_hit) {
    // What `llvm-symbolizer-14 --obj=<debug file>` answers: the same rules over the debug
    // file's .symtab (a stripped module keeps only .dynsym, without its local symbols).
    load_fallback(m);
    if (!m.fallback_file) return;
    stackprov::call_once(m.llvm_debug_once, [&] { m.llvm_debug = elf::load_llvm_symbols(*m.fallback_file); });
    table = &m.llvm_debug;
    from = &m.fallback_name;
    sym = m.llvm_debug.lookup(addr);
  }
  if (sym == nullptr) return;
  out->symbol_named = true;
  ResolvedFrame& outer = out->frames.back();
  out->before_symbol = {outer.has_start_address, outer.start_address, false, dwarf_hit};
  outer.linkage_name.assign(sym->name);
  assign_display(sym->name, &outer.function);
  outer.has_start_address = true;
  outer.start_address = sym->addr;
  if (outer.file.empty()) {
    outer.file.assign(table->file_of(*sym));
    out->before_symbol.file_from_symbol = !outer.file.empty();
  }
  if (!dwarf_hit) {
    outer.short_function = outer.function;
    out->resolver = table->from_dynsym() ? ResolvedBy::kDynsym : ResolvedBy::kSymtab;
    out->source = *from->path;
    out->source_build_id = *from->id;
    out->provenance = table->from_dynsym() ? "dynsym" : "symtab";
  }
}

}  // namespace stackprov::symbolize
