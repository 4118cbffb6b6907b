// SPDX-License-Identifier: Apache-2.0
// Split DWARF: .dwp unit indexes (.debug_cu_index v2/v5) and the per-module finder of .dwo/.dwp units.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "dwarf/dwarf_index.hpp"
#include "object/object_image.hpp"

namespace stackprov::dwarf {

/// .debug_cu_index of a DWARF package (DWARF 5 section 7.3.5; the GNU
/// version-2 layout for DWARF 4 packages has the same shape, other section ids).
class DwpIndex {
 public:
  struct Contribution {
    uint64_t offset = 0, size = 0;
    bool present = false;
  };
  struct Row {
    Contribution info, abbrev, line, str_offsets, rnglists;
  };
  /// Errors name what is malformed (SPROV_ERR_DWARF); bounded by the section size.
  static Result<DwpIndex> parse(SectionBytes cu_index, bool big_endian);
  bool find(uint64_t dwo_id, Row* out) const;
  size_t size() const { return rows_.size(); }
  uint32_t version() const { return version_; }

 private:
  uint32_t version_ = 0;
  std::vector<std::pair<uint64_t, Row>> rows_;  ///< sorted by dwo_id
};

/// Finds and keeps open the split-DWARF files of one module: `<binary>.dwp`
/// (llvm's convention, also beside the debug file) first, then the .dwo named
/// by the skeleton (absolute, else under DW_AT_comp_dir, else beside the
/// binary). A .dwo whose unit's dwo_id differs from the skeleton's is not used.
class SplitDwarfFiles {
 public:
  /// `dwp_candidates`: paths tried in order for the package.
  SplitDwarfFiles(std::string binary_path, std::vector<std::string> dwp_candidates);
  bool load(uint64_t dwo_id, std::string_view dwo_name, std::string_view comp_dir, DwoSections* out);
  /// The package in use ("" when none).
  std::string dwp_path();

 private:
  bool open_dwp();
  std::mutex mu_;
  std::string binary_dir_;
  std::vector<std::string> dwp_candidates_;
  bool dwp_tried_ = false;
  std::shared_ptr<const object::ObjectImage> dwp_;
  DwpIndex dwp_index_;
  std::unordered_map<std::string, std::shared_ptr<const object::ObjectImage>> dwos_;
};

/// DWARF 5 / GNU dwo_id of the first split compile unit in `info` at or after
/// `*pos` matching `dwo_id` (0 matches any); the unit's offset in *pos.
bool find_dwo_unit(SectionBytes info, bool big_endian, uint64_t dwo_id, uint64_t* pos);

}  // namespace stackprov::dwarf
