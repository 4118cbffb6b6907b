// SPDX-License-Identifier: Apache-2.0
// Compiled unwind tables: one CFI section's FDEs compiled lazily into sorted (pc range -> UnwindRule) rows.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "dwarf/cfi.hpp"
#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

/// What a compiled rule may carry: the word size, the register numbers the
/// unwinder tracks, and the callee-saved registers it restores from the stack
/// (a rule that restores any other register is kFull: the interpreter does it).
struct RowParams {
  int addr_size = 8;
  int num_regs = 0;
  uint64_t callee_saved = 0;  ///< bit n: DWARF register n
  bool operator==(const RowParams&) const = default;
};

/// The parameters of architecture `Traits` (arch/<isa>/registers.hpp).
template <class Traits>
constexpr RowParams row_params_of() {
  return RowParams{Traits::kAddrSize, Traits::kNumRegs, Traits::kCalleeSaved};
}

/// What a module's CFI needs from its architecture's traits: the compiled-row
/// parameters and the vendor opcodes its sections may use.
struct ArchCfi {
  RowParams rows;
  dwarf::CfiVendorOps vendor_ops = dwarf::CfiVendorOps::kNone;
};
template <class Traits>
constexpr ArchCfi arch_cfi_of() {
  return ArchCfi{row_params_of<Traits>(), Traits::kCfiVendorOps};
}

/// One compiled row (doc/unwind-tables.md): the rule in force from
/// `pc_begin + offset` up to the next row's offset (or the FDE's end).
struct CompiledRow {
  uint32_t offset;  ///< from the FDE's pc_begin
  UnwindRule rule;
};
static_assert(sizeof(CompiledRow) == 40, "compiled rows must stay compact");

/// The rows of one FDE, immutable once published: the header, then the rows'
/// offsets (`count` u32, searched), then their rules (`count` UnwindRule), so
/// that a lookup reads the header and offsets (one or two cache lines for most
/// FDEs) and one rule.
struct FdeRows {
  uint64_t pc_begin = 0;  ///< link-time
  uint64_t pc_end = 0;
  dwarf::CfiStatus status = dwarf::CfiStatus::kOk;  ///< not kOk: the FDE did not decode
  uint32_t count = 0;
  const uint32_t* offsets() const { return reinterpret_cast<const uint32_t*>(this + 1); }
  const UnwindRule* rules() const { return reinterpret_cast<const UnwindRule*>(offsets() + count); }
  /// Bytes of an FdeRows with `count` rows.
  static size_t bytes(uint32_t count) { return sizeof(FdeRows) + count * (sizeof(uint32_t) + sizeof(UnwindRule)); }
};
static_assert(sizeof(FdeRows) % alignof(UnwindRule) == 0 && alignof(UnwindRule) <= alignof(uint32_t),
              "offsets and rules follow the header unpadded");
static_assert(std::is_trivially_destructible_v<FdeRows> && std::is_trivially_destructible_v<UnwindRule>,
              "rows live in malloc'd memory that is freed without running destructors");

/// Compiles every row of `fde` (link-time [pc_begin, pc_end)) by running the
/// interpreter from row to row and translating each with translate_row().
/// At most `max_rows` rows: the rest of the FDE becomes one kFull row (the
/// interpreter answers there). A row the interpreter rejects (bad CFI after a
/// good prefix) ends the table with a kInvalid row. Exposed for tests.
/// Writes up to `cap` rows into `out` and returns how many.
uint32_t compile_fde_rows(const dwarf::CfiSection& sec, const dwarf::FdeInfo& fde, const RowParams& p,
                          CompiledRow* out, uint32_t cap);

/// The lazily compiled table of one CFI section (.eh_frame or .debug_frame)
/// of one module: one atomic slot per FDE of its FdeIndex, filled on the first
/// lookup that lands in that FDE. Lookups after that are a binary search of
/// the FDE index plus one of the FDE's rows, without locks or allocation.
/// Thread-safe: a slot is published with a release CAS; a thread that loses
/// the race frees its copy. The section and index must outlive the table.
/// The FDE search starts from a page index (the first FDE of each 2^shift
/// bytes of the section's pc range, about one FDE per page), so a lookup
/// reads a few adjacent keys instead of binary-searching all of them.
class CompiledCfi {
 public:
  CompiledCfi(const dwarf::CfiSection& sec, const dwarf::FdeIndex& index, const RowParams& params);
  ~CompiledCfi();
  CompiledCfi(const CompiledCfi&) = delete;
  CompiledCfi& operator=(const CompiledCfi&) = delete;

  /// The compiled rule for link-time `pc`: kOk and *rule (kCfaReg,
  /// kEndOfStack, kFull: run the interpreter; kInvalid: the interpreter
  /// rejected the row), kNotFound (no FDE covers pc), or the FDE's decode
  /// status. `p` must be the table's parameters (the module's architecture);
  /// a different `p` yields kUnsupported.
  dwarf::CfiStatus lookup(uint64_t pc, const RowParams& p, UnwindRule* rule) const;

  /// FDEs compiled so far (for tests and statistics).
  size_t compiled_fdes() const { return compiled_.load(std::memory_order_relaxed); }

 private:
  const FdeRows* compile(size_t i) const;

  const dwarf::CfiSection& sec_;
  const dwarf::FdeIndex& index_;
  /// Index of the last FDE whose pc_begin <= pc, or nslots_ when none.
  size_t find_fde(uint64_t pc) const;

  /// One per FDE index entry, sorted by pc_begin: the search keys, and the
  /// compiled rows (null until the first lookup in the FDE).
  size_t nslots_ = 0;
  std::unique_ptr<uint64_t[]> begins_;
  std::unique_ptr<std::atomic<const FdeRows*>[]> rows_;
  /// pages_[k]: the first FDE whose pc_begin >= base_ + (k << shift_); npages_ + 1 entries.
  uint64_t base_ = 0;
  uint32_t shift_ = 0;
  uint32_t npages_ = 0;
  std::unique_ptr<uint32_t[]> pages_;
  mutable std::atomic<size_t> compiled_{0};
  const RowParams params_;
};

}  // namespace stackprov::unwind
