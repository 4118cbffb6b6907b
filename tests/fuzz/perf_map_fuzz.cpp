// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a JIT perf map's text (/tmp/perf-PID.map, written by any process the profiler looks at):
// PerfMap::parse, find and ranges.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "symbolize/perf_map.hpp"

using stackprov::symbolize::PerfMap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = PerfMap::parse("fuzz.map", std::string_view(reinterpret_cast<const char*>(data), size));
  if (!m) return 0;
  // Invariants: entries are non-empty; ranges are sorted, disjoint, non-empty; every range's first
  // and last byte are found, the byte before and after a range is not; an entry found covers the
  // address.
  const auto& r = m->ranges();
  for (size_t i = 0; i < r.size(); i++) {
    if (r[i].first >= r[i].second) __builtin_trap();
    if (i > 0 && r[i - 1].second >= r[i].first) __builtin_trap();  // adjacent ranges are merged
    for (uint64_t a : {r[i].first, r[i].second - 1}) {
      const PerfMap::Entry* e = m->find(a);
      if (e == nullptr || a < e->start || a - e->start >= e->size) __builtin_trap();
    }
    if (r[i].first > 0 && m->find(r[i].first - 1) != nullptr) __builtin_trap();
    if (m->find(r[i].second) != nullptr) __builtin_trap();
  }
  return 0;
}
