// SPDX-License-Identifier: Apache-2.0
// The Mach-O compact unwind source (issue 34): `__TEXT,__unwind_info` as the table kind
// "compact_unwind". Each encoding (macho/compact_unwind.hpp) becomes a compact rule; DWARF mode goes
// to the FDE the encoding names in `__TEXT,__eh_frame` through the CFI interpreter; an exact pc
// (frame 0) in a prologue or epilogue gets the rule of its instructions (first_frame.hpp), and one
// with no entry or encoding 0 the return address at [sp] (x86_64) or in lr (arm64).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "dwarf/cfi.hpp"
#include "macho/compact_unwind.hpp"
#include "unwind/unwind_source.hpp"

namespace stackprov::unwind {

class CompactUnwindSource final : public UnwindSource {
 public:
  /// `table.data` is `__unwind_info` (checked by CompactUnwindTable::parse), `table.aux` the image's
  /// `__eh_frame` (may be absent: DWARF-mode entries then have no rule). `image` is a MachoObject
  /// of x86_64 or arm64.
  static Result<std::unique_ptr<UnwindSource>> make(const object::UnwindTable& table, const object::ObjectImage& image);

  /// Every frame this source finds is named compact_unwind (DWARF-mode ones too: the table that
  /// dispatched them).
  Method method(bool) const override { return Method::kCompactUnwind; }
  /// The body rule at link-time `rel` (a return address's lookup pc): kCfaReg from the encoding,
  /// DWARF mode's row translated (kFull when a compact rule cannot hold it), kNoInfo where no entry
  /// or encoding 0 covers `rel`; kBadCfi when the encoding or FDE does not decode.
  dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const override;
  /// As rule(); with q.exact_pc the prologue/epilogue analysis and the no-entry rule, whose answers
  /// the rule cache does not keep (the same rel as a return address means the body).
  RuleLookup lookup(uint64_t rel, const RuleQuery& q) const override;
  bool has_full_rows() const override { return eh_.data != nullptr; }
  /// DWARF mode's row at `rel` from the FDE the encoding names.
  dwarf::CfiStatus full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const override;
  /// Each entry's start, every row of a DWARF-mode entry's FDE (each FDE once, at most 2^20 rows in
  /// all: bounded for a hostile image), and the end of the table.
  std::vector<uint64_t> row_starts() const override;

  /// The decoded encoding covering link-time `rel` (tests, tools); nullopt outside the table.
  std::optional<macho::CompactRule> compact_rule(uint64_t rel) const;

 private:
  CompactUnwindSource(const object::ObjectImage& image, Arch arch, uint64_t base, macho::CompactUnwindTable table,
                      std::vector<uint64_t> starts)
      : image_(image), arch_(arch), base_(base), table_(std::move(table)), starts_(std::move(starts)) {}
  /// The body rule at `rel` (see rule()); *entry gets the covering entry when there is one.
  dwarf::CfiStatus body_rule(uint64_t rel, const RowParams& p, UnwindRule* out, macho::FunctionUnwind* entry) const;
  /// The function holding `rel`: the entry's range narrowed by LC_FUNCTION_STARTS (lld folds
  /// consecutive functions of one encoding into one entry).
  void function_bounds(uint64_t rel, const macho::FunctionUnwind& e, uint64_t* start, uint64_t* end) const;

  const object::ObjectImage& image_;
  Arch arch_;
  uint64_t base_;  ///< __TEXT's vmaddr: function offsets are from it
  macho::CompactUnwindTable table_;
  std::vector<uint64_t> starts_;  ///< LC_FUNCTION_STARTS, link-time, ascending
  dwarf::CfiSection eh_{};
};

/// The table kind "compact_unwind" (registered in unwind_source.cpp's built-in list).
extern const TableKind kCompactUnwindKind;

}  // namespace stackprov::unwind
