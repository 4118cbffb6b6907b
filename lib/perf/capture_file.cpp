// SPDX-License-Identifier: Apache-2.0
// stackprov capture files ("SPROVCAP"): sampled stacks with their module lists, written by `record`.
#include "perf/capture_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

namespace stackprov::perf {

namespace {

constexpr uint32_t kVersion = 4;  // reads 1 to 4; writes 3, or 4 with Python frames
constexpr uint8_t kModules = 1, kComm = 2, kSample = 3, kLost = 4, kVdso = 5, kEnd = 6, kKernel = 7, kPyCode = 8,
                  kPyStack = 9, kPyEval = 10;
constexpr uint32_t kMaxPyString = 16384;
constexpr uint32_t kMaxPyFrames = 65536;
constexpr uint32_t kMaxPyProblem = 1024;
constexpr uint32_t kMaxPyRanges = 16;
constexpr size_t kMaxPyCodes = size_t{1} << 24;
constexpr size_t kMaxLists = size_t{1} << 20;
constexpr size_t kMaxModules = 65536;
constexpr size_t kMaxSamples = size_t{1} << 26;
constexpr uint64_t kMaxStack = 64 * 1024;
constexpr uint32_t kMaxKernel = 1024;
constexpr uint32_t kMaxPath = 4096;
constexpr uint32_t kMaxComm = 64;
constexpr size_t kMaxVdso = 1u << 20;
constexpr uint32_t kMaxCmdline = 1u << 20;

void put(std::vector<uint8_t>& b, const void* p, size_t n) {
  const size_t at = b.size();
  b.resize(at + n);  // not insert(): GCC 12 warns falsely (-Warray-bounds) on its inlined range insert
  if (n != 0) std::memcpy(b.data() + at, p, n);
}
void put64(std::vector<uint8_t>& b, uint64_t v) { put(b, &v, 8); }
void put32(std::vector<uint8_t>& b, uint32_t v) { put(b, &v, 4); }

struct Reader {
  const uint8_t* p;
  size_t len;
  size_t at;
  const char* what;
  size_t remaining() const { return len - at; }
  Status need(size_t n, const char* field) const {
    if (n > len - at)
      return make_error(SPROV_ERR_TRUNCATED, "capture file: %s: %s needs %zu bytes at offset %zu, %zu left", what,
                        field, n, at, len - at);
    return {};
  }
  Status u64(uint64_t* v, const char* field) {
    if (Status st = need(8, field); !st.ok()) return st;
    std::memcpy(v, p + at, 8);
    at += 8;
    return {};
  }
  Status u32(uint32_t* v, const char* field) {
    if (Status st = need(4, field); !st.ok()) return st;
    std::memcpy(v, p + at, 4);
    at += 4;
    return {};
  }
  Status u8(uint8_t* v, const char* field) {
    if (Status st = need(1, field); !st.ok()) return st;
    *v = p[at++];
    return {};
  }
};

#define SPROV_TRY(expr)                                 \
  do {                                                  \
    if (Status st_ = (expr); !st_.ok()) return st_;     \
  } while (0)
#define SPROV_TRY_R(expr)                               \
  do {                                                  \
    if (Status st_ = (expr); !st_.ok()) return st_.error(); \
  } while (0)

}  // namespace

CaptureWriter::CaptureWriter(FILE* f, uint64_t regs_mask, uint32_t stack_user, const std::string& cmdline,
                             uint32_t frequency, bool python)
    : f_(f), regs_mask_(regs_mask) {
  // Only a regular file can have its header rewritten; a pipe's counts stay 0 (unknown).
  struct stat st;
  const int fd = fileno(f_);
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) start_ = ftello(f_);
  std::vector<uint8_t> h;
  put(h, kCaptureMagic, 8);
  put32(h, python ? 4 : 3);
  put32(h, 0);  // flags: kCountsFinal once finish() wrote the counts
  put64(h, regs_mask);
  put32(h, stack_user);
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(cmdline.size(), kMaxCmdline));
  put32(h, n);
  put(h, cmdline.data(), n);
  put32(h, frequency);
  counts_at_ = h.size();
  put64(h, 0);  // records, samples, bytes: unknown until the first flush()
  put64(h, 0);
  put64(h, 0);
  if (fwrite(h.data(), 1, h.size(), f_) != h.size()) io_error_ = true;
  bytes_ = h.size();
}

void CaptureWriter::write_kernel(const ModuleId& id, uint64_t text) {
  buf_.clear();
  buf_.push_back(id.len);
  put(buf_, id.bytes, id.len);
  put64(buf_, text);
  record(kKernel, buf_);
}

void CaptureWriter::record(uint8_t kind, const std::vector<uint8_t>& body) {
  uint8_t head[8] = {kind, 0, 0, 0};
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::memcpy(head + 4, &n, 4);
  if (fwrite(head, 1, 8, f_) != 8 || fwrite(body.data(), 1, body.size(), f_) != body.size()) io_error_ = true;
  records_++;
  bytes_ += 8 + body.size();
}

void CaptureWriter::write_counts(uint32_t flags) {
  if (start_ < 0 || io_error_) return;
  // The records first, then the counts that describe them: the header never counts more than
  // the file holds.
  if (fflush(f_) != 0) {
    io_error_ = true;
    return;
  }
  uint8_t c[24];
  std::memcpy(c, &records_, 8);
  std::memcpy(c + 8, &samples_, 8);
  std::memcpy(c + 16, &bytes_, 8);
  const int fd = fileno(f_);
  if (pwrite(fd, c, sizeof c, start_ + static_cast<off_t>(counts_at_)) != static_cast<ssize_t>(sizeof c) ||
      pwrite(fd, &flags, 4, start_ + 12) != 4)
    io_error_ = true;
}

void CaptureWriter::flush() { write_counts(0); }

void CaptureWriter::write_modules(uint32_t id, const ModuleList& list) {
  buf_.clear();
  put32(buf_, id);
  put64(buf_, list.vdso_start);
  put32(buf_, static_cast<uint32_t>(list.modules.size()));
  for (const memory::SnapshotModule& m : list.modules) {
    put64(buf_, m.start);
    put64(buf_, m.end);
    put64(buf_, m.file_offset);
    put64(buf_, m.load_bias);
    const uint32_t pl = static_cast<uint32_t>(std::min<size_t>(m.path.size(), kMaxPath));
    put32(buf_, pl);
    put(buf_, m.path.data(), pl);
    buf_.push_back(m.build_id.len);
    put(buf_, m.build_id.bytes, m.build_id.len);
  }
  put32(buf_, static_cast<uint32_t>(list.main));
  record(kModules, buf_);
}

void CaptureWriter::write_comm(uint32_t id, const std::string& comm) {
  buf_.clear();
  put32(buf_, id);
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(comm.size(), kMaxComm));
  put32(buf_, n);
  put(buf_, comm.data(), n);
  record(kComm, buf_);
}

void CaptureWriter::write_vdso(const std::vector<uint8_t>& bytes) {
  if (bytes.empty() || bytes.size() > kMaxVdso) return;
  record(kVdso, bytes);
}

void CaptureWriter::write_sample(const SampleView& s, uint32_t list, uint32_t comm) {
  buf_.clear();
  put64(buf_, s.time);
  put32(buf_, s.pid);
  put32(buf_, s.tid);
  put32(buf_, list);
  put32(buf_, comm);
  put64(buf_, s.ip);
  const uint32_t nregs = static_cast<uint32_t>(std::popcount(regs_mask_));
  for (uint32_t i = 0; i < nregs; i++) {
    uint64_t v = 0;
    if (s.user_regs && s.regs_mask == regs_mask_ && i < s.regs_count) std::memcpy(&v, s.regs + 8 * i, 8);
    put64(buf_, v);
  }
  buf_.push_back(s.user_regs && s.regs_mask == regs_mask_ ? 1 : 0);
  for (int i = 0; i < 7; i++) buf_.push_back(0);
  put64(buf_, s.stack_requested);
  const uint32_t sl = static_cast<uint32_t>(std::min<uint64_t>(s.stack_len, kMaxStack));
  put32(buf_, sl);
  put(buf_, s.stack, sl);
  const uint32_t nk = static_cast<uint32_t>(std::min<size_t>(s.kernel_ips.size(), kMaxKernel));
  put32(buf_, nk);
  for (uint32_t i = 0; i < nk; i++) put64(buf_, s.kernel_ips[i]);
  put64(buf_, s.period);
  record(kSample, buf_);
  samples_++;
}

namespace {
void put_str(std::vector<uint8_t>& b, const std::string& v, uint32_t max) {
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(v.size(), max));
  put32(b, n);
  put(b, v.data(), n);
}
}  // namespace

void CaptureWriter::write_py_code(uint32_t id, const PyCode& code) {
  buf_.clear();
  put32(buf_, id);
  put_str(buf_, code.function, kMaxPyString);
  put_str(buf_, code.qualname, kMaxPyString);
  put_str(buf_, code.file, kMaxPyString);
  record(kPyCode, buf_);
}

void CaptureWriter::write_py_stack(uint8_t state, const std::vector<PyFrameRef>& frames, const std::string& problem) {
  buf_.clear();
  buf_.push_back(state);
  for (int i = 0; i < 3; i++) buf_.push_back(0);
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(frames.size(), kMaxPyFrames));
  put32(buf_, n);
  for (uint32_t i = 0; i < n; i++) {
    put32(buf_, frames[i].code);
    put32(buf_, frames[i].line);
    buf_.push_back(frames[i].flags & (PyFrameRef::kEntry | PyFrameRef::kGenerator));
    for (int k = 0; k < 3; k++) buf_.push_back(0);
  }
  put_str(buf_, problem, kMaxPyProblem);
  record(kPyStack, buf_);
}

void CaptureWriter::write_py_eval(const PyEval& eval) {
  buf_.clear();
  put32(buf_, eval.pid);
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(eval.ranges.size(), kMaxPyRanges));
  put32(buf_, n);
  for (uint32_t i = 0; i < n; i++) {
    put64(buf_, eval.ranges[i].first);
    put64(buf_, eval.ranges[i].second);
  }
  put_str(buf_, eval.description, kMaxPyProblem);
  record(kPyEval, buf_);
}

void CaptureWriter::write_lost(uint64_t count) {
  buf_.clear();
  put64(buf_, count);
  record(kLost, buf_);
}

Status CaptureWriter::finish() {
  buf_.clear();
  put64(buf_, samples_);
  record(kEnd, buf_);
  if (fflush(f_) != 0) io_error_ = true;
  write_counts(kCountsFinal);
  if (io_error_) return make_error(SPROV_ERR_IO, "capture file: write failed: %s", strerror(errno));
  return {};
}

Status Profile::python(size_t i, PySampleView* out) const {
  *out = PySampleView{};
  if (i >= samples_.size()) return make_error(SPROV_ERR_INVALID_ARG, "sample %zu out of range (%zu samples)", i, samples_.size());
  const SampleRef& ref = samples_[i];
  if (ref.py_eval != UINT32_MAX) out->eval = &py_evals_[ref.py_eval];
  if (ref.py_at == 0) return {};
  // Checked when the file was indexed: state, counts, code ids and lengths.
  Reader b{bytes_ + ref.py_at, ref.py_len, 0, "python stack"};
  uint32_t n = 0;
  SPROV_TRY(b.u8(&out->state, "pystack.state"));
  b.at += 3;
  SPROV_TRY(b.u32(&n, "pystack.n"));
  SPROV_TRY(b.need(size_t{n} * 12, "pystack.frames"));
  out->frames.resize(n);
  for (uint32_t k = 0; k < n; k++) {
    const uint8_t* f = b.p + b.at + 12 * size_t{k};
    std::memcpy(&out->frames[k].code, f, 4);
    std::memcpy(&out->frames[k].line, f + 4, 4);
    out->frames[k].flags = f[8];
  }
  b.at += size_t{n} * 12;
  uint32_t pl = 0;
  SPROV_TRY(b.u32(&pl, "pystack.problem_len"));
  SPROV_TRY(b.need(pl, "pystack.problem"));
  out->problem.assign(reinterpret_cast<const char*>(b.p + b.at), pl);
  out->present = true;
  return {};
}

Status decode_capture_sample(const uint8_t* body, size_t len, uint64_t regs_mask, uint32_t version, SampleView* out) {
  Reader r{body, len, 0, "sample"};
  SampleView s;
  uint32_t list = 0, comm = 0;
  SPROV_TRY(r.u64(&s.time, "time"));
  SPROV_TRY(r.u32(&s.pid, "pid"));
  SPROV_TRY(r.u32(&s.tid, "tid"));
  SPROV_TRY(r.u32(&list, "list"));
  SPROV_TRY(r.u32(&comm, "comm"));
  SPROV_TRY(r.u64(&s.ip, "ip"));
  s.regs_mask = regs_mask;
  s.regs_count = static_cast<uint32_t>(std::popcount(regs_mask));
  SPROV_TRY(r.need(8ull * s.regs_count + 8, "regs"));
  s.regs = body + r.at;
  r.at += 8ull * s.regs_count;
  s.user_regs = body[r.at] != 0;
  r.at += 8;
  SPROV_TRY(r.u64(&s.stack_requested, "stack_requested"));
  uint32_t sl = 0;
  SPROV_TRY(r.u32(&sl, "stack_len"));
  if (sl > kMaxStack) return make_error(SPROV_ERR_LIMIT, "capture file: sample stack_len %u exceeds %llu", sl,
                                        static_cast<unsigned long long>(kMaxStack));
  SPROV_TRY(r.need(sl, "stack"));
  s.stack = body + r.at;
  s.stack_len = sl;
  r.at += sl;
  uint32_t nk = 0;
  SPROV_TRY(r.u32(&nk, "n_kernel"));
  if (nk > kMaxKernel) return make_error(SPROV_ERR_LIMIT, "capture file: sample has %u kernel frames (max %u)", nk, kMaxKernel);
  SPROV_TRY(r.need(8ull * nk, "kernel_ips"));
  s.kernel_ips.resize(nk);
  if (nk) std::memcpy(s.kernel_ips.data(), body + r.at, 8ull * nk);
  r.at += 8ull * nk;
  s.has_callchain = true;  // the kernel part (record samples with exclude_callchain_user)
  if (version >= 2) SPROV_TRY(r.u64(&s.period, "period"));
  if (s.user_regs) {  // sp is perf register bit 7 (PERF_REG_X86_SP)
    const int idx = std::popcount(regs_mask & ((1ull << 7) - 1));
    if ((regs_mask >> 7) & 1) std::memcpy(&s.sp, s.regs + 8 * idx, 8);
  }
  *out = std::move(s);
  return {};
}

Status Profile::index_capture() {
  format_ = ProfileFormat::kCapture;
  Reader r{bytes_, len_, 8, "header"};
  uint32_t version = 0, flags = 0, cl = 0;
  SPROV_TRY(r.u32(&version, "version"));
  if (version < 1 || version > kVersion)
    return make_error(SPROV_ERR_UNSUPPORTED, "capture file: version %u (this library reads 1 to %u)", version, kVersion);
  capture_version_ = version;
  SPROV_TRY(r.u32(&flags, "flags"));
  SPROV_TRY(r.u64(&regs_mask_, "sample_regs_user"));
  if (regs_mask_ & ~((1ull << 24) - 1))
    return make_error(SPROV_ERR_BAD_FORMAT, "capture file: sample_regs_user 0x%llx has unknown bits",
                      static_cast<unsigned long long>(regs_mask_));
  SPROV_TRY(r.u32(&stack_user_, "sample_stack_user"));
  SPROV_TRY(r.u32(&cl, "cmdline_len"));
  if (cl > kMaxCmdline) return make_error(SPROV_ERR_LIMIT, "capture file: cmdline of %u bytes", cl);
  SPROV_TRY(r.need(cl, "cmdline"));
  cmdline_.assign(reinterpret_cast<const char*>(bytes_ + r.at), cl);
  r.at += cl;
  event_.name = "cpu-clock";  // what sprov_record samples
  event_.clock = true;
  if (version >= 2) {
    uint32_t hz = 0;
    SPROV_TRY(r.u32(&hz, "frequency"));
    event_.frequency = hz;
  }
  uint64_t counted_records = 0, counted_samples = 0, counted_bytes = 0;  // 0: unknown (see the header)
  if (version >= 3) {
    SPROV_TRY(r.u64(&counted_records, "records"));
    SPROV_TRY(r.u64(&counted_samples, "samples"));
    SPROV_TRY(r.u64(&counted_bytes, "bytes"));
  }
  bool ended = false;
  bool after_sample = false;  // the record before this one was a SAMPLE (a PYSTACK's place)
  std::map<uint32_t, uint32_t> py_eval_of;  // pid -> its latest PYEVAL
  auto str = [&](Reader& b, std::string* out, uint32_t max, const char* field) -> Status {
    uint32_t n = 0;
    SPROV_TRY(b.u32(&n, field));
    if (n > max) return make_error(SPROV_ERR_LIMIT, "capture file: %s of %u bytes (max %u)", field, n, max);
    SPROV_TRY(b.need(n, field));
    out->assign(reinterpret_cast<const char*>(b.p + b.at), n);
    b.at += n;
    return {};
  };
  while (!ended) {
    uint8_t head[8];
    uint32_t blen = 0;
    if (r.remaining() >= 8) {
      std::memcpy(head, bytes_ + r.at, 8);
      std::memcpy(&blen, head + 4, 4);
    }
    if (r.remaining() < 8 || blen > r.remaining() - 8) {
      // The file ends before END (a copy cut short, a recorder killed): every complete record
      // is kept. What is lost is known from the header's counts when they count more than this
      // file holds: exactly when written at the end, at least that much from a flush before it.
      missing_bytes_ = UINT64_MAX;
      partial_bytes_ = r.remaining();
      char line[512];
      const int n = snprintf(line, sizeof line,
                             "truncated capture file: no END record; a partial record of %llu bytes dropped; %llu "
                             "complete records read (%zu samples); ",
                             static_cast<unsigned long long>(partial_bytes_), static_cast<unsigned long long>(records_),
                             samples_.size());
      const bool counted = counted_records > records_ && counted_samples >= samples_.size() && counted_bytes > len_;
      const bool final_counts = (flags & kCountsFinal) != 0;
      if (counted && final_counts) missing_bytes_ = counted_bytes - len_;
      if (counted)
        snprintf(line + n, sizeof line - n,
                 "lost: %s%llu records (%llu samples), %llu bytes (the header's counts, written %s)",
                 final_counts ? "" : "at least ", static_cast<unsigned long long>(counted_records - records_),
                 static_cast<unsigned long long>(counted_samples - samples_.size()),
                 static_cast<unsigned long long>(counted_bytes - len_),
                 final_counts ? "when the recording ended" : "at a flush before the recording ended");
      else {
        std::string why = "a version " + std::to_string(version) + " file";
        if (version >= 3)
          why = counted_bytes == 0 ? "the header has no counts: written to a pipe, or copied before the first flush"
                                   : "the header's counts, from a flush before the cut, count no more";
        snprintf(line + n, sizeof line - n, "bytes and samples lost: unknown (the END record counts them; %s)",
                 why.c_str());
      }
      truncation_ = line;
      break;
    }
    const size_t rec_at = r.at;
    r.at += 8;
    Reader b{bytes_ + r.at, blen, 0, "record"};
    const size_t body_at = r.at;
    r.at += blen;
    records_++;
    if (head[0] >= kPyCode && version < 4)
      return make_error(SPROV_ERR_BAD_FORMAT, "capture file: record kind %u at offset %zu in a version %u file", head[0],
                        rec_at, version);
    const bool was_after_sample = after_sample;
    after_sample = head[0] == kSample;
    switch (head[0]) {
      case kModules: {
        uint32_t id = 0, n = 0;
        auto list = std::make_shared<ModuleList>();
        SPROV_TRY(b.u32(&id, "modules.id"));
        if (id != lists_.size())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: module list id %u at offset %zu, expected %zu", id,
                            rec_at, lists_.size());
        if (lists_.size() >= kMaxLists) return make_error(SPROV_ERR_LIMIT, "capture file: more than %zu module lists", kMaxLists);
        SPROV_TRY(b.u64(&list->vdso_start, "modules.vdso_start"));
        SPROV_TRY(b.u32(&n, "modules.n"));
        if (n > kMaxModules) return make_error(SPROV_ERR_LIMIT, "capture file: module list %u has %u modules (max %zu)", id, n, kMaxModules);
        memory::Snapshot probe;
        for (uint32_t i = 0; i < n; i++) {
          memory::SnapshotModule m;
          uint32_t pl = 0;
          uint8_t il = 0;
          SPROV_TRY(b.u64(&m.start, "module.start"));
          SPROV_TRY(b.u64(&m.end, "module.end"));
          SPROV_TRY(b.u64(&m.file_offset, "module.file_offset"));
          SPROV_TRY(b.u64(&m.load_bias, "module.load_bias"));
          SPROV_TRY(b.u32(&pl, "module.path_len"));
          if (pl > kMaxPath) return make_error(SPROV_ERR_LIMIT, "capture file: module path of %u bytes", pl);
          SPROV_TRY(b.need(pl, "module.path"));
          m.path.assign(reinterpret_cast<const char*>(b.p + b.at), pl);
          b.at += pl;
          SPROV_TRY(b.u8(&il, "module.id_len"));
          if (il > ModuleId::kMax) return make_error(SPROV_ERR_BAD_FORMAT, "capture file: build-id of %u bytes", il);
          SPROV_TRY(b.need(il, "module.build_id"));
          m.build_id = ModuleId::from_bytes(b.p + b.at, il);
          b.at += il;
          if (m.end <= m.start)
            return make_error(SPROV_ERR_BAD_FORMAT, "capture file: module %s has empty range 0x%llx-0x%llx", m.path.c_str(),
                              static_cast<unsigned long long>(m.start), static_cast<unsigned long long>(m.end));
          if (Status st = probe.add_module(m); !st.ok()) return st;
          list->modules.push_back(std::move(m));
        }
        if (b.remaining() >= 4) {  // absent from files written before it (see the header)
          uint32_t raw = 0;
          SPROV_TRY(b.u32(&raw, "modules.main"));
          const auto main_index = static_cast<int32_t>(raw);
          if (main_index < -1 || (main_index >= 0 && raw >= n))
            return make_error(SPROV_ERR_BAD_FORMAT, "capture file: module list %u: main module %d of %u modules", id,
                              main_index, n);
          list->main = main_index;
        }
        list->hash = probe.module_list_hash();
        lists_.push_back(std::move(list));
        break;
      }
      case kComm: {
        uint32_t id = 0, n = 0;
        SPROV_TRY(b.u32(&id, "comm.id"));
        SPROV_TRY(b.u32(&n, "comm.len"));
        if (id != comms_.size() || n > kMaxComm)
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: comm id %u (expected %zu), length %u", id, comms_.size(), n);
        SPROV_TRY(b.need(n, "comm"));
        comms_.emplace_back(reinterpret_cast<const char*>(b.p + b.at), n);
        break;
      }
      case kSample: {
        SampleRef ref;
        Reader h{b.p, b.len, 0, "sample"};
        SPROV_TRY(h.u64(&ref.time, "time"));
        SPROV_TRY(h.u32(&ref.pid, "pid"));
        SPROV_TRY(h.u32(&ref.tid, "tid"));
        SPROV_TRY(h.u32(&ref.list, "list"));
        SPROV_TRY(h.u32(&ref.comm, "comm"));
        if (ref.list >= lists_.size() || ref.comm >= comms_.size())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: sample at offset %zu names module list %u / comm %u before "
                            "their definition", rec_at, ref.list, ref.comm);
        if (samples_.size() >= kMaxSamples) return make_error(SPROV_ERR_LIMIT, "capture file: more than %zu samples", kMaxSamples);
        SampleView probe;
        if (Status st = decode_capture_sample(b.p, b.len, regs_mask_, version, &probe); !st.ok()) return st;
        ref.offset = body_at;
        ref.size = blen;
        if (auto pe = py_eval_of.find(ref.pid); pe != py_eval_of.end()) ref.py_eval = pe->second;
        samples_.push_back(ref);
        break;
      }
      case kPyCode: {
        uint32_t id = 0;
        SPROV_TRY(b.u32(&id, "pycode.id"));
        if (id != py_codes_.size())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: Python code id %u at offset %zu, expected %zu", id, rec_at,
                            py_codes_.size());
        if (py_codes_.size() >= kMaxPyCodes)
          return make_error(SPROV_ERR_LIMIT, "capture file: more than %zu Python code objects", kMaxPyCodes);
        PyCode c;
        SPROV_TRY(str(b, &c.function, kMaxPyString, "pycode.function"));
        SPROV_TRY(str(b, &c.qualname, kMaxPyString, "pycode.qualname"));
        SPROV_TRY(str(b, &c.file, kMaxPyString, "pycode.file"));
        py_codes_.push_back(std::move(c));
        break;
      }
      case kPyStack: {
        if (!was_after_sample || samples_.empty())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: Python stack at offset %zu does not follow a sample", rec_at);
        uint8_t state = 0;
        uint32_t n = 0;
        SPROV_TRY(b.u8(&state, "pystack.state"));
        SPROV_TRY(b.need(3, "pystack.reserved"));
        b.at += 3;
        SPROV_TRY(b.u32(&n, "pystack.n"));
        if (state > 3) return make_error(SPROV_ERR_BAD_FORMAT, "capture file: Python stack state %u at offset %zu", state, rec_at);
        if (n > kMaxPyFrames)
          return make_error(SPROV_ERR_LIMIT, "capture file: Python stack of %u frames at offset %zu (max %u)", n, rec_at,
                            kMaxPyFrames);
        if (n != 0 && state != 1 && state != 3)
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: Python stack at offset %zu in state %u has %u frames",
                            rec_at, state, n);
        SPROV_TRY(b.need(size_t{n} * 12, "pystack.frames"));
        for (uint32_t i = 0; i < n; i++) {
          uint32_t code = 0;
          std::memcpy(&code, b.p + b.at + 12 * size_t{i}, 4);
          if (code >= py_codes_.size())
            return make_error(SPROV_ERR_BAD_FORMAT, "capture file: Python frame %u at offset %zu names code %u of %zu", i,
                              rec_at, code, py_codes_.size());
        }
        b.at += size_t{n} * 12;
        std::string problem;
        SPROV_TRY(str(b, &problem, kMaxPyProblem, "pystack.problem"));
        samples_.back().py_at = body_at;
        samples_.back().py_len = blen;
        break;
      }
      case kPyEval: {
        PyEval e;
        uint32_t n = 0;
        SPROV_TRY(b.u32(&e.pid, "pyeval.pid"));
        SPROV_TRY(b.u32(&n, "pyeval.n"));
        if (n == 0 || n > kMaxPyRanges)
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: %u interpreter ranges at offset %zu (1 to %u)", n, rec_at,
                            kMaxPyRanges);
        for (uint32_t i = 0; i < n; i++) {
          uint64_t lo = 0, hi = 0;
          SPROV_TRY(b.u64(&lo, "pyeval.start"));
          SPROV_TRY(b.u64(&hi, "pyeval.end"));
          if (lo >= hi)
            return make_error(SPROV_ERR_BAD_FORMAT, "capture file: interpreter range 0x%llx-0x%llx at offset %zu is empty",
                              static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi), rec_at);
          e.ranges.emplace_back(lo, hi);
        }
        SPROV_TRY(str(b, &e.description, kMaxPyProblem, "pyeval.description"));
        if (py_evals_.size() >= kMaxLists) return make_error(SPROV_ERR_LIMIT, "capture file: more than %zu PYEVAL records", kMaxLists);
        py_eval_of[e.pid] = static_cast<uint32_t>(py_evals_.size());
        py_evals_.push_back(std::move(e));
        break;
      }
      case kLost: {
        uint64_t n = 0;
        SPROV_TRY(b.u64(&n, "lost"));
        lost_ += n;
        break;
      }
      case kVdso:
        if (blen > kMaxVdso || !vdso_.empty())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: vDSO record of %u bytes (or a second one)", blen);
        vdso_.assign(b.p, b.p + blen);
        break;
      case kKernel: {
        uint8_t il = 0;
        SPROV_TRY(b.u8(&il, "kernel.id_len"));
        if (il > 20) return make_error(SPROV_ERR_BAD_FORMAT, "capture file: kernel build-id of %u bytes", il);
        SPROV_TRY(b.need(il, "kernel.build_id"));
        kernel_id_ = ModuleId::from_bytes(b.p + b.at, il);
        b.at += il;
        SPROV_TRY(b.u64(&kernel_text_, "kernel.text"));
        break;
      }
      case kEnd: {
        uint64_t n = 0;
        SPROV_TRY(b.u64(&n, "end.samples"));
        if (n != samples_.size())
          return make_error(SPROV_ERR_BAD_FORMAT, "capture file: END says %llu samples, %zu were read",
                            static_cast<unsigned long long>(n), samples_.size());
        ended = true;
        break;
      }
      default:
        return make_error(SPROV_ERR_BAD_FORMAT, "capture file: unknown record kind %u at offset %zu", head[0], rec_at);
    }
  }
  return {};
}

}  // namespace stackprov::perf
