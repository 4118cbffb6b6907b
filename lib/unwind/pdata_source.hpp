// SPDX-License-Identifier: Apache-2.0
// The x64 .pdata/.xdata unwind source (issue 33): a PE32+ image's RUNTIME_FUNCTION table as the
// table kind "pdata". Each lookup runs one symbolic RtlVirtualUnwind step (pe/x64_unwind.hpp) and
// turns it into a compact rule, or into an interpreter row where a compact rule cannot hold it (a
// machine frame, saves far from the frame, a frame base that is not the cfa's register).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "pe/unwind_info.hpp"
#include "pe/x64_unwind.hpp"
#include "unwind/unwind_source.hpp"

namespace stackprov::unwind {

class PdataSource final : public UnwindSource {
 public:
  /// `table` is the image's exception directory (PeObject::unwind_tables); checked by read_pdata.
  static Result<std::unique_ptr<UnwindSource>> make(const object::UnwindTable& table, const object::ObjectImage& image);

  Method method(bool) const override { return Method::kCfiPdata; }
  /// The rule at a caller's lookup pc (never an epilog); kFull where only an interpreter row holds it.
  dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const override;
  /// As rule(), and with q.exact_pc an epilog recognised from the code (that answer is not cached).
  /// Where nothing may allocate (a signal handler), no answer: the next rungs take the frame.
  RuleLookup lookup(uint64_t rel, const RuleQuery& q) const override;
  bool has_full_rows() const override { return true; }
  dwarf::CfiStatus full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const override;
  /// Each function's start, the end of each prolog operation, and each function's end.
  std::vector<uint64_t> row_starts() const override;

  /// Each RUNTIME_FUNCTION as [begin, end) link-time addresses, in table order (bundle epilog rows).
  std::vector<std::pair<uint64_t, uint64_t>> functions() const;

  /// The symbolic step at link-time address `rel` (tests, tools).
  Result<pe::X64Plan> plan(uint64_t rel, bool exact) const;

 private:
  PdataSource(const object::ObjectImage& image, uint64_t image_base, std::vector<pe::RuntimeFunction> table)
      : image_(image), image_base_(image_base), table_(std::move(table)) {}
  const object::ObjectImage& image_;
  uint64_t image_base_;
  std::vector<pe::RuntimeFunction> table_;
};

/// The table kind "pdata" (registered in unwind_source.cpp's built-in list).
extern const TableKind kPdataKind;

}  // namespace stackprov::unwind
