// SPDX-License-Identifier: Apache-2.0
// A trace's captured data: every thread's snapshot of one process in one checked container ("SPROVTRD").
#pragma once

#include <array>
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

/// One frame of a kernel segment as /proc/PID/task/TID/stack printed it: the function's name, the
/// offset from its start and its size (KASLR-independent: no address is kept, /proc prints none),
/// the module ("" for the kernel image), and the function's prototype from the kernel's BTF
/// (btf_func_id 0 and no prototype when BTF has no such function; `approximate` for a compiler clone).
struct CapturedKernelFrame {
  std::string symbol;
  uint64_t offset = 0, size = 0;
  std::string module;
  uint32_t btf_func_id = 0;
  bool approximate = false;
  std::string prototype;
};

/// One thread's kernel segment: its frames innermost first, then the kernel->user boundary with the
/// system call (-1: none) and the user sp and pc the kernel saved on entry (the captured frame 0's).
struct CapturedKernelSegment {
  uint64_t tid = 0;
  int64_t syscall = -1;
  uint64_t user_sp = 0, user_pc = 0;
  std::vector<CapturedKernelFrame> frames;
};

/// The kernel segments of a capture (trace-capture --with-btf): the running kernel's GNU build-id
/// (/sys/kernel/notes), the sha256 of the BTF file the prototypes came from
/// (/sys/kernel/btf/vmlinux), and a segment per thread whose kernel stack was read. Empty: none.
struct CapturedKernel {
  std::vector<uint8_t> build_id;
  std::array<uint8_t, 32> btf_sha256{};
  std::vector<CapturedKernelSegment> segments;
  bool empty() const { return segments.empty(); }
};

/// Limits of CapturedKernel in the container: the build-id's length (an ELF build-id note holds
/// at most ModuleId::kMax bytes), frames per segment (memory::kMaxKernelFrames), a name or module
/// (memory::kMaxKernelLine, /proc's line bound), a prototype.
constexpr size_t kMaxKernelBuildId = 64;
constexpr size_t kMaxKernelSegmentFrames = 256;
constexpr size_t kMaxKernelName = 512;
constexpr size_t kMaxKernelPrototype = 4096;

/// Format (doc/traces.md "Captured data"), integers little-endian, every length checked:
///   magic "SPROVTRD", u32 version (1; 2 when there are JIT entries; 3 when there are kernel
///   segments), u32 n_threads,
///   { u64 tid, u32 name_len, name, u64 snapshot_len, snapshot (memory::serialize) }*,
///   version 2: the JIT section: u32 path_len, path, u32 n_jit (≥ 1), { u64 start, u64 size
///   (≥ 1, no wrap), u32 name_len, name }*;
///   version 3: u32 sections (bit 0: a JIT section follows, bit 1: a kernel section follows; bit 1
///   set, no other), the JIT section when bit 0, then the kernel section: u8 id_len (1..64),
///   build-id, sha256[32] of the BTF, u32 n_segments (1..kMaxThreads), { u64 tid, i64 syscall,
///   u64 user_sp, u64 user_pc, u32 n_frames (1..256), { u32 name_len (1..512), name, u64 offset,
///   u64 size, u32 module_len (≤ 512), module, u32 btf_func_id, u8 approximate (0 or 1),
///   u32 proto_len (≤ 4096; 0 when btf_func_id is 0), prototype }* }*.
/// Data without kernel segments is version 1 or 2 byte for byte as before.
/// Limits: ≤ kMaxThreads threads, names ≤ 256 bytes, the whole ≤ kMaxDataBytes, the kMaxJit*,
/// the kMaxKernel*. Entries past kMaxJitEntries and names and paths past their limits are cut on
/// write; so are kernel frames past kMaxKernelSegmentFrames, names and prototypes past theirs.
std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads, const CapturedJit& jit = {},
                                       const CapturedKernel& kernel = {});
/// Errors are SPROV_ERR_SNAPSHOT naming the field, the thread, entry or segment and the offset.
/// `jit` (optional) receives the JIT entries (none for version 1), `kernel` (optional) the kernel
/// segments (none before version 3).
Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len, CapturedJit* jit = nullptr,
                                                        CapturedKernel* kernel = nullptr);

}  // namespace stackprov::trace
