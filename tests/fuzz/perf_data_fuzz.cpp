// SPDX-License-Identifier: Apache-2.0
// Fuzz target: perf.data and capture-file parsing, then every sample's snapshot and Python frames (no module files opened);
// the same bytes read through a file (perf::RecordSource's pread windows) give the records read from memory, and
// read once (perf::RecordStream, Profile::next_sample) the index's records and samples in its order, or a fallback.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "perf/perf_data.hpp"
#include "perf/profile.hpp"
#include "perf/record_stream.hpp"

namespace {

stackprov::perf::RecordStream::Order stream_order(uint32_t type) {
  using stackprov::perf::RecordStream;
  return type == stackprov::perf::kRecordFinishedRound ? RecordStream::Order::kSkip : RecordStream::Order::kSorted;
}

/// A RecordStream over `data` (from memory, or through `fd`) that reaches its end hands out the
/// index's records (`index`, FINISHED_ROUND left out) in the index's order, with the same bytes;
/// when the index refuses the file, the stream does not reach its end.
void check_stream(const uint8_t* data, size_t size, int fd,
                  const stackprov::Result<stackprov::perf::PerfData>& index) {
  using namespace stackprov::perf;
  auto pd = PerfData::parse(data, size, fd, false);
  if (!pd.ok()) {
    if (index.ok()) abort();  // the header-only parse refuses only what the index refuses
    return;
  }
  RecordStream s(pd.value(), stream_order);
  std::vector<StreamRecord> got;
  StreamRecord r;
  while (s.next(&r)) {
    if (r.bytes == nullptr || std::memcmp(r.bytes, data + r.ref.offset, r.ref.size) != 0) abort();
    got.push_back(r);
  }
  if (s.state() != RecordStream::State::kEnd) return;  // a fallback: the caller reads with the index
  if (!index.ok()) abort();
  size_t k = 0;
  for (const RecordRef& w : index.value().records()) {
    if (w.type == kRecordFinishedRound) continue;
    if (k >= got.size()) abort();
    const RecordRef& g = got[k].ref;
    if (g.offset != w.offset || g.time != w.time || g.type != w.type || g.size != w.size || g.pid != w.pid ||
        g.tid != w.tid || got[k].refused != index.value().sample_refused(w.offset))
      abort();
    k++;
  }
  if (k != got.size() || s.truncation().partial_bytes != index.value().truncation().partial_bytes) abort();
}

/// The records of a perf.data read through a memfd holding `data`: the same index (offsets, types,
/// times, pids, tids, refused samples), the same bytes of every record, the same error.
void check_file_source(const uint8_t* data, size_t size) {
  using stackprov::perf::PerfData;
  auto mem = PerfData::parse(data, size);
  const int fd = memfd_create("fuzz_perf_data", MFD_CLOEXEC);
  if (fd < 0) return;
  for (size_t done = 0; done < size;) {
    const ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) {
      close(fd);
      return;
    }
    done += static_cast<size_t>(w);
  }
  auto file = PerfData::parse(data, size, fd);
  if (mem.ok() != file.ok()) abort();
  if (!mem.ok()) {
    if (mem.error().message != file.error().message) abort();
    check_stream(data, size, fd, mem);
    close(fd);
    return;
  }
  check_stream(data, size, -1, mem);
  check_stream(data, size, fd, mem);
  const auto& a = mem.value().records();
  const auto& b = file.value().records();
  if (a.size() != b.size()) abort();
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i].offset != b[i].offset || a[i].time != b[i].time || a[i].type != b[i].type || a[i].size != b[i].size ||
        a[i].pid != b[i].pid || a[i].tid != b[i].tid ||
        mem.value().sample_refused(a[i].offset) != file.value().sample_refused(b[i].offset))
      abort();
    const uint8_t* ra = mem.value().record(a[i]);
    const uint8_t* rb = file.value().record(b[i]);
    if (ra == nullptr || rb == nullptr || std::memcmp(ra, rb, a[i].size) != 0) abort();
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_file_source(data, size);
  auto p = stackprov::perf::Profile::from_bytes(std::vector<uint8_t>(data, data + size), "", false);
  // Read once: the index's samples in its order, or an error (the caller then uses the index).
  auto once = stackprov::perf::Profile::from_bytes(std::vector<uint8_t>(data, data + size), "", false, true);
  if (once.ok()) {
    size_t i = 0, k = 0;
    stackprov::Result<bool> more = false;
    while ((more = once.value()->next_sample(&i)).ok() && more.value()) {
      if (!p.ok()) continue;  // handed out before the record the index refuses; the end is not reached
      if (i != k || k >= p.value()->samples().size()) abort();
      const auto& a = p.value()->samples()[k];
      const auto& b = once.value()->samples()[i];
      if (a.offset != b.offset || a.time != b.time || a.pid != b.pid || a.tid != b.tid || a.list != b.list ||
          p.value()->comms().at(a.comm) != once.value()->comms().at(b.comm))
        abort();
      k++;
    }
    if (more.ok() && (!p.ok() || k != p.value()->samples().size() || once.value()->lost() != p.value()->lost() ||
                      once.value()->records() != p.value()->records() ||
                      once.value()->warnings() != p.value()->warnings() ||
                      once.value()->truncation() != p.value()->truncation()))
      abort();
  }
  if (!p.ok()) return 0;
  stackprov::memory::Snapshot s;
  uint32_t list = UINT32_MAX;
  bool changed = false;
  const size_t n = p.value()->samples().size();
  for (size_t i = 0; i < n && i < 4096; i++) {
    stackprov::perf::SampleView v;
    (void)p.value()->fill_snapshot(i, s, &list, &changed, &v);
    stackprov::perf::PySampleView py;
    if (p.value()->python(i, &py).ok())
      for (const auto& f : py.frames) (void)p.value()->py_codes().at(f.code);  // ids were checked at indexing
  }
  return 0;
}
