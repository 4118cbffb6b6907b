// SPDX-License-Identifier: Apache-2.0
// Module maps: parsing /proc/PID/maps listings into executable file mappings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace stackprov {

/// One line of a /proc/PID/maps listing.
struct MapsEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  bool readable = false, writable = false, executable = false, shared = false;
  std::string path;  ///< may be empty, "[vdso]", "[stack]", "/path (deleted)" ...
};

/// Parses a maps listing; a malformed line is an error naming its line number
/// and text. Bounded: at most 1,000,000 lines.
Result<std::vector<MapsEntry>> parse_maps(std::string_view text);

/// Reads a whole file that reports no size (procfs) with read(2) into `out`;
/// 0, or -errno of the open or read that failed; -EFBIG past 256 MiB (a target's maps can grow so).
int read_proc_text(const char* path, std::string* out);

/// Reads /proc/<pid>/maps ("self" when pid is 0).
Result<std::string> read_maps_text(int pid);

}  // namespace stackprov
