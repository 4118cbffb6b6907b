// SPDX-License-Identifier: Apache-2.0
// gdb's tail-call search over the modules of one stack, at runtime addresses (pipeline/tail_call_frames.hpp).
#include "pipeline/tail_call_frames.hpp"

#include <algorithm>
#include <span>

#include "dwarf/tail_calls.hpp"

namespace stackprov::pipeline {

namespace {

/// A module's DWARF (DwarfResolver keeps its index).
class DwarfCallSites final : public ModuleCallSites {
 public:
  DwarfCallSites(symbolize::DwarfResolver& dwarf, std::shared_ptr<const object::ObjectImage> image)
      : dwarf_(dwarf), image_(std::move(image)) {}
  bool call_site_at(uint64_t ret, dwarf::CallSiteInfo* out) override { return dwarf_.call_site_at(image_, ret, out); }
  bool function_entry(uint64_t pc, uint64_t* entry) override { return dwarf_.function_entry(image_, pc, entry); }
  bool tail_calls_of(uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) override {
    return dwarf_.tail_calls_of(image_, entry, out);
  }
  bool symbol_address(std::string_view name, uint64_t* addr, bool* global) override {
    return dwarf_.symbol_address(image_, name, addr, global);
  }

 private:
  symbolize::DwarfResolver& dwarf_;
  std::shared_ptr<const object::ObjectImage> image_;
};

/// A bundle module's call-site section: targets this module defines were resolved when it was
/// built; a declaration's name is looked up in the stack's modules' name records.
class BundleCallSites final : public ModuleCallSites {
 public:
  explicit BundleCallSites(bundle::CallSiteTable t) : t_(std::move(t)) {
    for (size_t i = 0; i < t_.functions.size(); i++)
      for (const auto& [lo, hi] : t_.functions[i].ranges) ranges_.push_back({lo, hi, i});
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  }
  bool call_site_at(uint64_t ret, dwarf::CallSiteInfo* out) override {
    const bundle::CallSiteRecord* s = site(ret);
    if (s == nullptr) return false;
    *out = info(*s);
    return true;
  }
  bool function_entry(uint64_t pc, uint64_t* entry) override {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pc, [](uint64_t a, const Range& r) { return a < r.lo; });
    if (it == ranges_.begin() || pc >= (it - 1)->hi) return false;
    *entry = t_.functions[(it - 1)->func].entry;
    return true;
  }
  bool tail_calls_of(uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) override {
    out->clear();
    auto it = std::lower_bound(t_.functions.begin(), t_.functions.end(), entry,
                               [](const bundle::CallFunctionRecord& f, uint64_t e) { return f.entry < e; });
    if (it == t_.functions.end() || it->entry != entry) return false;
    for (uint64_t pc : it->tails) out->push_back(info(*site(pc)));  // the reader checked each names a site
    return true;
  }
  bool symbol_address(std::string_view name, uint64_t* addr, bool* global) override {
    auto it = std::lower_bound(t_.symbols.begin(), t_.symbols.end(), name,
                               [](const bundle::CallSymbolRecord& y, std::string_view n) { return y.name < n; });
    if (it == t_.symbols.end() || it->name != name) return false;
    *addr = it->addr;
    *global = it->global;
    return true;
  }

 private:
  struct Range {
    uint64_t lo, hi;
    size_t func;
  };
  const bundle::CallSiteRecord* site(uint64_t ret) const {
    auto it = std::lower_bound(t_.sites.begin(), t_.sites.end(), ret,
                               [](const bundle::CallSiteRecord& s, uint64_t a) { return s.return_pc < a; });
    return it != t_.sites.end() && it->return_pc == ret ? &*it : nullptr;
  }
  /// The site as the DWARF index answers it (a name's view points into this object).
  static dwarf::CallSiteInfo info(const bundle::CallSiteRecord& s) {
    dwarf::CallSiteInfo c;
    c.return_pc = s.return_pc;
    c.tail_call = s.tail_call;
    c.target = s.has_target              ? dwarf::CallSiteInfo::Target::kAddress
               : !s.target_name.empty() ? dwarf::CallSiteInfo::Target::kName
                                        : dwarf::CallSiteInfo::Target::kUnknown;
    c.target_addr = s.target;
    c.target_name = s.target_name;
    return c;
  }
  bundle::CallSiteTable t_;
  std::vector<Range> ranges_;
};

/// Each question goes to the module holding the address (the modules that have a frame in the
/// stack: gdb's minimal symbols are every objfile's, ours the stack's modules').
class TailCallModules {
 public:
  TailCallModules(const std::vector<unwind::Frame>& frames, const std::vector<memory::SnapshotModule>& modules,
                  const CallSitesOf& sites_of)
      : modules_(modules), sites_of_(sites_of) {
    std::vector<bool> used(modules.size());
    for (const unwind::Frame& f : frames)
      if (f.module_index >= 0 && static_cast<size_t>(f.module_index) < used.size()) used[f.module_index] = true;
    for (size_t i = 0; i < used.size(); i++)
      if (used[i]) mods_.push_back({static_cast<int32_t>(i), nullptr, false});
  }

  int32_t module_at(uint64_t addr) const {
    for (const Mod& m : mods_) {
      const memory::SnapshotModule& sm = modules_[m.index];
      if (addr >= sm.start && addr < sm.end) return m.index;
    }
    return -1;
  }

  dwarf::TailCallQueries queries() {
    dwarf::TailCallQueries q;
    q.function_entry = [this](uint64_t pc, uint64_t* entry) {
      Mod* m = mod_at(pc);
      if (m == nullptr || !m->sites->function_entry(pc - bias(*m), entry)) return false;
      *entry += bias(*m);
      return true;
    };
    q.call_site_at = [this](uint64_t ret, dwarf::CallSiteInfo* out) {
      Mod* m = ret == 0 ? nullptr : mod_at(ret - 1);
      if (m == nullptr || !m->sites->call_site_at(ret - bias(*m), out)) return false;
      absolute(*m, out);
      return true;
    };
    q.tail_calls_of = [this](uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) {
      Mod* m = mod_at(entry);
      if (m == nullptr || !m->sites->tail_calls_of(entry - bias(*m), out)) return false;
      for (dwarf::CallSiteInfo& s : *out) absolute(*m, &s);
      return true;
    };
    q.target_address = [](const dwarf::CallSiteInfo& s, uint64_t* out) {
      if (s.target != dwarf::CallSiteInfo::Target::kAddress) return false;
      *out = s.target_addr;
      return true;
    };
    return q;
  }

 private:
  struct Mod {
    int32_t index;
    std::shared_ptr<ModuleCallSites> sites;  ///< null until first asked; null without a source
    bool tried;
  };
  uint64_t bias(const Mod& m) const { return modules_[m.index].load_bias; }

  Mod* load(Mod& m) {
    if (!m.tried) {
      m.tried = true;
      m.sites = sites_of_(m.index);
    }
    return m.sites ? &m : nullptr;
  }

  Mod* mod_at(uint64_t addr) {
    for (Mod& m : mods_) {
      const memory::SnapshotModule& sm = modules_[m.index];
      if (addr >= sm.start && addr < sm.end) return load(m);
    }
    return nullptr;
  }

  /// A call site of module `m` at runtime addresses, its target resolved now: a definition's entry,
  /// or a declaration's name through the symbol tables (a global symbol in any of the stack's
  /// modules, in their order, before a local one, as gdb's lookup_minimal_symbol).
  void absolute(const Mod& m, dwarf::CallSiteInfo* s) {
    s->return_pc += bias(m);
    if (s->target == dwarf::CallSiteInfo::Target::kAddress) {
      s->target_addr += bias(m);
      return;
    }
    if (s->target != dwarf::CallSiteInfo::Target::kName) return;
    s->target = dwarf::CallSiteInfo::Target::kUnknown;
    bool have_local = false;
    uint64_t local = 0;
    for (Mod& o : mods_) {
      if (load(o) == nullptr) continue;
      uint64_t a = 0;
      bool global = false;
      if (!o.sites->symbol_address(s->target_name, &a, &global)) continue;
      if (global) {
        s->target = dwarf::CallSiteInfo::Target::kAddress;
        s->target_addr = a + bias(o);
        return;
      }
      if (!have_local) local = a + bias(o), have_local = true;
    }
    if (have_local) {
      s->target = dwarf::CallSiteInfo::Target::kAddress;
      s->target_addr = local;
    }
  }

  const std::vector<memory::SnapshotModule>& modules_;
  const CallSitesOf& sites_of_;
  std::vector<Mod> mods_;
};

}  // namespace

std::shared_ptr<ModuleCallSites> dwarf_call_sites(symbolize::DwarfResolver& dwarf,
                                                  std::shared_ptr<const object::ObjectImage> image) {
  return std::make_shared<DwarfCallSites>(dwarf, std::move(image));
}

Result<std::shared_ptr<ModuleCallSites>> bundle_call_sites(const bundle::BundleReader& reader, size_t module) {
  auto t = reader.call_sites(module);
  if (!t) return t.error();
  return std::shared_ptr<ModuleCallSites>(std::make_shared<BundleCallSites>(std::move(t.value())));
}

std::shared_ptr<ModuleCallSites> BundleCallSitesCache::get(symbolize::BundleResolver& bundles,
                                                           const memory::SnapshotModule& m) {
  if (m.build_id.empty() || !bundles.enabled()) return nullptr;
  const std::span<const uint8_t> id(m.build_id.bytes, m.build_id.len);
  auto b = bundles.bundle_of(m.build_id.kind, id);
  if (!b.ok() || b.value() == nullptr) return nullptr;
  const bundle::BundleReader& r = b.value()->reader;
  const bundle::ModuleView* mv = r.find_module(m.build_id.kind, id);
  if (mv == nullptr) return nullptr;
  const auto key = std::make_pair(&r, mv->index);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  auto sites = bundle_call_sites(r, mv->index);
  std::shared_ptr<ModuleCallSites> out = sites.ok() ? sites.value() : nullptr;
  cache_.emplace(key, out);
  return out;
}

std::vector<unwind::Frame> with_tail_call_frames(symbolize::DwarfResolver& dwarf,
                                                 const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const TailCallImageOf& image_of, std::vector<int64_t>* origin) {
  const CallSitesOf sites_of = [&](int32_t index) -> std::shared_ptr<ModuleCallSites> {
    auto image = image_of(index);
    return image ? dwarf_call_sites(dwarf, std::move(image)) : nullptr;
  };
  return with_tail_call_frames(frames, modules, sites_of, origin);
}

std::vector<unwind::Frame> with_tail_call_frames(const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const CallSitesOf& sites_of, std::vector<int64_t>* origin) {
  std::vector<unwind::Frame> out;
  out.reserve(frames.size());
  if (origin) origin->clear();
  TailCallModules mods(frames, modules, sites_of);
  const dwarf::TailCallQueries q = mods.queries();
  const size_t n = frames.size();
  // A walk holds at most 65536 frames; the inferred ones are bounded the same way.
  constexpr size_t kMaxInferred = 65536;
  size_t inferred = 0;
  for (size_t i = 0; i < n; i++) {
    const unwind::Frame& f = frames[i];
    out.push_back(f);
    if (origin) origin->push_back(static_cast<int64_t>(i));
    if (i + 1 >= n || inferred >= kMaxInferred) continue;
    const unwind::Frame& c = frames[i + 1];
    // gdb's tail-call sniffer belongs to its DWARF CFI unwinder: the caller was found by a table
    // from the callee, at a return address.
    const bool cfi = c.method == unwind::Method::kCfiEhFrame || c.method == unwind::Method::kCfiDebugFrame ||
                     c.method == unwind::Method::kCfiBundle;
    if (!cfi || !c.lookup_prev || f.module_index < 0 || c.module_index < 0 || f.domain != unwind::Domain::kUser)
      continue;
    for (uint64_t site : dwarf::tail_call_frames(q, c.pc, f.pc - (f.lookup_prev ? 1 : 0))) {
      if (inferred++ >= kMaxInferred) break;
      unwind::Frame t;
      t.pc = site;
      t.sp = f.cfa != 0 ? f.cfa : c.sp;  // the callee's CFA: the tail caller had released its frame
      t.module_index = mods.module_at(site - 1);
      t.method = unwind::Method::kTailCall;
      t.lookup_prev = true;
      t.flags = unwind::Frame::kFlagInferred;
      out.push_back(t);
      if (origin) origin->push_back(-1);
    }
  }
  return out;
}

}  // namespace stackprov::pipeline
