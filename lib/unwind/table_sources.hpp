// SPDX-License-Identifier: Apache-2.0
// The unwind sources LoadedModule makes itself (issue 32): an ELF module's DWARF CFI (.eh_frame,
// then .debug_frame of the file or of its separate debug file) and a bundle-backed module's
// compiled unwind rows. Other formats' tables come from the table-kind registry
// (unwind_source.hpp). Every loaded module with unwind information has exactly one source, and
// the unwinder's table rung asks it alone.
#pragma once

#include "unwind/module_unwind.hpp"
#include "unwind/unwind_source.hpp"

namespace stackprov::unwind {

/// DWARF CFI of a module's file: compiled rows on a miss (rule()/lookup()), the general
/// interpreter's rows where a compact rule cannot hold the row (full_row()). Owned by the module
/// it reads.
class DwarfCfiSource final : public UnwindSource {
 public:
  explicit DwarfCfiSource(const LoadedModule& mod) : mod_(mod) {}
  Method method(bool from_debug_frame) const override {
    return from_debug_frame ? Method::kCfiDebugFrame : Method::kCfiEhFrame;
  }
  dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const override;
  /// A miss: the compiled rows (kNotFound cached as kNoInfo); where nothing may allocate, kInvalid
  /// uncached, which sends the rung to full_row() (the interpreter allocates nothing).
  RuleLookup lookup(uint64_t rel, const RuleQuery& q) const override;
  bool has_full_rows() const override { return true; }
  dwarf::CfiStatus full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const override;
  std::vector<uint64_t> row_starts() const override;

 private:
  const LoadedModule& mod_;
};

/// A bundle-backed module's unwind rows (LoadedModule::bundle_rule): rows the bundle could not
/// compile are kFull, which no interpreter here can apply (no CFI travels in a bundle).
class BundleRowsSource final : public UnwindSource {
 public:
  explicit BundleRowsSource(const LoadedModule& mod) : mod_(mod) {}
  Method method(bool) const override { return Method::kCfiBundle; }
  dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const override;
  RuleLookup lookup(uint64_t rel, const RuleQuery& q) const override;
  std::vector<uint64_t> row_starts() const override;

 private:
  const LoadedModule& mod_;
};

}  // namespace stackprov::unwind
