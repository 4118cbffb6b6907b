// SPDX-License-Identifier: Apache-2.0
// A sampled profile (perf.data or stackprov capture file): sample index, module lists, per-sample snapshots.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"
#include "perf/module_tracker.hpp"
#include "perf/perf_data.hpp"

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
};

/// The user registers, user stack and kernel callchain of one sample.
struct SampleView {
  uint64_t time = 0, ip = 0, sp = 0;
  uint32_t pid = 0, tid = 0;
  bool user_regs = false;  ///< false: no user context (kernel thread)
  uint64_t regs_mask = 0;  ///< perf sample_regs_user bits
  const uint8_t* regs = nullptr;  ///< popcount(regs_mask) little-endian u64 values
  uint32_t regs_count = 0;
  const uint8_t* stack = nullptr;  ///< copied user stack starting at sp
  uint64_t stack_len = 0;          ///< bytes copied (dyn_size)
  uint64_t stack_requested = 0;    ///< bytes asked for (sample_stack_user)
  std::vector<uint64_t> kernel_ips;  ///< kernel part of the callchain, leaf first
};

/// Converts a decoded perf sample into a view (user regs, sp, stack, kernel callchain part).
void sample_view_from_perf(const RawSample& r, SampleView* out);

class Profile {
 public:
  /// Opens a perf.data file or a capture file (by magic). Module files are opened
  /// under `root` ("" = as recorded). The file is memory-mapped.
  static Result<std::unique_ptr<Profile>> open(const std::string& path, const std::string& root);
  /// The same over bytes in memory (tests, fuzzing); `open_files` false: module files are
  /// not opened (modules get no bias or build-id) and the host's vDSO is not used.
  static Result<std::unique_ptr<Profile>> from_bytes(std::vector<uint8_t> bytes, const std::string& root,
                                                     bool open_files = true);
  ~Profile();
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
  uint64_t sample_regs_user() const { return regs_mask_; }
  uint32_t sample_stack_user() const { return stack_user_; }

  /// Decodes sample `i` (pointers alias the file bytes).
  Status view(size_t i, SampleView* out) const;
  /// Fills `s` for sample `i`: registers (DWARF numbering), the stack copy and,
  /// when `s` last held another list than the sample's, the module list and vDSO
  /// bytes (`*modules_changed` says so). `s` is reused between samples.
  Status fill_snapshot(size_t i, memory::Snapshot& s, uint32_t* current_list, bool* modules_changed,
                       SampleView* view_out) const;

 private:
  friend class CaptureReader;
  Profile() = default;
  Status index_perf_data(const std::string& root, bool open_files);
  Status index(const std::string& root, bool open_files);
  Status index_capture();

  ProfileFormat format_ = ProfileFormat::kPerfData;
  const uint8_t* bytes_ = nullptr;
  size_t len_ = 0;
  void* mapping_ = nullptr;  ///< mmap of the file, or null when `owned_` holds the bytes
  std::vector<uint8_t> owned_;
  std::unique_ptr<PerfData> perf_;
  std::vector<SampleRef> samples_;
  std::vector<std::shared_ptr<const ModuleList>> lists_;
  std::vector<std::string> comms_;
  std::vector<uint8_t> vdso_;
  uint64_t lost_ = 0, records_ = 0;
  uint64_t regs_mask_ = 0;
  uint32_t stack_user_ = 0;
  std::string cmdline_, warnings_;
};

}  // namespace stackprov::perf
