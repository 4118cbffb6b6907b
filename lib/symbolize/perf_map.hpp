// SPDX-License-Identifier: Apache-2.0
// JIT perf maps (/tmp/perf-PID.map, as `node --perf-basic-prof` and other JITs write them): names of JIT code.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stackprov::symbolize {

/// One process's perf map: "START SIZE NAME" lines (hex, optional 0x), the
/// format perf reads (tools/perf/Documentation/jit-interface.txt). Where
/// entries overlap (code freed and reused) the later line wins, as a JIT
/// appends the newest code last. Immutable after load; thread-safe lookups.
class PerfMap {
 public:
  struct Entry {
    uint64_t start = 0, size = 0;
    std::string name;
  };
  /// The map of `pid` from `dir` (default "/tmp"): null when there is none, it holds no entry, or
  /// it belongs to neither the process's owner nor root (perf's rule).
  static std::shared_ptr<const PerfMap> load_pid(int64_t pid, const std::string& dir = "/tmp");
  /// Parses the file (a regular file only, its first kMaxFileBytes); lines that are not
  /// "START SIZE NAME" are skipped.
  static std::shared_ptr<const PerfMap> load_file(const std::string& path);
  static constexpr size_t kMaxFileBytes = size_t{512} << 20;
  /// A perf map's text, known by `path`: as load_file (null when no line is an entry).
  static std::shared_ptr<const PerfMap> parse(std::string path, std::string_view text);
  /// A map of `entries` in file order (later entries win where they overlap, as in a file),
  /// known by `path`: a trace's captured entries (doc/traces.md "Captured data"). Null when
  /// no entry is valid (size 0 or wrapping entries are dropped).
  static std::shared_ptr<const PerfMap> from_entries(std::string path, std::vector<Entry> entries);

  /// The entry covering `addr`, else nullptr.
  const Entry* find(uint64_t addr) const;
  const std::string& path() const { return path_; }
  /// Sorted, disjoint [start, end) ranges the map names (for the unwinder's JIT check).
  const std::vector<std::pair<uint64_t, uint64_t>>& ranges() const { return ranges_; }
  size_t size() const { return entries_.size(); }

 private:
  std::string path_;
  std::vector<Entry> entries_;  ///< disjoint, sorted by start
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

/// Perf maps by pid, each loaded once. Thread-safe.
class PerfMaps {
 public:
  std::shared_ptr<const PerfMap> get(int64_t pid);

 private:
  std::mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<const PerfMap>> maps_;
};

}  // namespace stackprov::symbolize
