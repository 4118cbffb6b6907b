// SPDX-License-Identifier: Apache-2.0
// bench/unwind: the cost of a stackprov rule-cache miss in a loaded module (compiled rows), measured on its own.
#include <algorithm>
#include <cstdio>
#include <random>

#include "arch/x86_64/registers.hpp"
#include "object/object_image.hpp"
#include "peers.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"

namespace bench_unwind {

namespace su = stackprov::unwind;

MissFigures measure_stackprov_miss(const SnapshotSet& set, int runs) {
  MissFigures m;
  if (set.groups().empty()) return m;
  struct Pc {
    const su::LoadedModule* mod;
    uint64_t rel;
  };
  std::vector<std::shared_ptr<su::LoadedModule>> mods;
  std::vector<Pc> pcs;
  for (const PlacedModule& pm : set.groups()[0].modules) {
    auto img = stackprov::object::open(pm.path);
    if (!img.ok()) continue;
    auto mod = su::LoadedModule::load(img.value(), {});
    if (!mod.ok() || !mod.value()->has_eh_frame()) continue;
    const su::LoadedModule& lm = *mod.value();
    for (size_t i = 0; i < lm.eh_index().size(); i++) {
      stackprov::dwarf::FdeInfo f;
      if (lm.eh_index().decode_entry(lm.eh_frame(), i, &f) != stackprov::dwarf::CfiStatus::kOk) continue;
      if (f.pc_end <= f.pc_begin) continue;
      for (uint64_t k = 0; k < 4; k++) pcs.push_back(Pc{&lm, f.pc_begin + (f.pc_end - f.pc_begin) * k / 4});
    }
    mods.push_back(mod.value());
  }
  if (pcs.empty()) return m;
  std::mt19937_64 rng(42);
  std::shuffle(pcs.begin(), pcs.end(), rng);
  m.pcs = pcs.size();
  m.modules = mods.size();
  constexpr su::RowParams kParams = su::row_params_of<stackprov::arch::x86_64::Traits>();
  su::RuleCache cache;
  volatile uint64_t sink = 0;
  auto pass = [&] {
    uint64_t s = 0;
    cache.clear();
    for (const Pc& p : pcs) {
      const uint32_t gen = p.mod->generation();
      if (const su::UnwindRule* r = cache.find(p.rel, gen)) {
        s += r->kind;
        continue;
      }
      su::UnwindRule r;
      if (p.mod->compiled_rule(p.rel, false, kParams, &r) == stackprov::dwarf::CfiStatus::kOk) {
        cache.insert(p.rel, gen, r, stackprov::arch::x86_64::Traits::kNumRegs, stackprov::arch::x86_64::Traits::kSpReg,
                     stackprov::arch::x86_64::Traits::kFpReg);  // as the unwinder inserts (Entry::pcs)
        s += r.cfa_off;
      }
    }
    sink = sink + s;
  };
  double t0 = cpu_ns();
  pass();  // compiles every FDE (the first miss in each)
  m.compile_ns = (cpu_ns() - t0) / static_cast<double>(pcs.size());
  std::vector<double> per;
  for (int r = 0; r < runs; r++) {
    double a = cpu_ns();
    pass();
    per.push_back((cpu_ns() - a) / static_cast<double>(pcs.size()));
  }
  m.miss_ns = median(per);
  // The same misses through the CFA interpreter (the path before compiled rows).
  auto interp_pass = [&] {
    uint64_t s = 0;
    cache.clear();
    stackprov::dwarf::CfiRow row;
    for (const Pc& p : pcs) {
      const uint32_t gen = p.mod->generation();
      if (const su::UnwindRule* r = cache.find(p.rel, gen)) {
        s += r->kind;
        continue;
      }
      stackprov::dwarf::FdeInfo fde;
      if (p.mod->eh_index().lookup(p.mod->eh_frame(), p.rel, &fde) != stackprov::dwarf::CfiStatus::kOk) continue;
      if (stackprov::dwarf::find_row(p.mod->eh_frame(), fde, p.rel, &row) != stackprov::dwarf::CfiStatus::kOk) continue;
      const su::UnwindRule r = su::translate_row(row, kParams.addr_size, kParams.num_regs, kParams.callee_saved);
      cache.insert(p.rel, gen, r, stackprov::arch::x86_64::Traits::kNumRegs, stackprov::arch::x86_64::Traits::kSpReg,
                   stackprov::arch::x86_64::Traits::kFpReg);
      s += r.cfa_off;
    }
    sink = sink + s;
  };
  per.clear();
  for (int r = 0; r < runs; r++) {
    double a = cpu_ns();
    interp_pass();
    per.push_back((cpu_ns() - a) / static_cast<double>(pcs.size()));
  }
  m.interp_ns = median(per);
  return m;
}

}  // namespace bench_unwind
