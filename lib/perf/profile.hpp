// SPDX-License-Identifier: Apache-2.0
// A sampled profile (perf.data or stackprov capture file): sample index, module lists, per-sample snapshots.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"
#include "perf/kernel_symbols.hpp"
#include "perf/module_tracker.hpp"
#include "perf/perf_data.hpp"
#include "perf/record_stream.hpp"

namespace stackprov::perf {

enum class ProfileFormat : uint8_t { kPerfData = 1, kCapture = 2 };

/// Where one sample is and what it refers to.
struct SampleRef {
  uint64_t time = 0;
  uint64_t offset = 0;  ///< of the sample record in the file bytes
  uint32_t size = 0;
  uint32_t pid = 0, tid = 0;
  uint32_t list = 0;  ///< module list id
  uint32_t comm = 0;  ///< index into Profile::comms()
  /// A capture file's PYSTACK record of the sample (record --python): its body's offset in the
  /// file bytes (0: none) and length; the PYEVAL record of its process then (index into
  /// Profile::py_evals(), UINT32_MAX: none).
  uint64_t py_at = 0;
  uint32_t py_len = 0;
  uint32_t py_eval = UINT32_MAX;
};

/// A CPython code object as `record --python` stored it (PYCODE record).
struct PyCode {
  std::string function, qualname, file;  ///< co_name, co_qualname, co_filename
};
/// Where a process's interpreter runs its frames (PYEVAL record): _PyEval_EvalFrameDefault and its
/// cold part, runtime addresses.
struct PyEval {
  uint32_t pid = 0;
  std::string description;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  ///< [start, end)
};
/// One CPython frame of a sample: its code (index into Profile::py_codes()), line, flags.
struct PyFrameRef {
  static constexpr uint8_t kEntry = 1, kGenerator = 2;
  uint32_t code = 0;
  uint32_t line = 0;  ///< 0: unknown
  uint8_t flags = 0;
};
/// The CPython frames read right after a sample was taken (runtime::PythonStackRead's state).
struct PySampleView {
  bool present = false;  ///< the sample has a PYSTACK record
  uint8_t state = 0;     ///< runtime::PythonStackRead::State
  std::vector<PyFrameRef> frames;  ///< innermost first
  std::string problem;
  const PyEval* eval = nullptr;    ///< the process's interpreter; null: none recorded
};

/// The user registers, user stack and callchain of one sample.
struct SampleView {
  uint64_t time = 0, ip = 0, sp = 0;
  uint64_t period = 0;  ///< PERF_SAMPLE_PERIOD (ns for cpu-clock); 0 when not recorded
  uint32_t pid = 0, tid = 0;
  bool user_regs = false;  ///< false: no user context (kernel thread, or no REGS_USER sampled)
  bool has_callchain = false;  ///< the sample holds PERF_SAMPLE_CALLCHAIN
  bool kernel_mode = false;    ///< sampled in kernel mode (header misc cpumode)
  uint64_t regs_mask = 0;  ///< perf sample_regs_user bits
  const uint8_t* regs = nullptr;  ///< popcount(regs_mask) little-endian u64 values
  uint32_t regs_count = 0;
  const uint8_t* stack = nullptr;  ///< copied user stack starting at sp
  uint64_t stack_len = 0;          ///< bytes copied (dyn_size)
  uint64_t stack_requested = 0;    ///< bytes asked for (sample_stack_user)
  std::vector<uint64_t> kernel_ips;  ///< kernel part of the callchain, leaf first
  std::vector<uint64_t> user_ips;    ///< user part of the callchain, leaf first (perf record -g)
};

/// Converts a decoded perf sample into a view (user regs, sp, stack, the callchain's kernel
/// and user parts split at the PERF_CONTEXT_KERNEL / PERF_CONTEXT_USER markers).
void sample_view_from_perf(const RawSample& r, SampleView* out);

class Profile {
 public:
  /// Opens a perf.data file or a capture file (by magic). Module files are opened
  /// under `root` ("" = as recorded). The file is memory-mapped; a perf.data file's records are
  /// read through pread (perf::RecordSource), not through the mapping.
  /// `stream`: a perf.data file is read once (RecordStream): no sample is known at open, and
  /// next_sample() hands them out in the index's order while the file is read.
  static Result<std::unique_ptr<Profile>> open(const std::string& path, const std::string& root, bool stream = false);
  /// The same over bytes in memory (tests, fuzzing); `open_files` false: module files are
  /// not opened (modules get no bias or build-id) and the host's vDSO is not used.
  static Result<std::unique_ptr<Profile>> from_bytes(std::vector<uint8_t> bytes, const std::string& root,
                                                     bool open_files = true, bool stream = false);
  ~Profile();
  /// The next sample in time order: true and `*i` its index (view, fill_snapshot, python), false
  /// at the end. Opened with `stream` (a perf.data file): samples() holds the samples handed out
  /// so far, view() and fill_snapshot() only the last, and lists(), comms(), lost(), records(),
  /// warnings() and truncation() are complete at the end. When the order cannot be kept (see
  /// RecordStream) before any sample was handed out, the file is read with the index from there
  /// on; after, SPROV_ERR_LIMIT naming why (open it without `stream`). Otherwise, each sample of
  /// the index in turn.
  Result<bool> next_sample(size_t* i);
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  ProfileFormat format() const { return format_; }
  const std::vector<SampleRef>& samples() const { return samples_; }
  const std::vector<std::shared_ptr<const ModuleList>>& lists() const { return lists_; }
  const std::vector<std::string>& comms() const { return comms_; }
  const std::vector<uint8_t>& vdso_bytes() const { return vdso_; }
  uint64_t lost() const { return lost_; }
  uint64_t records() const { return records_; }
  const std::string& cmdline() const { return cmdline_; }
  const std::string& warnings() const { return warnings_; }
  /// A file that ends early (a copy cut short, a full disk) is read up to its last complete
  /// record. truncation(): one line saying so, naming the file when opened by path and how much
  /// is lost; "" for a complete file. missing_bytes(): bytes of a perf.data data section past the
  /// end of the file, or a capture file's bytes past its end by its header's final counts
  /// (UINT64_MAX: unknown, a capture file without them); partial_bytes(): bytes of a partial
  /// last record dropped.
  const std::string& truncation() const { return truncation_; }
  uint64_t missing_bytes() const { return missing_bytes_; }
  uint64_t partial_bytes() const { return partial_bytes_; }
  uint64_t sample_regs_user() const { return regs_mask_; }
  uint32_t sample_stack_user() const { return stack_user_; }
  /// The sampling event: frequency mode (Hz) or a fixed period; clock events count nanoseconds.
  struct Event {
    std::string name;  ///< "cpu-clock", "task-clock", "cycles", ... ("event" when unknown)
    bool clock = false;
    uint64_t frequency = 0, period = 0;
  };
  const Event& event() const { return event_; }
  /// The kernel build-id the recording holds (perf.data HEADER_BUILD_ID "[kernel.kallsyms]",
  /// capture file KERNEL record); empty when none.
  const ModuleId& kernel_build_id() const { return kernel_id_; }
  /// Names kernel addresses of this recording (checks build-ids first; see KernelNamer).
  KernelNamer& kernel_namer() const { return *kernel_; }

  /// Decodes sample `i`. Its pointers (regs, stack) alias the file's bytes: for a perf.data file
  /// opened by path, a window of perf::RecordSource valid until the next view() or fill_snapshot()
  /// of this profile (which are therefore not safe to call from two threads at once).
  Status view(size_t i, SampleView* out) const;
  /// The CPython frames recorded with sample `i` (capture files of `record --python`; else none).
  Status python(size_t i, PySampleView* out) const;
  const std::vector<PyCode>& py_codes() const { return py_codes_; }
  const std::vector<PyEval>& py_evals() const { return py_evals_; }
  /// Fills `s` for sample `i`: registers (DWARF numbering), the stack and, when `s` last held
  /// another list than the sample's, the module list and vDSO bytes (`*modules_changed` says so).
  /// `s` is reused between samples. The stack is borrowed from the record's bytes
  /// (Snapshot::add_memory_view) where they stay until the next next_sample(), view() or
  /// fill_snapshot() — a capture file, bytes in memory, a perf.data file read once —, else
  /// copied (a perf.data file read with its index: its read windows are reused). Call
  /// Snapshot::drop_views before next_sample() if `s` is kept past it.
  Status fill_snapshot(size_t i, memory::Snapshot& s, uint32_t* current_list, bool* modules_changed,
                       SampleView* view_out) const;
  /// Where a perf.data file's records are read from (nullptr for a capture file).
  const RecordSource* record_source() const { return perf_ ? &perf_->source() : nullptr; }

 private:
  friend class CaptureReader;
  Profile() = default;
  struct PerfReader;
  Status index_perf_data(const std::string& root, bool open_files);
  Status index(const std::string& root, bool open_files, bool stream);
  Status begin_perf_data(const std::string& root, bool open_files, bool index);
  /// One record in time order: module lists, comms, lost counts, samples (`*sample`: one added).
  Status apply_record(const RecordRef& r, const uint8_t* rec, bool refused, bool* sample);
  void finish_perf_data(const Truncation& cut);
  void make_kernel_namer(bool open_files);
  static RecordStream::Order record_order(uint32_t type);
  /// fill_snapshot borrows the sample's stack from its record (the bytes outlive the snapshot's use).
  bool stack_in_place() const;
  Status index_capture();

  ProfileFormat format_ = ProfileFormat::kPerfData;
  const uint8_t* bytes_ = nullptr;
  size_t len_ = 0;
  void* mapping_ = nullptr;  ///< mmap of the file, or null when `owned_` holds the bytes
  int fd_ = -1;              ///< the file (open() only): perf.data records are read through it
  std::vector<uint8_t> owned_;
  std::unique_ptr<PerfData> perf_;
  std::vector<SampleRef> samples_;
  std::vector<std::shared_ptr<const ModuleList>> lists_;
  std::vector<std::string> comms_;
  std::vector<PyCode> py_codes_;
  std::vector<PyEval> py_evals_;
  std::vector<uint8_t> vdso_;
  uint64_t lost_ = 0, records_ = 0;
  uint64_t regs_mask_ = 0;
  uint32_t stack_user_ = 0;
  uint32_t capture_version_ = 0;
  std::string cmdline_, warnings_, truncation_;
  uint64_t missing_bytes_ = 0, partial_bytes_ = 0;
  Event event_;
  ModuleId kernel_id_;
  uint64_t kernel_text_ = 0;  ///< `_text` when recorded (KASLR), 0 when unknown
  std::unique_ptr<KernelNamer> kernel_;
  std::unique_ptr<PerfReader> reader_;  ///< perf.data: the state of reading its records
  size_t next_ = 0;                 ///< next_sample's next index
  std::string path_;                ///< opened by path: named in truncation()
};

}  // namespace stackprov::perf
