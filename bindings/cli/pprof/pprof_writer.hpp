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
};

/// (pc, name id) -> mapping index + 1 (0: none), as seen when unwinding.
using PprofFrameMappings = std::map<std::pair<uint64_t, uint32_t>, uint32_t>;

/// Writes one Sample per aggregated stack (value = count, label comm), a Location per unique
/// (pc, name, mapping), a Function per name id, a Mapping per module; gzip-compressed to `f`.
/// Returns false with `err` set on failure.
bool write_pprof(FILE* f, const StackAggregator& agg, const std::vector<std::string>& comms,
                 const std::vector<std::string>& names, const std::vector<std::string>& linkage,
                 const std::vector<PprofMapping>& mappings,
                 const PprofFrameMappings& frame_mappings, std::string* err);

}  // namespace stackprov_cli
