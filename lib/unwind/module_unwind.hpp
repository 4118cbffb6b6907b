// SPDX-License-Identifier: Apache-2.0
// Per-module unwind tables (eh_frame + debug_frame indexes) and the per-snapshot module table.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/once.hpp"
#include "bundle/format.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "dwarf/cfi.hpp"
#include "object/object_image.hpp"
#include "unwind/compiled_rows.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/unwind_source.hpp"

namespace stackprov::symbolize {
class GoPclntab;
}

namespace stackprov::unwind {

/// One loaded module: its ELF image and CFI indexes, or (offline, no file) a
/// symbol bundle's compiled unwind rows. Immutable after load except for the
/// lazily attached separate debug file (call_once, core/once.hpp), so concurrent
/// unwinders may share it without locks on the hot path.
class LoadedModule {
 public:
  /// Where a bundle-backed module's unwind rows come from: module `index` of
  /// `reader`, the bundle named `digest` ("sha256:<hex>").
  struct BundleSource {
    std::shared_ptr<const bundle::BundleReader> reader;
    size_t index = 0;
    std::string digest;
  };

  /// A module file of any format (lib/object): its unwind source is its first table of a
  /// registered kind (unwind_source.hpp: .pdata, compact unwind, ...), else its DWARF CFI
  /// (table_sources.hpp: .eh_frame indexed from .eh_frame_hdr when usable, else by scanning;
  /// .debug_frame of the file, or of its separate debug file found on first use with
  /// `debug_opts`). A file without either leaves its frames to the later rungs, which read its code.
  static Result<std::shared_ptr<LoadedModule>> load(std::shared_ptr<const object::ObjectImage> image,
                                                    object::DebugFileOptions debug_opts);

  /// A module backed by a bundle alone (no file): the table rung answers from the bundle's unwind
  /// rows (bundle_rule()); object() is null, read_code() false, there is no .eh_frame or
  /// .debug_frame. `arch` and `big_endian` are the snapshot's (a bundle module found by its
  /// identity is that very file).
  static Result<std::shared_ptr<LoadedModule>> load_bundle(BundleSource src, Arch arch, bool big_endian);

  /// The module's file as an object image (for an ELF file, its image's one ElfObject: stable per
  /// module, so the resolvers' per-module state is reused); null for a bundle-backed module.
  const std::shared_ptr<const object::ObjectImage>& object() const { return object_; }
  /// The module has an ELF file: the input of the DWARF resolvers and the ELF-only features
  /// (symbol tables, PLT, CPython's layout) today. False for a bundle-backed module and another
  /// format's file.
  bool has_elf() const { return object_ != nullptr && object_->format_name() == "elf"; }
  /// The module's one unwind source, which the unwinder's table rung asks: its file's DWARF CFI,
  /// its bundle's unwind rows (bundle-backed), or its first table of a registered kind (another
  /// format); nullptr when it has none (its frames are left to the later rungs).
  const UnwindSource* table() const { return table_.get(); }
  /// The table of a registered kind (not DWARF CFI, not a bundle's rows), else nullptr.
  const UnwindSource* source() const { return registered_table_ ? table_.get() : nullptr; }
  /// read_code() can answer: the module has a file.
  bool has_code() const { return object_ != nullptr; }
  uint32_t generation() const { return generation_; }
  Arch arch() const { return arch_; }
  bool big_endian() const { return big_endian_; }

  /// The bundle source of a bundle-backed module, else nullptr.
  const BundleSource* bundle() const { return bundle_ ? bundle_.get() : nullptr; }
  /// The bundle's unwind row covering link-time `rel` as a compact rule (same
  /// formulas, doc/bundles.md "Unwind rows"): kCfaReg, kEndOfStack, kFull (the
  /// row needs the CFI interpreter, which a bundle does not carry), kNoInfo (no
  /// row, or a gap row), kInvalid (a row naming registers beyond `num_regs` or a
  /// bundle error: hostile or damaged bytes). Thread-safe.
  UnwindRule bundle_rule(uint64_t rel, int num_regs) const;

  bool has_eh_frame() const { return has_eh_; }
  const dwarf::CfiSection& eh_frame() const { return eh_; }
  const dwarf::FdeIndex& eh_index() const { return eh_index_; }

  /// .debug_frame of the binary, else of its separate debug file (found by
  /// build-id or debuglink on first use). nullptr when there is none.
  struct DebugFrame {
    dwarf::CfiSection section;
    dwarf::FdeIndex index;
    std::unique_ptr<CompiledCfi> compiled;  ///< rows of `section`, compiled per FDE on first use
  };
  const DebugFrame* debug_frame() const;

  /// The compiled rule for link-time `rel` (doc/unwind-tables.md): from
  /// .eh_frame's compiled rows, else (no FDE covers rel there) from
  /// .debug_frame's when `use_debug_frame`. kOk with *rule and *from_debug;
  /// kNotFound; kBadCfi / kUnsupported when the covering FDE does not decode
  /// or `p` is not this module's architecture. The first lookup in an FDE
  /// compiles it (allocates); later ones do not. Thread-safe.
  dwarf::CfiStatus compiled_rule(uint64_t rel, bool use_debug_frame, const RowParams& p,
                                 UnwindRule* rule) const;
  /// The FDE covering link-time `rel`: in .eh_frame, else (no FDE there, `use_debug_frame`) in
  /// .debug_frame. kOk with *fde, *sec and *from_debug; kNotFound; kBadCfi / kUnsupported when
  /// the covering index entry does not decode.
  dwarf::CfiStatus find_fde(uint64_t rel, bool use_debug_frame, dwarf::FdeInfo* fde, const dwarf::CfiSection** sec,
                            bool* from_debug) const;
  /// The row parameters of this module's architecture (zero for an unknown one).
  const RowParams& row_params() const { return row_params_; }

  /// Copies code bytes at link-time address `vaddr` from the file (for
  /// trampoline recognition offline). False outside the file's loaded contents (PT_LOAD for ELF).
  bool read_code(uint64_t vaddr, void* buf, size_t len) const;
  /// A Go binary's pclntab (its pcsp SP deltas), loaded on first use; nullptr
  /// for other modules (doc/runtime-frames.md "Go").
  const symbolize::GoPclntab* go_pclntab() const;

 private:
  LoadedModule() = default;
  std::shared_ptr<const object::ObjectImage> object_;
  std::unique_ptr<UnwindSource> table_;
  bool registered_table_ = false;  ///< table_ is of a registered kind (source())
  std::unique_ptr<BundleSource> bundle_;
  Arch arch_ = Arch::kUnknown;
  bool big_endian_ = false;
  object::DebugFileOptions debug_opts_;
  uint32_t generation_ = 0;
  bool has_eh_ = false;
  dwarf::CfiSection eh_{};
  dwarf::FdeIndex eh_index_;
  RowParams row_params_;
  std::unique_ptr<CompiledCfi> eh_compiled_;
  mutable stackprov::OnceFlag debug_once_;
  mutable std::shared_ptr<const object::ObjectImage> debug_image_;
  mutable std::unique_ptr<DebugFrame> debug_frame_;
  mutable stackprov::OnceFlag go_once_;
  mutable std::shared_ptr<const symbolize::GoPclntab> go_;
};

/// The modules of one snapshot, resolved to loaded modules and sorted by
/// start address. Built once per distinct module list, then read without
/// locks or allocation.
struct ModuleSlot {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t bias = 0;
  const LoadedModule* module = nullptr;  ///< nullptr: no usable unwind info
  int32_t snapshot_index = -1;
  /// module->generation() when the module has an unwind source (LoadedModule::table()), else 0;
  /// set by ModuleTable::add, so that a rule-cache probe needs only the slot.
  uint32_t table_generation = 0;
  /// How the source names a frame its compact rule found, by the rule's from_debug_frame bit
  /// (UnwindSource::method), so that a cached rule is applied without asking the source.
  Method table_method[2] = {Method::kNone, Method::kNone};
  /// Bit i: table_method[i] is one the walk takes without the checks of heuristic frames (not
  /// signal, frame pointer, scan or prologue); set by ModuleTable::add.
  uint8_t plain_methods = 0;
};

class ModuleTable {
 public:
  void clear() {
    slots_.clear();
    hold_.clear();
    disjoint_ = true;
    stamp_ = next_table_stamp();
  }
  void add(const ModuleSlot& s, std::shared_ptr<LoadedModule> hold);
  void finish();  ///< sorts slots
  const ModuleSlot* find(uint64_t pc) const;
  /// find(pc), trying `hint` (a slot of this table, or nullptr) first: a caller
  /// usually lies in its callee's module. Same answer as find() (the hint is
  /// taken only when no two slots overlap).
  const ModuleSlot* find_near(uint64_t pc, const ModuleSlot* hint) const {
    if (hint != nullptr && disjoint_ && pc - hint->start < hint->end - hint->start) return hint;
    return find(pc);
  }
  size_t size() const { return slots_.size(); }
  /// No two slots overlap (find_near may answer with its hint).
  bool disjoint() const { return disjoint_; }
  /// Unique to this table's slots (never 0): every change (clear, add, finish) draws a new one, so
  /// that caches of answers by absolute pc (RuleCache's quick table) know whose they are.
  uint64_t stamp() const { return stamp_; }
  uint64_t key = 0;  ///< module_list_hash of the snapshot it was built for

 private:
  std::vector<ModuleSlot> slots_;
  std::vector<std::shared_ptr<LoadedModule>> hold_;
  bool disjoint_ = true;  ///< no two slots overlap (set by finish())
  static uint64_t next_table_stamp();
  uint64_t stamp_ = next_table_stamp();
};

/// Next module generation number (never 0). Thread-safe.
uint32_t next_module_generation();

}  // namespace stackprov::unwind
