// SPDX-License-Identifier: Apache-2.0
// Fuzz target: perf.data and capture-file parsing, then every sample's snapshot and Python frames (no module files opened);
// the same bytes read through a file (perf::RecordSource's pread windows) give the records read from memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "perf/perf_data.hpp"
#include "perf/profile.hpp"

namespace {

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
    close(fd);
    return;
  }
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
