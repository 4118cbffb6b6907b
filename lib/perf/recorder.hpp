// SPDX-License-Identifier: Apache-2.0
// perf_event recorder: samples a process (or a started command) and writes a capture file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace stackprov::perf {

struct RecordOptions {
  int64_t pid = 0;                ///< existing process, or 0 with `argv`
  std::vector<std::string> argv;  ///< command to start
  std::string output;             ///< capture file path
  std::string root;               ///< prefix for module files ("" = as is)
  uint32_t frequency = 999;       ///< Hz
  uint32_t stack_size = 8192;     ///< bytes, multiple of 8, <= 65528
  uint32_t duration_ms = 0;       ///< 0: until the target exits or SIGINT
  /// 0: perf_event samples (the default); kKernelCpuClock / kKernelOffCpu: the eBPF kernel sampler
  /// (kernel_sampler.hpp) takes the samples, the perf events only track the module map.
  uint32_t kernel_mode = 0;
  /// Called once when sampling has started (0, 0), then from the recording loop about every
  /// 250 ms with the samples and lost samples so far (a live count on a terminal); may be empty.
  std::function<void(uint64_t samples, uint64_t lost)> progress;
};

constexpr uint32_t kKernelCpuClock = 1;  ///< eBPF on the cpu-clock perf events
constexpr uint32_t kKernelOffCpu = 2;    ///< eBPF on sched:sched_switch (off-CPU stacks)

struct RecordStats {
  uint64_t samples = 0;
  uint64_t lost = 0;
  uint64_t threads = 0;
  int32_t exit_status = -1;
  std::string warnings;  ///< the module tracker's findings (a module left out or read from memory), one per line
};

/// Records with perf_event_open (see sprov_record in include/stackprov/perf.h).
/// Not thread-safe with respect to SIGINT: installs a SIGINT handler while it runs.
Status record(const RecordOptions& opts, RecordStats* stats);

}  // namespace stackprov::perf
