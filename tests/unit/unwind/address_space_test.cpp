// SPDX-License-Identifier: Apache-2.0
// AddressSpace generations: incremental updates with mmap/munmap/exec semantics, and readers that pin versions while a writer publishes.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "unwind/address_space.hpp"

using namespace stackprov;
using namespace stackprov::unwind;

namespace {

perf::RawMmap code(uint64_t start, uint64_t len, const std::string& path) {
  perf::RawMmap m;
  m.start = start;
  m.len = len;
  m.prot = PROT_READ | PROT_EXEC;
  m.path = path;
  return m;
}

}  // namespace

TEST_CASE("address space: mmap, munmap and exec semantics, one generation per changing update") {
  auto loader = [](const memory::SnapshotModule& m, const memory::Snapshot&) -> Result<std::shared_ptr<LoadedModule>> {
    return make_error(SPROV_ERR_NOT_FOUND, "%s: not loaded", m.path.c_str());
  };
  AddressSpace as(4242, "/nonexistent-root", loader, false);
  CHECK(as.generation() == 0);
  REQUIRE(as.update([](AddressSpace::Batch& b) {
              if (Status st = b.mmap(code(0x10000, 0x4000, "/lib/a.so")); !st.ok()) return st;
              return b.mmap(code(0x20000, 0x2000, "/lib/b.so"));
            }).ok());
  CHECK(as.generation() == 1);  // one publish for the batch
  REQUIRE(as.current().modules.size() == 2);
  CHECK(as.current().table.find(0x11000) != nullptr);
  CHECK(as.current().table.find(0x11000)->module == nullptr);  // loader refused: no unwind info
  CHECK(as.current().warnings.find("/lib/a.so") != std::string::npos);

  // A mapping over the middle of a.so splits it (mmap semantics).
  REQUIRE(as.update([](AddressSpace::Batch& b) { return b.mmap(code(0x11000, 0x1000, "/lib/c.so")); }).ok());
  CHECK(as.generation() == 2);
  REQUIRE(as.current().modules.size() == 4);
  CHECK(as.current().modules[0].end == 0x11000);
  CHECK(as.current().modules[1].path == "/lib/c.so");
  CHECK(as.current().modules[2].start == 0x12000);
  CHECK(as.current().modules[2].file_offset == 0x2000);

  // No change: no new generation.
  REQUIRE(as.update([](AddressSpace::Batch& b) { return b.unmap(0x90000, 0x91000); }).ok());
  CHECK(as.generation() == 2);

  // [uprobes] is a trampoline range, not a module; munmap removes code; exec drops everything.
  REQUIRE(as.update([](AddressSpace::Batch& b) {
              if (Status st = b.mmap(code(0x7000, 0x1000, "[uprobes]")); !st.ok()) return st;
              return b.unmap(0x20000, 0x22000);
            }).ok());
  CHECK(as.generation() == 3);
  REQUIRE(as.current().trampolines.size() == 1);
  CHECK(as.current().trampolines[0].start == 0x7000);
  CHECK(as.current().modules.size() == 3);
  REQUIRE(as.update([](AddressSpace::Batch& b) {
              b.exec();
              return Status();
            }).ok());
  CHECK(as.generation() == 4);
  CHECK(as.current().modules.empty());
  CHECK(as.current().trampolines.empty());
  CHECK(as.live_versions() == 1);  // every older generation was freed (no reader pinned it)

  // A bad range is an error naming it; the state is unchanged.
  Status st = as.update([](AddressSpace::Batch& b) { return b.unmap(0x3000, 0x2000); });
  REQUIRE(!st.ok());
  CHECK(st.error().message.find("0x3000") != std::string::npos);
}

TEST_CASE("address space: readers never see a freed or half-built generation while a writer publishes") {
  auto loader = [](const memory::SnapshotModule& m, const memory::Snapshot&) -> Result<std::shared_ptr<LoadedModule>> {
    return make_error(SPROV_ERR_NOT_FOUND, "%s", m.path.c_str());
  };
  AddressSpace as(4242, "/nonexistent-root", loader, false);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; t++) {
    readers.emplace_back([&] {
      uint64_t last = 0;
      while (!stop.load()) {
        PinnedVersion v(as);
        // Generation g (g >= 1) holds modules 0..(g-1) % 5: a table consistent with its number.
        const size_t want = v->generation == 0 ? 0 : (v->generation - 1) % 5 + 1;
        if (v->generation < last || v->modules.size() != want || v->table.size() != want) bad++;
        for (size_t i = 0; i < v->modules.size(); i++)
          if (v->table.find(v->modules[i].start) == nullptr) bad++;
        last = v->generation;
        reads++;
      }
    });
  }
  // At least 2,000 publishes, and more until the readers have read while it publishes (on a
  // loaded machine the readers may get no CPU during the first 2,000).
  for (int g = 1; g <= 2000 || (reads.load() < 100 && g <= 400000); g++) {
    const int n = (g - 1) % 5 + 1;
    REQUIRE(as.update([&](AddressSpace::Batch& b) {
                b.exec();
                for (int i = 0; i < n; i++)
                  if (Status st = b.mmap(code(0x100000 + 0x10000 * i, 0x1000, "/lib/m" + std::to_string(i) + ".so"));
                      !st.ok())
                    return st;
                return Status();
              }).ok());
    REQUIRE(as.generation() == static_cast<uint64_t>(g));
    REQUIRE(as.live_versions() <= AddressSpace::kSlots);
  }
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(bad.load() == 0);
  CHECK(reads.load() > 0);
  // The next publish reclaims whatever the readers held at the end.
  REQUIRE(as.update([](AddressSpace::Batch& b) {
              b.exec();
              return Status();
            }).ok());
  CHECK(as.live_versions() == 1);
}
