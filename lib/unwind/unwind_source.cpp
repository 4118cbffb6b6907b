// SPDX-License-Identifier: Apache-2.0
// The table-kind registry and source construction.
#include "unwind/unwind_source.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include "unwind/compact_source.hpp"
#include "unwind/pdata_source.hpp"

namespace stackprov::unwind {

UnwindSource::~UnwindSource() = default;

RuleLookup UnwindSource::lookup(uint64_t rel, const RuleQuery& q) const {
  RuleLookup l;
  if (rule(rel, q.params, &l.rule) != dwarf::CfiStatus::kOk) l.rule = UnwindRule{};  // kInvalid
  return l;
}

dwarf::CfiStatus UnwindSource::full_row(uint64_t, const RuleQuery&, FullRow*) const {
  return dwarf::CfiStatus::kUnsupported;
}

namespace {

// The built-in table kinds read through this interface: x64 .pdata (PE), Mach-O compact unwind.
// eh_frame and debug_frame (DWARF CFI, ELF) go through LoadedModule's compiled rows.
constexpr const TableKind* kBuiltin[] = {&kPdataKind, &kCompactUnwindKind};

std::mutex g_mu;
std::vector<const TableKind*>& registered() {
  static std::vector<const TableKind*> v;
  return v;
}

const TableKind* find_kind(std::string_view name) {
  for (const TableKind* k : kBuiltin)
    if (k != nullptr && k->name == name) return k;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const TableKind* k : registered())
    if (k->name == name) return k;
  return nullptr;
}

}  // namespace

void register_table_kind(const TableKind* kind) {
  if (kind == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& v = registered();
  if (std::find(v.begin(), v.end(), kind) == v.end()) v.push_back(kind);
}

Result<std::unique_ptr<UnwindSource>> make_source(const object::ObjectImage& image,
                                                  const std::vector<object::UnwindTable>& tables) {
  for (const object::UnwindTable& t : tables)
    if (const TableKind* k = find_kind(t.kind)) return k->make(t, image);
  return std::unique_ptr<UnwindSource>();
}

}  // namespace stackprov::unwind
