// SPDX-License-Identifier: Apache-2.0
// Per-module DWARF index: units → lazily built per-unit address map of subprograms and inline trees, line tables.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/once.hpp"
#include "dwarf/dwarf_index_reader.hpp"
#include "dwarf/line_table.hpp"

namespace stackprov::dwarf {

/// Location lists read on first use (`stack --args`): symbolization never reads them, and a
/// compressed .debug_loclists is a large share of what a debug file inflates (python3.11's: 2.2 of
/// its 9.6 MB of compressed DWARF). Shared by the copies of one DwarfSections; thread-safe.
struct LazyLocations {
  std::function<void(SectionBytes* loc, SectionBytes* loclists)> load;  ///< run once, under `once`
  OnceFlag once;
  SectionBytes loc, loclists;
};

/// The .debug_* sections of one file, decompressed; views into their owner.
struct DwarfSections {
  SectionBytes info, abbrev, line, line_str, str, str_offsets, addr, ranges, rnglists;
  SectionBytes str_sup;  ///< .debug_str of the dwz supplementary file (DW_FORM_GNU_strp_alt)
  bool big_endian = false;
  /// Location lists (DWARF 4 .debug_loc, DWARF 5 .debug_loclists): `stack --args`. Set directly, or
  /// through `lazy_locations` (then loaded by locations() on first use).
  SectionBytes loc, loclists;
  std::shared_ptr<LazyLocations> lazy_locations;
  /// {loc, loclists}: the lazy ones when set (loaded now if they were not), else the fields.
  std::pair<SectionBytes, SectionBytes> locations() const {
    if (!lazy_locations) return {loc, loclists};
    LazyLocations& l = *lazy_locations;
    call_once(l.once, [&] {
      if (l.load) l.load(&l.loc, &l.loclists);
    });
    return {l.loc, l.loclists};
  }
};

/// The split-DWARF sections of one skeleton unit's DWO unit: a .dwo file's
/// sections, or a .dwp's sections sliced to the unit's contributions.
struct DwoSections {
  SectionBytes info, abbrev, str, str_offsets, rnglists, line;
  std::shared_ptr<const void> owner;  ///< keeps the file holding the bytes alive
  std::string path;                   ///< for provenance and errors
};

/// Finds the DWO unit of a skeleton unit: `dwo_id` (DWARF 5 header or
/// DW_AT_GNU_dwo_id; 0 when absent), DW_AT_dwo_name/DW_AT_GNU_dwo_name and the
/// skeleton's DW_AT_comp_dir. Called at most once per skeleton unit, under its
/// lock; must be thread-safe across units.
using DwoLoader = std::function<bool(uint64_t dwo_id, std::string_view dwo_name, std::string_view comp_dir,
                                     DwoSections* out)>;

/// One frame of an address's inline chain, as llvm-symbolizer reports it. The
/// views point into the sections or into the index's path pool: valid while
/// the DwarfIndex (and the sections) live.
struct DwarfFrame {
  std::string_view name;          ///< DW_AT_name through abstract_origin/specification; may be empty
  std::string_view linkage_name;  ///< DW_AT_linkage_name (or MIPS) the same way; may be empty
  std::string_view file;          ///< absolute path; empty when unknown
  uint32_t line = 0;
  uint32_t column = 0;
  uint32_t discriminator = 0;
  std::string_view start_file;    ///< DW_AT_decl_file of the function
  /// That DW_AT_decl_file is DW_FORM_implicit_const (gcc DWARF 5 abbreviations),
  /// which llvm-symbolizer-14 does not read (it prints StartFileName "").
  bool start_file_implicit_const = false;
  uint32_t start_line = 0;        ///< DW_AT_decl_line of the function
  bool has_start_address = false; ///< the DIE has DW_AT_low_pc
  uint64_t start_address = 0;
  bool has_function = false;      ///< false for a line-table-only frame (no subprogram DIE)
  bool has_file = false;          ///< file/line came from a valid file index
};

/// One DW_TAG_call_site (DWARF 5) or DW_TAG_GNU_call_site (the GNU extension gcc emits for DWARF 4):
/// what gdb reads of it to find tail-call frames (gdb/dwarf2/read.c read_call_site_scope).
struct CallSiteInfo {
  uint64_t return_pc = 0;  ///< DW_AT_call_return_pc, else DW_AT_low_pc (GNU): the address after the call or jump
  bool tail_call = false;  ///< DW_AT_call_tail_call / DW_AT_GNU_tail_call
  enum class Target : uint8_t {
    kUnknown,  ///< no target, or one only a running frame can compute (DW_AT_call_target expressions)
    kAddress,  ///< DW_AT_call_origin/abstract_origin names a function definition: its entry pc
    kName,     ///< ... names a declaration: its linkage name, else its name (resolved by a symbol table)
  };
  Target target = Target::kUnknown;
  uint64_t target_addr = 0;
  std::string_view target_name;  ///< valid while the index (and its sections) live
};

/// A parameter's type as `info args` needs it to print a value (dwarf/frame_args.hpp): through
/// typedefs and cv-qualifiers to a base type, a pointer or an enumeration.
struct ParamType {
  enum class Kind : uint8_t {
    kUnsupported,  ///< a struct, union, array, class, function, long double, __int128, ...: no value printed
    kSigned,
    kUnsigned,
    kBool,
    kChar,   ///< DW_ATE_signed_char (C's char and signed char)
    kUChar,  ///< DW_ATE_unsigned_char
    kFloat,
    kPointer,
    kEnum,
  };
  Kind kind = Kind::kUnsupported;
  uint32_t size = 0;     ///< bytes (DW_AT_byte_size; a pointer: the unit's address size)
  std::string name;      ///< gdb's C spelling: "int", "const char *", "enum color", "struct s *"; "" unknown
  bool points_to_char = false;  ///< kPointer to a char type (gdb also prints the string; not read here)
  bool enum_signed = false;     ///< kEnum: the enumerators are read as signed values
  std::vector<std::pair<uint64_t, std::string_view>> enumerators;  ///< kEnum, in DIE order
};

/// One DW_TAG_formal_parameter of a subprogram at one pc (DwarfIndex::parameters).
struct ParamInfo {
  std::string_view name;  ///< through DW_AT_abstract_origin; "" when none
  ParamType type;
  enum class Where : uint8_t {
    kOptimizedOut,  ///< no DW_AT_location, or a location list with no entry for the pc (gdb: <optimized out>)
    kExpr,          ///< the location expression that holds at the pc: `expr`
    kConst,         ///< DW_AT_const_value: `const_value`
    kUnreadable,    ///< a location this reader does not decode (loclistx, DWO location lists, a constant block)
  };
  Where where = Where::kOptimizedOut;
  const uint8_t* expr = nullptr;  ///< into the sections; valid while the index lives
  size_t expr_len = 0;
  uint64_t const_value = 0;
};

/// The formal parameters of the subprogram covering a pc, and its frame base at that pc.
struct FrameParams {
  std::vector<ParamInfo> params;  ///< DIE order (gdb's `info args` order)
  bool has_frame_base = false;    ///< DW_AT_frame_base holds at the pc
  const uint8_t* frame_base = nullptr;
  size_t frame_base_len = 0;
  uint8_t addr_size = 8;
  bool big_endian = false;
};

struct DwarfIndexLimits {
  size_t max_units = size_t{1} << 20;
  size_t max_nodes_per_unit = size_t{1} << 24;
  size_t max_depth = 4096;                   ///< DIE nesting
  size_t memory_budget = size_t{512} << 20;  ///< built unit indexes beyond this are evicted
};

struct DwarfIndexStats {
  size_t units = 0;
  size_t units_built = 0;   ///< builds so far (a rebuild after eviction counts again)
  size_t units_evicted = 0;
  size_t bytes = 0;         ///< memory held by built unit indexes and line tables now
};

/// Index of the DWARF of one file. build() reads only unit headers and unit
/// DIEs; each unit's DIE tree and line program are decoded on the first lookup
/// that lands in it (under a per-unit lock) and may be evicted when the memory
/// budget is exceeded. lookup() is thread-safe and deterministic: results do not
/// depend on the order of lookups or on eviction. The sections must outlive it.
class DwarfIndex {
 public:
  static Result<std::unique_ptr<DwarfIndex>> build(const DwarfSections& s, const DwarfIndexLimits& limits = {});
  ~DwarfIndex();

  /// Split DWARF: how skeleton units find their DWO units. Set before lookups.
  void set_dwo_loader(DwoLoader loader) { dwo_loader_ = std::move(loader); }
  /// dwz: the index of the supplementary file (.gnu_debugaltlink), followed
  /// by DW_FORM_GNU_ref_alt / DW_FORM_GNU_strp_alt. Set before lookups.
  void set_supplementary(std::unique_ptr<DwarfIndex> alt);
  /// Skeleton units (DW_AT_dwo_name / DW_AT_GNU_dwo_name) seen by build().
  size_t skeleton_units() const { return skeletons_; }
  /// DWO units loaded so far and the ones whose DWO could not be found.
  size_t dwo_loaded() const { return dwo_loaded_.load(); }
  size_t dwo_missing() const { return dwo_missing_.load(); }

  /// Fills `frames` innermost first (llvm-symbolizer --inlines order). Returns
  /// false (no frames) when no unit covers `addr`; when a unit covers it but no
  /// subprogram does, true with a single frame without a function if the line
  /// table has a row for it (line table only), else true with no frames.
  bool lookup(uint64_t addr, std::vector<DwarfFrame>* frames) const;

  /// Call sites (gdb's DWARF tail-call frames, dwarf/tail_calls.hpp). Each unit's call sites and
  /// subprogram ranges are read on the first question that lands in it and kept (not evicted).
  /// The call site whose return pc is exactly `ret`, in the unit covering `ret - 1`.
  bool call_site_at(uint64_t ret, CallSiteInfo* out) const;
  /// The entry pc of the subprogram (not an inlined copy) covering `pc`: its DW_AT_low_pc, else
  /// the start of its first range. False when no subprogram covers it.
  bool function_entry(uint64_t pc, uint64_t* entry) const;
  /// True when a subprogram has its entry pc exactly at `entry`; `*out` is then the tail-call sites
  /// in it, when its DIE says its call sites are complete (DW_AT_call_all_calls,
  /// DW_AT_call_all_tail_calls or their GNU forms; gdb keeps no list otherwise), else empty.
  bool tail_calls_of(uint64_t entry, std::vector<CallSiteInfo>* out) const;

  /// Everything the three questions above answer from, for a symbol bundle (doc/bundles.md "Call
  /// sites"): every unit's call sites (first DIE per return pc) and its subprograms that have an
  /// entry pc, each with its address ranges as function_entry sees them (inner subprograms split
  /// outer ones) and its tail-call sites in tail_calls_of's order. Reads every unit's DIEs.
  struct CallSiteExport {
    struct Function {
      uint64_t entry = 0;
      std::vector<std::pair<uint64_t, uint64_t>> ranges;  ///< [low, high), sorted
      std::vector<CallSiteInfo> tails;
    };
    std::vector<Function> functions;
    std::vector<CallSiteInfo> sites;  ///< target_name views valid while the index lives
  };
  void export_call_sites(CallSiteExport* out) const;

  /// The formal parameters of the subprogram (not an inlined copy) covering `pc`, each with its
  /// location at `pc` (a location list's entry covering it), and the subprogram's frame base
  /// (dwarf/frame_args.cpp). False when no subprogram with DWARF covers `pc`.
  bool parameters(uint64_t pc, FrameParams* out) const;

  /// Drops every built unit index (they are rebuilt on demand).
  void evict_all() const;
  DwarfIndexStats stats() const;

  struct Unit;
  struct UnitIndex;
  struct UnitCalls;

 private:
  DwarfIndex() = default;
  struct DieInfo;
  std::shared_ptr<const UnitIndex> unit_index(size_t unit) const;
  const LineTable* unit_lines(const UnitIndex& ui) const;
  const Unit* unit_at_offset(uint64_t off) const;
  bool read_die(const Unit& u, uint64_t die_off, DieInfo* out) const;
  void resolve_names(const Unit& u, const UnitIndex* self, uint64_t die_off, DwarfFrame* f) const;
  /// The path of file `index` of `ui`'s line table (interned); false when invalid.
  bool unit_file(const UnitIndex& ui, uint64_t index, std::string_view* out) const;
  /// One copy of each distinct file path; views stay valid while the index lives.
  std::string_view intern_path(const std::string& path) const;
  /// resolve_names through names_: the names of a DIE are read once.
  void cached_names(const Unit& u, const UnitIndex* self, uint64_t die_off, DwarfFrame* f) const;
  bool load_dwo(Unit& u) const;
  /// The unit covering `addr` (aranges); -1 when none.
  int64_t unit_covering(uint64_t addr) const;
  const UnitCalls* unit_calls(size_t unit) const;
  /// The subprogram of `uc` covering `pc`; -1 when none.
  static int64_t function_at(const UnitCalls& uc, uint64_t pc);
  /// A location attribute's expression at `pc` (exprloc/block, or a location list's entry).
  ParamInfo::Where location_at(const Unit& u, uint16_t form, uint64_t value, const uint8_t* block, size_t block_len,
                               uint64_t pc, const uint8_t** expr, size_t* expr_len) const;
  /// The type at `die_off` (DW_AT_type), for `info args`; `depth` bounds the reference chain.
  void param_type(const Unit& u, uint64_t die_off, int depth, ParamType* out) const;
  void enforce_budget(size_t keep) const;

  DwarfSections s_;
  DwarfIndexLimits limits_;
  std::vector<std::unique_ptr<Unit>> units_;
  struct Arange {
    uint64_t low, high;
    uint32_t unit;
  };
  std::vector<Arange> aranges_;  ///< sorted, non-overlapping
  mutable std::atomic<size_t> bytes_{0};
  mutable std::atomic<size_t> built_{0};
  mutable std::atomic<size_t> evicted_{0};
  mutable std::mutex evict_mu_;
  mutable size_t clock_hand_ = 0;
  DwoLoader dwo_loader_;
  std::unique_ptr<DwarfIndex> alt_;
  size_t skeletons_ = 0;
  mutable std::atomic<size_t> dwo_loaded_{0};
  mutable std::atomic<size_t> dwo_missing_{0};
  /// What resolve_names found for a subprogram/inlined-subroutine DIE, by DIE
  /// (sharded by key; each shard is cleared when it exceeds its bound).
  struct Names {
    std::string_view name, linkage, start_file;
    uint32_t start_line = 0;
    bool start_file_implicit_const = false;
  };
  struct NameShard {
    std::mutex mu;
    std::unordered_map<uint64_t, Names> map;
  };
  static constexpr size_t kNameShards = 16;
  mutable NameShard names_[kNameShards];
  /// Every file path of the built line tables, once (deque: elements never move).
  struct PathPool {
    std::mutex mu;
    std::deque<std::string> strings;
    std::unordered_map<std::string_view, uint32_t> ids;
  };
  mutable PathPool paths_;
};

}  // namespace stackprov::dwarf
