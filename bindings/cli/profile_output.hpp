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
  };
  /// Adds one sample; `names` are ids into the caller's name table.
  void add(uint32_t comm, const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& names);
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

/// Writes a self-contained flame-graph SVG of the folded lines: one <g> per
/// frame with a <title> "name (N samples, P%)" shown on hover, data-samples,
/// click-to-zoom and reset, inline script only.
void write_flamegraph_svg(FILE* f, const std::map<std::string, uint64_t>& folded, const std::string& title);

std::string xml_escape(const std::string& s);

}  // namespace stackprov_cli
