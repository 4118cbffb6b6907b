// SPDX-License-Identifier: Apache-2.0
// DWARF 2–5 line-number programs (.debug_line): decoder, sequences, address lookup and file-name resolution.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "dwarf/dwarf_index_reader.hpp"

namespace stackprov::dwarf {

/// One row of the line-number matrix (DWARF 5 section 6.2.2), decoded. A LineTable keeps its
/// rows packed (16 bytes each, see LineTable); lookup() and rows() give them in this form.
struct LineRow {
  uint64_t address = 0;
  uint32_t file = 0;
  uint32_t line = 0;
  uint32_t discriminator = 0;
  uint16_t column = 0;
  uint8_t flags = 0;  ///< kRow* bits

  static constexpr uint8_t kIsStmt = 1;
  static constexpr uint8_t kEndSequence = 2;
  static constexpr uint8_t kBasicBlock = 4;
  static constexpr uint8_t kPrologueEnd = 8;
  static constexpr uint8_t kEpilogueBegin = 16;
  bool is_stmt() const { return flags & kIsStmt; }
  bool end_sequence() const { return flags & kEndSequence; }
};

/// A run of rows ended by DW_LNE_end_sequence: [low, high) and rows [first_row, last_row).
struct LineSequence {
  uint64_t low = 0;
  uint64_t high = 0;
  uint32_t first_row = 0;
  uint32_t last_row = 0;  ///< one past the end_sequence row
};

/// Sections a line program may reference (DW_FORM_line_strp, DW_FORM_strp in v5 headers).
struct LineSections {
  SectionBytes line;
  SectionBytes line_str;
  SectionBytes str;
  bool big_endian = false;
};

/// Hard limits that keep a hostile program bounded.
struct LineLimits {
  size_t max_rows = size_t{1} << 26;
  size_t max_files = size_t{1} << 20;
};

/// One decoded line program. Immutable after parse(); lookups are thread-safe.
/// String views point into the sections: keep their owner (the object image) alive.
class LineTable {
 public:
  /// Decodes the program at `offset` of `s.line`. `cu_addr_size` is used for
  /// DW_LNE_set_address in versions < 5; `comp_dir` is the unit's DW_AT_comp_dir.
  /// Errors name the offset and what was malformed (SPROV_ERR_DWARF).
  static Result<LineTable> parse(const LineSections& s, uint64_t offset, uint8_t cu_addr_size,
                                 std::string_view comp_dir, const LineLimits& limits = {});

  /// The row that describes `addr`, as llvm-symbolizer chooses it: the sequence
  /// with the smallest high > addr that contains addr, then the last row whose
  /// address is <= addr. Empty when no sequence covers addr.
  std::optional<LineRow> lookup(uint64_t addr) const;

  /// Whether `index` names a file (1-based before DWARF 5, 0-based from 5).
  bool has_file(uint64_t index) const;
  /// Absolute path of file `index`: the name, prefixed by its include
  /// directory and, when that is relative, by the compilation directory
  /// (llvm::sys::path::append rules). False when the index is invalid.
  bool file_path(uint64_t index, std::string* out) const;

  uint16_t version() const { return version_; }
  /// Every row, decoded, in program order (sequences' first_row/last_row index it).
  std::vector<LineRow> rows() const;
  size_t row_count() const { return attrs_.size(); }
  const std::vector<LineSequence>& sequences() const { return sequences_; }
  size_t file_count() const { return files_.size(); }
  size_t memory_bytes() const;

 private:
  struct FileEntry {
    std::string_view name;
    uint64_t dir = 0;
  };
  uint16_t version_ = 0;
  std::string_view comp_dir_;
  std::vector<std::string_view> dirs_;
  std::vector<FileEntry> files_;  ///< as numbered by the version (index 0 unused before v5)
  /// Rows as struct-of-arrays: the address search reads 4 bytes a row. An address is
  /// stored relative to its sequence's low (addr32_), or in full (addr64_) for a table
  /// that has a sequence spanning more than 4 GiB or going below its start.
  struct RowAttrs {
    uint32_t line = 0;
    uint32_t file = 0;
    uint16_t column = 0;
    uint8_t flags = 0;
  };
  uint64_t row_address(const LineSequence& seq, uint32_t row) const {
    return addr64_.empty() ? seq.low + addr32_[row] : addr64_[row];
  }
  LineRow decode(const LineSequence& seq, uint32_t row) const;
  std::vector<uint32_t> addr32_;
  std::vector<uint64_t> addr64_;
  std::vector<RowAttrs> attrs_;
  std::vector<std::pair<uint32_t, uint32_t>> discriminators_;  ///< (row, value) of rows whose value is not 0, by row
  std::vector<LineSequence> sequences_;  ///< sorted by high
};

/// llvm::sys::path::append for POSIX: joins with one '/', skipping empty parts.
void path_append(std::string* path, std::string_view part);

}  // namespace stackprov::dwarf
