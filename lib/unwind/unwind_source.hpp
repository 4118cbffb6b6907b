// SPDX-License-Identifier: Apache-2.0
// Unwind sources (issue 32): a module's unwind table of one kind, turned into a source once per
// module and asked per frame for the compact rule at a module-relative pc; the registry of table
// kinds that makes them. "Add a table kind" is a source class plus one registry entry here.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "core/error.hpp"
#include "dwarf/cfi.hpp"
#include "object/object_image.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/frame.hpp"
#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

/// One module's unwind table. Immutable once made; thread-safe for concurrent lookups.
class UnwindSource {
 public:
  virtual ~UnwindSource();
  /// How the frames this source finds are named (sprov_method): the table's kind, the rung CFI.
  virtual Method method() const = 0;
  /// The rule at link-time `rel` as a compact rule (unwind_rule.hpp): kCfaReg, kEndOfStack or
  /// kNoInfo (no entry covers `rel`). kOk with *rule; kBadCfi when the table's bytes do not
  /// decode there (hostile or damaged). `p` is the module's architecture's row parameters.
  virtual dwarf::CfiStatus rule(uint64_t rel, const RowParams& p, UnwindRule* rule) const = 0;
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
/// none is (an ELF module's eh_frame and debug_frame are read by LoadedModule's DWARF CFI path
/// itself, with its compiled rows and rule cache: doc/architecture.md "Adding an unwind table
/// kind"). An error when the table's kind is known but its bytes are not.
Result<std::unique_ptr<UnwindSource>> make_source(const object::ObjectImage& image);

/// Adds a table kind (plug-ins, tests); a kind registered twice is kept once. Thread-safe.
void register_table_kind(const TableKind* kind);

}  // namespace stackprov::unwind
