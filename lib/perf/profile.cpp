// SPDX-License-Identifier: Apache-2.0
// A sampled profile (perf.data or stackprov capture file): sample index, module lists, per-sample snapshots.
#include "perf/profile.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "arch/x86_64/registers.hpp"
#include "core/mapped_file.hpp"
#include "perf/capture_file.hpp"

namespace stackprov::perf {

namespace {
constexpr int kPerfRegSp = 7;  // arch/x86/include/uapi/asm/perf_regs.h PERF_REG_X86_SP
}  // namespace

void sample_view_from_perf(const RawSample& r, SampleView* out) {
  SampleView v;
  v.time = r.time;
  v.ip = r.ip;
  v.period = r.period;
  v.pid = r.pid;
  v.tid = r.tid;
  v.kernel_mode = (r.misc & kMiscCpumodeMask) == kMiscKernel;
  v.user_regs = r.regs_abi != 0 && r.regs != nullptr;
  v.regs_mask = r.regs_mask;
  v.regs = r.regs;
  v.regs_count = r.regs_count;
  if (v.user_regs && ((r.regs_mask >> kPerfRegSp) & 1)) {
    const int idx = std::popcount(r.regs_mask & ((1ull << kPerfRegSp) - 1));
    std::memcpy(&v.sp, r.regs + 8 * idx, 8);
  }
  v.stack = r.stack;
  v.stack_len = r.stack_dyn_size;
  v.stack_requested = r.stack_size;
  // Callchain: [PERF_CONTEXT_KERNEL, kernel ips…, PERF_CONTEXT_USER, user ips…] (other
  // contexts, e.g. guest, are skipped); entries before any marker go by the sample's mode.
  v.has_callchain = r.callchain != nullptr;
  enum { kNone, kKernel, kUser } part = v.kernel_mode ? kKernel : kUser;
  for (uint64_t i = 0; i < r.callchain_nr && i < 1024; i++) {
    uint64_t ip;
    std::memcpy(&ip, reinterpret_cast<const uint8_t*>(r.callchain) + 8 * i, 8);
    if (ip >= kContextMax) {
      part = ip == kContextKernel ? kKernel : ip == kContextUser ? kUser : kNone;
      continue;
    }
    if (part == kKernel) v.kernel_ips.push_back(ip);
    else if (part == kUser) v.user_ips.push_back(ip);
  }
  *out = std::move(v);
}

/// The state of reading a perf.data file's records in time order (Profile::apply_record).
struct Profile::PerfReader {
  PerfReader(const std::string& root, const PerfData& d, bool open_files)
      : tracker(root, d.build_ids(), open_files ? read_own_vdso() : std::vector<uint8_t>{}, open_files) {}
  ModuleTracker tracker;
  std::map<std::string, uint32_t> comm_ids;
  std::map<uint32_t, uint32_t> tid_comm;
  uint64_t bad = 0;
  std::string first_bad;
  std::unique_ptr<RecordStream> stream;  ///< read once (open(..., stream)); null: the index
  StreamRecord current;                  ///< the record the stream handed out last
  std::string root;
  bool open_files = true;
};

Profile::~Profile() {
  reader_.reset();  // before the file it reads
  if (mapping_ != nullptr) unmap_file(mapping_, len_);
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Profile>> Profile::open(const std::string& path, const std::string& root, bool stream) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return make_error(-errno, "%s: %s", path.c_str(), strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return make_error(-e, "%s: fstat: %s", path.c_str(), strerror(e));
  }
  std::unique_ptr<Profile> p(new Profile());
  p->path_ = path;
  p->len_ = static_cast<size_t>(st.st_size);
  if (p->len_ > 0) {
    auto mapped = map_file(fd, p->len_, false, path);  // guarded: a truncation is no SIGBUS
    if (!mapped) {
      close(fd);
      return std::move(mapped).error();
    }
    void* m = mapped.value();
    p->mapping_ = m;
    p->bytes_ = static_cast<const uint8_t*>(m);
    // A perf.data file's records are read through the fd (perf::RecordSource), unless the guard
    // copied the file into memory.
    if (file_guard() == FileGuard::kSigbus) p->fd_ = fd;
    else close(fd);
  } else {
    close(fd);
  }
  if (Status s = p->index(root, true, stream); !s.ok()) {
    Error e = s.error();
    e.message = path + ": " + e.message;
    return e;
  }
  if (!p->truncation_.empty() && p->format_ == ProfileFormat::kCapture) p->truncation_ = path + ": " + p->truncation_;
  if (p->format_ == ProfileFormat::kCapture && p->fd_ >= 0) {  // read from the mapping only
    close(p->fd_);
    p->fd_ = -1;
  }
  return p;
}

Result<std::unique_ptr<Profile>> Profile::from_bytes(std::vector<uint8_t> bytes, const std::string& root,
                                                     bool open_files, bool stream) {
  std::unique_ptr<Profile> p(new Profile());
  p->owned_ = std::move(bytes);
  p->bytes_ = p->owned_.data();
  p->len_ = p->owned_.size();
  if (Status s = p->index(root, open_files, stream); !s.ok()) return s.error();
  return p;
}

Status Profile::index(const std::string& root, bool open_files, bool stream) {
  const bool capture = len_ >= 8 && std::memcmp(bytes_, kCaptureMagic, 8) == 0;
  if (!capture && stream) {  // read once: the kernel's map met with the records (KernelNamer::set_recorded_text)
    if (Status st = begin_perf_data(root, open_files, false); !st.ok()) return st;
    reader_->stream = std::make_unique<RecordStream>(*perf_, record_order);
    make_kernel_namer(open_files);
    return {};
  }
  Status st = capture ? index_capture() : index_perf_data(root, open_files);
  if (!st.ok()) return st;
  make_kernel_namer(open_files);
  return {};
}

void Profile::make_kernel_namer(bool open_files) {
  // Without files (fuzzing, tests) nothing of this host is read: kernel frames stay unnamed.
  kernel_ = open_files ? std::make_unique<KernelNamer>(kernel_id_, kernel_text_)
                       : std::make_unique<KernelNamer>(kernel_id_, kernel_text_, "", "", "");
}

namespace {
/// perf's name of an event (tools/perf/util/evsel.c: hardware and software event names).
std::string event_name(uint32_t type, uint64_t config) {
  static const char* const kHw[] = {"cycles", "instructions", "cache-references", "cache-misses",
                                    "branches", "branch-misses", "bus-cycles"};
  static const char* const kSw[] = {"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations"};
  if (type == 0 && config < 7) return kHw[config];
  if (type == 1 && config < 5) return kSw[config];
  return "event";
}
}  // namespace

Status Profile::begin_perf_data(const std::string& root, bool open_files, bool index) {
  format_ = ProfileFormat::kPerfData;
  auto pd = PerfData::parse(bytes_, len_, fd_, index);
  if (!pd.ok()) return pd.error();
  perf_ = std::make_unique<PerfData>(std::move(pd).value());
  const PerfData& d = *perf_;
  cmdline_ = d.cmdline();
  const EventAttr& attr0 = d.decoder().attrs()[0];
  regs_mask_ = attr0.sample_regs_user;
  stack_user_ = attr0.sample_stack_user;
  event_.name = event_name(attr0.type, attr0.config);
  event_.clock = attr0.clock();
  (attr0.freq() ? event_.frequency : event_.period) = attr0.sample_period;
  if (auto k = d.build_ids().find("[kernel.kallsyms]"); k != d.build_ids().end()) kernel_id_ = k->second;
  reader_ = std::make_unique<PerfReader>(root, d, open_files);
  reader_->root = root;
  reader_->open_files = open_files;
  vdso_ = reader_->tracker.vdso_bytes();  // this host's, fixed when the tracker is made
  return {};
}

RecordStream::Order Profile::record_order(uint32_t type) {
  switch (type) {  // the records apply_record decodes; the others are not read again
    case kRecordMmap: case kRecordMmap2: case kRecordComm: case kRecordFork: case kRecordExit: case kRecordSample:
      return RecordStream::Order::kSorted;
    case kRecordLost: case kRecordLostSamples:  // counts: added in any order (perf writes one at the end, time 0)
      return RecordStream::Order::kAsRead;
    default:
      return RecordStream::Order::kSkip;
  }
}

Status Profile::apply_record(const RecordRef& r, const uint8_t* rec, bool refused, bool* sample) {
  PerfReader& rd = *reader_;
  *sample = false;
  auto comm_id = [&](const std::string& c) {
    auto [it, fresh] = rd.comm_ids.emplace(c, static_cast<uint32_t>(comms_.size()));
    if (fresh) comms_.push_back(c);
    return it->second;
  };
  auto add_sample = [&](uint64_t time, uint32_t pid, uint32_t tid) {
    SampleRef ref;
    ref.time = time;
    ref.offset = r.offset;
    ref.size = r.size;
    ref.pid = pid;
    ref.tid = tid;
    rd.tracker.on_sample(pid, tid);
    ref.list = rd.tracker.list_for(pid);
    auto c = rd.tid_comm.find(tid);
    ref.comm = c != rd.tid_comm.end() ? c->second : comm_id(":" + std::to_string(tid));
    samples_.push_back(ref);
    *sample = true;
  };
  records_++;
  if (r.type == kRecordSample && !refused) {  // decoded when the index was built
    add_sample(r.time, r.pid, r.tid);
    return {};
  }
  if (record_order(r.type) == RecordStream::Order::kSkip) return {};
  if (rec == nullptr)
    return make_error(SPROV_ERR_TRUNCATED, "perf.data: record at 0x%llx (%u bytes) could not be read again: %s",
                      static_cast<unsigned long long>(r.offset), r.size, perf_->source().why().c_str());
  const PerfData& d = *perf_;
  Status st;
  switch (r.type) {
    case kRecordMmap:
    case kRecordMmap2: {
      RawMmap m;
      st = d.decoder().decode_mmap(rec, r.size, &m);
      // The kernel's map: "[kernel.kallsyms]_text", pid -1, pgoff = `_text` at recording
      // time (tools/perf/util/synthetic-events.c perf_event__synthesize_kernel_mmap).
      if (st.ok() && m.pid == UINT32_MAX && m.path.rfind("[kernel.kallsyms]", 0) == 0) {
        if (kernel_ != nullptr && !kernel_->set_recorded_text(m.pgoff))  // read once: frames were named with the other
          return make_error(SPROV_ERR_LIMIT, "perf.data: the kernel's map at 0x%llx moves _text to 0x%llx after samples "
                            "were named with 0x%llx", static_cast<unsigned long long>(r.offset),
                            static_cast<unsigned long long>(m.pgoff), static_cast<unsigned long long>(kernel_text_));
        kernel_text_ = m.pgoff;
      } else if (st.ok()) {
        rd.tracker.on_mmap(m);
      }
      break;
    }
    case kRecordComm: {
      RawComm c;
      st = d.decoder().decode_comm(rec, r.size, &c);
      if (st.ok()) {
        rd.tracker.on_comm(c);
        rd.tid_comm[c.tid] = comm_id(c.comm);
      }
      break;
    }
    case kRecordFork: {
      RawTask t;
      st = d.decoder().decode_task(rec, r.size, &t);
      if (st.ok()) {
        rd.tracker.on_fork(t);
        auto pc = rd.tid_comm.find(t.ptid);
        if (pc != rd.tid_comm.end() && !rd.tid_comm.count(t.tid)) rd.tid_comm[t.tid] = pc->second;
      }
      break;
    }
    case kRecordExit: {
      RawTask t;
      st = d.decoder().decode_task(rec, r.size, &t);
      if (st.ok()) rd.tracker.on_exit(t);
      break;
    }
    case kRecordLost:
    case kRecordLostSamples: {
      uint64_t n = 0;
      st = d.decoder().decode_lost(rec, r.size, &n);
      if (st.ok()) lost_ += n;
      break;
    }
    case kRecordSample: {  // refused when the index was built: decoded again for the message
      RawSample s;
      st = d.decoder().decode_sample(rec, r.size, &s);
      if (st.ok()) add_sample(s.time, s.pid, s.tid);
      break;
    }
    default:
      break;
  }
  if (!st.ok()) {
    if (rd.stream != nullptr && record_order(r.type) == RecordStream::Order::kAsRead)  // its place in time unknown
      return make_error(SPROV_ERR_LIMIT, "perf.data: malformed record at 0x%llx read out of its time order: %s",
                        static_cast<unsigned long long>(r.offset), st.error().message.c_str());
    if (rd.bad++ == 0) rd.first_bad = st.error().message;
  }
  return {};
}

void Profile::finish_perf_data(const Truncation& cut) {
  PerfReader& rd = *reader_;
  lists_ = rd.tracker.lists();
  vdso_ = rd.tracker.vdso_bytes();
  warnings_ = rd.tracker.warnings();
  if (rd.bad)
    warnings_ += std::to_string(rd.bad) + " malformed record(s) skipped; first: " + rd.first_bad + "\n";
  if (cut.any()) {
    missing_bytes_ = cut.data_missing;
    partial_bytes_ = cut.partial_bytes;
    char line[512];
    if (cut.data_missing != 0)
      snprintf(line, sizeof line,
               "truncated perf.data: the file ends %llu bytes before the end of its data section (%llu bytes); a "
               "partial record of %llu bytes dropped; %llu complete records read (%zu samples); records lost: "
               "unknown (perf.data does not count them)",
               static_cast<unsigned long long>(cut.data_missing), static_cast<unsigned long long>(cut.data_size),
               static_cast<unsigned long long>(cut.partial_bytes), static_cast<unsigned long long>(records_),
               samples_.size());
    else
      snprintf(line, sizeof line,
               "truncated perf.data: the data section is complete (%llu records, %zu samples); the file ends inside "
               "its feature sections (build-ids, command line): %llu of them missing",
               static_cast<unsigned long long>(records_), samples_.size(),
               static_cast<unsigned long long>(cut.features_missing));
    truncation_ = path_.empty() ? std::string(line) : path_ + ": " + line;
  }
}

Status Profile::index_perf_data(const std::string& root, bool open_files) {
  if (Status st = begin_perf_data(root, open_files, true); !st.ok()) return st;
  const PerfData& d = *perf_;
  for (const RecordRef& r : d.records()) {
    const bool refused = r.type == kRecordSample && d.sample_refused(r.offset);
    const bool read = record_order(r.type) != RecordStream::Order::kSkip && (r.type != kRecordSample || refused);
    bool sample = false;
    if (Status st = apply_record(r, read ? d.record(r) : nullptr, refused, &sample); !st.ok()) return st;
  }
  finish_perf_data(d.truncation());
  return {};
}

Result<bool> Profile::next_sample(size_t* i) {
  if (reader_ == nullptr || reader_->stream == nullptr) {  // the index: its next sample
    if (next_ >= samples_.size()) return false;
    *i = next_++;
    return true;
  }
  PerfReader& rd = *reader_;
  RecordStream& rs = *rd.stream;
  while (rs.next(&rd.current)) {
    bool sample = false;
    if (Status st = apply_record(rd.current.ref, rd.current.bytes, rd.current.refused, &sample); !st.ok()) return st.error();
    if (!sample) continue;
    const auto& lists = rd.tracker.lists();  // append-only: the new ones appended (not the vector copied)
    lists_.insert(lists_.end(), lists.begin() + static_cast<std::ptrdiff_t>(std::min(lists_.size(), lists.size())), lists.end());
    *i = samples_.size() - 1;
    next_ = samples_.size();
    return true;
  }
  if (rs.state() == RecordStream::State::kFallback) {
    if (!samples_.empty())
      return make_error(SPROV_ERR_LIMIT, "%s: the samples cannot be handed out in time order while the file is read "
                        "once; open it without streaming (%llu samples were handed out)", rs.why().c_str(),
                        static_cast<unsigned long long>(samples_.size()));
    // Nothing handed out yet: read it with the index from here on (the same order or error).
    const std::string root = rd.root;
    const bool open_files = rd.open_files;
    comms_.clear();
    lists_.clear();
    lost_ = records_ = 0;
    kernel_text_ = 0;
    kernel_.reset();
    reader_.reset();
    perf_.reset();
    if (Status st = index_perf_data(root, open_files); !st.ok()) return st.error();
    make_kernel_namer(open_files);  // the kernel's map as the index read it last
    next_ = 0;
    return next_sample(i);
  }
  records_ = rs.records();  // the skipped ones too (FINISHED_ROUND...), as the index counts them
  finish_perf_data(rs.truncation());
  rd.stream.reset();
  return false;
}

Status Profile::view(size_t i, SampleView* out) const {
  if (i >= samples_.size())
    return make_error(SPROV_ERR_INVALID_ARG, "sample index %zu out of range (%zu samples)", i, samples_.size());
  const SampleRef& ref = samples_[i];
  if (format_ == ProfileFormat::kCapture) return decode_capture_sample(bytes_ + ref.offset, ref.size, regs_mask_, capture_version_, out);
  RawSample r;
  const bool streamed = reader_ != nullptr && reader_->stream != nullptr;
  if (streamed && i + 1 != samples_.size())
    return make_error(SPROV_ERR_INVALID_ARG, "sample %zu is no longer held: a profile read once holds only the sample "
                      "handed out last (%zu)", i, samples_.size() - 1);
  if (streamed && reader_->current.decoded) {  // decoded when the stream handed it out
    sample_view_from_perf(reader_->current.sample, out);
    return {};
  }
  const uint8_t* rec = streamed ? reader_->current.bytes : perf_->record_at(ref.offset, ref.size);
  if (rec == nullptr)
    return make_error(SPROV_ERR_TRUNCATED, "perf.data: sample record at 0x%llx (%u bytes) could not be read again: %s",
                      static_cast<unsigned long long>(ref.offset), static_cast<unsigned>(ref.size),
                      perf_->source().why().c_str());
  if (Status st = perf_->decoder().decode_sample(rec, ref.size, &r); !st.ok()) return st;
  sample_view_from_perf(r, out);
  return {};
}

bool Profile::stack_in_place() const {
  if (format_ == ProfileFormat::kCapture) return true;  // the mapping (or owned_): the profile's lifetime
  if (reader_ != nullptr && reader_->stream != nullptr) return true;  // the chunk of the record handed out last
  return perf_ != nullptr && !perf_->source().from_file();  // the bytes in memory
}

Status Profile::fill_snapshot(size_t i, memory::Snapshot& s, uint32_t* current_list, bool* modules_changed,
                              SampleView* view_out) const {
  SampleView v;
  if (Status st = view(i, &v); !st.ok()) return st;
  const SampleRef& ref = samples_[i];
  const ModuleList& list = *lists_.at(ref.list);
  s.arch = Arch::kX86_64;
  s.endian = Endian::kLittle;
  s.pid = ref.pid;
  s.tid = ref.tid;
  s.flags = 0;  // the sample ip is the exact pc, not a return address
  s.regs_valid = 0;
  *modules_changed = false;
  if (*current_list != ref.list || s.modules.size() != list.modules.size()) {
    s.memory.clear();
    s.modules = list.modules;
    if (list.vdso_start != 0 && !vdso_.empty()) {
      if (Status st = s.add_memory(list.vdso_start, vdso_.data(), vdso_.size()); !st.ok()) return st;
    }
    *current_list = ref.list;
    *modules_changed = true;
  }
  // Drop the previous sample's stack (every region but the vDSO's), keeping its buffer for this
  // sample's (no allocation and free of ~8 KiB per sample).
  auto dropped = [&](const memory::MemoryRegion& m) { return m.addr != list.vdso_start || list.vdso_start == 0; };
  std::vector<uint8_t> spare;
  for (memory::MemoryRegion& m : s.memory)
    if (dropped(m) && m.bytes.capacity() > spare.capacity()) spare.swap(m.bytes);
  s.memory.erase(std::remove_if(s.memory.begin(), s.memory.end(), dropped), s.memory.end());
  if (v.user_regs) {
    uint64_t vals[64];
    const uint32_t n = std::min<uint32_t>(v.regs_count, 64);
    std::memcpy(vals, v.regs, 8ull * n);
    arch::x86_64::Regs regs;
    if (Status st = arch::x86_64::regs_from_perf(v.regs_mask, vals, n, &regs); !st.ok()) return st;
    for (int r = 0; r < arch::x86_64::Traits::kNumRegs; r++)
      if (regs.has(r)) s.set_reg(r, regs.get(r));
    if (v.stack_len > 0 && v.sp + v.stack_len > v.sp) {
      // Read in place where the record's bytes stay until the next sample (no copy of ~8 KiB a
      // sample); a perf.data file read with its index reuses its windows at the next read.
      Status st = stack_in_place() ? s.add_memory_view(v.sp, v.stack, v.stack_len)
                                   : s.add_memory(v.sp, v.stack, v.stack_len, &spare);
      if (!st.ok()) return st;
    }
  }
  if (view_out != nullptr) *view_out = std::move(v);
  return {};
}

}  // namespace stackprov::perf
