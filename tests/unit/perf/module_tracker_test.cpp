// SPDX-License-Identifier: Apache-2.0
// ModuleTracker: mmap replacement semantics against a page-by-page model, and its bounds on hostile records.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// A FORK or EXIT record of process `pid` (its main thread), child of `ppid`.
RawTask task(uint32_t pid, uint32_t ppid) {
  RawTask f;
  f.pid = f.tid = pid;
  f.ppid = f.ptid = ppid;
  return f;
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

TEST_CASE("module tracker: forked processes share nothing they can see: each agrees with its own model", "[perf][tracker]") {
  // fork(2) gives the child a copy of the parent's mappings; from then on each changes only its own
  // (the tracker shares the table copy-on-write, and the parent's list until either changes). The
  // model: per process, each page's last executable file mapping, copied at fork, cleared at exec.
  constexpr uint64_t kPage = 0x1000, kPages = 64, kBase = 0x400000;
  using Model = std::vector<std::pair<std::string, uint64_t>>;  // path ("" none), file offset
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  std::map<uint32_t, Model> model{{1, Model(kPages)}};
  uint64_t x = 0x9e3779b97f4a7c15;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  auto pick = [&] {
    auto it = model.begin();
    std::advance(it, next() % model.size());
    return it->first;
  };
  uint32_t next_pid = 2;
  size_t lists_before = 0;
  for (int r = 0; r < 4000; r++) {
    const uint64_t op = next() % 10;
    if (op == 0 && model.size() < 40) {  // fork: the child's list is its parent's while neither changes
      const uint32_t parent = pick(), child = next_pid++;
      const uint32_t parent_list = t.list_for(parent);
      lists_before = t.lists().size();
      t.on_fork(task(child, parent));
      model[child] = model[parent];
      CHECK(t.list_for(child) == parent_list);
      CHECK(t.lists().size() == lists_before);
    } else if (op == 1) {  // exec: a new address space
      const uint32_t pid = pick();
      RawComm c;
      c.pid = c.tid = pid;
      c.exec = true;
      c.comm = "x";
      t.on_comm(c);
      model[pid] = Model(kPages);
    } else {
      const uint32_t pid = pick();
      const uint64_t first = next() % kPages, n = 1 + next() % 8;
      const uint64_t last = std::min(kPages, first + n);
      const bool exec = next() % 3 != 0;
      const std::string path = "/lib/m" + std::to_string(next() % 5) + ".so";
      const uint64_t pgoff = (next() % 16) * kPage;
      t.on_mmap(mmap_rec(pid, kBase + first * kPage, (last - first) * kPage, pgoff, exec, path));
      for (uint64_t p = first; p < last; p++)
        model[pid][p] = exec ? std::make_pair(path, pgoff + (p - first) * kPage) : std::make_pair(std::string(), uint64_t{0});
    }
    if (r % 50 != 49) continue;
    for (const auto& [pid, want] : model) {
      const ModuleList& l = *t.lists()[t.list_for(pid)];
      Model got(kPages);
      for (const auto& m : l.modules) {
        REQUIRE(m.start >= kBase);
        REQUIRE(m.end <= kBase + kPages * kPage);
        for (uint64_t a = m.start; a < m.end; a += kPage) got[(a - kBase) / kPage] = {m.path, m.file_offset + (a - m.start)};
      }
      for (uint64_t p = 0; p < kPages; p++) {
        INFO("round " << r << " pid " << pid << " page " << p);
        REQUIRE(got[p] == want[p]);
      }
    }
  }
  CHECK(next_pid > 20);  // the walk forked often enough to mean something
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

namespace {

// A parent (pid 1) with `n` executable mappings.
void map_parent(ModuleTracker& t, uint64_t n) {
  for (uint64_t i = n; i-- > 0;)  // descending: each insert lands at the front
    t.on_mmap(mmap_rec(1, 0x10000000 + i * 0x2000, 0x1000, 0, true, "/lib/a" + std::to_string(i) + ".so"));
}

// `n` children of pid 1 from `first` on, each forked and exited.
void fork_and_exit(ModuleTracker& t, uint32_t first, uint32_t n) {
  for (uint32_t c = first; c < first + n; c++) {
    t.on_fork(task(c, 1));
    t.on_exit(task(c, 1));
  }
}

size_t modules_of(ModuleTracker& t, uint32_t pid) { return t.lists()[t.list_for(pid)]->modules.size(); }

}  // namespace

TEST_CASE("module tracker: exited processes are freed, the live ones keep their modules", "[perf][tracker]") {
  // A server forking a child per request, each exiting: before on_exit, the children's copies of
  // the parent's mappings were never freed and, after 255 children, new ones started without
  // modules (the test above). fork(2) gives a child its parent's mappings: every child must have
  // the parent's list, however many came and went before it.
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  constexpr uint64_t kMaps = 4096;
  map_parent(t, kMaps);
  RawTask thread = task(1, 1);  // a thread of the parent ends (pid != tid): the process runs on
  thread.tid = 7;
  t.on_exit(thread);
  // The parent is sampled before it forks (its list is built; the children share it until they
  // change: the copy-on-write path; a child of a parent never sampled builds its own, checked by
  // the model test above).
  REQUIRE(modules_of(t, 1) == kMaps);
  size_t full = 0;
  constexpr uint32_t kChildren = 600;  // 2.3 times the 2^20 mappings of all processes (2,000 took 59 s under ASan)
  for (uint32_t child = 2; child < 2 + kChildren; child++) {
    t.on_fork(task(child, 1));
    // a record of the child after its EXIT (its main thread's last sample) still has them
    t.on_exit(task(child, 1));
    t.on_sample(child, child);
    if (modules_of(t, child) == kMaps) full++;
  }
  CHECK(full == kChildren);
  CHECK(t.warnings().empty());
  CHECK(modules_of(t, 1) == kMaps);
}

TEST_CASE("module tracker: exited processes are kept for the 4,096 exits that follow", "[perf][tracker]") {
  // The documented window: with no pressure on the bound, an exited process is freed when the
  // 4,097th exit after it comes, oldest first.
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  map_parent(t, 4);
  fork_and_exit(t, 100, 10);         // pids 100..109 exit first
  fork_and_exit(t, 1000, 4096 - 5);  // 4,091 more: 100..104 are the oldest five of 4,101
  for (uint32_t pid = 100; pid < 110; pid++) {
    INFO("pid " << pid);
    CHECK(modules_of(t, pid) == (pid < 105 ? 0u : 4u));  // freed: a sample finds no modules
  }
  CHECK(modules_of(t, 1000 + 4096 - 6) == 4);
}

TEST_CASE("module tracker: a process running after its main thread's EXIT is not freed", "[perf][tracker]") {
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  map_parent(t, 4);
  // 10: its main thread ends with pthread_exit, another thread goes on sampling
  t.on_fork(task(10, 1));
  t.on_exit(task(10, 1));
  t.on_sample(10, 11);
  // 20: a second thread exec's (the kernel ends the old main thread first: EXIT, then COMM exec)
  t.on_fork(task(20, 1));
  t.on_exit(task(20, 1));
  RawComm exec;
  exec.pid = exec.tid = 20;
  exec.exec = true;
  exec.comm = "new";
  t.on_comm(exec);
  t.on_mmap(mmap_rec(20, 0x400000, 0x1000, 0, true, "/bin/new"));
  // 30: like 10, but then its last thread ends: it is exited after all
  t.on_fork(task(30, 1));
  t.on_exit(task(30, 1));
  t.on_sample(30, 31);
  RawTask last = task(30, 1);
  last.tid = 31;
  t.on_exit(last);
  fork_and_exit(t, 1000, 5000);
  CHECK(modules_of(t, 10) == 4);
  REQUIRE(modules_of(t, 20) == 1);
  CHECK(t.lists()[t.list_for(20)]->modules[0].path == "/bin/new");
  CHECK(modules_of(t, 30) == 0);
}

TEST_CASE("module tracker: a reused pid is not freed by its predecessor's exit", "[perf][tracker]") {
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  t.on_mmap(mmap_rec(1, 0x400000, 0x1000, 0, true, "/bin/server"));
  t.on_fork(task(100, 1));
  t.on_exit(task(100, 1));      // the first process 100 ends; its state waits for late samples
  t.on_fork(task(100, 1));      // pid 100 again: a new process, running
  t.on_mmap(mmap_rec(100, 0x7f0000000000, 0x1000, 0, true, "/lib/plugin.so"));
  // 4096 more exits: the first 100's turn to be freed comes, and must leave the running 100 alone
  fork_and_exit(t, 1000, 5000);
  const ModuleList& l = *t.lists()[t.list_for(100)];
  REQUIRE(l.modules.size() == 2);
  CHECK(l.modules[0].path == "/bin/server");
  CHECK(l.modules[1].path == "/lib/plugin.so");
}

TEST_CASE("module tracker: spellings of one file share one open", "[perf][tracker][hostile]") {
  // review of module_tracker.cpp: files were cached by spelling, so "//x", "/./x", ... each opened
  // and mapped the file again, and 8192 spellings used up the limit on opened files. Now 9000
  // spellings of this test's own executable open it once: every module has its build-id (readelf
  // -n's, the oracle) and no limit is reached.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  exe[n] = 0;
  std::string want;
  {
    FILE* p = popen(("readelf -n '" + std::string(exe) + "'").c_str(), "r");
    REQUIRE(p != nullptr);
    char line[512];
    while (fgets(line, sizeof line, p))
      if (const char* b = strstr(line, "Build ID: ")) want.assign(b + 10, strcspn(b + 10, "\n"));
    pclose(p);
  }
  REQUIRE(want.size() == 40);
  ModuleTracker t("", {}, {});
  constexpr uint64_t kSpellings = 9000;
  for (uint64_t i = 0; i < kSpellings; i++) {
    // "/" repeated, then "./" repeated: every spelling names the same file.
    std::string spelled(1 + i % 100, '/');
    for (uint64_t k = 0; k < i / 100; k++) spelled += "./";
    spelled += std::string(exe).substr(1);
    t.on_mmap(mmap_rec(1, 0x10000000 + i * 0x2000, 0x1000, 0, true, spelled));
  }
  const auto& mods = t.lists()[t.list_for(1)]->modules;
  REQUIRE(mods.size() == kSpellings);
  size_t with_id = 0;
  for (const auto& m : mods) with_id += m.build_id.hex() == want;
  CHECK(with_id == kSpellings);
  CHECK(t.warnings().find("limit") == std::string::npos);
  CHECK(t.warnings().find("further modules are not opened") == std::string::npos);
}

namespace {

RawComm exec_comm(uint32_t pid, std::string comm) {
  RawComm c;
  c.pid = c.tid = pid;
  c.exec = true;
  c.comm = std::move(comm);
  return c;
}

// The path of `pid`'s main module, "" when there is none.
std::string main_of(ModuleTracker& t, uint32_t pid) {
  const ModuleList& l = *t.lists()[t.list_for(pid)];
  return l.main >= 0 ? l.modules.at(static_cast<size_t>(l.main)).path : std::string();
}

}  // namespace

TEST_CASE("module tracker: the main module is the file an exec maps first, whatever its name or address",
          "[perf][tracker][main]") {
  // Issue 36: pprof's first mapping was chosen by the comm ("sh" for /bin/sh -> dash, a name set
  // by prctl). The exec record says which file the process runs: the kernel maps it before its
  // interpreter (fs/binfmt_elf.c load_elf_binary), then the vDSO; the loader maps libraries later.
  ModuleTracker t("", {}, {}, /*open_files=*/false);
  t.on_mmap(mmap_rec(7, 0x400000, 0x1000, 0, true, "/usr/bin/stackprov"));  // before the exec: the recorder's child
  CHECK(main_of(t, 7).empty());  // no exec recorded, no file opened: not known
  t.on_comm(exec_comm(7, "sh"));
  t.on_mmap(mmap_rec(7, 0x7f0000000000, 0x1000, 0, false, "/usr/bin/dash"));  // a data mapping is not code
  t.on_mmap(mmap_rec(7, 0x7f1000000000, 0x1000, 0, true, "[vdso]"));
  t.on_mmap(mmap_rec(7, 0x5500000000, 0x4000, 0x1000, true, "/usr/bin/dash"));
  t.on_mmap(mmap_rec(7, 0x1000, 0x1000, 0x1000, true, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"));
  t.on_mmap(mmap_rec(7, 0x7f2000000000, 0x1000, 0x1000, true, "/usr/lib/x86_64-linux-gnu/libc.so.6"));
  const ModuleList& l = *t.lists()[t.list_for(7)];
  REQUIRE(l.modules.size() == 3);  // ld.so first by address
  CHECK(l.main == 1);
  CHECK(main_of(t, 7) == "/usr/bin/dash");
  // A renamed thread changes nothing; a forked child runs the same program until it execs.
  RawComm renamed;
  renamed.pid = 7;
  renamed.tid = 7;
  renamed.comm = "renamed";
  t.on_comm(renamed);
  t.on_fork(task(8, 7));
  CHECK(main_of(t, 8) == "/usr/bin/dash");
  t.on_comm(exec_comm(8, "cc"));
  t.on_mmap(mmap_rec(8, 0x600000, 0x1000, 0x1000, true, "/usr/bin/x86_64-linux-gnu-gcc-12"));
  CHECK(main_of(t, 8) == "/usr/bin/x86_64-linux-gnu-gcc-12");
  CHECK(main_of(t, 7) == "/usr/bin/dash");
}

TEST_CASE("module tracker: without an exec, or with ld.so exec'd, the main module is the program among the files",
          "[perf][tracker][main]") {
  // The module files are opened: the program is the executable (ET_EXEC or a PIE), never the
  // dynamic loader or libc.so.6 (which has a PT_INTERP). The answer is the program the test maps.
  const std::string ldso = "/lib64/ld-linux-x86-64.so.2", libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  char sh[4096];
  REQUIRE(realpath("/bin/sh", sh) != nullptr);
  ModuleTracker t("", {}, {});
  // A process seen through its maps (perf record -p): no exec record.
  t.on_mmap(mmap_rec(1, 0x1000, 0x1000, 0x1000, true, ldso));
  t.on_mmap(mmap_rec(1, 0x2000, 0x1000, 0x1000, true, libc));
  t.on_mmap(mmap_rec(1, 0x7f0000000000, 0x1000, 0x1000, true, sh));
  CHECK(main_of(t, 1) == sh);
  // `ld.so PROG`: the exec maps the loader, which maps PROG like a library.
  t.on_comm(exec_comm(2, "ld-linux-x86-64"));
  t.on_mmap(mmap_rec(2, 0x1000, 0x1000, 0x1000, true, ldso));
  t.on_mmap(mmap_rec(2, 0x2000, 0x1000, 0x1000, true, libc));
  t.on_mmap(mmap_rec(2, 0x7f0000000000, 0x1000, 0x1000, true, sh));
  CHECK(main_of(t, 2) == sh);
  // The loader alone (it has not mapped PROG yet): it is what runs.
  t.on_comm(exec_comm(3, "ld-linux-x86-64"));
  t.on_mmap(mmap_rec(3, 0x1000, 0x1000, 0x1000, true, ldso));
  CHECK(main_of(t, 3) == ldso);
  // Only libraries and no exec: not known.
  t.on_mmap(mmap_rec(4, 0x1000, 0x1000, 0x1000, true, ldso));
  t.on_mmap(mmap_rec(4, 0x2000, 0x1000, 0x1000, true, libc));
  CHECK(main_of(t, 4).empty());
}
