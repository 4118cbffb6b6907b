// SPDX-License-Identifier: Apache-2.0
// Windows minidumps (issue 33): our own checked reader of the header, the stream directory and the
// streams a stack needs -- threads with x64 CONTEXT records, MemoryList and Memory64List, modules
// (UTF-16 names, CodeView records), the exception and system info. doc/windows.md "Minidumps".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace stackprov::minidump {

inline constexpr uint32_t kSignature = 0x504d444d;  ///< "MDMP"
/// MINIDUMP_STREAM_TYPE values read here (minidumpapiset.h).
inline constexpr uint32_t kThreadListStream = 3;
inline constexpr uint32_t kModuleListStream = 4;
inline constexpr uint32_t kMemoryListStream = 5;
inline constexpr uint32_t kExceptionStream = 6;
inline constexpr uint32_t kSystemInfoStream = 7;
inline constexpr uint32_t kMemory64ListStream = 9;
inline constexpr uint32_t kMiscInfoStream = 15;
/// SystemInfo ProcessorArchitecture (PROCESSOR_ARCHITECTURE_*).
inline constexpr uint16_t kArchX86 = 0;
inline constexpr uint16_t kArchAmd64 = 9;
inline constexpr uint16_t kArchArm64 = 12;
/// The x64 CONTEXT record (winnt.h): 1232 bytes; ContextFlags bits.
inline constexpr uint32_t kX64ContextSize = 0x4d0;
inline constexpr uint32_t kContextAmd64 = 0x100000;
inline constexpr uint32_t kContextControl = 0x1;        ///< rip, rsp, eflags, cs, ss
inline constexpr uint32_t kContextInteger = 0x2;        ///< rax..r15 except rsp
inline constexpr uint32_t kContextFloatingPoint = 0x8;  ///< the legacy save area: mxcsr, xmm0..15
/// Limits on what a hostile dump may declare (real dumps stay far below them).
inline constexpr uint32_t kMaxStreams = 4096;
inline constexpr uint32_t kMaxThreads = 1u << 16;
inline constexpr uint32_t kMaxModules = 1u << 16;
inline constexpr uint64_t kMaxMemoryRanges = 1u << 22;
inline constexpr uint32_t kMaxNameBytes = 2 * 32768;  ///< a MINIDUMP_STRING (UNICODE_STRING's limit)
inline constexpr uint32_t kMaxCodeViewBytes = 64 * 1024;

/// MINIDUMP_LOCATION_DESCRIPTOR: `size` bytes at file offset `rva`.
struct Location {
  uint32_t size = 0;
  uint32_t rva = 0;
};

struct StreamEntry {
  uint32_t type = 0;
  Location loc;
};

/// A range of the process's memory held in the file: `size` bytes at `offset`.
struct MemoryRange {
  uint64_t start = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

struct Thread {
  uint32_t id = 0;
  uint32_t suspend_count = 0;
  uint32_t priority_class = 0;
  uint32_t priority = 0;
  uint64_t teb = 0;
  MemoryRange stack;  ///< size 0 when none was written
  Location context;   ///< size 0: no context (wine's dumping thread)
};

/// A module's CodeView record. kRsds ("RSDS", PDB 7.0): GUID (as stored), age and PDB path; kOther
/// a record of another signature (NB10, ...), kept as its signature only.
struct CodeView {
  enum class Kind { kRsds, kOther };
  Kind kind = Kind::kOther;
  uint32_t signature = 0;
  std::array<uint8_t, 16> guid{};
  uint32_t age = 0;
  std::string pdb_path;
};

struct Module {
  uint64_t base = 0;
  uint32_t size = 0;
  uint32_t checksum = 0;
  uint32_t timestamp = 0;
  std::string name;  ///< MINIDUMP_STRING, UTF-16LE converted to UTF-8 (unpaired surrogates as U+FFFD)
  Location cv_record;
  std::optional<CodeView> codeview;  ///< none when the record is empty (wine writes it empty)
  Location misc_record;
};

struct Exception {
  uint32_t thread_id = 0;
  uint32_t code = 0;
  uint32_t flags = 0;
  uint64_t record = 0;
  uint64_t address = 0;
  uint32_t num_params = 0;  ///< at most 15 (EXCEPTION_MAXIMUM_PARAMETERS)
  std::array<uint64_t, 15> params{};
  Location context;  ///< the faulting thread's context at the exception
};

struct SystemInfo {
  uint16_t arch = 0;  ///< kArch*
  uint16_t level = 0;
  uint16_t revision = 0;
  uint8_t processors = 0;
  uint8_t product_type = 0;
  uint32_t major = 0, minor = 0, build = 0, platform = 0;
  std::string csd_version;  ///< "" when absent or unreadable
};

/// The registers of an x64 CONTEXT record that ContextFlags says are present.
struct X64Context {
  uint32_t flags = 0;
  /// In CONTEXT order: rax rcx rdx rbx rsp rbp rsi rdi r8 .. r15.
  std::array<uint64_t, 16> gpr{};
  uint64_t rip = 0;
  uint32_t eflags = 0;
  uint32_t mxcsr = 0;
  std::array<std::array<uint8_t, 16>, 16> xmm{};
  bool has_control() const { return (flags & kContextControl) != 0; }
  bool has_integer() const { return (flags & kContextInteger) != 0; }
  bool has_xmm() const { return (flags & kContextFloatingPoint) != 0; }
};

/// A parsed minidump over bytes it owns (a guarded mapping of the file, or a copy). Immutable after
/// parse: thread-safe to read.
class Minidump {
 public:
  /// Opens and checks `path` (mapped read-only under core/mapped_file.hpp's guard: a file truncated
  /// meanwhile reads as zeros, not SIGBUS).
  static Result<std::unique_ptr<Minidump>> open(const std::string& path);
  static Result<std::unique_ptr<Minidump>> from_bytes(std::vector<uint8_t> bytes, std::string name);
  ~Minidump();
  Minidump(const Minidump&) = delete;
  Minidump& operator=(const Minidump&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t timestamp() const { return timestamp_; }
  uint64_t flags() const { return flags_; }
  const std::vector<StreamEntry>& streams() const { return streams_; }
  const std::vector<Thread>& threads() const { return threads_; }
  const std::vector<Module>& modules() const { return modules_; }
  /// MemoryList and Memory64List ranges together, sorted by start; ranges of size 0 left out.
  /// Overlapping ranges (dbghelp writes some twice) are kept: reads take the first that holds them.
  const std::vector<MemoryRange>& memory() const { return memory_; }
  bool has_memory64() const { return has_memory64_; }
  const std::optional<Exception>& exception() const { return exception_; }
  const std::optional<SystemInfo>& system_info() const { return system_info_; }
  /// MINIDUMP_MISC_INFO's ProcessId when its flag MINIDUMP_MISC1_PROCESS_ID is set.
  const std::optional<uint32_t>& process_id() const { return process_id_; }

  /// The file bytes of a location (checked at parse time for every location kept).
  std::span<const uint8_t> bytes(Location loc) const;
  std::span<const uint8_t> bytes(const MemoryRange& r) const;
  /// An x64 CONTEXT at `loc`: SPROV_ERR_TRUNCATED when shorter than the record, SPROV_ERR_BAD_FORMAT
  /// when ContextFlags lacks CONTEXT_AMD64.
  Result<X64Context> x64_context(Location loc) const;
  /// Copies [addr, addr + len) of the process's memory from the ranges (a read may span adjacent
  /// ranges); false when any byte is not in the dump. Never faults.
  bool read(uint64_t addr, void* buf, size_t len) const;
  /// How many bytes from `addr` on the dump holds without a gap, at most `max`.
  uint64_t readable_from(uint64_t addr, uint64_t max = UINT64_MAX) const;

 private:
  Minidump() = default;
  Status parse();
  Status parse_threads(Location loc);
  Status parse_modules(Location loc);
  Status parse_memory(Location loc);
  Status parse_memory64(Location loc);
  Status parse_exception(Location loc);
  Status parse_system_info(Location loc);
  Result<std::string> read_string(uint32_t rva, const char* what) const;
  Status check(Location loc, const char* what) const;
  /// The range holding `addr` that reaches furthest, null when none does.
  const MemoryRange* range_at(uint64_t addr) const;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;
  std::vector<uint8_t> owned_;
  uint32_t version_ = 0, timestamp_ = 0;
  uint64_t flags_ = 0;
  std::vector<StreamEntry> streams_;
  std::vector<Thread> threads_;
  std::vector<Module> modules_;
  std::vector<MemoryRange> memory_;
  std::vector<uint64_t> max_end_;  ///< parallel to memory_: the largest range end up to each range
  bool has_memory64_ = false;
  std::optional<Exception> exception_;
  std::optional<SystemInfo> system_info_;
  std::optional<uint32_t> process_id_;
};

/// "EXCEPTION_ACCESS_VIOLATION" for 0xC0000005 and the other NTSTATUS codes of winnt.h's
/// EXCEPTION_* list; "" for others.
const char* exception_name(uint32_t code);

}  // namespace stackprov::minidump
