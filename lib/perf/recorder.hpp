// SPDX-License-Identifier: Apache-2.0
// perf_event recorder: samples a process (or a started command) and writes a capture file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "perf/module_tracker.hpp"
#include "perf/profile.hpp"

namespace stackprov::perf {

/// A language runtime's frames, read for each sample while recording (record --python). The
/// recorder asks it; the C ABI layer gives CPython's (runtime::PythonSampler, lib/capi/perf.cpp),
/// which this layer cannot name.
class RuntimeSampler {
 public:
  struct Frame {
    std::string function, qualname, file;
    uint32_t line = 0;
    uint8_t flags = 0;  ///< PyFrameRef::kEntry, kGenerator
  };
  virtual ~RuntimeSampler() = default;
  /// Process `pid` has the module list `l` (new or changed; l.images holds the files read): true,
  /// with `*eval` filled, when one of its modules holds an interpreter, which read() then reads.
  /// A module that holds one that cannot be read says so in `*warning`.
  virtual bool attach(uint32_t pid, const ModuleList& l, PyEval* eval, std::string* warning) = 0;
  /// Thread `tid` of attached process `pid`, read now: runtime::PythonStackRead::State's value,
  /// the frames innermost first, what was wrong or changed.
  virtual uint8_t read(uint32_t pid, uint32_t tid, std::vector<Frame>* frames, std::string* problem) = 0;
  /// `pid` exec'd: its interpreter, if any, is gone.
  virtual void forget(uint32_t pid) = 0;
};

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
  /// Read each sampled thread's CPython 3.11 frames right after its sample (the thread runs on:
  /// runtime::PythonSampler says when a read is torn); perf_event samples only (kernel_mode 0).
  std::shared_ptr<RuntimeSampler> python;
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
  /// With RecordOptions::python: the samples of an interpreter's process whose Python frames were
  /// read whole, torn (changed during the read: none kept), damaged (cut short), or of a thread
  /// the interpreter has no state for; and the processes found to run an interpreter.
  uint64_t python_read = 0, python_torn = 0, python_damaged = 0, python_no_thread = 0, python_processes = 0;
};

/// Records with perf_event_open (see sprov_record in include/stackprov/perf.h).
/// Not thread-safe with respect to SIGINT: installs a SIGINT handler while it runs.
Status record(const RecordOptions& opts, RecordStats* stats);

}  // namespace stackprov::perf
