// SPDX-License-Identifier: Apache-2.0
// perf.data reader: file header, attributes, feature sections and the decoding of perf_event records.
#include "perf/perf_data.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace stackprov::perf {

namespace {

// tools/perf/util/header.h: struct perf_file_header is 104 bytes:
// magic, size, attr_size, attrs{offset,size}, data{offset,size}, event_types{offset,size}, features[4].
constexpr size_t kFileHeaderSize = 104;
constexpr uint64_t kMagic2 = 0x32454c4946524550ull;         // "PERFILE2" read little-endian
constexpr uint64_t kMagic2Swapped = 0x50455246494c4532ull;  // written by a big-endian host
constexpr uint64_t kMagic1 = 0x454c494646524550ull;         // "PERFFILE" (format version 1)
constexpr size_t kAttrMinSize = 64;     // PERF_ATTR_SIZE_VER0
constexpr size_t kAttrRegsOffset = 80;  // sample_regs_user (PERF_ATTR_SIZE_VER3 = 96 includes it)
constexpr size_t kMaxAttrs = 4096;
constexpr size_t kMaxIdsPerAttr = 1u << 20;
// HEADER_* feature bits (tools/perf/util/header.h).
constexpr int kFeatBuildId = 2, kFeatHostname = 3, kFeatArch = 6, kFeatCmdline = 11;
constexpr uint16_t kMiscBuildIdSize = 1u << 15;  // PERF_RECORD_MISC_BUILD_ID_SIZE

uint64_t ld64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

/// Bounds-checked reader over one record or section. The checks are inline, the messages built
/// out of line (decode_sample reads ~15 fields a sample); the checks forced inline (GCC 12 left
/// u64 a call: 1.9-3.1% of a native json perf-import).
struct Cursor {
  const uint8_t* p;
  size_t len;
  size_t at = 0;
  const char* what;
  size_t remaining() const { return len - at; }
  [[gnu::always_inline]] Status need(size_t n, const char* field) const {
    if (n > remaining()) [[unlikely]] return short_of(n, field);
    return {};
  }
  [[gnu::always_inline]] Status u64(uint64_t* v, const char* field) {
    if (8 > remaining()) [[unlikely]] return short_of(8, field);
    *v = ld64(p + at);
    at += 8;
    return {};
  }
  [[gnu::always_inline]] Status u32(uint32_t* v, const char* field) {
    if (4 > remaining()) [[unlikely]] return short_of(4, field);
    *v = ld32(p + at);
    at += 4;
    return {};
  }
  [[gnu::always_inline]] Status skip(uint64_t n, const char* field) {
    if (n > remaining()) [[unlikely]] return skip_past(n, field);
    at += static_cast<size_t>(n);
    return {};
  }
  [[gnu::cold, gnu::noinline]] Error short_of(size_t n, const char* field) const {
    return make_error(SPROV_ERR_TRUNCATED, "%s: field %s needs %zu bytes at offset %zu, %zu left", what, field, n,
                      at, remaining());
  }
  [[gnu::cold, gnu::noinline]] Error skip_past(uint64_t n, const char* field) const {
    return make_error(SPROV_ERR_TRUNCATED, "%s: field %s of %llu bytes at offset %zu, %zu left", what, field,
                      static_cast<unsigned long long>(n), at, remaining());
  }
};

#define SPROV_TRY(expr)                  \
  do {                                   \
    if (Status st_ = (expr); !st_.ok()) return st_; \
  } while (0)

/// Size of a PERF_SAMPLE_READ value for `read_format` (perf_event.h, struct read_format).
Result<uint64_t> read_value_size(Cursor& c, uint64_t rf) {
  const uint64_t extra = ((rf & 1) ? 8 : 0) + ((rf & 2) ? 8 : 0);  // TOTAL_TIME_ENABLED / RUNNING
  const uint64_t per = 8 + ((rf & 4) ? 8 : 0) + ((rf & 16) ? 8 : 0);  // value, ID, LOST
  if (!(rf & 8)) return per + extra;                                 // not PERF_FORMAT_GROUP
  if (c.remaining() < 8) return make_error(SPROV_ERR_TRUNCATED, "%s: read_format group nr", c.what);
  const uint64_t nr = ld64(c.p + c.at);
  if (nr > c.remaining() / per)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: read group of %llu values exceeds the record", c.what,
                      static_cast<unsigned long long>(nr));
  return 8 + extra + nr * per;
}

std::string bounded_string(const uint8_t* p, size_t max) {
  size_t n = 0;
  while (n < max && p[n] != 0) n++;
  return std::string(reinterpret_cast<const char*>(p), n);
}

int trailer_fields_before_time(uint64_t st) { return (st & kSampleTid) ? 1 : 0; }

}  // namespace

// ---------------------------------------------------------------- RecordDecoder

Status RecordDecoder::init(std::vector<EventAttr> attrs) {
  if (attrs.empty()) return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: no event attributes");
  const uint64_t st0 = attrs[0].sample_type;
  constexpr uint64_t kPositional = kSampleIp | kSampleTid | kSampleTime | kSampleAddr | kSampleId |
                                   kSampleStreamId | kSampleCpu | kSampleIdentifier;
  for (size_t i = 0; i < attrs.size(); i++) {
    const EventAttr& a = attrs[i];
    if ((a.sample_type & kPositional) != (st0 & kPositional) && !(a.sample_type & st0 & kSampleIdentifier))
      return make_error(SPROV_ERR_UNSUPPORTED,
                        "perf.data: attribute %zu has sample_type 0x%llx, attribute 0 has 0x%llx: sample ids "
                        "cannot be located",
                        i, static_cast<unsigned long long>(a.sample_type), static_cast<unsigned long long>(st0));
    if (a.sample_regs_user & ~((1ull << 24) - 1))
      return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: sample_regs_user 0x%llx has non-x86_64 bits",
                        static_cast<unsigned long long>(a.sample_regs_user));
    for (uint64_t id : a.ids) by_id_[id] = i;
  }
  if (st0 & kSampleIdentifier) {
    sample_id_pos_ = 0;
  } else if (st0 & kSampleId) {
    sample_id_pos_ = std::popcount(st0 & (kSampleIp | kSampleTid | kSampleTime | kSampleAddr));
  }
  if (attrs[0].sample_id_all()) {
    const uint64_t t = st0 & (kSampleTid | kSampleTime | kSampleId | kSampleStreamId | kSampleCpu | kSampleIdentifier);
    trailer_size_ = 8 * std::popcount(t);
    if (st0 & kSampleIdentifier) trailer_id_back_ = 1;
    else if (st0 & kSampleId)
      trailer_id_back_ = static_cast<int>(trailer_size_ / 8) - std::popcount(t & (kSampleTid | kSampleTime));
    if (st0 & kSampleTime) trailer_time_back_ = static_cast<int>(trailer_size_ / 8) - trailer_fields_before_time(st0);
  }
  attrs_ = std::move(attrs);
  return {};
}

Result<const EventAttr*> RecordDecoder::attr_of_sample(const uint8_t* rec, size_t len) const {
  if (attrs_.size() == 1 || sample_id_pos_ < 0) return &attrs_[0];
  const size_t at = 8 + 8 * static_cast<size_t>(sample_id_pos_);
  if (at + 8 > len) return make_error(SPROV_ERR_TRUNCATED, "sample record of %zu bytes has no id", len);
  const uint64_t id = ld64(rec + at);
  auto it = by_id_.find(id);
  if (it == by_id_.end())
    return make_error(SPROV_ERR_BAD_FORMAT, "sample id %llu matches no attribute", static_cast<unsigned long long>(id));
  return &attrs_[it->second];
}

Status RecordDecoder::decode_sample(const uint8_t* rec, size_t len, RawSample* out) const {
  auto attr_r = attr_of_sample(rec, len);
  if (!attr_r.ok()) return attr_r.error();
  const EventAttr& a = *attr_r.value();
  const uint64_t st = a.sample_type;
  if (len < 8) return make_error(SPROV_ERR_TRUNCATED, "sample record of %zu bytes", len);
  Cursor c{rec, len, 8, "sample"};
  RawSample s;
  s.misc = ld16(rec + 4);
  uint64_t v = 0;
  if (st & kSampleIdentifier) SPROV_TRY(c.u64(&s.id, "identifier"));
  if (st & kSampleIp) SPROV_TRY(c.u64(&s.ip, "ip"));
  if (st & kSampleTid) {
    SPROV_TRY(c.u32(&s.pid, "pid"));
    SPROV_TRY(c.u32(&s.tid, "tid"));
  }
  if (st & kSampleTime) SPROV_TRY(c.u64(&s.time, "time"));
  if (st & kSampleAddr) SPROV_TRY(c.u64(&v, "addr"));
  if (st & kSampleId) SPROV_TRY(c.u64(&s.id, "id"));
  if (st & kSampleStreamId) SPROV_TRY(c.u64(&v, "stream_id"));
  if (st & kSampleCpu) {
    SPROV_TRY(c.u32(&s.cpu, "cpu"));
    SPROV_TRY(c.skip(4, "cpu.res"));
  }
  if (st & kSamplePeriod) SPROV_TRY(c.u64(&s.period, "period"));
  if (st & kSampleRead) {
    auto n = read_value_size(c, a.read_format);
    if (!n.ok()) return n.error();
    SPROV_TRY(c.skip(n.value(), "read"));
  }
  if (st & kSampleCallchain) {
    SPROV_TRY(c.u64(&s.callchain_nr, "callchain.nr"));
    if (s.callchain_nr > c.remaining() / 8)
      return make_error(SPROV_ERR_BAD_FORMAT, "sample: callchain.nr %llu exceeds the record (%zu bytes left)",
                        static_cast<unsigned long long>(s.callchain_nr), c.remaining());
    s.callchain = reinterpret_cast<const uint64_t*>(rec + c.at);
    c.at += 8 * s.callchain_nr;
  }
  if (st & kSampleRaw) {
    uint32_t n = 0;
    SPROV_TRY(c.u32(&n, "raw.size"));
    SPROV_TRY(c.skip(n, "raw.data"));
  }
  if (st & kSampleBranchStack) {
    uint64_t nr = 0;
    SPROV_TRY(c.u64(&nr, "branch_stack.nr"));
    if (a.branch_sample_type & (1ull << 17)) SPROV_TRY(c.skip(8, "branch_stack.hw_idx"));  // BRANCH_HW_INDEX
    if (nr > c.remaining() / 24)
      return make_error(SPROV_ERR_BAD_FORMAT, "sample: branch_stack.nr %llu exceeds the record",
                        static_cast<unsigned long long>(nr));
    c.at += 24 * nr;
  }
  if (st & kSampleRegsUser) {
    SPROV_TRY(c.u64(&s.regs_abi, "regs_user.abi"));
    if (s.regs_abi != 0) {
      s.regs_mask = a.sample_regs_user;
      s.regs_count = static_cast<uint32_t>(std::popcount(s.regs_mask));
      SPROV_TRY(c.need(8ull * s.regs_count, "regs_user.regs"));
      s.regs = rec + c.at;
      c.at += 8ull * s.regs_count;
    }
  }
  if (st & kSampleStackUser) {
    SPROV_TRY(c.u64(&s.stack_size, "stack_user.size"));
    if (s.stack_size != 0) {
      SPROV_TRY(c.skip(s.stack_size, "stack_user.data"));
      s.stack = rec + c.at - s.stack_size;
      SPROV_TRY(c.u64(&s.stack_dyn_size, "stack_user.dyn_size"));
      if (s.stack_dyn_size > s.stack_size)
        return make_error(SPROV_ERR_BAD_FORMAT, "sample: stack_user.dyn_size %llu exceeds size %llu",
                          static_cast<unsigned long long>(s.stack_dyn_size),
                          static_cast<unsigned long long>(s.stack_size));
    }
  }
  *out = s;
  return {};
}

uint64_t RecordDecoder::record_time(const uint8_t* rec, size_t len) const {
  if (len < 8) return 0;
  const uint32_t type = ld32(rec);
  if (type == kRecordSample) {
    auto a = attr_of_sample(rec, len);
    if (!a.ok()) return 0;
    const uint64_t st = a.value()->sample_type;
    if (!(st & kSampleTime)) return 0;
    const size_t at = 8 + 8 * std::popcount(st & (kSampleIdentifier | kSampleIp | kSampleTid));
    return at + 8 <= len ? ld64(rec + at) : 0;
  }
  if (type >= 64 || trailer_time_back_ < 0 || len < 8 + trailer_size_) return 0;
  return ld64(rec + len - 8 * static_cast<size_t>(trailer_time_back_));
}

Status RecordDecoder::decode_mmap(const uint8_t* rec, size_t len, RawMmap* out) const {
  const uint32_t type = len >= 8 ? ld32(rec) : 0;
  const uint16_t misc = len >= 8 ? ld16(rec + 4) : 0;
  const size_t fixed = type == kRecordMmap2 ? 8 + 8 + 24 + 24 + 8 : 8 + 8 + 24;
  if (len < fixed + trailer_size_ + 1)
    return make_error(SPROV_ERR_TRUNCATED, "mmap record of %zu bytes (needs %zu)", len, fixed + trailer_size_ + 1);
  RawMmap m;
  m.pid = ld32(rec + 8);
  m.tid = ld32(rec + 12);
  m.start = ld64(rec + 16);
  m.len = ld64(rec + 24);
  m.pgoff = ld64(rec + 32);
  if (type == kRecordMmap2) {
    if (misc & kMiscMmapBuildId) {
      const uint8_t n = rec[40];
      if (n > 20) return make_error(SPROV_ERR_BAD_FORMAT, "mmap2 record: build_id_size %u exceeds 20", n);
      m.build_id = ModuleId::from_bytes(rec + 44, n);
    }
    m.prot = ld32(rec + 64);
  } else {
    m.prot = (misc & kMiscMmapData) ? 1 : 5;  // PROT_READ | PROT_EXEC for code mappings
  }
  m.path = bounded_string(rec + fixed, len - fixed - trailer_size_);
  if (m.start + m.len < m.start)
    return make_error(SPROV_ERR_BAD_FORMAT, "mmap record: range 0x%llx+0x%llx wraps", static_cast<unsigned long long>(m.start),
                      static_cast<unsigned long long>(m.len));
  m.time = record_time(rec, len);
  *out = std::move(m);
  return {};
}

Status RecordDecoder::decode_task(const uint8_t* rec, size_t len, RawTask* out) const {
  if (len < 8 + 24) return make_error(SPROV_ERR_TRUNCATED, "fork/exit record of %zu bytes (needs 32)", len);
  out->pid = ld32(rec + 8);
  out->ppid = ld32(rec + 12);
  out->tid = ld32(rec + 16);
  out->ptid = ld32(rec + 20);
  out->time = ld64(rec + 24);
  return {};
}

Status RecordDecoder::decode_comm(const uint8_t* rec, size_t len, RawComm* out) const {
  if (len < 16 + trailer_size_ + 1) return make_error(SPROV_ERR_TRUNCATED, "comm record of %zu bytes", len);
  out->pid = ld32(rec + 8);
  out->tid = ld32(rec + 12);
  out->exec = (ld16(rec + 4) & kMiscCommExec) != 0;
  out->comm = bounded_string(rec + 16, std::min<size_t>(len - 16 - trailer_size_, 16));
  out->time = record_time(rec, len);
  return {};
}

Status RecordDecoder::decode_lost(const uint8_t* rec, size_t len, uint64_t* lost) const {
  const uint32_t type = len >= 8 ? ld32(rec) : 0;
  const size_t at = type == kRecordLost ? 16 : 8;  // LOST: {id, lost}; LOST_SAMPLES: {lost}
  if (len < at + 8) return make_error(SPROV_ERR_TRUNCATED, "lost record of %zu bytes", len);
  *lost = ld64(rec + at);
  return {};
}

// ---------------------------------------------------------------- RecordSource

bool RecordSource::fill(std::vector<uint8_t>& buf, uint64_t off, size_t want, size_t need, size_t* got) {
  if (buf.size() < want) buf.resize(want);
  size_t have = 0;
  error_ = 0;
  while (have < want) {
    const ssize_t r = pread(fd_, buf.data() + have, want - have, static_cast<off_t>(off + have));
    calls_++;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) error_ = errno;
    if (r <= 0) break;  // an error or the end of the file
    have += static_cast<size_t>(r);
  }
  read_ += have;
  *got = have;
  return have >= need;
}

std::string RecordSource::why() const {
  if (error_ != 0) return std::string("read error: ") + strerror(error_);
  return "the file ends before them (it shrank or changed while read)";
}

const uint8_t* RecordSource::at(uint64_t off, size_t n) {
  if (off > len_ || n > len_ - off) {
    error_ = 0;
    return nullptr;
  }
  if (fd_ < 0) return bytes_ + off;
  tick_++;
  asked_ += n;
  // In order after one of the last kWindows accesses (a run of records, wherever it is served from).
  bool continues = false;
  for (const auto& [o, e] : recent_) continues |= e != 0 && off >= o && off <= e + kRunGap;
  recent_[tick_ % kWindows] = {off, off + n};
  auto inside = [&](uint64_t start, size_t len) { return off >= start && off - start <= len && n <= len - (off - start); };
  if (exact_len_ != 0 && inside(exact_off_, exact_len_)) return exact_.data() + (off - exact_off_);
  if (windows_.empty()) windows_.resize(kWindows);
  Window* lru = &windows_[0];
  for (Window& w : windows_) {
    if (inside(w.off, w.len)) {
      w.used = tick_;
      return w.buf.data() + (off - w.off);
    }
    if (w.len != 0 && off >= w.off && off <= w.off + w.len + kRunGap) continues = true;  // its run goes on
    if (w.used < lru->used) lru = &w;
  }
  // A miss. Windows pay when the accesses that follow fall inside them; a small record away from
  // every run, or any record once the bytes read pass four times those asked for (more
  // interleaved runs than windows), is read alone.
  misses_++;
  size_t got = 0;
  if ((n < kSmallRecord && !continues) || (misses_ > 64 && read_ > 4 * asked_)) {
    exact_len_ = 0;
    if (!fill(exact_, off, n, n, &got)) return nullptr;
    exact_off_ = off;
    exact_len_ = n;
    return exact_.data();
  }
  uint64_t want = std::min<uint64_t>(std::max(kWindowBytes, n), len_ - off);
  for (const Window& w : windows_)  // not into bytes another window holds (read again for nothing)
    if (&w != lru && w.len != 0 && w.off > off && w.off - off < want && w.off - off >= n) want = w.off - off;
  lru->len = 0;
  if (!fill(lru->buf, off, static_cast<size_t>(want), n, &got)) return nullptr;
  lru->off = off;
  lru->len = got;
  lru->used = tick_;
  return lru->buf.data();
}

// ---------------------------------------------------------------- the walk of the data section

Result<WalkStep> walk_head(const uint8_t* head, uint64_t off, uint64_t end, Truncation* cut, RecordRef* r) {
  if (end - off < 8) {
    if (cut->data_missing != 0) {  // the file ends inside this record's header
      cut->partial_bytes = end - off;
      return WalkStep::kCut;
    }
    return make_error(SPROV_ERR_TRUNCATED, "perf.data: record header at 0x%llx cut off by the data section end",
                      static_cast<unsigned long long>(off));
  }
  r->offset = off;
  r->type = ld32(head);
  r->misc = ld16(head + 4);
  r->size = ld16(head + 6);
  if (r->size >= 8 && r->size > end - off && cut->data_missing != 0) {  // the file ends inside this record
    cut->partial_bytes = end - off;
    return WalkStep::kCut;
  }
  if (r->size < 8 || r->size > end - off)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: record at 0x%llx (type %u) has size %u (%llu bytes left)",
                      static_cast<unsigned long long>(off), r->type, r->size,
                      static_cast<unsigned long long>(end - off));
  if (r->type == kRecordCompressed)
    return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: compressed records (perf record -z) at 0x%llx are not read",
                      static_cast<unsigned long long>(off));
  return WalkStep::kRecord;
}

Result<WalkStep> walk_step(const uint8_t* rec, const RecordRef& r, uint64_t end, Truncation* cut, uint64_t* step) {
  const uint64_t off = r.offset;
  *step = r.size;
  if (r.type == kRecordAuxtrace) {  // struct perf_record_auxtrace: u64 size of the trailing aux data
    if (r.size < 16) return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: auxtrace record at 0x%llx too small",
                                       static_cast<unsigned long long>(off));
    const uint64_t aux = ld64(rec + 8);
    if (aux > end - off - r.size && cut->data_missing != 0 && aux <= cut->data_missing + (end - off - r.size)) {
      cut->partial_bytes = end - off;  // the file ends inside the trailing aux data
      return WalkStep::kCut;
    }
    if (aux > end - off - r.size)
      return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: auxtrace data of %llu bytes at 0x%llx exceeds the data section",
                        static_cast<unsigned long long>(aux), static_cast<unsigned long long>(off));
    *step += aux;
  }
  return WalkStep::kRecord;
}

bool index_fields(const RecordDecoder& d, const uint8_t* rec, RecordRef* r) {
  r->time = d.record_time(rec, r->size);
  if (r->type != kRecordSample) return true;
  RawSample smp;
  if (!d.decode_sample(rec, r->size, &smp).ok()) return false;
  r->pid = smp.pid;
  r->tid = smp.tid;
  return true;
}

// ---------------------------------------------------------------- PerfData

Result<PerfData> PerfData::parse(const uint8_t* bytes, size_t len) { return parse(bytes, len, -1); }

Result<PerfData> PerfData::parse(const uint8_t* bytes, size_t len, int fd, bool index) {
  if (len < 16) return make_error(SPROV_ERR_TRUNCATED, "perf.data: %zu bytes, too short for a header", len);
  const uint64_t magic = ld64(bytes);
  if (magic == kMagic2Swapped)
    return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: big-endian file (magic \"2ELIFREP\"): written on a "
                                             "big-endian host; only little-endian x86_64 files are read");
  if (magic == kMagic1) return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: format version 1 (\"PERFFILE\") is not read");
  if (magic != kMagic2)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: bad magic 0x%016llx (expected \"PERFILE2\")",
                      static_cast<unsigned long long>(magic));
  const uint64_t hsize = ld64(bytes + 8);
  if (hsize == 16)
    return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: pipe-mode file (perf record -o -): not read; record to a file");
  if (len < kFileHeaderSize)
    return make_error(SPROV_ERR_TRUNCATED, "perf.data: the file (%zu bytes) ends inside the %zu-byte header", len,
                      kFileHeaderSize);
  if (hsize < kFileHeaderSize)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: header size %llu (file %zu bytes), expected %zu",
                      static_cast<unsigned long long>(hsize), len, kFileHeaderSize);
  const uint64_t attr_size = ld64(bytes + 16);
  const uint64_t attrs_off = ld64(bytes + 24), attrs_size = ld64(bytes + 32);
  const uint64_t data_off = ld64(bytes + 40), data_size = ld64(bytes + 48);
  uint64_t feat_bits[4];
  for (int i = 0; i < 4; i++) feat_bits[i] = ld64(bytes + 72 + 8 * i);
  auto in_file = [&](uint64_t off, uint64_t size) { return off <= len && size <= len - off; };
  if (!in_file(attrs_off, attrs_size))
    return make_error(attrs_off <= len ? SPROV_ERR_TRUNCATED : SPROV_ERR_BAD_FORMAT,
                      "perf.data: attrs section 0x%llx+0x%llx exceeds the file (%zu bytes): cut inside the header",
                      static_cast<unsigned long long>(attrs_off), static_cast<unsigned long long>(attrs_size), len);
  // A data section that starts inside the file but ends past it is a file cut short: every
  // complete record is read and truncation_ says what is missing.
  if (data_off > len || data_size > UINT64_MAX - data_off)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: data section 0x%llx+0x%llx exceeds the file (%zu bytes)",
                      static_cast<unsigned long long>(data_off), static_cast<unsigned long long>(data_size), len);
  Truncation cut;
  if (data_size > len - data_off) {
    cut.data_size = data_size;
    cut.data_missing = data_size - (len - data_off);
  }
  if (attr_size < kAttrMinSize + 16 || attr_size > 4096)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: attr_size %llu out of range [%zu, 4096]",
                      static_cast<unsigned long long>(attr_size), kAttrMinSize + 16);
  if (attrs_size % attr_size != 0 || attrs_size / attr_size > kMaxAttrs || attrs_size == 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: attrs section of %llu bytes is not a multiple of attr_size %llu "
                                            "(or holds more than %zu attributes)",
                      static_cast<unsigned long long>(attrs_size), static_cast<unsigned long long>(attr_size), kMaxAttrs);
  std::vector<EventAttr> attrs;
  for (uint64_t off = attrs_off; off < attrs_off + attrs_size; off += attr_size) {
    const uint8_t* a = bytes + off;
    const uint32_t asz = ld32(a + 4);
    if (asz < kAttrMinSize || asz > attr_size - 16)
      return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: attribute %zu: attr.size %u out of range [%zu, %llu]",
                        attrs.size(), asz, kAttrMinSize, static_cast<unsigned long long>(attr_size - 16));
    EventAttr e;
    e.type = ld32(a);
    e.config = ld64(a + 8);
    e.sample_period = ld64(a + 16);
    e.sample_type = ld64(a + 24);
    e.read_format = ld64(a + 32);
    e.flags = ld64(a + 40);
    if (asz >= kAttrRegsOffset) e.branch_sample_type = ld64(a + 72);
    if (asz >= kAttrRegsOffset + 12) {
      e.sample_regs_user = ld64(a + 80);
      e.sample_stack_user = ld32(a + 88);
    }
    const uint64_t ids_off = ld64(a + attr_size - 16), ids_size = ld64(a + attr_size - 8);
    if (!in_file(ids_off, ids_size) || ids_size % 8 != 0 || ids_size / 8 > kMaxIdsPerAttr)
      return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: attribute %zu: ids section 0x%llx+0x%llx is invalid",
                        attrs.size(), static_cast<unsigned long long>(ids_off),
                        static_cast<unsigned long long>(ids_size));
    for (uint64_t i = 0; i < ids_size / 8; i++) e.ids.push_back(ld64(bytes + ids_off + 8 * i));
    attrs.push_back(std::move(e));
  }
  PerfData pd;
  pd.bytes_ = bytes;
  pd.len_ = len;
  pd.source_ = fd >= 0 ? RecordSource(fd, len) : RecordSource(bytes, len);
  if (Status st = pd.decoder_.init(std::move(attrs)); !st.ok()) return st.error();

  pd.data_off_ = data_off;
  pd.data_end_ = data_off + data_size - cut.data_missing;  // within the file
  if (index) {  // the record index
    uint64_t off = data_off;
    const uint64_t end = pd.data_end_;
    while (off < end) {
      const uint8_t* head = end - off >= 8 ? pd.source_.at(off, 8) : nullptr;
      if (end - off >= 8 && head == nullptr)
        return make_error(SPROV_ERR_TRUNCATED, "perf.data: record header at 0x%llx could not be read: %s",
                          static_cast<unsigned long long>(off), pd.source_.why().c_str());
      RecordRef r;
      auto h = walk_head(head, off, end, &cut, &r);
      if (!h.ok()) return h.error();
      if (h.value() == WalkStep::kCut) break;
      const uint8_t* rec = pd.source_.at(off, r.size);
      if (rec == nullptr)
        return make_error(SPROV_ERR_TRUNCATED, "perf.data: record at 0x%llx (%u bytes) could not be read: %s",
                          static_cast<unsigned long long>(off), r.size, pd.source_.why().c_str());
      uint64_t step = 0;
      auto w = walk_step(rec, r, end, &cut, &step);
      if (!w.ok()) return w.error();
      if (w.value() == WalkStep::kCut) break;
      if (pd.records_.size() >= kMaxRecords)
        return make_error(SPROV_ERR_LIMIT, "perf.data: more than %zu records", kMaxRecords);
      if (!index_fields(pd.decoder_, rec, &r)) pd.refused_.push_back(off);  // ascending: read in order
      pd.records_.push_back(r);
      off += step;
    }
  }
  std::stable_sort(pd.records_.begin(), pd.records_.end(),
                   [](const RecordRef& a, const RecordRef& b) { return a.time < b.time; });
  pd.truncation_ = cut;
  // The feature sections follow the data section: none of them is in a file cut inside it.
  if (cut.data_missing != 0) {
    for (int b = 1; b < 256; b++) pd.truncation_.features_missing += (feat_bits[b / 64] >> (b % 64)) & 1;
  } else if (Status st = pd.parse_features(pd.data_end_, feat_bits); !st.ok()) {
    return st.error();
  }
  if (!pd.arch_.empty() && pd.arch_ != "x86_64")
    return make_error(SPROV_ERR_UNSUPPORTED, "perf.data: recorded on arch \"%s\"; only x86_64 is unwound", pd.arch_.c_str());
  return pd;
}

Status PerfData::parse_features(uint64_t feat_offset, const uint64_t bits[4]) {
  size_t n = 0;
  for (int b = 1; b < 256; b++) n += (bits[b / 64] >> (b % 64)) & 1;
  if (n == 0) return {};
  if (feat_offset > len_ || n * 16 > len_ - feat_offset) {  // the file ends inside the feature table
    truncation_.features_missing = n;
    return {};
  }
  size_t idx = 0;
  for (int b = 1; b < 256; b++) {
    if (!((bits[b / 64] >> (b % 64)) & 1)) continue;
    const uint8_t* sec = bytes_ + feat_offset + 16 * idx++;
    const uint64_t off = ld64(sec), size = ld64(sec + 8);
    if (off > len_ || size > len_ - off) {  // cut off by the end of the file (or a bad offset): skipped
      truncation_.features_missing++;
      continue;
    }
    Cursor c{bytes_ + off, static_cast<size_t>(size), 0, "perf.data feature"};
    auto read_string = [&](std::string* out) -> Status {
      uint32_t slen = 0;
      SPROV_TRY(c.u32(&slen, "string.len"));
      SPROV_TRY(c.need(slen, "string"));
      *out = bounded_string(c.p + c.at, slen);
      c.at += slen;
      return {};
    };
    if (b == kFeatHostname) {
      SPROV_TRY(read_string(&hostname_));
    } else if (b == kFeatArch) {
      SPROV_TRY(read_string(&arch_));
    } else if (b == kFeatCmdline) {
      uint32_t nr = 0;
      SPROV_TRY(c.u32(&nr, "cmdline.nr"));
      if (nr > c.remaining() / 4)
        return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: cmdline of %u strings exceeds its section", nr);
      for (uint32_t i = 0; i < nr; i++) {
        std::string s;
        SPROV_TRY(read_string(&s));
        if (!cmdline_.empty()) cmdline_ += ' ';
        cmdline_ += s;
      }
    } else if (b == kFeatBuildId) {
      // struct build_id_event: perf_event_header, pid_t pid, u8 build_id[24] (or data[20] + size), filename.
      while (c.remaining() >= 8) {
        const uint8_t* e = c.p + c.at;
        const uint16_t misc = ld16(e + 4), esize = ld16(e + 6);
        if (esize < 36 || esize > c.remaining())
          return make_error(SPROV_ERR_BAD_FORMAT, "perf.data: build-id entry at 0x%llx has size %u",
                            static_cast<unsigned long long>(off + c.at), esize);
        size_t id_len = 20;
        if (misc & kMiscBuildIdSize) id_len = std::min<size_t>(e[32], 20);
        std::string path = bounded_string(e + 36, esize - 36);
        ModuleId id = ModuleId::from_bytes(e + 12, id_len);
        if (!path.empty()) build_ids_[path] = id;
        c.at += esize;
      }
    }
  }
  return {};
}

}  // namespace stackprov::perf
