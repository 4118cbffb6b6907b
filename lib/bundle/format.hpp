// SPDX-License-Identifier: Apache-2.0
// The symbol-bundle file (doc/bundles.md): neutral records, the deterministic writer and the mmap reader.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::bundle {

// ---- limits (doc/bundles.md "Limits"); the writer and the reader enforce the same values.
inline constexpr uint32_t kFormatVersion = 8;     ///< what write_bundle writes
inline constexpr uint32_t kMinFormatVersion = 2;  ///< the oldest the reader reads (and tests still write)
inline constexpr size_t kMaxIdBytes = 64;              ///< identity bytes per module
inline constexpr uint32_t kMaxInlineDepth = 127;       ///< depth 0 (outermost) .. 127
inline constexpr size_t kMaxStringBytes = 1u << 20;    ///< one string, without its NUL
inline constexpr uint64_t kMaxRecords = 1ull << 28;    ///< ranges, pads, pad frames or rows per module
inline constexpr size_t kMaxModules = 1u << 16;
inline constexpr uint32_t kMaxSections = 32;
inline constexpr int kMaxSavedRegs = 12;

/// How a module is identified. Values are on disk: never renumber.
using stackprov::IdKind;  ///< core/types.hpp: kElfBuildId 1, kPdbGuidAge 2, kMachoUuid 3, kPeCodeId 4 (0 is not stored)

/// A module's identity as the writer takes it: kind + bytes (1..kMaxIdBytes, checked when written;
/// stackprov::ModuleId is the in-memory identity, bounded by its type).
struct IdBytes {
  IdKind kind = IdKind::kElfBuildId;
  std::vector<uint8_t> bytes;
};

/// Address-range record (symbfile RangeV1): [start, start + length) at inline `depth`
/// (0 = the outermost, concrete function). For depth > 0 the call_* fields say where
/// in the caller (depth - 1) this inlined instance was called. `file:line:column` is
/// the source position of the range's addresses as attributed to `function`.
/// Addresses are module-relative as the builder defines them (ELF: link-time vaddr).
struct RangeRecord {
  uint64_t start = 0;
  uint32_t length = 0;
  uint16_t depth = 0;
  std::string function;   ///< linkage (mangled) name
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  std::string call_file;  ///< empty at depth 0
  uint32_t call_line = 0;
  uint32_t call_column = 0;
  /// Depth 0 only, with no deeper record inside: the code has no DWARF and the function
  /// (and file "" or an STT_FILE name, line 0, column 0) is llvm-symbolizer-14's answer
  /// from the symbol table. Stored in the optional symbol-table-ranges section.
  bool from_symtab = false;
};

/// One frame of an inline chain, as input to a return pad.
struct FrameRecord {
  std::string function;
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
};

/// Return-pad record (symbfile ReturnPadV1): the address after a call and the full
/// inline chain at the call, outermost frame first.
struct ReturnPadRecord {
  uint64_t addr = 0;
  std::vector<FrameRecord> frames;
};

/// Compact unwind row: applies from `pc` up to the next row's pc of the same module.
/// Kinds (same formulas as the unwinder's compact rule, see doc/bundles.md):
///  kCfaReg: cfa = reg[cfa_reg] + cfa_off; reg[saved_reg[i]] = *(cfa + saved_off[i] * addr_size);
///           ra = *(cfa + ra_off * addr_size) (ra_kind kRaAtCfa) or reg[ra_reg]; sp' = cfa.
///  kEndOfStack: no caller. kFull: needs the CFI interpreter (not representable).
///  kNoInfo: no unwind information from this pc on (a gap).
struct UnwindRowRecord {
  enum Kind : uint8_t { kCfaReg = 1, kEndOfStack = 2, kFull = 3, kNoInfo = 4 };
  enum RaKind : uint8_t { kRaAtCfa = 0, kRaSameValue = 1, kRaUnspecified = 2 };
  uint64_t pc = 0;
  uint8_t kind = kNoInfo;
  uint8_t cfa_reg = 0;
  uint8_t ra_kind = kRaAtCfa;
  uint8_t ra_reg = 0;
  int32_t cfa_off = 0;
  int8_t ra_off = 0;
  uint8_t nsaved = 0;
  bool signal_frame = false;
  bool from_debug_frame = false;
  std::array<uint8_t, kMaxSavedRegs> saved_reg{};
  std::array<int8_t, kMaxSavedRegs> saved_off{};
};

/// Symbol-name record (format 5, doc/bundles.md "Symbol names"): the addresses [addr, addr + length)
/// are named `name` (a linkage name) by the one naming rule outside llvm-symbolizer mode, the symbol
/// tables' choice among aliases (doc/symbols.md "The alias rule": PLT stubs, .symtab — the module's,
/// else its separate debug file's — then .dynsym), whose symbol starts at `sym_start` (<= addr; the
/// frame's offset is from there). One record per run of addresses with the same answer.
struct SymbolRecord {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint64_t sym_start = 0;
  std::string name;
};

/// Call-site record (doc/bundles.md "Call sites"): a DWARF call site as gdb's tail-call search
/// (dwarf/tail_calls.hpp) asks of it. `target` is the entry pc of the function it calls (a
/// definition's, or a declaration's the module's own symbol tables resolve); else `target_name`
/// names a declaration no symbol of the module defines, looked up when the search runs in the
/// other modules' CallSymbolRecords (gdb's minimal symbols); neither: unknown (a
/// DW_AT_call_target expression).
struct CallSiteRecord {
  uint64_t return_pc = 0;
  bool tail_call = false;
  bool has_target = false;
  uint64_t target = 0;
  std::string target_name;  ///< only when !has_target
};

/// A function symbol by name, as the search's name lookup answers it for this module
/// (DwarfResolver::symbol_address: the global or weak one at the highest address, else a local
/// one): the names of the symbols at the entries of the module's CallFunctionRecords.
struct CallSymbolRecord {
  std::string name;  ///< without a version suffix
  uint64_t addr = 0;
  bool global = false;
};

/// A subprogram the search can meet: its entry pc, its address ranges (function_entry; inner
/// subprograms split outer ones, so ranges of all functions do not overlap; the entry lies in one)
/// and its tail-call sites (return pcs of the module's CallSiteRecords with tail_call), in the order
/// dwarf::DwarfIndex::tail_calls_of gives them (empty: its call-site list is not complete).
struct CallFunctionRecord {
  uint64_t entry = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  ///< [low, high), sorted
  std::vector<uint64_t> tails;
};

/// Everything about one module that goes into a bundle.
struct ModuleContents {
  IdBytes id;
  std::string name;                      ///< file name as given (no host path unless given)
  std::array<uint8_t, 32> sha256_file{};   ///< of the original file; zero if unknown
  std::array<uint8_t, 32> sha256_debug{};  ///< of the debug file; zero if unknown
  std::vector<RangeRecord> ranges;
  std::vector<ReturnPadRecord> return_pads;
  std::vector<UnwindRowRecord> unwind_rows;
  std::vector<uint8_t> debug_blob;       ///< the debug file itself (--include-debug); may be empty
  /// The ranges are a PDB's answers (a PE with a PDB): the outermost frame's position is its line
  /// table's, so an answer without inlines is that frame alone (llvm's PDB context), not the
  /// innermost frame's line as for DWARF. Module flag kModFlagPdbLines (format 4).
  bool pdb_lines = false;
  /// Format 5: the naming rule's symbol names (sorted, not overlapping; written from format 5 on,
  /// left out of older formats). May be empty.
  std::vector<SymbolRecord> symbols;
  /// The optional call-sites section (written from format 5 on): only what the tail-call search can
  /// use (the builder's selection, doc/bundles.md "Call sites"). May be empty.
  std::vector<CallSiteRecord> call_sites;
  std::vector<CallFunctionRecord> call_functions;
  std::vector<CallSymbolRecord> call_symbols;
};

/// A module's call-site section decoded (BundleReader::call_sites): sites sorted by return pc,
/// functions by entry.
struct CallSiteTable {
  std::vector<CallSiteRecord> sites;
  std::vector<CallFunctionRecord> functions;
  std::vector<CallSymbolRecord> symbols;  ///< sorted by name
};

struct BundleContents {
  std::vector<ModuleContents> modules;
};

/// Serialises `contents` into the bundle format. Deterministic: modules, records and
/// strings are sorted, so equal contents in any input order give identical bytes; no
/// clock, no host state. Rejects invalid input (duplicate module ids, overlapping
/// ranges at one depth, an inlined range outside any caller range, duplicate pads or
/// rows, values beyond the limits) with SPROV_ERR_BUNDLE naming the offending value.
/// Thread-safe (pure function). The bundle's identity, `sha256:<hex>` of the returned
/// bytes, is content addressing and belongs to the evidence layer:
/// evidence::digest_string(evidence::sha256(bytes)) (lib/evidence/encoding.hpp).
Result<std::vector<uint8_t>> write_bundle(const BundleContents& contents);
/// The same in format `version` (kMinFormatVersion..kFormatVersion): the tests write older
/// formats to check that the reader still reads them; the library writes kFormatVersion only.
Result<std::vector<uint8_t>> write_bundle(const BundleContents& contents, uint32_t version);
/// The same, consuming `contents`: the writer sorts and checks its own copy of the modules, which
/// a caller done with them (`bundle build`) need not pay for (a module's records and names twice
/// in memory; 1,300 records naming a 1 MiB string: 1.4 GB copied).
Result<std::vector<uint8_t>> write_bundle(BundleContents&& contents, uint32_t version = kFormatVersion);

/// A frame of a looked-up inline chain; the views point into the reader's bytes.
struct FrameView {
  std::string_view function;
  std::string_view file;
  uint32_t line = 0;
  uint32_t column = 0;
};

/// A module of an open bundle (validated at open).
struct ModuleView {
  size_t index = 0;
  IdKind id_kind = IdKind::kElfBuildId;
  std::span<const uint8_t> id;
  std::string_view name;
  std::array<uint8_t, 32> sha256_file{};
  std::array<uint8_t, 32> sha256_debug{};
  uint64_t range_count = 0;
  uint64_t pad_count = 0;
  uint64_t unwind_count = 0;
  std::span<const uint8_t> debug_blob;   ///< empty when not embedded
  bool pdb_lines = false;                ///< ModuleContents::pdb_lines
  uint64_t symbol_count = 0;             ///< SymbolRecords (format 5's optional section); 0 without
  uint64_t call_site_count = 0;          ///< CallSiteRecords (the optional call-sites section); 0 without
  uint64_t call_function_count = 0;      ///< CallFunctionRecords
  uint64_t call_symbol_count = 0;        ///< CallSymbolRecords
};

/// Reads a bundle from memory or an mmap'd file.
/// open() validates the header, the section table and the module table eagerly; each
/// module's records are validated (sorted, non-overlapping, in bounds) on its first
/// lookup, once (call_once, core/once.hpp). All methods are const and thread-safe after open.
/// Errors (SPROV_ERR_BUNDLE) name the offending value; hostile bytes never crash.
/// Views returned by the methods stay valid while the reader lives.
class BundleReader {
 public:
  /// Reads `data` in place: the caller keeps the `len` bytes alive and unchanged
  /// for the reader's lifetime.
  static Result<BundleReader> open(const uint8_t* data, size_t len);
  /// Maps `path` read-only (unmapped by the destructor).
  static Result<BundleReader> open_file(const std::string& path);

  BundleReader(BundleReader&&) noexcept;
  BundleReader& operator=(BundleReader&&) noexcept;
  BundleReader(const BundleReader&) = delete;
  BundleReader& operator=(const BundleReader&) = delete;
  ~BundleReader();

  const std::vector<ModuleView>& modules() const { return modules_; }
  /// The module with this identity, or nullptr.
  const ModuleView* find_module(IdKind kind, std::span<const uint8_t> id) const;

  /// The inline chain at `rel_addr`, OUTERMOST frame first (depth 0 .. innermost).
  /// Each outer frame's file:line:column is the call site of the frame inside it; the
  /// innermost frame's is the range's own position (as llvm-symbolizer prints them).
  /// An empty vector: no range covers the address (not an error).
  Result<std::vector<FrameView>> lookup(size_t module, uint64_t rel_addr) const;
  /// Whether `rel_addr` lies in a range the builder took from the symbol table (no DWARF
  /// there; RangeRecord::from_symtab). Validated at open; false for an unknown module.
  bool from_symtab(size_t module, uint64_t rel_addr) const;
  /// The symbol-name record covering `rel_addr` (ModuleContents::symbols), its name a view into
  /// the reader's string table; `found` false when none covers it or the module has none. Errors:
  /// the module's records are hostile (checked on its first lookup, with its string table).
  struct SymbolLookup {
    bool found = false;
    std::string_view name;
    uint64_t sym_start = 0;
  };
  Result<SymbolLookup> symbol(size_t module, uint64_t rel_addr) const;
  /// Every symbol-name record of a module in address order (export, tests).
  Result<std::vector<SymbolRecord>> symbols(size_t module) const;
  /// The module's call-site section (ModuleContents::call_sites, call_functions), decoded and
  /// checked on each call (the caller keeps it): empty when the module has none. Errors
  /// (SPROV_ERR_BUNDLE) name the record and the value: a varint past the block, an address that
  /// wraps, sites, functions or names out of order, overlapping function ranges, an entry outside
  /// its function, a tail index past the sites or naming a site that is not a tail call, a string
  /// index past the module's strings, bytes left over.
  Result<CallSiteTable> call_sites(size_t module) const;
  /// The chain recorded for the return address `addr` (exact match), outermost first;
  /// empty when `addr` has no return pad.
  Result<std::vector<FrameView>> return_pad(size_t module, uint64_t addr) const;
  /// All return pads of a module in address order, each with its full chain (for export).
  Result<std::vector<ReturnPadRecord>> return_pads(size_t module) const;
  /// The unwind row covering `rel_pc` (last row with pc <= rel_pc); `found` false when
  /// the first row starts after rel_pc or the module has no rows.
  struct RowLookup {
    bool found = false;
    UnwindRowRecord row;
  };
  Result<RowLookup> unwind_row(size_t module, uint64_t rel_pc) const;
  /// Decodes every unwind row of a module (for fsck; lookups decode only the block they need):
  /// each row valid, in address order within its block and before the next block's start, and
  /// as many rows as the module table says.
  Status check_unwind_rows(size_t module) const;
  /// Every unwind row of a module in address order, checked as check_unwind_rows does (export,
  /// and a bundle-backed module's unwind source).
  Result<std::vector<UnwindRowRecord>> unwind_rows(size_t module) const;

  /// The raw range records of a module in file order (depth, start), for export and tests.
  Result<std::vector<RangeRecord>> ranges(size_t module) const;

  /// Whether the bundle file shrank while mapped (another user truncated it): the bytes past
  /// its new end read as zeros (core/mapped_file.hpp), so answers read from them are not its.
  bool file_changed() const;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  struct Impl;  // section pointers and per-module lazily validated indexes

 private:
  BundleReader();
  /// check_unwind_rows, collecting the rows into `out` when it is not null.
  Status walk_unwind_rows(size_t module, std::vector<UnwindRowRecord>* out) const;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // mmap base when opened from a file
  size_t map_len_ = 0;
  std::vector<ModuleView> modules_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stackprov::bundle
