// SPDX-License-Identifier: Apache-2.0
// Fuzz target: perf.data and capture-file parsing, then every sample's snapshot and Python frames (no module files opened).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = stackprov::perf::Profile::from_bytes(std::vector<uint8_t>(data, data + size), "", false);
  if (!p.ok()) return 0;
  stackprov::memory::Snapshot s;
  uint32_t list = UINT32_MAX;
  bool changed = false;
  const size_t n = p.value()->samples().size();
  for (size_t i = 0; i < n && i < 4096; i++) {
    stackprov::perf::SampleView v;
    (void)p.value()->fill_snapshot(i, s, &list, &changed, &v);
    stackprov::perf::PySampleView py;
    if (p.value()->python(i, &py).ok())
      for (const auto& f : py.frames) (void)p.value()->py_codes().at(f.code);  // ids were checked at indexing
  }
  return 0;
}
