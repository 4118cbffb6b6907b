// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a trace's captured data (the "SPROVTRD" container of thread snapshots and JIT entries).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "trace/capture_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stackprov::trace::CapturedJit jit;
  auto r = stackprov::trace::deserialize_capture(data, size, &jit);
  if (!r.ok()) {
    if (r.error().code != SPROV_ERR_SNAPSHOT) __builtin_trap();  // the header's error convention
    return 0;
  }
  // What parses re-serializes to the same bytes (one encoding per value).
  const auto again = stackprov::trace::serialize_capture(r.value(), jit);
  (void)stackprov::symbolize::PerfMap::from_entries(jit.path, jit.entries);  // what resolve makes of them
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  return 0;
}
