// SPDX-License-Identifier: Apache-2.0
// PerfMap: /tmp/perf-PID.map lines as perf's jit-interface.txt defines them (hex START SIZE NAME, 0x optional).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "symbolize/perf_map.hpp"

using stackprov::symbolize::PerfMap;

namespace {
std::string write_map(const std::string& text) {
  char name[] = "/tmp/stackprov-perfmap-XXXXXX";
  int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  FILE* f = fdopen(fd, "w");
  fputs(text.c_str(), f);
  fclose(f);
  return name;
}
}  // namespace

TEST_CASE("perf map: hex with and without 0x, names with spaces, bounds") {
  const std::string path = write_map(
      "7f0000001000 40 LazyCompile:~outer /srv/app.js:3\n"
      "0x7f0000002000 0x10 Builtin: ArgumentsAdaptorTrampoline\n"
      "not a line\n"
      "7f0000003000 0 zero-sized\n");
  auto m = PerfMap::load_file(path);
  std::remove(path.c_str());
  REQUIRE(m);
  CHECK(m->size() == 2);
  REQUIRE(m->find(0x7f0000001000));
  CHECK(m->find(0x7f000000103f)->name == "LazyCompile:~outer /srv/app.js:3");
  CHECK(m->find(0x7f0000001040) == nullptr);
  CHECK(m->find(0x7f0000000fff) == nullptr);
  CHECK(m->find(0x7f0000002008)->name == "Builtin: ArgumentsAdaptorTrampoline");
  CHECK(m->find(0x7f0000003000) == nullptr);
  CHECK(m->ranges() == std::vector<std::pair<uint64_t, uint64_t>>{{0x7f0000001000, 0x7f0000001040},
                                                                   {0x7f0000002000, 0x7f0000002010}});
}

TEST_CASE("perf map: a later line wins over the code it replaced") {
  const std::string path = write_map("1000 100 old\n1080 10 new\n");
  auto m = PerfMap::load_file(path);
  std::remove(path.c_str());
  REQUIRE(m);
  CHECK(m->find(0x1085)->name == "new");
  CHECK(m->find(0x1000) == nullptr);  // the old entry overlapped newer code: dropped as a whole
  CHECK(PerfMap::load_pid(-1) == nullptr);
}
