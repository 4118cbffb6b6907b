// SPDX-License-Identifier: Apache-2.0
// PerfMap: /tmp/perf-PID.map lines as perf's jit-interface.txt defines them (hex START SIZE NAME, 0x optional).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

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

TEST_CASE("perf map: random overlapping lines against a brute-force reading of the rule") {
  // The rule (jit-interface.txt's "later lines win"): a line is kept unless a later line overlaps it.
  // The reference applies it to every pair; the map must agree at every probed address.
  uint64_t x = 0x9e3779b97f4a7c15;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  std::vector<PerfMap::Entry> lines;
  for (int i = 0; i < 1500; i++) {
    std::string name = "f";  // appended, not "f" + string&& (GCC 12 -Wrestrict false positive, PR 105329)
    name += std::to_string(i);
    lines.push_back({0x10000 + next() % 0x8000, 1 + next() % 0x100, std::move(name)});
  }
  std::string text;
  for (const auto& e : lines) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%llx %llx ", static_cast<unsigned long long>(e.start),
                  static_cast<unsigned long long>(e.size));
    text += buf;
    text += e.name;
    text += '\n';
  }
  auto m = PerfMap::parse("random.map", text);
  REQUIRE(m);
  std::vector<bool> kept(lines.size(), true);
  for (size_t i = 0; i < lines.size(); i++)
    for (size_t j = i + 1; j < lines.size() && kept[i]; j++)
      if (lines[j].start < lines[i].start + lines[i].size && lines[i].start < lines[j].start + lines[j].size)
        kept[i] = false;
  size_t n_kept = 0;
  for (size_t i = 0; i < lines.size(); i++) n_kept += kept[i];
  CHECK(m->size() == n_kept);
  for (uint64_t a = 0xff00; a < 0x18200; a += 3) {
    const PerfMap::Entry* want = nullptr;
    for (size_t i = 0; i < lines.size(); i++)
      if (kept[i] && a >= lines[i].start && a < lines[i].start + lines[i].size) want = &lines[i];
    const PerfMap::Entry* got = m->find(a);
    REQUIRE((got == nullptr) == (want == nullptr));
    if (got) CHECK(got->name == want->name);
  }
}

TEST_CASE("perf map: a JIT's 400,000 lines in address order are all found") {
  // Newest code last at rising addresses: the order that made the old overlap check quadratic
  // (23 s for these lines; doc/hardening.md "Findings").
  std::string text;
  constexpr int kLines = 400000;
  for (int i = 0; i < kLines; i++) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "%x 40 LazyCompile:~f%d /x.js:1\n", 0x10000000 + i * 0x80, i);
    text += buf;
  }
  auto m = PerfMap::parse("big.map", text);
  REQUIRE(m);
  CHECK(m->size() == kLines);
  for (int i = 0; i < kLines; i += 997) {
    const PerfMap::Entry* e = m->find(0x10000000 + uint64_t(i) * 0x80 + 0x3f);
    REQUIRE(e);
    char want[64];
    std::snprintf(want, sizeof want, "LazyCompile:~f%d /x.js:1", i);
    CHECK(e->name == want);
    CHECK(m->find(0x10000000 + uint64_t(i) * 0x80 + 0x40) == nullptr);
  }
  CHECK(m->ranges().size() == kLines);  // 0x40 bytes of every 0x80: none adjacent
}

TEST_CASE("perf map: only a regular file owned by the process's owner or root is read (perf's rule)",
          "[hostile]") {
  // review: any user could write /tmp/perf-PID.map for a process that never made one, or make it a
  // FIFO (the profiler hung) or a symlink to /dev/zero (read forever).
  char tmpl[] = "/tmp/stackprov-perfmap-dir-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, path = dir + "/perf-" + std::to_string(getpid()) + ".map";
  {
    std::ofstream f(path);
    f << "1000 10 jitted\n";
  }
  REQUIRE(PerfMap::load_pid(getpid(), dir));  // ours
  REQUIRE(geteuid() == 0);  // to give the map to another user (the tests run as root, as CI does)
  REQUIRE(chown(path.c_str(), 65534, 65534) == 0);
  CHECK(PerfMap::load_pid(getpid(), dir) == nullptr);
  std::remove(path.c_str());
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  CHECK(PerfMap::load_pid(getpid(), dir) == nullptr);  // returns at once: not a regular file
  CHECK(PerfMap::load_file(path) == nullptr);
  std::remove(path.c_str());
  REQUIRE(symlink("/dev/zero", path.c_str()) == 0);
  CHECK(PerfMap::load_file(path) == nullptr);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}
