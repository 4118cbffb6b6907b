// SPDX-License-Identifier: Apache-2.0
// The resolver chain: a policy (debuginfod, bundle, dwarf, gopclntab, symtab, dynsym, demangle) tried in order, per-frame provenance.
#include "symbolize/resolver_chain.hpp"

#include <algorithm>

namespace stackprov::symbolize {

ResolverPolicy ResolverPolicy::from_names(const std::vector<std::string>& names, bool offline) {
  ResolverPolicy p;
  p.offline = offline;
  const bool has_dwarf = std::find(names.begin(), names.end(), "dwarf") != names.end();
  for (const std::string& n : names) {
    if (n == "bundle") {
      p.order.push_back(Step::kBundle);
    } else if (n == "dwarf" || n == "debuginfod") {
      (n == "dwarf" ? p.dwarf : p.debuginfod) = true;
      // One DWARF step: at "dwarf", or at "debuginfod" when "dwarf" is absent.
      // (debuginfod fetches inside the DWARF step, only when no local debug file exists.)
      if (n == "dwarf" || !has_dwarf) p.order.push_back(Step::kDwarf);
    } else if (n == "gopclntab") {
      p.order.push_back(Step::kGopclntab);
    } else if (n == "symtab") {
      p.order.push_back(Step::kSymtab);
    } else if (n == "dynsym") {
      p.order.push_back(Step::kDynsym);
    } else if (n == "demangle") {
      p.demangle = true;
    }
  }
  if (offline) {
    // Never a module file, a debug file or the network.
    p.order.erase(std::remove_if(p.order.begin(), p.order.end(), [](Step s) { return s != Step::kBundle; }),
                  p.order.end());
    p.debuginfod = p.dwarf = false;
  }
  return p;
}

bool ResolverPolicy::has(Step s) const { return std::find(order.begin(), order.end(), s) != order.end(); }

ResolverChain::ResolverChain(ResolverPolicy policy, DwarfResolverOptions dwarf_opts,
                             std::optional<std::string> store_dir)
    : policy_(std::move(policy)), bundles_(policy_.has(ResolverPolicy::Step::kBundle) ? std::move(store_dir)
                                                                                       : std::nullopt) {
  using Step = ResolverPolicy::Step;
  if (policy_.has(Step::kDwarf) || policy_.has(Step::kSymtab) || policy_.has(Step::kDynsym)) {
    dwarf_opts.debuginfod = dwarf_opts.debuginfod && policy_.debuginfod;
    // "debuginfod" alone still reads DWARF (of the fetched file, or a local one: never fetched twice).
    dwarf_opts.dwarf = policy_.dwarf || policy_.debuginfod;
    dwarf_ = std::make_unique<DwarfResolver>(std::move(dwarf_opts));
  }
}

bool ResolverChain::resolve(const ChainModule& m, uint64_t addr, SymtabPolicy symtab_policy, Resolution* out,
                            std::optional<Error>* bundle_error) {
  using Step = ResolverPolicy::Step;
  // The DWARF resolver's answer (DWARF, else the symbol tables), computed once. Swapped
  // with *out on success: both keep their string buffers for the next calls of this thread.
  thread_local Resolution tables;
  bool tables_done = false;
  auto run_tables = [&] {
    if (tables_done) return;
    tables_done = true;
    if (dwarf_ && m.image) dwarf_->resolve(m.image, addr, &tables, symtab_policy);
    else tables.resolver = ResolvedBy::kNone;  // what a previous call left is not this answer
  };
  for (Step step : policy_.order) {
    switch (step) {
      case Step::kBundle: {
        if (!bundles_.enabled()) break;
        ModuleId id = m.build_id;
        if (id.empty() && m.image) id = m.image->id();
        if (id.empty()) break;
        auto r = bundles_.resolve(id.kind, std::span<const uint8_t>(id.bytes, id.len), addr, out);
        if (!r) {
          if (bundle_error && !*bundle_error) *bundle_error = r.error();
          break;
        }
        if (r.value()) return true;
        break;
      }
      case Step::kDwarf:
        run_tables();
        if (tables.resolver == ResolvedBy::kDwarf || tables.resolver == ResolvedBy::kDebuginfod) {
          std::swap(*out, tables);
          return true;
        }
        break;
      case Step::kGopclntab:
        if (m.image && go_.resolve(m.image, addr, out)) return true;
        break;
      case Step::kSymtab:
      case Step::kDynsym:
        run_tables();
        if (tables.resolver == (step == Step::kSymtab ? ResolvedBy::kSymtab : ResolvedBy::kDynsym)) {
          std::swap(*out, tables);
          return true;
        }
        break;
    }
  }
  *out = Resolution{};
  out->frames.emplace_back();
  out->provenance = "none";
  return false;
}

}  // namespace stackprov::symbolize
