// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a trace's captured data (the "SPROVTRD" container of thread snapshots, JIT entries and kernel segments).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "trace/capture_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stackprov::trace::CapturedJit jit;
  stackprov::trace::CapturedKernel kernel;
  auto r = stackprov::trace::deserialize_capture(data, size, &jit, &kernel);
  if (!r.ok()) {
    if (r.error().code != SPROV_ERR_SNAPSHOT) __builtin_trap();  // the header's error convention
    return 0;
  }
  // What parses re-serializes to the same bytes (one encoding per value).
  const auto again = stackprov::trace::serialize_capture(r.value(), jit, kernel);
  (void)stackprov::symbolize::PerfMap::from_entries(jit.path, jit.entries);  // what resolve makes of them
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  return 0;
}
