// SPDX-License-Identifier: Apache-2.0
// DwarfIndex's private structures and attribute readers, shared by dwarf_index.cpp and dwarf_params.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/once.hpp"
#include "dwarf/dwarf_index.hpp"

namespace stackprov::dwarf {

struct AttrSpec {
  uint16_t at = 0;
  uint16_t form = 0;
  int64_t implicit = 0;
};

struct Abbrev {
  uint16_t tag = 0;
  bool children = false;
  bool valid = false;
  uint32_t first = 0;  ///< index into AbbrevTable::specs
  uint32_t count = 0;
  int32_t fixed_size = -1;  ///< bytes of all attribute values when every form has a fixed size, else -1
};

struct AttrVal {
  uint16_t form = 0;
  uint64_t u = 0;
  const char* str = nullptr;  ///< DW_FORM_string; a block form: its bytes (str_len of them)
  size_t str_len = 0;
};

inline bool is_constant_form(uint16_t f) {
  switch (f) {
    case kFormData1: case kFormData2: case kFormData4: case kFormData8: case kFormUdata: case kFormSdata:
    case kFormImplicitConst:
      return true;
    default:
      return false;
  }
}

inline constexpr size_t kMaxAbbrevs = size_t{1} << 22;
inline constexpr size_t kMaxRangeEntries = size_t{1} << 20;
inline constexpr int kMaxRefChain = 64;
inline constexpr size_t kMaxCallSitesPerUnit = size_t{1} << 20;  ///< subprograms and call sites each


struct AbbrevTable {
  std::vector<Abbrev> dense;  ///< by code, when codes are small
  std::vector<std::pair<uint64_t, Abbrev>> sparse;  ///< sorted by code otherwise
  std::vector<AttrSpec> specs;
  bool ok = false;

  const Abbrev* find(uint64_t code) const {
    if (code < dense.size()) return dense[code].valid ? &dense[code] : nullptr;
    auto it = std::lower_bound(sparse.begin(), sparse.end(), code,
                               [](const std::pair<uint64_t, Abbrev>& p, uint64_t c) { return p.first < c; });
    return it != sparse.end() && it->first == code ? &it->second : nullptr;
  }
};

/// A unit's call sites and subprogram ranges (call_site_at, function_entry, tail_calls_of).
struct DwarfIndex::UnitCalls {
  struct Func {
    uint64_t die = 0;  ///< the subprogram's DIE (in the unit whose DIEs were walked: a skeleton's DWO unit)
    uint64_t entry = 0;
    bool has_entry = false;
    std::vector<uint32_t> tails;  ///< into `sites`: its tail-call sites, when its list is complete
  };
  struct Range {
    uint64_t low, high;
    uint32_t func;
  };
  std::vector<Func> funcs;
  std::vector<Range> ranges;       ///< sorted by low, non-overlapping (inner subprograms split outer ones)
  std::vector<CallSiteInfo> sites; ///< sorted by return_pc; the first DIE of a return pc kept (gdb)
};

struct DwarfIndex::Unit {
  uint64_t offset = 0;      ///< unit header in .debug_info
  uint64_t end = 0;         ///< one past the unit
  uint64_t die_offset = 0;  ///< the unit DIE
  uint64_t abbrev_offset = 0;
  uint16_t version = 0;
  uint8_t unit_type = 0;
  uint8_t addr_size = 8;
  bool is64 = false;
  uint64_t base_address = 0;
  bool has_stmt_list = false;
  uint64_t stmt_list = 0;
  std::string_view comp_dir;
  AttrVal comp_dir_val;  ///< resolved when the unit is built (strp_alt needs the supplementary file)
  bool has_comp_dir = false;
  uint64_t str_offsets_base = 0;
  uint64_t addr_base = 0;
  uint64_t rnglists_base = 0;
  uint64_t loclists_base = 0;  ///< DW_AT_loclists_base (DW_FORM_loclistx)
  uint64_t ranges_base = 0;  ///< DW_AT_GNU_ranges_base of a DWARF 4 skeleton (applies to its DWO unit)
  uint32_t index = 0;
  const DwarfSections* s = nullptr;  ///< the sections this unit's offsets refer to
  // Split DWARF: a skeleton's DWO unit, loaded on first use under `mu`.
  bool has_dwo = false;
  bool is_dwo = false;
  bool dwo_tried = false;
  uint64_t dwo_id = 0;
  std::string_view dwo_name;
  std::unique_ptr<DwarfSections> dwo_sections;
  std::unique_ptr<Unit> dwo;
  std::shared_ptr<const void> dwo_owner;

  stackprov::OnceFlag abbrev_once;
  AbbrevTable abbrevs;

  std::mutex mu;  ///< guards `built`
  std::shared_ptr<const UnitIndex> built;
  stackprov::OnceFlag calls_once;
  std::unique_ptr<UnitCalls> calls;  ///< read once (unit_calls), kept
  std::atomic<bool> referenced{false};
};

struct DwarfIndex::UnitIndex {
  struct Node {
    uint64_t die = 0;
    uint64_t low_pc = 0;
    int32_t parent = -1;  ///< nearest enclosing subprogram/inlined_subroutine node
    uint32_t call_file = 0;
    uint32_t call_line = 0;
    uint32_t call_column = 0;
    uint32_t discriminator = 0;
    bool is_subprogram = false;
    bool has_low_pc = false;
  };
  struct Entry {
    uint64_t low, high;
    uint32_t node;
  };
  std::vector<Node> nodes;
  std::vector<Entry> map;  ///< sorted by low, non-overlapping
  std::unique_ptr<LineTable> lines;
  std::vector<std::string_view> files;  ///< lines' file paths by index, interned (DwarfIndex::paths_)
  size_t bytes = 0;
};

struct DwarfIndex::DieInfo {
  uint16_t tag = 0;
  std::string_view name, linkage;
  bool has_name = false, has_linkage = false;
  bool has_decl_file = false, has_decl_line = false;
  bool decl_file_implicit = false;  // DW_AT_decl_file is DW_FORM_implicit_const
  uint64_t decl_file = 0, decl_line = 0;
  uint64_t abstract_origin = 0, specification = 0;  ///< absolute .debug_info offsets; 0 = none
  bool origin_alt = false, spec_alt = false;        ///< DW_FORM_GNU_ref_alt: in the dwz supplementary file
  bool declaration = false;                         ///< DW_AT_declaration
  bool has_low = false, has_high = false, has_ranges = false;
  AttrVal low, high, ranges;                        ///< DW_AT_low_pc, DW_AT_high_pc, DW_AT_ranges as read
};

/// The abbreviation table of unit `u` (its whole table).
bool parse_abbrevs(const DwarfSections& s, const DwarfIndex::Unit& u, AbbrevTable* t);
/// One attribute value of `form` (DWARF 5 section 7.5.6); a block's bytes in `str`/`str_len`.
bool read_attr(Cursor& c, const DwarfIndex::Unit& u, uint16_t form, int64_t implicit, AttrVal* v);
std::string_view attr_string(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal& v);
bool attr_address(const DwarfSections& s, const DwarfIndex::Unit& u, const AttrVal& v, uint64_t* out);
/// A reference's absolute .debug_info offset; *alt: in the dwz supplementary file.
bool attr_ref(const DwarfIndex::Unit& u, const AttrVal& v, uint64_t* out, bool* alt);
bool is_block_form(uint16_t f);

}  // namespace stackprov::dwarf
