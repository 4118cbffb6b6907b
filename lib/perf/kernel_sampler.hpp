// SPDX-License-Identifier: Apache-2.0
// The eBPF kernel sampler's loader (doc/kernel-stacks.md): loads lib/perf/bpf/kernel_sampler.bpf.c
// (a libbpf skeleton generated at build time), attaches it to perf events or sched:sched_switch and
// hands out its ring-buffer events (struct sprov_kernel_event, include/stackprov/kernel.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/error.hpp"

namespace stackprov::perf {

struct KernelSamplerOptions {
  uint32_t tgid = 0;          ///< the process whose threads are sampled
  uint32_t stack_bytes = 8192;  ///< user stack bytes copied per event (<= SPROV_KERNEL_MAX_STACK)
};

class KernelSampler {
 public:
  /// Whether this build has the sampler; `why` says why not (a cross or sanitizer build, no BTF,
  /// no libbpf, ...).
  static bool available(std::string* why);
  /// Loads the program (the verifier runs here). Errors: SPROV_ERR_UNSUPPORTED (not built), the
  /// load's errno (EPERM without CAP_BPF/CAP_PERFMON).
  static Result<std::unique_ptr<KernelSampler>> open(const KernelSamplerOptions& o);
  ~KernelSampler();
  /// cpu-clock mode: the program runs on every overflow of perf event `fd` (and of its inherited
  /// copies); the event's own samples are dropped (the program returns 0), or with `keep_samples`
  /// still written (another program's event: its owner sees them too).
  Status attach_perf_event(int fd, bool keep_samples = false);
  /// Off-CPU mode: the program runs at sched:sched_switch for the target's threads.
  Status attach_sched_switch();
  /// Calls `fn` for each event in the ring now (never waits).
  Status drain(const std::function<void(const uint8_t* event, size_t len)>& fn);
  /// Waits up to `timeout_ms` for events, then calls `fn` for each; returns how many.
  Result<int> poll(int timeout_ms, const std::function<void(const uint8_t* event, size_t len)>& fn);
  /// cpu-clock mode for the C ABI: opens a cpu-clock event at `frequency` Hz (inherited) per thread
  /// of `pid` and CPU, and attaches to each (the sampler keeps the fds).
  Status attach_cpu_clock(int64_t pid, uint32_t frequency);
  /// Events the ring had no room for (summed over CPUs).
  uint64_t dropped() const;

 private:
  KernelSampler() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stackprov::perf
