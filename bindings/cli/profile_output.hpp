// SPDX-License-Identifier: Apache-2.0
// Profile outputs: stack aggregation by XXH3 of the pc sequence, folded stacks and flame-graph SVG.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace stackprov_cli {

/// Identical stacks (same comm, same pc sequence) counted once each. Keyed by
/// XXH3-64 of (comm, pcs); a hash collision (same hash, other sequence) is
/// detected by comparing the sequences and kept as a separate entry.
class StackAggregator {
 public:
  struct Entry {
    uint32_t comm = 0;
    std::vector<uint64_t> pcs;     ///< leaf first
    std::vector<uint32_t> names;   ///< symbol-name ids, leaf first (parallel to pcs)
    uint64_t count = 0;
    uint64_t period = 0;           ///< sum of the samples' periods
  };
  /// Adds one sample of `period`; `names` are ids into the caller's name table.
  void add(uint32_t comm, const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& names, uint64_t period = 0);
  const std::vector<Entry>& entries() const { return entries_; }
  uint64_t collisions() const { return collisions_; }

 private:
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_hash_;
  std::vector<Entry> entries_;
  uint64_t collisions_ = 0;
};

/// Folded lines "comm;root;…;leaf" -> count (sorted, identical lines merged).
std::map<std::string, uint64_t> fold(const StackAggregator& agg, const std::vector<std::string>& comms,
                                     const std::vector<std::string>& names);

/// Writes "LINE COUNT\n" per folded line (flamegraph.pl / inferno input).
void write_folded(FILE* f, const std::map<std::string, uint64_t>& folded);

/// Writes a self-contained flame-graph SVG of the folded lines, as flamegraph.pl and inferno
/// draw them: one <g class="f"> per frame with a <title> "name (N samples, P%)" ("1 sample"),
/// data-x / data-samples / data-d; hover writes "Function: <title>" into the details line;
/// click zooms, "Reset Zoom" resets; "Search" (or Ctrl-F, or ?s=REGEX in the URL) highlights
/// the frames whose name matches a regex and shows "Matched: P%" (the share of samples under
/// a matching frame, nested matches counted once); "Reset Search" clears it. Kernel frames
/// (names ending in "_[k]") are drawn in orange. Inline script only, no external resources.
void write_flamegraph_svg(FILE* f, const std::map<std::string, uint64_t>& folded, const std::string& title);

std::string xml_escape(const std::string& s);

}  // namespace stackprov_cli
