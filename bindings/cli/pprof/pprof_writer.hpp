// SPDX-License-Identifier: Apache-2.0
// pprof profile.proto output (gzip-compressed), built only when CMake found Protobuf (STACKPROV_HAVE_PPROF).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "profile_output.hpp"

namespace stackprov_cli {

struct PprofMapping {
  uint64_t start = 0, limit = 0, file_offset = 0;
  std::string filename, build_id;  ///< build_id as lowercase hex
  bool lines = false;              ///< has_filenames / has_line_numbers / has_inline_frames
};

/// One pprof Line: a function (name, linkage name, the source file of its lines and its
/// declaration line) and the line number in it.
struct PprofLine {
  std::string function, system_name, filename;
  int64_t line = 0, start_line = 0;
};

/// What a Location holds: its mapping (index + 1; 0: none) and its lines, innermost inlined
/// function first and the physical function last (pprof's order). No lines: one Line with
/// the frame's name.
struct PprofLocation {
  uint32_t mapping = 0;
  std::vector<PprofLine> lines;
};
using PprofLocations = std::map<std::pair<uint64_t, uint32_t>, PprofLocation>;  ///< (pc, name id)

/// The sample values: [samples/count, VALUE/UNIT] with VALUE/UNIT cpu/nanoseconds for clock
/// events (the summed sample periods), else the event's name/count; period_type the same,
/// `period` the nominal period (1e9/frequency for clock events in frequency mode).
struct PprofMeta {
  std::string value_type = "cpu", value_unit = "nanoseconds";
  int64_t period = 0;
  std::vector<std::string> comments;
};

/// Writes one Sample per aggregated stack (values count and summed period, label comm), a
/// Location per unique (pc, name), a Function per (name, file), a Mapping per module;
/// gzip-compressed to `f`. Returns false with `err` set on failure.
bool write_pprof(FILE* f, const StackAggregator& agg, const std::vector<std::string>& comms,
                 const std::vector<std::string>& names, const std::vector<std::string>& linkage,
                 const std::vector<PprofMapping>& mappings, const PprofLocations& locations, const PprofMeta& meta,
                 std::string* err);

}  // namespace stackprov_cli
