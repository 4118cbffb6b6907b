// SPDX-License-Identifier: Apache-2.0
// ModuleTracker: mmap replacement semantics against a page-by-page model, and its bounds on hostile records.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <map>
#include <string>
#include <vector>

#include "perf/module_tracker.hpp"
#include "perf/perf_data.hpp"

using namespace stackprov;
using namespace stackprov::perf;

namespace {

RawMmap mmap_rec(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, bool exec, std::string path) {
  RawMmap m;
  m.pid = m.tid = pid;
  m.start = start;
  m.len = len;
  m.pgoff = pgoff;
  m.prot = PROT_READ | (exec ? PROT_EXEC : 0);
  m.path = std::move(path);
  return m;
}

}  // namespace

TEST_CASE("module tracker: random mmaps agree with a page-by-page model of mmap", "[perf][tracker]") {
  // The model: each page holds the last executable file mapping written over it (path and file
  // offset), or nothing after a data mapping. The tracker's list must name the same at every page.
  constexpr uint64_t kPage = 0x1000, kPages = 256, kBase = 0x400000;
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  std::vector<std::pair<std::string, uint64_t>> model(kPages);  // path ("" none), file offset
  uint64_t x = 0x2545f4914f6cdd1d;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int r = 0; r < 3000; r++) {
    const uint64_t first = next() % kPages, n = 1 + next() % 16;
    const uint64_t last = std::min(kPages, first + n);
    const bool exec = next() % 3 != 0;
    const std::string path = "/lib/m" + std::to_string(next() % 7) + ".so";
    const uint64_t pgoff = (next() % 64) * kPage;
    t.on_mmap(mmap_rec(42, kBase + first * kPage, (last - first) * kPage, pgoff, exec, path));
    for (uint64_t p = first; p < last; p++) model[p] = exec ? std::make_pair(path, pgoff + (p - first) * kPage)
                                                            : std::make_pair(std::string(), uint64_t{0});
    if (r % 100 != 99) continue;
    const ModuleList& l = *t.lists()[t.list_for(42)];
    std::vector<std::pair<std::string, uint64_t>> got(kPages);
    for (const auto& m : l.modules) {
      REQUIRE(m.start >= kBase);
      REQUIRE(m.end <= kBase + kPages * kPage);
      for (uint64_t a = m.start; a < m.end; a += kPage) got[(a - kBase) / kPage] = {m.path, m.file_offset + (a - m.start)};
    }
    for (uint64_t p = 0; p < kPages; p++) {
      INFO("round " << r << " page " << p);
      REQUIRE(got[p] == model[p]);
    }
  }
}

TEST_CASE("module tracker: forks and mmaps cannot multiply mappings without bound", "[perf][tracker][hostile]") {
  // review of module_tracker.cpp: a 40-byte FORK copied every mapping of its parent. Now all
  // processes together hold at most 2^20 mappings; children past that start without modules.
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  constexpr uint64_t kMaps = 4096;
  for (uint64_t i = kMaps; i-- > 0;)  // descending: each insert lands at the front
    t.on_mmap(mmap_rec(1, 0x10000000 + i * 0x2000, 0x1000, 0, true, "/lib/a" + std::to_string(i) + ".so"));
  REQUIRE(t.lists()[t.list_for(1)]->modules.size() == kMaps);
  size_t full = 0, empty = 0;
  for (uint32_t child = 2; child < 2 + 300; child++) {
    RawTask f;
    f.pid = f.tid = child;
    f.ppid = f.ptid = 1;
    t.on_fork(f);
    const size_t n = t.lists()[t.list_for(child)]->modules.size();
    if (n == kMaps) full++;
    else if (n == 0) empty++;
  }
  // 2^20 / 4096 = 256 processes' worth: the parent and 255 children.
  CHECK(full == 255);
  CHECK(empty == 300 - 255);
  CHECK_THAT(t.warnings(), Catch::Contains("forked children start without modules"));
}
