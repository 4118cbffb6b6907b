// SPDX-License-Identifier: Apache-2.0
// The resolver chain: a policy (debuginfod, bundle, dwarf, gopclntab, symtab, dynsym, demangle) tried in order, per-frame provenance.
#include "symbolize/resolver_chain.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace stackprov::symbolize {

const char* attempt_outcome_name(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kAnswered: return "answered";
    case AttemptOutcome::kFound: return "found";
    case AttemptOutcome::kMissing: return "missing";
    case AttemptOutcome::kIdentityMismatch: return "identity mismatch";
    case AttemptOutcome::kCrcMismatch: return "crc mismatch";
    case AttemptOutcome::kUnreadable: return "unreadable";
    case AttemptOutcome::kFetchFailed: return "fetch failed";
    case AttemptOutcome::kNoDwarf: return "no DWARF";
    case AttemptOutcome::kNotCovered: return "no DWARF covering the address";
    case AttemptOutcome::kNoSymbols: return "no symbols";
    case AttemptOutcome::kSkipped: return "skipped";
    case AttemptOutcome::kNotAnswered: return "not answered";
  }
  return "unknown";
}

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
    if (dwarf_opts.dwarf) pdb_ = std::make_unique<PdbResolver>(dwarf_opts.debug);
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
        auto r = bundles_.resolve(id.kind, std::span<const uint8_t>(id.bytes, id.len), addr, out, nullptr,
                                  symtab_policy == SymtabPolicy::kWithDebugFile);
        if (!r) {
          if (bundle_error && !*bundle_error) *bundle_error = r.error();
          break;
        }
        if (r.value()) return true;
        break;
      }
      case Step::kDwarf:
        if (pdb_ && m.image && pdb_->resolve(m.image, addr, out)) return true;  // a PE image's PDB
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

void ResolverChain::explain_module(const ChainModule& m, std::vector<ResolveAttempt>* out) {
  using Step = ResolverPolicy::Step;
  ModuleId id = m.build_id;
  if (id.empty() && m.image) id = m.image->id();
  const std::string path = m.image ? m.image->path() : std::string();
  // The symbol-table steps share the DWARF resolver's tables: each is listed once, at its place.
  for (Step step : policy_.order) {
    switch (step) {
      case Step::kBundle: {
        if (!bundles_.enabled()) {
          out->push_back({"bundle", "", AttemptOutcome::kSkipped, "no bundle store configured"});
          break;
        }
        if (id.empty()) {
          out->push_back({"bundle", "", AttemptOutcome::kSkipped, "the module has no identity to look up"});
          break;
        }
        auto b = bundles_.bundle_of(id.kind, std::span<const uint8_t>(id.bytes, id.len));
        if (!b) out->push_back({"bundle", bundles_.store_dir(), AttemptOutcome::kUnreadable, b.error().message});
        else if (!b.value())
          out->push_back({"bundle", bundles_.store_dir(), AttemptOutcome::kMissing,
                          "no bundle for build-id " + id.hex() + " in the store"});
        else
          out->push_back({"bundle", b.value()->path, AttemptOutcome::kFound, b.value()->digest});
        break;
      }
      case Step::kDwarf:
        if (!dwarf_ || !m.image) {
          out->push_back({"dwarf", "", AttemptOutcome::kSkipped, "no module file"});
          break;
        }
        if (pdb_)
          for (ResolveAttempt& a : pdb_->attempts(m.image)) out->push_back(std::move(a));
        for (ResolveAttempt& a : dwarf_->dwarf_attempts(m.image)) out->push_back(std::move(a));
        break;
      case Step::kGopclntab:
        if (!m.image) {
          out->push_back({"gopclntab", "", AttemptOutcome::kSkipped, "no module file"});
        } else if (const GoPclntab* t = go_.table(m.image)) {
          out->push_back({"gopclntab", path, AttemptOutcome::kFound, "Go pclntab (" + t->found_by() + ")"});
        } else {
          out->push_back({"gopclntab", path, AttemptOutcome::kSkipped, "not a Go binary: no pclntab"});
        }
        break;
      case Step::kSymtab:
      case Step::kDynsym:
        if (!dwarf_ || !m.image) {
          out->push_back({step == Step::kSymtab ? "symtab" : "dynsym", "", AttemptOutcome::kSkipped, "no module file"});
          break;
        }
        for (ResolveAttempt& a : dwarf_->table_attempts(m.image, step == Step::kDynsym)) out->push_back(std::move(a));
        break;
    }
  }
}

void ResolverChain::explain_address(const ChainModule& m, uint64_t addr, const Resolution& answer,
                                    std::vector<ResolveAttempt>* out) {
  using Step = ResolverPolicy::Step;
  char at[32];
  snprintf(at, sizeof at, "0x%" PRIx64, addr);
  // The step that answered, by the answer's resolver; the DWARF step answers for debuginfod too.
  auto answered_by = [&](Step s) {
    switch (s) {
      case Step::kBundle: return answer.resolver == ResolvedBy::kBundle;
      case Step::kDwarf:
        return answer.resolver == ResolvedBy::kDwarf || answer.resolver == ResolvedBy::kDebuginfod ||
               answer.resolver == ResolvedBy::kPdb;
      case Step::kGopclntab: return answer.resolver == ResolvedBy::kGopclntab;
      case Step::kSymtab: return answer.resolver == ResolvedBy::kSymtab;
      case Step::kDynsym: return answer.resolver == ResolvedBy::kDynsym;
    }
    return false;
  };
  for (Step step : policy_.order) {
    if (answered_by(step)) break;
    // DWARF that is there but does not describe the address: the answer is the symbol table's.
    if (step == Step::kDwarf && dwarf_ && m.image) {
      if (std::string f = dwarf_->dwarf_file(m.image); !f.empty())
        out->push_back({"dwarf", f, AttemptOutcome::kNotCovered,
                        std::string("no DWARF unit of ") + f + " covers " + at, true});
    }
  }
  if (answer.resolver == ResolvedBy::kNone) {
    out->push_back({"none", "", AttemptOutcome::kNotAnswered, std::string("no step of the policy knows ") + at, true});
    return;
  }
  // The answer's own provenance names the step; a bundle's digest says which bundle.
  std::string why = answer.bundle_digest != answer.source ? answer.bundle_digest : std::string();
  out->push_back({answer.provenance.empty() ? "none" : answer.provenance, answer.source, AttemptOutcome::kAnswered,
                  std::move(why), true});
}

}  // namespace stackprov::symbolize
