// SPDX-License-Identifier: Apache-2.0
// DWARF CFI and bundle rows as unwind sources.
#include "unwind/table_sources.hpp"

#include "unwind/bundle_rows.hpp"

namespace stackprov::unwind {

dwarf::CfiStatus DwarfCfiSource::rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const {
  const dwarf::CfiStatus st = mod_.compiled_rule(rel, true, p, rule);
  if (st != dwarf::CfiStatus::kNotFound) return st;
  *rule = UnwindRule{};
  rule->kind = UnwindRule::kNoInfo;
  return dwarf::CfiStatus::kOk;
}

RuleLookup DwarfCfiSource::lookup(uint64_t rel, const RuleQuery& q) const {
  RuleLookup l;  // kInvalid: the interpreter (full_row) says why
  if (!q.may_allocate) {
    l.cache = false;
    return l;
  }
  const dwarf::CfiStatus st = mod_.compiled_rule(rel, q.use_debug_frame, q.params, &l.rule);
  if (st == dwarf::CfiStatus::kOk) {
    l.cache = l.rule.kind != UnwindRule::kInvalid;
  } else if (st == dwarf::CfiStatus::kNotFound) {
    l.rule = UnwindRule{};
    l.rule.kind = UnwindRule::kNoInfo;
  } else {
    l.rule = UnwindRule{};
    l.cache = false;
  }
  return l;
}

dwarf::CfiStatus DwarfCfiSource::full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const {
  dwarf::FdeInfo fde;
  dwarf::CfiStatus st = mod_.find_fde(rel, q.use_debug_frame, &fde, &out->section, &out->from_debug_frame);
  if (st != dwarf::CfiStatus::kOk) return st;
  return dwarf::find_row(*out->section, fde, rel, &out->row);
}

std::vector<uint64_t> DwarfCfiSource::row_starts() const {
  std::vector<uint64_t> out;
  auto rows = bundle_unwind_rows(mod_);
  if (!rows.ok()) return out;
  for (const bundle::UnwindRowRecord& r : rows.value()) out.push_back(r.pc);
  return out;
}

dwarf::CfiStatus BundleRowsSource::rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const {
  *rule = mod_.bundle_rule(rel, p.num_regs);
  return rule->kind == UnwindRule::kInvalid ? dwarf::CfiStatus::kBadCfi : dwarf::CfiStatus::kOk;
}

RuleLookup BundleRowsSource::lookup(uint64_t rel, const RuleQuery& q) const {
  return RuleLookup{mod_.bundle_rule(rel, q.params.num_regs), true};
}

std::vector<uint64_t> BundleRowsSource::row_starts() const {
  std::vector<uint64_t> out;
  const LoadedModule::BundleSource* b = mod_.bundle();
  if (b == nullptr) return out;
  auto rows = b->reader->unwind_rows(b->index);
  if (!rows.ok()) return out;
  for (const bundle::UnwindRowRecord& r : rows.value()) out.push_back(r.pc);
  return out;
}

}  // namespace stackprov::unwind
