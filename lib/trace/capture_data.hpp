// SPDX-License-Identifier: Apache-2.0
// A trace's captured data: every thread's snapshot of one process in one checked container ("SPROVTRD").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"

namespace stackprov::trace {

/// One captured thread: its id, name (from /proc/PID/task/TID/comm, "" when unknown) and snapshot.
struct CapturedThread {
  uint64_t tid = 0;
  std::string name;
  memory::Snapshot snapshot;
};

/// Format (doc/traces.md "Captured data"), integers little-endian, every length checked:
///   magic "SPROVTRD", u32 version (1), u32 n_threads,
///   { u64 tid, u32 name_len, name, u64 snapshot_len, snapshot (memory::serialize) }*.
/// Limits: ≤ kMaxThreads threads, names ≤ 256 bytes, the whole ≤ kMaxDataBytes.
std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads);
/// Errors are SPROV_ERR_SNAPSHOT naming the field, the thread and the offset.
Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len);

}  // namespace stackprov::trace
