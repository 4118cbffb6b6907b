// SPDX-License-Identifier: Apache-2.0
// gdb's tail-call search over the modules of one stack, at runtime addresses (pipeline/tail_call_frames.hpp).
#include "pipeline/tail_call_frames.hpp"

#include "dwarf/tail_calls.hpp"

namespace stackprov::pipeline {

namespace {

/// Each question goes to the module holding the address (the modules that have a frame in the
/// stack: gdb's minimal symbols are every objfile's, ours the stack's modules').
class TailCallModules {
 public:
  TailCallModules(const std::vector<unwind::Frame>& frames, const std::vector<memory::SnapshotModule>& modules,
                  symbolize::DwarfResolver& dwarf, const TailCallImageOf& image_of)
      : modules_(modules), dwarf_(dwarf), image_of_(image_of) {
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
      if (m == nullptr || !dwarf_.function_entry(m->image, pc - bias(*m), entry)) return false;
      *entry += bias(*m);
      return true;
    };
    q.call_site_at = [this](uint64_t ret, dwarf::CallSiteInfo* out) {
      Mod* m = ret == 0 ? nullptr : mod_at(ret - 1);
      if (m == nullptr || !dwarf_.call_site_at(m->image, ret - bias(*m), out)) return false;
      absolute(*m, out);
      return true;
    };
    q.tail_calls_of = [this](uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) {
      Mod* m = mod_at(entry);
      if (m == nullptr || !dwarf_.tail_calls_of(m->image, entry - bias(*m), out)) return false;
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
    std::shared_ptr<const object::ObjectImage> image;  ///< null until first asked; null without a file
    bool tried;
  };
  uint64_t bias(const Mod& m) const { return modules_[m.index].load_bias; }

  Mod* load(Mod& m) {
    if (!m.tried) {
      m.tried = true;
      m.image = image_of_(m.index);
    }
    return m.image ? &m : nullptr;
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
      if (!dwarf_.symbol_address(o.image, s->target_name, &a, &global)) continue;
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
  symbolize::DwarfResolver& dwarf_;
  const TailCallImageOf& image_of_;
  std::vector<Mod> mods_;
};

}  // namespace

std::vector<unwind::Frame> with_tail_call_frames(symbolize::DwarfResolver& dwarf,
                                                 const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const TailCallImageOf& image_of, std::vector<int64_t>* origin) {
  std::vector<unwind::Frame> out;
  out.reserve(frames.size());
  if (origin) origin->clear();
  TailCallModules mods(frames, modules, dwarf, image_of);
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
