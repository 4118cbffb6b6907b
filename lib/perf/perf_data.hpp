// SPDX-License-Identifier: Apache-2.0
// perf.data reader: file header, attributes, feature sections and the decoding of perf_event records.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::perf {

// Record types and sample_type bits: include/uapi/linux/perf_event.h (Linux 6.1) and
// tools/perf/util/event.h for the perf tool's own records (>= 64).
constexpr uint32_t kRecordMmap = 1, kRecordLost = 2, kRecordComm = 3, kRecordExit = 4,
                   kRecordFork = 7, kRecordSample = 9, kRecordMmap2 = 10, kRecordLostSamples = 13,
                   kRecordHeaderBuildId = 67, kRecordFinishedRound = 68, kRecordAuxtrace = 71,
                   kRecordCompressed = 81;
constexpr uint64_t kSampleIp = 1u << 0, kSampleTid = 1u << 1, kSampleTime = 1u << 2,
                   kSampleAddr = 1u << 3, kSampleRead = 1u << 4, kSampleCallchain = 1u << 5,
                   kSampleId = 1u << 6, kSampleCpu = 1u << 7, kSamplePeriod = 1u << 8,
                   kSampleStreamId = 1u << 9, kSampleRaw = 1u << 10, kSampleBranchStack = 1u << 11,
                   kSampleRegsUser = 1u << 12, kSampleStackUser = 1u << 13,
                   kSampleIdentifier = 1u << 16;
/// perf_event_header.misc bits.
constexpr uint16_t kMiscCpumodeMask = 7, kMiscKernel = 1, kMiscUser = 2, kMiscCommExec = 1u << 13,
                   kMiscMmapData = 1u << 13, kMiscMmapBuildId = 1u << 14;
/// Callchain context markers (PERF_CONTEXT_*), as u64.
constexpr uint64_t kContextKernel = static_cast<uint64_t>(-128), kContextUser = static_cast<uint64_t>(-512),
                   kContextMax = static_cast<uint64_t>(-4095);

/// The fields of struct perf_event_attr this reader uses (offsets in perf_data.cpp).
struct EventAttr {
  uint32_t type = 0;
  uint64_t config = 0;
  uint64_t sample_period = 0;  ///< offset 16: the period, or the frequency in Hz when freq() is set
  uint64_t sample_type = 0;
  uint64_t read_format = 0;
  uint64_t flags = 0;  ///< the bitfield word at offset 40 (disabled, inherit, … sample_id_all = bit 18)
  uint64_t branch_sample_type = 0;
  uint64_t sample_regs_user = 0;
  uint32_t sample_stack_user = 0;
  std::vector<uint64_t> ids;  ///< sample ids of this attribute (the attr's ids section)
  bool sample_id_all() const { return (flags >> 18) & 1; }
  bool freq() const { return (flags >> 10) & 1; }
  /// PERF_TYPE_SOFTWARE cpu-clock / task-clock: the period counts nanoseconds.
  bool clock() const { return type == 1 && (config == 0 || config == 1); }
};

/// A decoded PERF_RECORD_SAMPLE. Pointers alias the record's bytes.
struct RawSample {
  uint64_t ip = 0, time = 0, period = 0, id = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  uint16_t misc = 0;
  const uint64_t* callchain = nullptr;  ///< unaligned-safe only on x86 (records are 8-aligned)
  uint64_t callchain_nr = 0;
  uint64_t regs_abi = 0;  ///< 0: no user registers (PERF_SAMPLE_REGS_ABI_NONE)
  uint64_t regs_mask = 0;
  const uint8_t* regs = nullptr;  ///< popcount(regs_mask) little-endian u64 values
  uint32_t regs_count = 0;
  const uint8_t* stack = nullptr;
  uint64_t stack_size = 0;  ///< bytes requested (sample_stack_user)
  uint64_t stack_dyn_size = 0;  ///< bytes really copied (<= stack_size)
};

/// A decoded MMAP or MMAP2 record.
struct RawMmap {
  uint32_t pid = 0, tid = 0;
  uint64_t start = 0, len = 0, pgoff = 0;
  uint32_t prot = 0;  ///< PROT_* (MMAP2); MMAP records: PROT_EXEC unless misc has MMAP_DATA
  ModuleId build_id;   ///< MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID
  std::string path;
  uint64_t time = 0;  ///< from the sample_id trailer; 0 when absent
  /// The mapped file's device and inode as /proc/PID/maps lists them; 0: unknown. Compared with
  /// the file opened only for a live process (ModuleTracker::set_live).
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
};

struct RawTask {  ///< FORK / EXIT
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
};

struct RawComm {
  uint32_t pid = 0, tid = 0;
  bool exec = false;
  std::string comm;
  uint64_t time = 0;
};

/// Decoders for records as the kernel writes them (perf.data data section and
/// mmap ring buffers have the same layout). `rec` points at the perf_event_header;
/// `len` is header.size. Every field is bounds-checked; errors name the field.
class RecordDecoder {
 public:
  /// Validates `attrs` (at least one; sample_type supported) and computes id positions.
  Status init(std::vector<EventAttr> attrs);
  const std::vector<EventAttr>& attrs() const { return attrs_; }
  /// The attribute of a sample record (by id when there are several attributes).
  Result<const EventAttr*> attr_of_sample(const uint8_t* rec, size_t len) const;
  Status decode_sample(const uint8_t* rec, size_t len, RawSample* out) const;
  Status decode_mmap(const uint8_t* rec, size_t len, RawMmap* out) const;
  Status decode_task(const uint8_t* rec, size_t len, RawTask* out) const;
  Status decode_comm(const uint8_t* rec, size_t len, RawComm* out) const;
  /// Lost count of a LOST or LOST_SAMPLES record.
  Status decode_lost(const uint8_t* rec, size_t len, uint64_t* lost) const;
  /// Time of any record: the sample's TIME, or the sample_id trailer's; 0 when absent.
  uint64_t record_time(const uint8_t* rec, size_t len) const;

 private:
  std::vector<EventAttr> attrs_;
  std::map<uint64_t, size_t> by_id_;
  int sample_id_pos_ = -1;  ///< u64 index of the id in a sample record body; -1: none
  int trailer_id_back_ = -1;  ///< u64 index from the end of a non-sample record; -1: none
  uint32_t trailer_size_ = 0;  ///< bytes of the sample_id trailer (sample_id_all)
  int trailer_time_back_ = -1;  ///< u64 index of time counted from the record's end
};

/// One record of the data section (offset into the file and its header fields).
struct RecordRef {
  uint64_t offset = 0;
  uint64_t time = 0;
  uint32_t type = 0;
  uint16_t misc = 0;
  uint16_t size = 0;
  /// A sample's pid and tid, decoded when the index was built (decode_sample, the data section read
  /// once in order; PerfData::sample_refused says whether it refused the sample).
  uint32_t pid = 0, tid = 0;
};
static_assert(sizeof(RecordRef) == 32, "the index of 2^26 records stays within 2 GiB");

/// What a perf.data file that ends early lacks (all zero for a complete file).
struct Truncation {
  uint64_t data_missing = 0;   ///< bytes of the data section (header's data.size) past the end of the file
  uint64_t data_size = 0;      ///< the data section's size as the header gives it
  uint64_t partial_bytes = 0;  ///< bytes of a partial last record that were dropped
  uint64_t features_missing = 0;  ///< feature sections (build-ids, cmdline, arch...) cut off by the end
  bool any() const { return data_missing != 0 || partial_bytes != 0 || features_missing != 0; }
};

/// The most records a data section may hold (PerfData::parse, RecordStream).
constexpr size_t kMaxRecords = size_t{1} << 26;

/// One step of the walk of a data section in file order (PerfData::parse's index and RecordStream
/// share it): kRecord, or kCut when the file ends inside the record (cut->partial_bytes set).
enum class WalkStep : uint8_t { kRecord, kCut };
/// The header of the record at `off` (8 bytes at `head`; unread, may be null, when fewer than 8
/// bytes are left before `end`, the data section's end within the file): its size and type checked,
/// r's offset, type, misc and size set. Errors name the offset and the value.
Result<WalkStep> walk_head(const uint8_t* head, uint64_t off, uint64_t end, Truncation* cut, RecordRef* r);
/// The bytes from record `r` (its r.size bytes at `rec`) to the next: its size and an AUXTRACE
/// record's trailing data, checked against `end`.
Result<WalkStep> walk_step(const uint8_t* rec, const RecordRef& r, uint64_t end, Truncation* cut, uint64_t* step);
/// r's time and, for a sample, its pid and tid; false when decode_sample refuses the sample.
bool index_fields(const RecordDecoder& d, const uint8_t* rec, RecordRef* r);

/// Where a perf.data file's records are read from: bytes in memory (a buffer, a fuzz input), or
/// the file itself through pread into a few reused windows (doc/perf.md "Reading the records").
/// The file way touches no page of a mapping: on a VM where each page fault and each first touch
/// of a mapped page costs microseconds, reading ~500 MB of records through a mapping cost 230-300
/// ms of CPU, through pread into a reused buffer ~50 ms (doc/benchmarks.md, issue 37). Records are
/// read in data-section order and then in time order, which perf writes in rounds of per-CPU runs:
/// kWindows windows of kWindowBytes serve both: a miss that continues a window's run or one of the
/// last kWindows accesses fills a window; a small record that misses them elsewhere (the mmap and comm records
/// between the samples, met again in time order) is read alone, and an access pattern the
/// windows do not serve (more interleaved runs than windows) record by record, so that the bytes
/// read stay within a few times the bytes asked for. Not thread-safe (the windows are reused).
class RecordSource {
 public:
  static constexpr size_t kWindowBytes = size_t{256} << 10;
  static constexpr size_t kWindows = 8;
  static constexpr size_t kSmallRecord = 1024;  ///< a miss below this size reads the record alone
  /// A record at most this far past the end of a window or of a recent access continues its run
  /// (the records of other types between two samples of one run are skipped in time order).
  static constexpr size_t kRunGap = 4096;
  RecordSource() = default;
  RecordSource(const uint8_t* bytes, size_t len) : bytes_(bytes), len_(len) {}
  /// Reads through `fd` (not owned: it must stay open while this source is used), a file of `len`
  /// bytes when it was opened.
  RecordSource(int fd, size_t len) : len_(len), fd_(fd) {}
  /// [off, off + n) (n <= 65536 + 16), valid until the next call; nullptr when the file no longer
  /// holds those bytes (it shrank or changed while read) or a read failed (why()).
  const uint8_t* at(uint64_t off, size_t n);
  /// Why the last at() that failed did: the read's error, or the file ending before the bytes.
  std::string why() const;
  bool from_file() const { return fd_ >= 0; }
  int fd() const { return fd_; }  ///< the file (not owned), -1 for bytes in memory
  const uint8_t* bytes() const { return bytes_; }  ///< the bytes in memory (nullptr for a file)
  /// Bytes read from the file, and pread calls (for tests and benchmarks).
  uint64_t bytes_read() const { return read_; }
  uint64_t reads() const { return calls_; }

 private:
  bool fill(std::vector<uint8_t>& buf, uint64_t off, size_t want, size_t need, size_t* got);
  const uint8_t* bytes_ = nullptr;
  size_t len_ = 0;
  int fd_ = -1;
  struct Window {
    std::vector<uint8_t> buf;
    uint64_t off = 0;
    size_t len = 0;
    uint64_t used = 0;  ///< the access count when last used (LRU)
  };
  std::vector<Window> windows_;
  std::vector<uint8_t> exact_;  ///< one record, when windows do not pay
  uint64_t exact_off_ = 0;
  size_t exact_len_ = 0;
  std::pair<uint64_t, uint64_t> recent_[kWindows] = {};  ///< [off, end) of the last accesses
  int error_ = 0;                         ///< errno of the last failed read, 0: the file ended
  uint64_t tick_ = 0, asked_ = 0, read_ = 0, calls_ = 0, misses_ = 0;
};

/// A perf.data file (`perf record` output, file mode "PERFILE2", host byte order
/// little-endian). Pipe-mode files, big-endian files and compressed records
/// (perf record -z) are refused with a message saying so. A file that ends inside
/// its data section or its feature sections (a copy cut short, a full disk) is read
/// up to its last complete record and truncation() says what is missing; one that
/// ends inside the header or the attributes is refused (SPROV_ERR_TRUNCATED).
class PerfData {
 public:
  /// Parses header, attributes, features and the record index from `bytes`
  /// (not copied; must outlive this object). Bounded: at most 2^26 records.
  static Result<PerfData> parse(const uint8_t* bytes, size_t len);
  /// The same, the records read through `fd` (RecordSource; it must stay open while this object
  /// is used), everything else from `bytes`, the file mapped (its header, attributes and feature
  /// sections: a few pages).
  /// `index` false: no record index (records() empty, truncation().partial_bytes unknown): the
  /// records are read once by a RecordStream.
  static Result<PerfData> parse(const uint8_t* bytes, size_t len, int fd, bool index = true);
  /// The bytes of a record of records() (valid until the next call), nullptr when the file no
  /// longer holds them. Not thread-safe.
  const uint8_t* record(const RecordRef& r) const { return source_.at(r.offset, r.size); }
  const uint8_t* record_at(uint64_t offset, size_t size) const { return source_.at(offset, size); }
  const RecordSource& source() const { return source_; }
  /// decode_sample refused the sample record at `offset` when the index was built (decode it
  /// again for the message).
  bool sample_refused(uint64_t offset) const {
    return std::binary_search(refused_.begin(), refused_.end(), offset);
  }

  const RecordDecoder& decoder() const { return decoder_; }
  /// Records in data-section order, stably sorted by time (as perf script orders them).
  const std::vector<RecordRef>& records() const { return records_; }
  const uint8_t* bytes() const { return bytes_; }  ///< the whole file (records: record())
  /// HEADER_BUILD_ID: path -> build-id (the last one wins for a path).
  const std::map<std::string, ModuleId>& build_ids() const { return build_ids_; }
  const std::string& cmdline() const { return cmdline_; }  ///< HEADER_CMDLINE, space-joined
  const std::string& arch() const { return arch_; }        ///< HEADER_ARCH ("x86_64"), "" if absent
  const std::string& hostname() const { return hostname_; }
  /// What the file lacks when it ends early (see Truncation); any() is false for a complete file.
  const Truncation& truncation() const { return truncation_; }
  /// The data section: its offset, and its end within the file.
  uint64_t data_offset() const { return data_off_; }
  uint64_t data_end() const { return data_end_; }

 private:
  Status parse_features(uint64_t feat_offset, const uint64_t bits[4]);
  mutable RecordSource source_;
  const uint8_t* bytes_ = nullptr;
  size_t len_ = 0;
  RecordDecoder decoder_;
  std::vector<RecordRef> records_;
  std::vector<uint64_t> refused_;  ///< offsets of the samples decode_sample refused, ascending
  std::map<std::string, ModuleId> build_ids_;
  std::string cmdline_, arch_, hostname_;
  Truncation truncation_;
  uint64_t data_off_ = 0, data_end_ = 0;
};

}  // namespace stackprov::perf
