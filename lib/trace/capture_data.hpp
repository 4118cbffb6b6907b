// SPDX-License-Identifier: Apache-2.0
// A trace's captured data: every thread's snapshot of one process in one checked container ("SPROVTRD").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"
#include "symbolize/perf_map.hpp"

namespace stackprov::trace {

/// One captured thread: its id, name (from /proc/PID/task/TID/comm, "" when unknown) and snapshot.
struct CapturedThread {
  uint64_t tid = 0;
  std::string name;
  memory::Snapshot snapshot;
};

/// The perf-map entries (/tmp/perf-PID.map) that cover the captured frames' pcs, in the map's
/// order, with the map's path: what names and unwinds JIT frames when the map is gone.
struct CapturedJit {
  std::string path;
  std::vector<symbolize::PerfMap::Entry> entries;
};

/// Limits of CapturedJit in the container.
constexpr size_t kMaxJitEntries = 16384;
constexpr size_t kMaxJitPath = 4096;
constexpr size_t kMaxJitName = 4096;

/// Format (doc/traces.md "Captured data"), integers little-endian, every length checked:
///   magic "SPROVTRD", u32 version (1, or 2 when there are JIT entries), u32 n_threads,
///   { u64 tid, u32 name_len, name, u64 snapshot_len, snapshot (memory::serialize) }*,
///   version 2 only: u32 path_len, path, u32 n_jit (≥ 1), { u64 start, u64 size (≥ 1, no wrap),
///   u32 name_len, name }*.
/// Limits: ≤ kMaxThreads threads, names ≤ 256 bytes, the whole ≤ kMaxDataBytes, the kMaxJit*.
/// Entries past kMaxJitEntries and names and paths past their limits are cut on write.
std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads, const CapturedJit& jit = {});
/// Errors are SPROV_ERR_SNAPSHOT naming the field, the thread and the offset. `jit` (optional)
/// receives the JIT entries (none for version 1).
Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len, CapturedJit* jit = nullptr);

}  // namespace stackprov::trace
