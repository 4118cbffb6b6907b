// SPDX-License-Identifier: Apache-2.0
// Unwind sources (issue 32): a module's unwind table of one kind, turned into a source once per
// module and asked per frame for the compact rule at a module-relative pc; the registry of table
// kinds that makes them. "Add a table kind" is a source class plus one registry entry here.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "dwarf/cfi.hpp"
#include "object/object_image.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/frame.hpp"
#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

/// What the table rung asks of a source on a rule-cache miss: the architecture's row parameters
/// and the walk's options (WalkOptions).
struct RuleQuery {
  RowParams params;
  bool use_debug_frame = true;  ///< DWARF: .debug_frame where .eh_frame has no FDE
  bool may_allocate = true;     ///< false in signal handlers: nothing may be compiled or loaded
  /// The pc is where the frame executes (frame 0, or a frame a signal or machine frame
  /// interrupted), not a return address looked up at pc - 1: a source that recognises epilogs from
  /// the code (x64 .pdata) may do so only then, and does not let the rule cache keep that answer.
  bool exact_pc = false;
};

/// A source's answer on a rule-cache miss: the rule, and whether the rule cache may keep it (a
/// rule the source could not make without allocating, or whose reason only its interpreter can
/// give, is not kept).
struct RuleLookup {
  UnwindRule rule;
  bool cache = true;
};

/// A row the table rung applies with the general CFI interpreter (a rule of kind kFull, or
/// kInvalid from a source that has one): every register rule, expressions read from `section`.
struct FullRow {
  dwarf::CfiRow row;
  const dwarf::CfiSection* section = nullptr;
  bool from_debug_frame = false;
  /// Expression bytes a source makes for this row (a table whose rules are not DWARF's: x64
  /// .pdata's machine frames), with `section` pointing at `own_section` over them. The row lives
  /// in the unwinder and is applied where it was filled, never copied.
  uint8_t own_exprs[96] = {};
  dwarf::CfiSection own_section;
};

/// One module's unwind table. Immutable once made; thread-safe for concurrent lookups. The table
/// rung (unwinder.hpp) asks lookup() on a rule-cache miss and keeps the answer in the cache, so a
/// walk through cached pcs never calls a source: no per-frame virtual dispatch.
class UnwindSource {
 public:
  virtual ~UnwindSource();
  /// How the frames this source finds are named (sprov_method): the table's kind, the rung CFI.
  /// `from_debug_frame` is the rule's bit of that name (DWARF: .debug_frame, not .eh_frame).
  virtual Method method(bool from_debug_frame = false) const = 0;
  /// The rule at link-time `rel` as a compact rule (unwind_rule.hpp): kCfaReg, kEndOfStack or
  /// kNoInfo (no entry covers `rel`). kOk with *rule; kBadCfi when the table's bytes do not
  /// decode there (hostile or damaged). `p` is the module's architecture's row parameters.
  virtual dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const = 0;
  /// The table rung's question on a rule-cache miss. By default rule() with undecodable bytes as
  /// kInvalid (bad CFI), kept in the cache.
  virtual RuleLookup lookup(uint64_t rel, const RuleQuery& q) const;
  /// Whether full_row() can answer: the source has rows a compact rule cannot hold (DWARF CFI's
  /// expressions and register-to-register rules). Without it, a kFull rule is a row the module's
  /// table does not carry (SPROV_FRAME_CFI_NOT_IN_BUNDLE).
  virtual bool has_full_rows() const { return false; }
  /// The row at `rel` for the general interpreter: kOk with *out; kNotFound (no entry covers
  /// `rel`); kBadCfi / kUnsupported when it does not decode.
  virtual dwarf::CfiStatus full_row(uint64_t rel, const RuleQuery& q, FullRow* out) const;
  /// The link-time addresses where the rule may change (each entry's start, and the end of the
  /// covered code, where kNoInfo begins), for a bundle's unwind rows (bundle_rows.hpp).
  virtual std::vector<uint64_t> row_starts() const = 0;
};

/// A table kind: `name` as object::UnwindTable names it, `make` reads the table once.
struct TableKind {
  std::string_view name;
  Result<std::unique_ptr<UnwindSource>> (*make)(const object::UnwindTable& table, const object::ObjectImage& image);
};

/// The source for the first of `image`'s unwind tables whose kind is registered; nullptr when
/// none is (an ELF module's eh_frame and debug_frame are one DWARF CFI source that LoadedModule
/// makes itself, with its compiled rows and the separate debug file found on first use:
/// dwarf_source.hpp, doc/architecture.md "Adding an unwind table kind"). An error when the
/// table's kind is known but its bytes are not.
/// `tables` is image.unwind_tables(), listed once by the caller (which reads them too).
Result<std::unique_ptr<UnwindSource>> make_source(const object::ObjectImage& image,
                                                  const std::vector<object::UnwindTable>& tables);

/// Adds a table kind (plug-ins, tests); a kind registered twice is kept once. Thread-safe.
void register_table_kind(const TableKind* kind);

}  // namespace stackprov::unwind
