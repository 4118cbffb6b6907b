// SPDX-License-Identifier: Apache-2.0
// Unit tests for lib/perf: perf.data parsing (synthetic files), hostile input, capture-file round trip.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/capture_file.hpp"
#include "perf/perf_data.hpp"
#include "perf/profile.hpp"
#include "perf/record_stream.hpp"
#include "stackprov/perf.h"
#include "stackprov/stackprov.h"

using namespace stackprov;
using namespace stackprov::perf;

namespace {

constexpr uint64_t kSampleType = kSampleIp | kSampleTid | kSampleTime | kSampleCallchain | kSampleRegsUser | kSampleStackUser;
constexpr uint64_t kRegsMask = (1ull << 7) | (1ull << 8);  // SP, IP
constexpr uint32_t kStackBytes = 64;

struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u16(uint16_t v) { return raw(&v, 2); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& str(const std::string& s, size_t padded) {
    std::vector<uint8_t> z(padded, 0);
    std::memcpy(z.data(), s.data(), std::min(s.size(), padded));
    return raw(z.data(), padded);
  }
};

/// perf_event_header + body + sample_id trailer {pid, tid, time}.
std::vector<uint8_t> record(uint32_t type, uint16_t misc, const Bytes& body, uint64_t time, bool trailer = true) {
  Bytes r;
  const size_t size = 8 + body.b.size() + (trailer ? 16 : 0);
  r.u32(type).u16(misc).u16(static_cast<uint16_t>(size)).raw(body.b.data(), body.b.size());
  if (trailer) r.u32(100).u32(100).u64(time);
  return r.b;
}

std::vector<uint8_t> sample(uint64_t time, uint64_t ip, uint64_t sp, uint64_t callchain_nr = 2,
                            uint32_t stack_bytes = kStackBytes) {
  Bytes b;
  b.u64(ip).u32(100).u32(101).u64(time);
  b.u64(callchain_nr).u64(kContextUser).u64(ip);
  b.u64(2).u64(sp).u64(ip);  // abi 64, regs in mask-bit order: SP (bit 7), IP (bit 8)
  b.u64(stack_bytes);
  for (uint32_t i = 0; i < stack_bytes; i++) b.b.push_back(static_cast<uint8_t>(i ^ time));
  b.u64(stack_bytes / 2);  // dyn_size
  return record(kRecordSample, kMiscUser, b, time, false);
}

/// A complete perf.data: header, one attribute, MMAP2 + COMM + 2 samples, features CMDLINE + ARCH.
std::vector<uint8_t> perf_file(const std::vector<std::vector<uint8_t>>& records, uint32_t stack_user = kStackBytes) {
  Bytes attr;  // perf_event_attr, 128 bytes (PERF_ATTR_SIZE_VER7)
  attr.u32(1).u32(128).u64(0).u64(999).u64(kSampleType).u64(0).u64(1ull << 18);  // sample_id_all
  attr.u32(0).u32(0).u64(0).u64(0).u64(0).u64(kRegsMask).u32(stack_user).u32(0);
  while (attr.b.size() < 128) attr.b.push_back(0);
  Bytes data;
  for (const auto& r : records) data.raw(r.data(), r.size());
  Bytes feats;  // CMDLINE (bit 11) and ARCH (bit 6): sections in bit order
  Bytes arch_sec, cmd_sec;
  arch_sec.u32(8).str("x86_64", 8);
  cmd_sec.u32(2).u32(8).str("./spin", 8).u32(4).str("1", 4);

  const uint64_t attrs_off = 104, attr_size = 128 + 16;
  const uint64_t data_off = attrs_off + attr_size;
  const uint64_t feat_off = data_off + data.b.size();
  const uint64_t arch_off = feat_off + 32, cmd_off = arch_off + arch_sec.b.size();
  Bytes f;
  f.raw("PERFILE2", 8).u64(104).u64(attr_size).u64(attrs_off).u64(attr_size).u64(data_off).u64(data.b.size());
  f.u64(0).u64(0);
  f.u64((1ull << 6) | (1ull << 11)).u64(0).u64(0).u64(0);
  f.raw(attr.b.data(), 128).u64(0).u64(0);  // ids section: none
  f.raw(data.b.data(), data.b.size());
  f.u64(arch_off).u64(arch_sec.b.size()).u64(cmd_off).u64(cmd_sec.b.size());
  f.raw(arch_sec.b.data(), arch_sec.b.size()).raw(cmd_sec.b.data(), cmd_sec.b.size());
  return f.b;
}

std::vector<uint8_t> mmap2(uint64_t start, uint64_t len, const std::string& path, uint64_t time) {
  Bytes b;
  b.u32(100).u32(100).u64(start).u64(len).u64(0);
  b.u32(8).u32(1).u64(1234).u64(0);  // maj, min, ino, ino_generation
  b.u32(5).u32(2);                    // prot R|X, flags
  b.str(path, (path.size() + 8) & ~size_t{7});
  return record(kRecordMmap2, kMiscUser, b, time);
}

std::vector<uint8_t> comm(const std::string& c, uint64_t time) {
  Bytes b;
  b.u32(100).u32(101).str(c, 8);
  return record(kRecordComm, 0, b, time);
}

std::vector<uint8_t> good_file() {
  return perf_file({mmap2(0x400000, 0x1000, "/nonexistent/spin", 10), comm("worker", 11),
                    sample(30, 0x400123, 0x7ffd0000), sample(20, 0x400456, 0x7ffd0100)});
}

}  // namespace

TEST_CASE("perf.data: header, features, records ordered by time") {
  auto bytes = good_file();
  auto pd = PerfData::parse(bytes.data(), bytes.size());
  REQUIRE(pd.ok());
  CHECK(pd.value().arch() == "x86_64");
  CHECK(pd.value().cmdline() == "./spin 1");
  REQUIRE(pd.value().records().size() == 4);
  CHECK(pd.value().records()[2].time == 20);  // samples sorted by time
  CHECK(pd.value().records()[3].time == 30);
}

TEST_CASE("perf.data: samples become snapshots with exact pc, sp and the copied stack") {
  auto p = Profile::from_bytes(good_file(), "", false);
  REQUIRE(p.ok());
  const Profile& prof = *p.value();
  REQUIRE(prof.samples().size() == 2);
  CHECK(prof.comms()[prof.samples()[0].comm] == "worker");
  REQUIRE(prof.lists().size() == 1);
  REQUIRE(prof.lists()[0]->modules.size() == 1);
  CHECK(prof.lists()[0]->modules[0].path == "/nonexistent/spin");
  memory::Snapshot s;
  uint32_t list = UINT32_MAX;
  bool changed = false;
  SampleView v;
  REQUIRE(prof.fill_snapshot(0, s, &list, &changed, &v).ok());
  CHECK(changed);
  CHECK(s.flags == 0);
  CHECK(s.regs[16] == 0x400456);  // rip (time 20 sorts first)
  CHECK(s.regs[7] == 0x7ffd0100);  // rsp
  REQUIRE(s.memory.size() == 1);
  CHECK(s.memory[0].addr == 0x7ffd0100);
  CHECK(s.memory[0].size() == kStackBytes / 2);
  // Bytes in memory: the stack borrowed from the record in place, not copied.
  const uint8_t* file = prof.record_source()->bytes();
  CHECK(s.memory[0].view == v.stack);
  CHECK(s.memory[0].bytes.empty());
  CHECK(v.stack >= file + prof.samples()[0].offset);
  CHECK(v.stack + v.stack_len <= file + prof.samples()[0].offset + prof.samples()[0].size);
  CHECK(v.stack_requested == kStackBytes);
  REQUIRE(prof.fill_snapshot(1, s, &list, &changed, &v).ok());
  CHECK_FALSE(changed);  // same module list: not rebuilt
  CHECK(s.memory.size() == 1);
}

namespace {
/// A file removed when the test leaves, however it leaves.
struct TempFile {
  char path[40] = "/tmp/stackprov-perf-windows-XXXXXX";
  int fd = mkstemp(path);
  ~TempFile() {
    if (fd >= 0) close(fd), unlink(path);
  }
};

std::vector<uint8_t> finished_round() { return record(kRecordFinishedRound, 0, Bytes{}, 0, false); }

/// Two runs of samples whose times interleave (as perf writes per-CPU buffers in rounds), `runs`
/// runs of `per_run` samples each, comm records between them; samples of `stack` stack bytes. With
/// `rounds`, a FINISHED_ROUND after each run (a round's records reach into the next round's
/// times); with `ties`, a second sample of the same time now and then (file order decides).
std::vector<uint8_t> rounds_file(uint64_t runs, uint64_t per_run, uint32_t stack, bool rounds = true,
                                 bool lost_at_end = false, bool ties = true) {
  std::vector<std::vector<uint8_t>> recs{mmap2(0x400000, 0x1000, "/nonexistent/spin", 0), comm("spin", 0)};
  for (uint64_t run = 0; run < runs; run++) {
    for (uint64_t i = 0; i < per_run; i++) {
      const uint64_t t = 100 + (run / 2) * 2 * per_run + 2 * i + (run % 2);
      recs.push_back(sample(t, 0x400000 + (t % 0x1000), 0x7ffd0000 + 16 * (t % 997), 2, stack));
      if (i % 150 == 0) recs.push_back(comm("w" + std::to_string(run) + "-" + std::to_string(i), t));
      if (ties && i % 97 == 0) recs.push_back(sample(t, 0x400000, 0x7ffd0000, 2, stack));  // a tie: file order
    }
    if (rounds) recs.push_back(finished_round());
  }
  if (lost_at_end)  // as perf record writes it at exit: LOST_SAMPLES {lost}, no time (tools/perf/builtin-record.c)
    recs.push_back(record(kRecordLostSamples, 0, Bytes().u64(77), 0, false));
  return perf_file(recs, stack);
}
std::vector<uint8_t> interleaved_file(uint64_t runs, uint64_t per_run, uint32_t stack) {
  return rounds_file(runs, per_run, stack, false, false, false);
}
}  // namespace

TEST_CASE("perf.data read from the file through windows: the same samples as from memory") {
  // Samples of 2 KiB stacks (runs of ~900 KiB, longer than a window) and of 64 bytes (runs of
  // ~64 KiB): each read in file order for the index, then in time order.
  const uint32_t stack = GENERATE(2048u, 64u);
  const uint64_t runs = 12, per_run = stack > 1024 ? 400 : 2000;
  const std::vector<uint8_t> bytes = interleaved_file(runs, per_run, stack);
  INFO("stack " << stack << ", file " << bytes.size() << " bytes");
  TempFile tmp;
  REQUIRE(tmp.fd >= 0);
  REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  auto mem = Profile::from_bytes(bytes, "", false);
  auto file = Profile::open(tmp.path, "");
  REQUIRE(mem.ok());
  REQUIRE(file.ok());
  const Profile& a = *mem.value();
  const Profile& b = *file.value();
  REQUIRE(b.record_source() != nullptr);
  CHECK(b.record_source()->from_file());
  REQUIRE(a.samples().size() == runs * per_run);
  REQUIRE(b.samples().size() == a.samples().size());
  memory::Snapshot sa, sb;
  uint32_t la = UINT32_MAX, lb = UINT32_MAX;
  bool ca = false, cb = false;
  SampleView va, vb;
  for (size_t i = 0; i < a.samples().size(); i++) {
    INFO("sample " << i);
    CHECK(a.samples()[i].time == 100 + i);  // time order across the two runs of each round
    CHECK(b.samples()[i].time == a.samples()[i].time);
    CHECK(b.samples()[i].offset == a.samples()[i].offset);
    CHECK(b.samples()[i].pid == 100);
    CHECK(b.samples()[i].tid == 101);
    CHECK(b.comms()[b.samples()[i].comm] == a.comms()[a.samples()[i].comm]);
    REQUIRE(a.fill_snapshot(i, sa, &la, &ca, &va).ok());
    REQUIRE(b.fill_snapshot(i, sb, &lb, &cb, &vb).ok());
    CHECK(sb.regs[16] == sa.regs[16]);
    CHECK(sb.regs[7] == sa.regs[7]);
    REQUIRE(sb.memory.size() == 1);
    REQUIRE(sb.memory[0].bytes.size() == stack / 2);  // read with the index through a file: copied
    CHECK(sb.memory[0].view == nullptr);
    REQUIRE(sa.memory[0].view != nullptr);            // from memory: borrowed in place
    REQUIRE(sa.memory[0].size() == stack / 2);
    CHECK(std::memcmp(sb.memory[0].data(), sa.memory[0].data(), stack / 2) == 0);
    CHECK(sb.memory[0].bytes[1] == static_cast<uint8_t>(1 ^ a.samples()[i].time));  // the file's own bytes
  }
  // Read about twice (index in order, samples in time order), in windows: far fewer reads than
  // records (the comm records met again in time order are read alone, one read each).
  const RecordSource& src = *b.record_source();
  const double read_x = static_cast<double>(src.bytes_read()) / static_cast<double>(bytes.size());
  INFO("bytes read / file bytes = " << read_x << ", " << src.reads() << " reads");
  CHECK(read_x < 2.5);
  CHECK(src.reads() < a.samples().size() / 8);
  // The file cut short after it was opened: a clean error naming the record, no crash.
  REQUIRE(ftruncate(tmp.fd, static_cast<off_t>(bytes.size() / 2)) == 0);
  bool failed = false;
  for (size_t i = 0; i < b.samples().size() && !failed; i++) {
    Status st = b.fill_snapshot(i, sb, &lb, &cb, &vb);
    if (!st.ok()) {
      failed = true;
      CHECK(st.error().code == SPROV_ERR_TRUNCATED);
      CHECK(st.error().message.find("could not be read again: the file ends before them") != std::string::npos);
    }
  }
  CHECK(failed);
}

TEST_CASE("perf.data: hostile input gives clean errors") {
  auto good = good_file();
  SECTION("cut inside the header or the attributes: refused, naming the offset") {
    for (size_t n : {size_t{0}, size_t{15}, size_t{60}, size_t{104}, size_t{200}}) {
      auto p = Profile::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + n), "", false);
      REQUIRE_FALSE(p.ok());
      CHECK(p.error().code == SPROV_ERR_TRUNCATED);
    }
    auto p = Profile::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + 200), "", false);
    CHECK(p.error().message.find("attrs section 0x68+0x90 exceeds the file (200 bytes)") != std::string::npos);
  }
  SECTION("cut anywhere in the data section: every complete record is read") {
    const uint64_t data_off = 104 + 144;
    uint64_t data_end = data_off;
    std::vector<uint64_t> ends;  // end offset of each record, in file order
    while (data_end < good.size() && ends.size() < 4) {
      uint16_t sz = 0;
      std::memcpy(&sz, good.data() + data_end + 6, 2);
      data_end += sz;
      ends.push_back(data_end);
    }
    for (size_t n = data_off; n < data_end; n++) {
      INFO("cut at " << n);
      auto p = Profile::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + n), "", false);
      REQUIRE(p.ok());
      const size_t complete = std::count_if(ends.begin(), ends.end(), [&](uint64_t e) { return e <= n; });
      const uint64_t last_end = complete ? ends[complete - 1] : data_off;
      CHECK(p.value()->records() == complete);
      CHECK(p.value()->samples().size() == (complete > 2 ? complete - 2 : 0));  // MMAP2, COMM, then samples
      CHECK(p.value()->missing_bytes() == data_end - n);
      CHECK(p.value()->partial_bytes() == n - last_end);
      CHECK(p.value()->truncation().find("truncated perf.data: the file ends " + std::to_string(data_end - n) +
                                         " bytes before the end of its data section") == 0);
      CHECK(p.value()->cmdline().empty());  // the feature sections follow the data: all lost
      for (size_t i = 0; i < p.value()->samples().size(); i++) {
        SampleView v;
        CHECK(p.value()->view(i, &v).ok());
      }
    }
  }
  SECTION("cut inside the feature sections: every record, the features that are whole") {
    auto p = Profile::from_bytes(std::vector<uint8_t>(good.begin(), good.end() - 1), "", false);
    REQUIRE(p.ok());
    CHECK(p.value()->samples().size() == 2);
    CHECK(p.value()->missing_bytes() == 0);
    CHECK(p.value()->partial_bytes() == 0);
    CHECK(p.value()->cmdline().empty());  // CMDLINE, the last section, is cut
    CHECK(p.value()->truncation().find("1 of them missing") != std::string::npos);
    auto whole = Profile::from_bytes(good, "", false);
    REQUIRE(whole.ok());
    CHECK(whole.value()->truncation().empty());
    CHECK(whole.value()->cmdline() == "./spin 1");
  }
  SECTION("big-endian and pipe mode are refused") {
    auto be = good;
    std::memcpy(be.data(), "2ELIFREP", 8);
    auto p = Profile::from_bytes(be, "", false);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == SPROV_ERR_UNSUPPORTED);
    auto pipe = good;
    const uint64_t sixteen = 16;
    std::memcpy(pipe.data() + 8, &sixteen, 8);
    CHECK(Profile::from_bytes(pipe, "", false).error().code == SPROV_ERR_UNSUPPORTED);
  }
  SECTION("a huge callchain count skips the sample with a warning") {
    auto f = perf_file({sample(5, 0x1, 0x1000, uint64_t{1} << 60), sample(6, 0x2, 0x2000)});
    auto p = Profile::from_bytes(f, "", false);
    REQUIRE(p.ok());
    CHECK(p.value()->samples().size() == 1);
    CHECK(p.value()->warnings().find("callchain.nr") != std::string::npos);
  }
  SECTION("a record size of zero") {
    auto bad = good;
    const uint64_t data_off = 104 + 144;
    bad[data_off + 6] = 0;
    bad[data_off + 7] = 0;
    auto p = Profile::from_bytes(bad, "", false);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().message.find("size 0") != std::string::npos);
  }
}

TEST_CASE("capture file: written samples read back identically") {
  auto p = Profile::from_bytes(good_file(), "", false);
  REQUIRE(p.ok());
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    CaptureWriter w(f, kRegsMask, kStackBytes, "./spin 1");
    ModuleList list = *p.value()->lists()[0];
    REQUIRE(list.modules.size() == 1);
    CHECK(list.main == -1);  // no exec recorded, the file not opened
    list.main = 0;           // as if it were: the capture file keeps it
    w.write_modules(0, list);
    w.write_comm(0, "worker");
    for (size_t i = 0; i < p.value()->samples().size(); i++) {
      SampleView v;
      REQUIRE(p.value()->view(i, &v).ok());
      w.write_sample(v, 0, 0);
    }
    w.write_lost(3);
    REQUIRE(w.finish().ok());
  }
  fclose(f);
  std::vector<uint8_t> bytes(buf, buf + len);
  free(buf);
  auto c = Profile::from_bytes(bytes, "", false);
  REQUIRE(c.ok());
  CHECK(c.value()->format() == ProfileFormat::kCapture);
  CHECK(c.value()->lost() == 3);
  CHECK(c.value()->cmdline() == "./spin 1");
  CHECK(c.value()->lists()[0]->main == 0);
  {
    // MODULES before main was written (issue 36): the body ends after the entries; main unknown.
    // Past the list's modules (or below -1) it is refused.
    const size_t at = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 4 + 24;  // the first record, MODULES
    uint32_t blen = 0;
    std::memcpy(&blen, bytes.data() + at + 4, 4);
    auto old = bytes;
    old.erase(old.begin() + static_cast<std::ptrdiff_t>(at + 8 + blen - 4), old.begin() + static_cast<std::ptrdiff_t>(at + 8 + blen));
    const uint32_t shorter = blen - 4;
    std::memcpy(old.data() + at + 4, &shorter, 4);
    auto o = Profile::from_bytes(old, "", false);
    REQUIRE(o.ok());
    CHECK(o.value()->lists()[0]->main == -1);
    CHECK(o.value()->samples().size() == 2);
    for (int32_t bad : {1, -2}) {
      auto b = bytes;
      std::memcpy(b.data() + at + 8 + blen - 4, &bad, 4);
      auto r = Profile::from_bytes(b, "", false);
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(r.error().message, Catch::Contains("main module " + std::to_string(bad) + " of 1 modules"));
    }
  }
  REQUIRE(c.value()->samples().size() == 2);
  for (size_t i = 0; i < 2; i++) {
    memory::Snapshot a, b;
    uint32_t la = UINT32_MAX, lb = UINT32_MAX;
    bool ch = false;
    REQUIRE(p.value()->fill_snapshot(i, a, &la, &ch, nullptr).ok());
    REQUIRE(c.value()->fill_snapshot(i, b, &lb, &ch, nullptr).ok());
    const auto sa = memory::serialize(a), sb = memory::serialize(b);
    size_t at = 0;
    while (at < sa.size() && at < sb.size() && sa[at] == sb[at]) at++;
    INFO("first difference at byte " << at << " of " << sa.size() << "/" << sb.size());
    CHECK(at == sa.size());
    CHECK(sa.size() == sb.size());
  }
  // A capture file cut inside its header is refused; cut after it, its complete records are read.
  const size_t header = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 4 + 24;  // magic ... cmdline "./spin 1", frequency, counts
  for (size_t n = 0; n < bytes.size(); n++) {
    INFO("cut at " << n);
    auto t = Profile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n), "", false);
    if (n < header) {
      CHECK_FALSE(t.ok());
      continue;
    }
    REQUIRE(t.ok());
    CHECK(t.value()->samples().size() <= 2);
    CHECK(t.value()->missing_bytes() == UINT64_MAX);
    CHECK(t.value()->truncation().find("truncated capture file: no END record; a partial record of " +
                                       std::to_string(t.value()->partial_bytes()) + " bytes dropped") == 0);
    for (size_t i = 0; i < t.value()->samples().size(); i++) {
      memory::Snapshot a, b;
      uint32_t la = UINT32_MAX, lb = UINT32_MAX;
      bool ch = false;
      REQUIRE(c.value()->fill_snapshot(i, a, &la, &ch, nullptr).ok());
      REQUIRE(t.value()->fill_snapshot(i, b, &lb, &ch, nullptr).ok());
      CHECK(memory::serialize(a) == memory::serialize(b));
    }
  }
  CHECK(c.value()->truncation().empty());
}

namespace {

/// The bytes of `f` (a regular file) as a copy taken now would hold them.
std::vector<uint8_t> file_bytes(FILE* f) {
  std::vector<uint8_t> out(1 << 20);
  const ssize_t n = pread(fileno(f), out.data(), out.size(), 0);
  REQUIRE(n > 0);
  out.resize(static_cast<size_t>(n));
  return out;
}

/// The capture file's records as this test wrote them: MODULES, COMM, 2 SAMPLEs (flush() after the
/// first when `f` is a file), LOST, END.
std::vector<uint8_t> write_capture(FILE* f, const Profile& p, std::vector<uint8_t>* at_flush) {
  CaptureWriter w(f, kRegsMask, kStackBytes, "./spin 1");
  w.write_modules(0, *p.lists()[0]);
  w.write_comm(0, "worker");
  SampleView v;
  REQUIRE(p.view(0, &v).ok());
  w.write_sample(v, 0, 0);
  w.flush();
  if (at_flush) *at_flush = file_bytes(f);
  REQUIRE(p.view(1, &v).ok());
  w.write_sample(v, 0, 0);
  w.write_lost(3);
  REQUIRE(w.finish().ok());
  return at_flush ? file_bytes(f) : std::vector<uint8_t>();
}

std::string cut_line(const std::vector<uint8_t>& bytes, size_t n, uint64_t* missing = nullptr) {
  auto t = Profile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)),
                               "", false);
  REQUIRE(t.ok());
  if (missing) *missing = t.value()->missing_bytes();
  const std::string& line = t.value()->truncation();
  const size_t at = line.find("samples); ");
  REQUIRE(at != std::string::npos);
  return line.substr(at + 10);
}

}  // namespace

TEST_CASE("capture file: the header counts what is lost from a cut copy (issue 36)") {
  auto p = Profile::from_bytes(good_file(), "", false);
  REQUIRE(p.ok());
  REQUIRE(p.value()->samples().size() == 2);
  FILE* f = tmpfile();
  REQUIRE(f != nullptr);
  std::vector<uint8_t> live;
  const std::vector<uint8_t> bytes = write_capture(f, *p.value(), &live);
  fclose(f);
  auto c = Profile::from_bytes(bytes, "", false);
  REQUIRE(c.ok());
  CHECK(c.value()->truncation().empty());
  CHECK(c.value()->records() == 6);  // as written: MODULES, COMM, SAMPLE, SAMPLE, LOST, END
  const size_t header = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 4 + 24;
  // The header's record boundaries, by the lengths the test reads itself.
  std::vector<size_t> ends;
  for (size_t at = header; at < bytes.size();) {
    uint32_t blen = 0;
    std::memcpy(&blen, bytes.data() + at + 4, 4);
    at += 8 + blen;
    ends.push_back(at);
  }
  REQUIRE(ends.size() == 6);
  REQUIRE(ends.back() == bytes.size());
  SECTION("the finished file cut anywhere past its header: exactly the records, samples and bytes after the cut") {
    for (size_t n = header; n < bytes.size(); n++) {
      INFO("cut at " << n);
      const size_t kept = static_cast<size_t>(std::count_if(ends.begin(), ends.end(), [&](size_t e) { return e <= n; }));
      const size_t kept_samples = kept >= 4 ? 2 : kept == 3 ? 1 : 0;  // SAMPLE records are the 3rd and 4th
      uint64_t missing = 0;
      CHECK(cut_line(bytes, n, &missing) ==
            "lost: " + std::to_string(6 - kept) + " records (" + std::to_string(2 - kept_samples) + " samples), " +
                std::to_string(bytes.size() - n) + " bytes (the header's counts, written when the recording ended)");
      CHECK(missing == bytes.size() - n);
    }
  }
  SECTION("a copy taken after a flush, cut before what it counted: at least that much") {
    REQUIRE(live.size() == ends[2]);  // MODULES, COMM, the first SAMPLE
    // the same records; the header differs in its flags and counts only
    REQUIRE(std::equal(live.begin() + static_cast<std::ptrdiff_t>(header), live.end(),
                       bytes.begin() + static_cast<std::ptrdiff_t>(header)));
    for (size_t n = header; n < live.size(); n++) {
      INFO("cut at " << n);
      const size_t kept = static_cast<size_t>(std::count_if(ends.begin(), ends.begin() + 3, [&](size_t e) { return e <= n; }));
      uint64_t missing = 0;
      CHECK(cut_line(live, n, &missing) ==
            "lost: at least " + std::to_string(3 - kept) + " records (" + std::to_string(kept == 3 ? 0 : 1) +
                " samples), " + std::to_string(live.size() - n) +
                " bytes (the header's counts, written at a flush before the recording ended)");
      CHECK(missing == UINT64_MAX);
    }
  }
  SECTION("a copy that holds more than the flush counted, cut past it: unknown") {
    std::vector<uint8_t> grown(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(ends[3]));
    std::copy(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(header), grown.begin());
    CHECK(cut_line(grown, ends[3] - 1) == "bytes and samples lost: unknown (the END record counts them; the "
                                          "header's counts, from a flush before the cut, count no more)");
  }
  SECTION("the same records as version 2 (no counts): read alike, a cut says unknown") {
    std::vector<uint8_t> old(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header - 24));
    old.insert(old.end(), bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
    const uint32_t two = 2, zero = 0;
    std::memcpy(old.data() + 8, &two, 4);
    std::memcpy(old.data() + 12, &zero, 4);
    auto o = Profile::from_bytes(old, "", false);
    REQUIRE(o.ok());
    CHECK(o.value()->truncation().empty());
    CHECK(o.value()->samples().size() == 2);
    CHECK(o.value()->lost() == 3);
    uint64_t missing = 0;
    CHECK(cut_line(old, old.size() - 1, &missing) ==
          "bytes and samples lost: unknown (the END record counts them; a version 2 file)");
    CHECK(missing == UINT64_MAX);
  }
}

TEST_CASE("capture file: written to a pipe, its header has no counts and a cut says unknown") {
  auto p = Profile::from_bytes(good_file(), "", false);
  REQUIRE(p.ok());
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  FILE* w = fdopen(fds[1], "wb");
  REQUIRE(w != nullptr);
  write_capture(w, *p.value(), nullptr);  // a few KiB: within the pipe's buffer
  fclose(w);
  std::vector<uint8_t> bytes;
  uint8_t buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) bytes.insert(bytes.end(), buf, buf + n);
  close(fds[0]);
  auto c = Profile::from_bytes(bytes, "", false);
  REQUIRE(c.ok());
  CHECK(c.value()->samples().size() == 2);
  uint64_t missing = 0;
  CHECK(cut_line(bytes, bytes.size() - 1, &missing) ==
        "bytes and samples lost: unknown (the END record counts them; the header has no counts: written to a pipe, or "
        "copied before the first flush)");
  CHECK(missing == UINT64_MAX);
}

namespace {

/// A version 4 capture (record --python): PYEVAL, two PYCODEs, three SAMPLEs of good_file()'s
/// first sample, the first with a read PYSTACK, the second with none, the third torn.
std::vector<uint8_t> python_capture(const Profile& p, std::vector<uint8_t>* stack_body) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    CaptureWriter w(f, kRegsMask, kStackBytes, "python3 app.py", 999, /*python=*/true);
    w.write_modules(0, *p.lists()[0]);
    w.write_comm(0, "python3");
    SampleView v;
    REQUIRE(p.view(0, &v).ok());
    PyEval e;
    e.pid = v.pid;
    e.description = "CPython 3.11.2 (test)";
    e.ranges = {{0x1000, 0x2000}, {0x3000, 0x3100}};
    w.write_py_eval(e);
    w.write_py_code(0, PyCode{"leaf", "Worker.leaf", "/srv/app.py"});
    w.write_py_code(1, PyCode{"<module>", "<module>", "/srv/app.py"});
    w.write_sample(v, 0, 0);
    w.write_py_stack(1, {{0, 4, PyFrameRef::kEntry | PyFrameRef::kGenerator}, {1, 24, PyFrameRef::kEntry}}, "");
    w.write_sample(v, 0, 0);
    w.write_sample(v, 0, 0);
    w.write_py_stack(2, {}, "frame 0 (0x10) changed during the read");
    REQUIRE(w.finish().ok());
  }
  fclose(f);
  std::vector<uint8_t> bytes(buf, buf + len);
  free(buf);
  // The first PYSTACK body as doc/capture_file.hpp lays it out, byte by byte.
  auto u32 = [&](uint32_t x) {
    for (int i = 0; i < 4; i++) stack_body->push_back(static_cast<uint8_t>(x >> (8 * i)));
  };
  stack_body->assign({1, 0, 0, 0});
  u32(2);
  u32(0), u32(4), stack_body->insert(stack_body->end(), {3, 0, 0, 0});
  u32(1), u32(24), stack_body->insert(stack_body->end(), {1, 0, 0, 0});
  u32(0);
  return bytes;
}

/// The offset of the `n`-th record of kind `kind` (0-based) in a capture file's bytes.
size_t record_at(const std::vector<uint8_t>& bytes, uint8_t kind, int n) {
  uint32_t cl = 0;
  std::memcpy(&cl, bytes.data() + 28, 4);
  size_t at = 32 + cl + 4 + 24;
  while (at + 8 <= bytes.size()) {
    uint32_t blen = 0;
    std::memcpy(&blen, bytes.data() + at + 4, 4);
    if (bytes[at] == kind && n-- == 0) return at;
    at += 8 + blen;
  }
  FAIL("no record of kind " << int(kind));
  return 0;
}

}  // namespace

TEST_CASE("capture file version 4: Python frames with their samples (record --python, issue 35)") {
  auto p = Profile::from_bytes(good_file(), "", false);
  REQUIRE(p.ok());
  std::vector<uint8_t> body;
  const std::vector<uint8_t> bytes = python_capture(*p.value(), &body);
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  CHECK(version == 4);
  {
    // The PYSTACK record's body is the documented layout.
    const size_t at = record_at(bytes, 9, 0);
    uint32_t blen = 0;
    std::memcpy(&blen, bytes.data() + at + 4, 4);
    CHECK(std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(at + 8),
                               bytes.begin() + static_cast<std::ptrdiff_t>(at + 8 + blen)) == body);
  }
  auto c = Profile::from_bytes(bytes, "", false);
  REQUIRE(c.ok());
  const Profile& r = *c.value();
  REQUIRE(r.samples().size() == 3);
  REQUIRE(r.py_codes().size() == 2);
  CHECK(r.py_codes()[0].qualname == "Worker.leaf");
  CHECK(r.py_codes()[1].function == "<module>");
  PySampleView py;
  REQUIRE(r.python(0, &py).ok());
  CHECK(py.present);
  CHECK(py.state == 1);
  REQUIRE(py.frames.size() == 2);
  CHECK(py.frames[0].code == 0);
  CHECK(py.frames[0].line == 4);
  CHECK(py.frames[0].flags == (PyFrameRef::kEntry | PyFrameRef::kGenerator));
  CHECK(py.frames[1].line == 24);
  REQUIRE(py.eval != nullptr);
  CHECK(py.eval->description == "CPython 3.11.2 (test)");
  CHECK(py.eval->ranges == std::vector<std::pair<uint64_t, uint64_t>>{{0x1000, 0x2000}, {0x3000, 0x3100}});
  REQUIRE(r.python(1, &py).ok());
  CHECK_FALSE(py.present);
  CHECK(py.eval != nullptr);  // the process runs an interpreter; this sample has no read
  REQUIRE(r.python(2, &py).ok());
  CHECK(py.present);
  CHECK(py.state == 2);
  CHECK(py.frames.empty());
  CHECK(py.problem == "frame 0 (0x10) changed during the read");
  CHECK_FALSE(r.python(3, &py).ok());

  // A capture without Python frames is still a version 3 file.
  {
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    { CaptureWriter w(f, kRegsMask, kStackBytes, "x"); REQUIRE(w.finish().ok()); }
    fclose(f);
    uint32_t v3 = 0;
    std::memcpy(&v3, buf + 8, 4);
    free(buf);
    CHECK(v3 == 3);
  }

  // Hostile records: each refused naming what is wrong.
  auto refused = [&](std::vector<uint8_t> b, const std::string& says) {
    auto x = Profile::from_bytes(std::move(b), "", false);
    REQUIRE_FALSE(x.ok());
    CHECK_THAT(x.error().message, Catch::Contains(says));
  };
  const size_t stack_at = record_at(bytes, 9, 0) + 8;
  {
    auto b = bytes;
    b[stack_at + 20] = 7;  // the second frame names code 7 of 2
    refused(b, "Python frame 1 at offset");
    auto s = bytes;
    s[stack_at] = 5;
    refused(s, "Python stack state 5");
    auto t = bytes;
    t[stack_at] = 2;  // torn with frames
    refused(t, "in state 2 has 2 frames");
    auto n = bytes;
    const uint32_t many = 70000;
    std::memcpy(n.data() + stack_at + 4, &many, 4);
    refused(n, "Python stack of 70000 frames");
  }
  {
    auto b = bytes;  // a PYSTACK that follows no SAMPLE: the PYCODE before the first SAMPLE made one
    b[record_at(bytes, 8, 1)] = 9;
    refused(b, "does not follow a sample");
    auto v = bytes;
    const uint32_t three = 3;
    std::memcpy(v.data() + 8, &three, 4);  // kinds 8..10 in a version 3 file
    refused(v, "in a version 3 file");
    auto e = bytes;
    const size_t eval_at = record_at(bytes, 10, 0) + 8;
    std::memcpy(e.data() + eval_at + 16, e.data() + eval_at + 8, 8);  // the first range's end = its start
    refused(e, "is empty");
    auto z = bytes;
    const uint32_t zero = 0;
    std::memcpy(z.data() + eval_at + 4, &zero, 4);
    refused(z, "0 interpreter ranges");
    auto id = bytes;
    id[record_at(bytes, 8, 1) + 8] = 5;
    refused(id, "Python code id 5");
  }
  // Cut anywhere after the header: the complete records are read, the Python frames with them.
  for (size_t n = 32 + 14 + 4 + 24; n < bytes.size(); n++) {
    INFO("cut at " << n);
    auto t = Profile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)), "", false);
    REQUIRE(t.ok());
    for (size_t i = 0; i < t.value()->samples().size(); i++) {
      PySampleView a;
      REQUIRE(t.value()->python(i, &a).ok());
      CHECK(a.frames.size() <= 2);
    }
  }
}

// ---------------------------------------------------------------- RecordStream

namespace {
RecordStream::Order stream_order(uint32_t type) {
  return type == kRecordFinishedRound ? RecordStream::Order::kSkip : RecordStream::Order::kSorted;
}
bool stream_ordered(uint32_t type) { return stream_order(type) == RecordStream::Order::kSorted; }


/// The records a stream hands out, and its final state.
struct Streamed {
  std::vector<RecordRef> refs;
  std::vector<bool> same_bytes;  ///< the bytes handed out are the file's
  RecordStream::State state;
  std::string why;
  uint64_t records = 0, bytes_read = 0;
};

Streamed stream_all(const std::vector<uint8_t>& bytes, int fd, RecordStream::Limits limits = {}) {
  auto pd = PerfData::parse(bytes.data(), bytes.size(), fd, false);
  REQUIRE(pd.ok());
  CHECK(pd.value().records().empty());
  RecordStream s(pd.value(), stream_order, limits);
  Streamed out;
  StreamRecord r;
  while (s.next(&r)) {
    out.refs.push_back(r.ref);
    out.same_bytes.push_back(std::memcmp(r.bytes, bytes.data() + r.ref.offset, r.ref.size) == 0);
  }
  out.state = s.state();
  out.why = s.why();
  out.records = s.records();
  out.bytes_read = s.bytes_read();
  return out;
}

/// The index's records (the oracle: PerfData::parse's stable sort), FINISHED_ROUND left out.
std::vector<RecordRef> indexed(const std::vector<uint8_t>& bytes) {
  auto pd = PerfData::parse(bytes.data(), bytes.size());
  REQUIRE(pd.ok());
  std::vector<RecordRef> out;
  for (const RecordRef& r : pd.value().records())
    if (stream_ordered(r.type)) out.push_back(r);
  return out;
}

void check_same(const Streamed& s, const std::vector<RecordRef>& want) {
  REQUIRE(s.refs.size() == want.size());
  for (size_t i = 0; i < want.size(); i++) {
    INFO("record " << i);
    CHECK(s.refs[i].offset == want[i].offset);
    CHECK(s.refs[i].time == want[i].time);
    CHECK(s.refs[i].type == want[i].type);
    CHECK(s.refs[i].size == want[i].size);
    CHECK(s.refs[i].pid == want[i].pid);
    CHECK(s.refs[i].tid == want[i].tid);
    CHECK(s.same_bytes[i]);
  }
}

}  // namespace

TEST_CASE("RecordStream: the index's order, the file read once, round by round") {
  const uint32_t stack = GENERATE(2048u, 64u);
  const uint64_t runs = 12, per_run = stack > 1024 ? 400 : 2000;
  const std::vector<uint8_t> bytes = rounds_file(runs, per_run, stack);
  INFO("stack " << stack << ", file " << bytes.size() << " bytes");
  const std::vector<RecordRef> want = indexed(bytes);
  REQUIRE(want.size() > runs * per_run);
  Streamed mem = stream_all(bytes, -1);
  CHECK(mem.state == RecordStream::State::kEnd);
  check_same(mem, want);
  CHECK(mem.records == want.size() + runs);  // the FINISHED_ROUND records counted, not handed out
  TempFile tmp;
  REQUIRE(tmp.fd >= 0);
  REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  Streamed file = stream_all(bytes, tmp.fd);
  CHECK(file.state == RecordStream::State::kEnd);
  check_same(file, want);
  // Once (a record that straddles two chunks read again from its start): not twice as the index.
  const double read_x = static_cast<double>(file.bytes_read) / static_cast<double>(bytes.size());
  INFO("bytes read / file bytes = " << read_x);
  CHECK(read_x < 1.1);
}

TEST_CASE("RecordStream: without FINISHED_ROUND, held to the end within the cap, else a fallback naming it") {
  const std::vector<uint8_t> bytes = rounds_file(4, 300, 64, false);
  const std::vector<RecordRef> want = indexed(bytes);
  Streamed all = stream_all(bytes, -1);
  CHECK(all.state == RecordStream::State::kEnd);
  check_same(all, want);
  RecordStream::Limits small;
  small.held_records = 100;
  Streamed capped = stream_all(bytes, -1, small);
  CHECK(capped.state == RecordStream::State::kFallback);
  CHECK(capped.refs.empty());
  CHECK(capped.why.find("more than 100 records held") != std::string::npos);
  TempFile tmp;
  REQUIRE(tmp.fd >= 0);
  REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  RecordStream::Limits bytes_cap;
  bytes_cap.held_bytes = RecordStream::kChunkBytes / 2;
  Streamed file = stream_all(bytes, tmp.fd, bytes_cap);
  if (bytes.size() > RecordStream::kChunkBytes) {
    CHECK(file.state == RecordStream::State::kFallback);
    CHECK(file.why.find("exceed the cap of " + std::to_string(RecordStream::kChunkBytes / 2)) != std::string::npos);
  }
}

TEST_CASE("RecordStream: a round out of order, a record without a time late, a bad record: fallback") {
  SECTION("a later round older than a record handed out") {
    const std::vector<uint8_t> bytes =
        perf_file({sample(10, 0x400000, 0x7ffd0000), finished_round(), sample(20, 0x400000, 0x7ffd0000),
                   finished_round(), sample(30, 0x400000, 0x7ffd0000), finished_round(), sample(15, 0x400000, 0x7ffd0000),
                   finished_round()});
    Streamed s = stream_all(bytes, -1);
    CHECK(s.state == RecordStream::State::kFallback);
    CHECK(s.why.find("(time 15) is older than one handed out (time 20)") != std::string::npos);
    REQUIRE(s.refs.size() == 2);  // 10 and 20; the index (the fallback) puts 15 before 20
    CHECK(indexed(bytes)[1].time == 15);
  }
  SECTION("records without a time after timed ones") {
    const std::vector<uint8_t> bytes = perf_file({sample(10, 0x400000, 0x7ffd0000), finished_round(),
                                                  sample(20, 0x400000, 0x7ffd0000), finished_round(),
                                                  comm("x", 0)});
    Streamed s = stream_all(bytes, -1);
    CHECK(s.state == RecordStream::State::kFallback);
    CHECK(s.why.find("(time 0) is older than one handed out (time 10)") != std::string::npos);
  }
  SECTION("a record whose size runs past the data section") {
    std::vector<uint8_t> bytes = perf_file({sample(10, 0x400000, 0x7ffd0000), finished_round(), sample(20, 0x400000, 0x7ffd0000)});
    auto pd = PerfData::parse(bytes.data(), bytes.size(), -1, false);
    REQUIRE(pd.ok());
    const uint64_t second = pd.value().data_offset() + sample(10, 0x400000, 0x7ffd0000).size() + 8;
    const uint16_t huge = 0xfff8;
    std::memcpy(bytes.data() + second + 6, &huge, 2);
    auto index = PerfData::parse(bytes.data(), bytes.size());
    REQUIRE_FALSE(index.ok());
    Streamed s = stream_all(bytes, -1);
    CHECK(s.state == RecordStream::State::kFallback);
    CHECK(s.why == index.error().message);  // the index's own message
  }
}

namespace {
struct CSample {
  uint64_t time, ip, sp, stack_size;
  int64_t pid, tid;
  std::string comm;
  uint32_t list;
  std::string snapshot;  ///< serialized (registers, the user stack's bytes, modules); "" without one
};
CSample c_sample(const struct sprov_profile_sample& s) {
  std::string snap;
  if (s.snapshot != nullptr) {
    void* out = nullptr;
    size_t len = 0;
    REQUIRE(sprov_snapshot_serialize(s.snapshot, &out, &len) == 0);
    snap.assign(static_cast<const char*>(out), len);
    sprov_free(out);
  }
  return CSample{s.time, s.ip, s.sp, s.stack_size, s.pid, s.tid, s.comm ? s.comm : "", s.module_list, snap};
}
void check_same_sample(const CSample& a, const CSample& b) {
  CHECK(a.time == b.time);
  CHECK(a.ip == b.ip);
  CHECK(a.sp == b.sp);
  CHECK(a.stack_size == b.stack_size);
  CHECK(a.pid == b.pid);
  CHECK(a.tid == b.tid);
  CHECK(a.comm == b.comm);
  CHECK(a.list == b.list);
  CHECK(a.snapshot == b.snapshot);  // read once, the stack is borrowed from the record: the same bytes
}
/// Every sample through sprov_profile_sample of a profile opened with its index (the oracle).
std::vector<CSample> c_indexed(sprov_context* ctx, const char* path, struct sprov_profile_info* info_out) {
  sprov_profile* p = nullptr;
  REQUIRE(sprov_profile_open(ctx, path, nullptr, &p) == 0);
  SPROV_OPTS(sprov_profile_info, info);
  REQUIRE(sprov_profile_info(p, &info) == 0);
  std::vector<CSample> out;
  for (size_t i = 0; i < info.samples; i++) {
    SPROV_OPTS(sprov_profile_sample, s);
    REQUIRE(sprov_profile_sample(p, i, &s) == 0);
    out.push_back(c_sample(s));
  }
  *info_out = info;
  info_out->warnings = info_out->cmdline = info_out->event = info_out->truncation = info_out->kernel_note = nullptr;
  sprov_profile_free(p);
  return out;
}
}  // namespace

TEST_CASE("sprov_profile_next with SPROV_PROFILE_OPEN_STREAM: the samples of sprov_profile_sample, in order") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  SECTION("rounds: read once, perf's lost count at the end without a time") {
    const std::vector<uint8_t> bytes = rounds_file(6, 500, 256, true, true);
    TempFile tmp;
    REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    struct sprov_profile_info want_info;
    const std::vector<CSample> want = c_indexed(ctx, tmp.path, &want_info);
    REQUIRE(want.size() > 3000);
    REQUIRE(!want[0].snapshot.empty());  // the samples have user registers and a stack
    SPROV_OPTS(sprov_profile_open_opts, o, .flags = SPROV_PROFILE_OPEN_STREAM);
    sprov_profile* p = nullptr;
    REQUIRE(sprov_profile_open(ctx, tmp.path, &o, &p) == 0);
    SPROV_OPTS(sprov_profile_info, info);
    REQUIRE(sprov_profile_info(p, &info) == 0);
    CHECK(info.samples == 0);  // none known before they are read
    size_t n = 0, index = 0;
    SPROV_OPTS(sprov_profile_sample, s);
    int rc;
    while ((rc = sprov_profile_next(p, &index, &s)) == 0) {
      INFO("sample " << n);
      REQUIRE(n < want.size());
      CHECK(index == n);
      check_same_sample(c_sample(s), want[n]);
      if (n > 0) {  // only the last one is held
        SPROV_OPTS(sprov_profile_sample, old);
        CHECK(sprov_profile_sample(p, n - 1, &old) == SPROV_ERR_INVALID_ARG);
      }
      n++;
    }
    CHECK(rc == SPROV_ERR_NOT_FOUND);
    CHECK(n == want.size());
    REQUIRE(sprov_profile_info(p, &info) == 0);
    CHECK(info.samples == want_info.samples);
    CHECK(info.records == want_info.records);
    CHECK(info.lost == want_info.lost);
    CHECK(info.lost == 77);
    CHECK(info.module_lists == want_info.module_lists);
    sprov_profile_free(p);
  }
  SECTION("a round out of order before any sample: read with the index instead") {
    const std::vector<uint8_t> bytes =
        perf_file({mmap2(0x400000, 0x1000, "/nonexistent/spin", 5), finished_round(),
                   mmap2(0x500000, 0x1000, "/nonexistent/lib", 6), finished_round(), comm("late", 1),
                   sample(20, 0x400123, 0x7ffd0000), finished_round(), sample(10, 0x400456, 0x7ffd0100)});
    TempFile tmp;
    REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    struct sprov_profile_info want_info;
    const std::vector<CSample> want = c_indexed(ctx, tmp.path, &want_info);
    REQUIRE(want.size() == 2);
    SPROV_OPTS(sprov_profile_open_opts, o, .flags = SPROV_PROFILE_OPEN_STREAM);
    sprov_profile* p = nullptr;
    REQUIRE(sprov_profile_open(ctx, tmp.path, &o, &p) == 0);
    size_t index = 0;
    for (size_t n = 0; n < want.size(); n++) {
      SPROV_OPTS(sprov_profile_sample, s);
      REQUIRE(sprov_profile_next(p, &index, &s) == 0);
      CHECK(index == n);
      check_same_sample(c_sample(s), want[n]);
    }
    SPROV_OPTS(sprov_profile_sample, s);
    CHECK(sprov_profile_next(p, &index, &s) == SPROV_ERR_NOT_FOUND);
    sprov_profile_free(p);
  }
  SECTION("a round out of order after samples were handed out: SPROV_ERR_LIMIT naming it") {
    const std::vector<uint8_t> bytes =
        perf_file({sample(10, 0x400000, 0x7ffd0000), finished_round(), sample(20, 0x400000, 0x7ffd0000),
                   finished_round(), sample(30, 0x400000, 0x7ffd0000), finished_round(), sample(15, 0x400000, 0x7ffd0000),
                   finished_round()});
    TempFile tmp;
    REQUIRE(write(tmp.fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    SPROV_OPTS(sprov_profile_open_opts, o, .flags = SPROV_PROFILE_OPEN_STREAM);
    sprov_profile* p = nullptr;
    REQUIRE(sprov_profile_open(ctx, tmp.path, &o, &p) == 0);
    size_t index = 0;
    int rc = 0, n = 0;
    SPROV_OPTS(sprov_profile_sample, s);
    while ((rc = sprov_profile_next(p, &index, &s)) == 0) n++;
    CHECK(n == 2);
    CHECK(rc == SPROV_ERR_LIMIT);
    CHECK(index == SIZE_MAX);
    CHECK(std::string(sprov_last_error_message()).find("(time 15) is older than one handed out (time 20)") != std::string::npos);
    sprov_profile_free(p);
  }
  SECTION("unknown flags are refused") {
    SPROV_OPTS(sprov_profile_open_opts, o, .flags = 2u);
    sprov_profile* p = nullptr;
    CHECK(sprov_profile_open(ctx, "/nonexistent", &o, &p) == SPROV_ERR_INVALID_ARG);
  }
  sprov_context_free(ctx);
}
