// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the CPython 3.11 frame reader and the sampler of record --python over a hostile memory image, and the location-table decoder.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "memory/memory_reader.hpp"
#include "runtime/python.hpp"

using namespace stackprov;

namespace {

[[noreturn]] void fail() { abort(); }

/// The input as target memory at kBase (and, mirrored, every pointer the reader follows lands in
/// it often: pointers are read from the same bytes).
class BlobReader final : public memory::MemoryReader {
 public:
  static constexpr uint64_t kBase = 0x10000;
  BlobReader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool read(uint64_t addr, void* buf, size_t len) override {
    if (addr < kBase || addr - kBase > n_ || len > n_ - (addr - kBase)) return false;
    std::memcpy(buf, d_ + (addr - kBase), len);
    return true;
  }
  const char* name() const override { return "blob"; }

 private:
  const uint8_t* d_;
  size_t n_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  BlobReader mem(data, size);
  runtime::PythonTarget t;
  t.runtime_addr = BlobReader::kBase;
  t.layout = runtime::python311_layout();
  runtime::PythonLimits lim;
  lim.max_interpreters = 4;
  lim.max_threads = 16;
  lim.max_frames = 256;
  lim.max_string_bytes = 64;
  lim.max_linetable_bytes = 4096;
  lim.max_dict_entries = 256;
  auto r = runtime::read_python_threads(mem, t, lim);
  if (r.ok()) {
    if (r.value().size() > size_t{lim.max_interpreters} * lim.max_threads) fail();
    for (const auto& th : r.value()) {
      if (th.frames.size() > lim.max_frames) fail();
      if (th.name.size() > 4 * lim.max_string_bytes + 3) fail();
      for (const auto& f : th.frames)
        if (f.function.size() > 4 * lim.max_string_bytes + 3 || f.file.size() > 4 * lim.max_string_bytes + 3) fail();
    }
  }
  // The sampler of record --python over the same memory: each thread read twice (the second time
  // from its caches, checked again), within the same limits; a tid of no thread state has no frames.
  runtime::PythonSampler sampler(mem, t, lim);
  const std::vector<int64_t> tids = r.ok() && !r.value().empty() ? std::vector<int64_t>{r.value()[0].tid, -1}
                                                                  : std::vector<int64_t>{0};
  for (int pass = 0; pass < 2; pass++)
    for (int64_t tid : tids) {
      const runtime::PythonStackRead s = sampler.read(tid);
      if (s.frames.size() > lim.max_frames) fail();
      if (s.state == runtime::PythonStackRead::kTorn) fail();  // the memory does not change here
    }
  for (int64_t unit = -1; unit < 64; unit += 7) (void)runtime::python311_addr2line(data, size, 1, unit);
  return 0;
}
