// SPDX-License-Identifier: Apache-2.0
// add_modules_from_maps on a hostile target's listing: what the snapshot cannot hold is left out, not fatal.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/module_map.hpp"
#include "memory/module_list.hpp"
#include "memory/snapshot.hpp"

using namespace stackprov;
using namespace stackprov::memory;

TEST_CASE("module list: a path over the snapshot's limit leaves that module out, not the capture",
          "[memory][hostile]") {
  // review of module_list.cpp: a target can map an executable file under a path longer than a
  // snapshot module path may be (the kernel prints 5,000-byte lines); that failed the whole capture.
  std::vector<MapsEntry> maps(3);
  for (size_t i = 0; i < maps.size(); i++) {
    maps[i].start = 0x400000 + i * 0x10000;
    maps[i].end = maps[i].start + 0x1000;
    maps[i].readable = maps[i].executable = true;
  }
  maps[0].path = "/nonexistent-stackprov/a.so";
  maps[1].path = "/nonexistent-stackprov/" + std::string(5000, 'd') + "/b.so";
  maps[2].path = "/nonexistent-stackprov/c.so";
  Snapshot s;
  s.arch = Arch::kX86_64;
  std::string warnings;
  REQUIRE(add_modules_from_maps(s, maps, "", &warnings).ok());
  REQUIRE(s.modules.size() == 2);
  CHECK(s.modules[0].path == maps[0].path);
  CHECK(s.modules[1].path == maps[2].path);
  CHECK_THAT(warnings, Catch::Contains("exceeds the limit") && Catch::Contains("(left out)"));
}

TEST_CASE("module list: a [vdso] line claiming gigabytes is not allocated", "[memory][hostile]") {
  // review: the vDSO's bytes were allocated (end - start) before the 64 MiB check.
  std::vector<MapsEntry> maps(1);
  maps[0].start = 0x7fff00000000;
  maps[0].end = maps[0].start + (uint64_t{64} << 30);  // 64 GiB
  maps[0].executable = true;
  maps[0].path = "[vdso]";
  Snapshot s;
  s.arch = Arch::kX86_64;
  REQUIRE(add_modules_from_maps(s, maps, "", nullptr).ok());
  REQUIRE(s.modules.size() == 1);
  CHECK(s.modules[0].build_id.empty());
}
