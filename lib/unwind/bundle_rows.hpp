// SPDX-License-Identifier: Apache-2.0
// Bundle unwind rows: a module's .eh_frame/.debug_frame rows over its executable sections as compact lib/bundle records.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::unwind {

/// The unwind rows of every executable section (SHF_EXECINSTR) of `mod`, looked up
/// exactly as the unwinder does (.eh_frame first, then .debug_frame) and reduced by
/// translate_row(): one record where the rule changes, kNoInfo where no FDE covers
/// the pc (start of each gap), kFull where the row needs the CFI interpreter or
/// the CFI is malformed. Link-time addresses; deterministic. Fails for an
/// architecture without register traits.
Result<std::vector<bundle::UnwindRowRecord>> bundle_unwind_rows(const LoadedModule& mod);

/// The rows of a module of another format (LoadedModule::source()): its source's rule at each
/// address where it says the rule may change (UnwindSource::row_starts), equal neighbours merged;
/// a rule the source cannot decode is kFull (no rule). Deterministic.
Result<std::vector<bundle::UnwindRowRecord>> bundle_source_rows(const UnwindSource& src, const RowParams& p);

/// The bundle record of `rule` from `pc` on (a rule the record cannot hold is kFull).
bundle::UnwindRowRecord to_record(uint64_t pc, const UnwindRule& rule);
/// Whether two records give the same rule (their pcs aside).
bool same_rule(const bundle::UnwindRowRecord& a, const bundle::UnwindRowRecord& b);
/// `rows` (pc -> record, sorted) as a bundle module's row list: a row whose rule equals the one
/// before it is left out (it changes nothing).
std::vector<bundle::UnwindRowRecord> merge_equal_rows(const std::map<uint64_t, bundle::UnwindRowRecord>& rows);

}  // namespace stackprov::unwind
