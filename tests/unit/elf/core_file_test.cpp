// SPDX-License-Identifier: Apache-2.0
// ELF core files against gcore/kernel cores checked with readelf, eu-readelf, gdb and /proc; C ABI end to end.
#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "arch/x86_64/registers.hpp"
#include "elf/core_file.hpp"
#include "elf_test_util.hpp"
#include "memory/core_capture.hpp"
#include "stackprov/stackprov.h"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

// The call chain a forked child of this test binary is parked in (end-to-end test).
extern "C" __attribute__((noinline)) int core_b(int fd) {
  const char ready = 'r';
  if (write(fd, &ready, 1) != 1) _exit(3);
  int r = pause();
  asm volatile("" ::: "memory");
  return r + 1;
}
extern "C" __attribute__((noinline)) int core_a(int fd) {
  int r = core_b(fd);
  asm volatile("" ::: "memory");
  return r + 2;
}

/// A missing prerequisite fails the test with its name: make deps installs every tool, and the
/// tests run as root with a plain core_pattern. Never a silent pass.
#define CORE_PREREQUISITE_MISSING(msg) FAIL(msg)

namespace {

const char* kFixtureSource = R"(
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_barrier_t barrier;
__attribute__((noinline)) void fixture_park(void) { for (;;) pause(); }
static void* worker(void* arg) { pthread_barrier_wait(&barrier); fixture_park(); return arg; }
int main(void) {
  pthread_t t[2];
  pthread_barrier_init(&barrier, 0, 3);
  for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, 0);
  pthread_barrier_wait(&barrier);
  printf("ready\n");
  fflush(stdout);
  fixture_park();
  return 0;
}
)";

const char* kOtherSource = R"(
#include <stdio.h>
int main(void) { printf("a different program\n"); return 7; }
)";

bool have_core_tools() { return have_tool("gcore") && have_tool("gdb") && have_tool("eu-readelf"); }

/// A running child whose stdout line "ready" says it is parked; killed on destruction.
class Child {
 public:
  explicit Child(const std::string& exe) {
    int p[2];
    if (pipe(p) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(p[1], 1);
      close(p[0]);
      execl(exe.c_str(), exe.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(p[1]);
    char buf[16] = {};
    ready_ = read(p[0], buf, 6) == 6 && std::memcmp(buf, "ready\n", 6) == 0;
    close(p[0]);
  }
  /// Forks this test binary; the child parks in core_a -> core_b -> pause().
  Child() {
    int p[2];
    if (pipe(p) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(p[0]);
      core_a(p[1]);
      _exit(0);
    }
    close(p[1]);
    char c = 0;
    ready_ = read(p[0], &c, 1) == 1 && c == 'r';
    close(p[0]);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }

  /// Thread ids from /proc/PID/task.
  std::set<int64_t> tids() const {
    std::set<int64_t> out;
    const std::string dir = "/proc/" + std::to_string(pid_) + "/task";
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.insert(std::stoll(e->d_name));
      closedir(d);
    }
    return out;
  }

  /// Writes DIR/core.PID with gcore; returns its path ("" on failure).
  std::string gcore(const TempDir& dir) const {
    const std::string prefix = dir.file("core");
    // The thread states settle (every thread reaches pause()) before the dump.
    usleep(100 * 1000);
    run("gcore -o '" + prefix + "' " + std::to_string(pid_) + " >/dev/null 2>&1");
    const std::string path = prefix + "." + std::to_string(pid_);
    return file_exists(path) ? path : "";
  }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

struct GdbThread {
  uint64_t rip = 0, rsp = 0, sp0 = 0, sp1 = 0;
};

/// Per LWP: rip, rsp and the two words at rsp, as gdb reads them from the core.
std::map<int64_t, GdbThread> gdb_threads(const std::string& exe, const std::string& core) {
  std::map<int64_t, GdbThread> out;
  const std::string text = run("gdb -nx -batch -ex 'thread apply all info registers rip rsp' "
                               "-ex 'thread apply all x/2gx $sp' '" + exe + "' -c '" + core + "' 2>/dev/null")
                               .out;
  std::istringstream in(text);
  std::string line;
  int64_t cur = -1;
  const std::regex thread_re(R"(^Thread \d+ \(.*LWP (\d+)\))");
  const std::regex reg_re(R"(^(rip|rsp)\s+(0x[0-9a-f]+))");
  const std::regex mem_re(R"(^(0x[0-9a-f]+):\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, thread_re)) {
      cur = std::stoll(m[1]);
    } else if (cur >= 0 && std::regex_search(line, m, reg_re)) {
      (m[1] == "rip" ? out[cur].rip : out[cur].rsp) = std::stoull(m[2], nullptr, 16);
    } else if (cur >= 0 && std::regex_search(line, m, mem_re)) {
      out[cur].sp0 = std::stoull(m[2], nullptr, 16);
      out[cur].sp1 = std::stoull(m[3], nullptr, 16);
    }
  }
  return out;
}

struct EuFile {
  uint64_t start, end, offset;
  std::string path;
};

/// NT_FILE entries as eu-readelf -n prints them ("start-end offset size path").
std::vector<EuFile> eu_nt_file(const std::string& core) {
  std::vector<EuFile> out;
  std::istringstream in(run("eu-readelf -n '" + core + "' 2>/dev/null").out);
  std::string line;
  const std::regex re(R"(^\s+([0-9a-f]+)-([0-9a-f]+) ([0-9a-f]+) \d+\s+(/.*)$)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re))
      out.push_back({std::stoull(m[1], nullptr, 16), std::stoull(m[2], nullptr, 16), std::stoull(m[3], nullptr, 16),
                     m[4]});
  return out;
}

/// "pid: N" of every PRSTATUS, and the AUXV values, as eu-readelf -n prints them.
std::vector<int64_t> eu_prstatus_pids(const std::string& core) {
  std::vector<int64_t> out;
  std::istringstream in(run("eu-readelf -n '" + core + "' 2>/dev/null").out);
  std::string line;
  const std::regex re(R"(^\s+pid: (\d+), ppid)");
  std::smatch m;
  bool in_prstatus = false;
  while (std::getline(in, line)) {
    if (line.find("PRSTATUS") != std::string::npos) in_prstatus = true;
    if (in_prstatus && std::regex_search(line, m, re)) {
      out.push_back(std::stoll(m[1]));
      in_prstatus = false;
    }
  }
  return out;
}

uint64_t eu_auxv(const std::string& core, const std::string& key) {
  std::istringstream in(run("eu-readelf -n '" + core + "' 2>/dev/null").out);
  std::string line;
  const std::regex re("^\\s+" + key + ": (0x[0-9a-f]+)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) return std::stoull(m[1], nullptr, 16);
  return 0;
}

/// The first " KEY: VALUE" of eu-readelf -n (VALUE up to a comma or the end of the line; not NT_PRSTATUS's "info.KEY").
std::string eu_note_field(const std::string& core, const std::string& key) {
  const std::string out = run("eu-readelf -n '" + core + "' 2>/dev/null").out;
  std::smatch m;
  if (std::regex_search(out, m, std::regex("[ ,]" + key + ": ([^,\n]*)"))) return m[1];
  return "";
}

std::string phdr_flag_string(uint32_t f) {
  std::string s;
  if (f & PF_R) s += 'R';
  if (f & PF_W) s += 'W';
  if (f & PF_X) s += 'E';
  return s;
}

/// Compares CoreFile's PT_LOAD list with readelf -lW.
void check_segments(const CoreFile& core, const std::string& path) {
  std::vector<ReadelfPhdr> loads;
  for (const ReadelfPhdr& p : readelf_phdrs(path))
    if (p.type == "LOAD" && p.memsz != 0) loads.push_back(p);
  std::sort(loads.begin(), loads.end(), [](const ReadelfPhdr& a, const ReadelfPhdr& b) { return a.vaddr < b.vaddr; });
  REQUIRE(loads.size() == core.segments().size());
  for (size_t i = 0; i < loads.size(); i++) {
    const CoreSegment& s = core.segments()[i];
    INFO("segment " << i << " at 0x" << std::hex << loads[i].vaddr);
    CHECK(s.vaddr == loads[i].vaddr);
    CHECK(s.memsz == loads[i].memsz);
    CHECK(s.offset == loads[i].offset);
    CHECK(s.filesz == loads[i].filesz);
    CHECK(s.present == s.filesz);
    CHECK(phdr_flag_string(s.flags) == loads[i].flags);
  }
}

void check_nt_file(const CoreFile& core, const std::string& path) {
  const std::vector<EuFile> eu = eu_nt_file(path);
  REQUIRE(!eu.empty());
  REQUIRE(eu.size() == core.files().size());
  // The kernel writes the page size; gdb's gcore writes 1 and byte offsets.
  CHECK((core.file_page_size() == 4096 || core.file_page_size() == 1));
  for (size_t i = 0; i < eu.size(); i++) {
    INFO("NT_FILE entry " << i << " " << eu[i].path);
    CHECK(core.files()[i].start == eu[i].start);
    CHECK(core.files()[i].end == eu[i].end);
    CHECK(core.files()[i].file_offset == eu[i].offset);
    CHECK(core.files()[i].path == eu[i].path);
  }
}

/// Threads and registers against /proc/PID/task (before the dump), eu-readelf and gdb.
void check_threads(const CoreFile& core, const std::string& path, const std::string& exe,
                   const std::set<int64_t>& proc_tids) {
  std::vector<int64_t> tids;
  for (const CoreThread& t : core.threads()) tids.push_back(t.tid);
  CHECK(tids == eu_prstatus_pids(path));
  CHECK(std::set<int64_t>(tids.begin(), tids.end()) == proc_tids);
  const auto gdb = gdb_threads(exe, path);
  REQUIRE(gdb.size() == tids.size());
  for (const CoreThread& t : core.threads()) {
    INFO("thread " << t.tid);
    arch::x86_64::Regs r{};
    REQUIRE(arch::x86_64::regs_from_prstatus(t.prstatus, t.prstatus_size, &r).ok());
    REQUIRE(gdb.count(t.tid));
    const GdbThread& g = gdb.at(t.tid);
    CHECK(r.get(arch::x86_64::kRip) == g.rip);
    CHECK(r.get(arch::x86_64::kRsp) == g.rsp);
    uint64_t words[2] = {};
    REQUIRE(core.read(g.rsp, words, sizeof words));
    CHECK(words[0] == g.sp0);
    CHECK(words[1] == g.sp1);
  }
}

const memory::SnapshotModule* find_module(const memory::Snapshot& s, const std::string& path) {
  for (const memory::SnapshotModule& m : s.modules)
    if (m.path == path) return &m;
  return nullptr;
}

sprov_process_opts process_opts() {
  sprov_process_opts o = {};
  o.sz = sizeof(o);
  return o;
}

std::string real(const std::string& p) {
  char* r = realpath(p.c_str(), nullptr);
  std::string out = r ? r : p;
  free(r);
  return out;
}

}  // namespace

TEST_CASE("core_file: gcore of a three-thread process matches readelf, eu-readelf, gdb and /proc", "[core]") {
  if (!have_core_tools()) CORE_PREREQUISITE_MISSING("gcore, gdb or eu-readelf is not installed (make deps)");
  TempDir dir;
  const std::string exe = dir.file("fixture");
  REQUIRE(compile_c(dir, kFixtureSource, "-g -O1 -pthread -Wl,--build-id=sha1", exe));
  Child child(exe);
  REQUIRE(child.ready());
  const std::set<int64_t> proc_tids = child.tids();
  REQUIRE(proc_tids.size() == 3);
  const std::string path = child.gcore(dir);
  REQUIRE(!path.empty());

  auto core = CoreFile::open(path);
  REQUIRE(core.ok());
  const CoreFile& c = *core.value();
  CHECK(c.arch() == Arch::kX86_64);
  CHECK(c.is_64bit());
  CHECK(c.pid() == child.pid());
  CHECK(c.program_name() == "fixture");
  CHECK(c.warnings().empty());
  check_segments(c, path);
  check_nt_file(c, path);
  check_threads(c, path, exe, proc_tids);
  CHECK(c.auxv().entry == eu_auxv(path, "ENTRY"));
  CHECK(c.auxv().sysinfo_ehdr == eu_auxv(path, "SYSINFO_EHDR"));
  CHECK(c.auxv().phdr == eu_auxv(path, "PHDR"));
  CHECK(c.read_string(c.auxv().execfn, 4096) == std::optional<std::string>(exe));
  // The core's copy of the executable's first page carries its build-id.
  bool saw_exe = false;
  for (const CoreMappedFile& f : c.files())
    if (f.path == exe && f.file_offset == 0) {
      saw_exe = true;
      auto id = c.build_id_at(f.start);
      REQUIRE(id.has_value());
      CHECK(id->hex() == readelf_build_id(exe));
    }
  CHECK(saw_exe);

  SECTION("capture: one snapshot per thread, modules and vDSO, no warnings") {
    memory::CoreCaptureOptions o;
    o.max_stack_bytes = 8192;
    size_t walked = 0;
    auto cap = memory::capture_core(c, o, [&](memory::Snapshot&, memory::MemoryReader& rd) {
      uint64_t w = 0;
      CHECK(rd.read(c.auxv().sysinfo_ehdr, &w, 4));
      walked++;
    });
    REQUIRE(cap.ok());
    CHECK(cap.value().warnings.empty());
    CHECK(cap.value().pid == child.pid());
    REQUIRE(cap.value().threads.size() == 3);
    CHECK(walked == 3);
    for (size_t i = 0; i < 3; i++) {
      const memory::Snapshot& s = cap.value().threads[i];
      CHECK(s.tid == c.threads()[i].tid);
      CHECK(s.pid == child.pid());
      CHECK(s.flags == 0);
      const uint64_t sp = s.regs[arch::x86_64::kRsp];
      REQUIRE(s.memory.size() >= 2);  // the vDSO and the stack
      bool has_stack = false;
      for (const memory::MemoryRegion& r : s.memory)
        if (r.addr == sp) {
          has_stack = true;
          CHECK(r.bytes.size() <= 8192);
          CHECK(r.bytes.size() == std::min<uint64_t>(8192, c.readable_from(sp)));
        }
      CHECK(has_stack);
      const memory::SnapshotModule* m = find_module(s, exe);
      REQUIRE(m != nullptr);
      CHECK(m->build_id.hex() == readelf_build_id(exe));
      CHECK(find_module(s, "[vdso]") != nullptr);
      bool libc = false;
      for (const memory::SnapshotModule& mod : s.modules) libc |= mod.path.find("libc.so") != std::string::npos;
      CHECK(libc);
    }
  }
  SECTION("tid selects one thread; an unknown tid is an error naming it") {
    memory::CoreCaptureOptions o;
    o.tid = c.threads().back().tid;
    auto cap = memory::capture_core(c, o, nullptr);
    REQUIRE(cap.ok());
    REQUIRE(cap.value().threads.size() == 1);
    CHECK(cap.value().threads[0].tid == o.tid);
    o.tid = 999999999;
    auto bad = memory::capture_core(c, o, nullptr);
    REQUIRE(!bad.ok());
    CHECK(bad.error().code == SPROV_ERR_NOT_FOUND);
    CHECK_THAT(bad.error().message, Catch::Contains("thread 999999999 is not in core"));
  }
  SECTION("truncated copies give clean errors or warnings") {
    const std::vector<uint8_t> bytes = read_file(path);
    const CoreSegment& last = c.segments().back();
    uint64_t needed = 0;  // end of the last byte a segment (PT_LOAD or PT_NOTE) needs
    for (const ReadelfPhdr& p : readelf_phdrs(path)) needed = std::max(needed, p.offset + p.filesz);
    REQUIRE(needed < bytes.size());
    const std::vector<size_t> cuts = {0, 10, 63, 64, 64 + 56 * 2, static_cast<size_t>(last.offset + 10),
                                      bytes.size() / 2, static_cast<size_t>(needed - 1),
                                      bytes.size() - 1};
    for (size_t cut : cuts) {
      INFO("cut at " << cut << " of " << bytes.size());
      auto t = CoreFile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut), "cut");
      if (!t.ok()) {
        CHECK((t.error().code == SPROV_ERR_TRUNCATED || t.error().code == SPROV_ERR_ELF));
        CHECK(!t.error().message.empty());
        continue;
      }
      const CoreFile& tc = *t.value();
      CHECK(tc.warnings().empty() == (cut >= needed));
      for (const CoreSegment& s : tc.segments()) {
        CHECK(s.present <= s.filesz);
        CHECK((s.present == 0 || s.offset + s.present <= cut));
        if (s.present < s.filesz) {
          uint8_t b;
          CHECK(!tc.read(s.vaddr + s.present, &b, 1));
        }
      }
      auto cap = memory::capture_core(tc, {}, nullptr);
      if (cap.ok() && cut < needed)
        CHECK_THAT(cap.value().warnings, Catch::Contains("truncated"));
      else if (cap.ok())
        CHECK(cap.value().warnings.empty());
      else
        CHECK(cap.error().code == SPROV_ERR_TRUNCATED);
    }
    // The path API too.
    const std::string cut_path = dir.file("cut.core");
    write_bytes(cut_path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 100));
    auto t = CoreFile::open(cut_path);
    REQUIRE(!t.ok());
    CHECK(t.error().code == SPROV_ERR_TRUNCATED);
    CHECK_THAT(t.error().message, Catch::Contains(cut_path) && Catch::Contains("truncated"));
  }
}

TEST_CASE("core_file: a kernel-written core (4-byte aligned notes, filesz 0 segments)", "[core]") {
  if (!have_tool("eu-readelf") || !have_tool("readelf")) CORE_PREREQUISITE_MISSING("eu-readelf or readelf is not installed (make deps)");
  const std::string pattern = run("cat /proc/sys/kernel/core_pattern").out;
  if (pattern.empty() || pattern[0] == '|' || pattern[0] == '/' || pattern.find('%') != std::string::npos)
    CORE_PREREQUISITE_MISSING("/proc/sys/kernel/core_pattern must be a plain file name for this test, it is: " + pattern);
  std::string name = pattern.substr(0, pattern.find_first_of("\n"));
  TempDir dir;
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(2);
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &rl);
    prctl(PR_SET_DUMPABLE, 1);
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  std::string path = dir.file(name);
  if (!file_exists(path)) path = dir.file(name + "." + std::to_string(pid));
  if (!file_exists(path)) CORE_PREREQUISITE_MISSING("the kernel wrote no core file " + path + " (RLIMIT_CORE or container limits)");

  auto core = CoreFile::open(path);
  REQUIRE(core.ok());
  const CoreFile& c = *core.value();
  CHECK(c.warnings().empty());
  REQUIRE(c.threads().size() == 1);
  CHECK(c.threads()[0].tid == pid);
  CHECK(c.threads()[0].signal == SIGSEGV);
  CHECK(c.pid() == pid);
  // NT_SIGINFO (the kernel writes one, after the dumping thread's NT_PRSTATUS) and NT_PRPSINFO.
  REQUIRE(c.threads()[0].has_siginfo);
  CHECK(std::to_string(c.threads()[0].siginfo.signo) == eu_note_field(path, "si_signo"));
  CHECK(std::to_string(c.threads()[0].siginfo.code) == eu_note_field(path, "si_code"));
  CHECK(c.threads()[0].siginfo.code == SI_TKILL);  // raise()
  CHECK(c.program_name() == eu_note_field(path, "fname"));
  CHECK_THAT(eu_note_field(path, "psargs"), Catch::StartsWith(c.program_args()));
  CHECK(!c.program_args().empty());
  CHECK(!c.truncated());
  check_segments(c, path);
  check_nt_file(c, path);
  CHECK(c.auxv().entry == eu_auxv(path, "ENTRY"));
  CHECK(c.auxv().sysinfo_ehdr == eu_auxv(path, "SYSINFO_EHDR"));
  // Code segments of files are not dumped (filesz 0): reading them fails.
  bool saw_undumped = false;
  for (const CoreSegment& s : c.segments())
    if (s.filesz == 0) {
      saw_undumped = true;
      uint8_t b;
      CHECK(!c.read(s.vaddr, &b, 1));
    }
  CHECK(saw_undumped);

  SECTION("capture: modules from NT_FILE by the PT_LOAD flags; unwinds to this test through raise()") {
    auto cap = memory::capture_core(c, {}, nullptr);
    REQUIRE(cap.ok());
    CHECK(cap.value().warnings.empty());
    const memory::Snapshot& s = cap.value().threads[0];
    const std::string self = real("/proc/self/exe");
    const memory::SnapshotModule* m = find_module(s, self);
    REQUIRE(m != nullptr);
    CHECK(m->build_id.hex() == readelf_build_id(self));
    CHECK(find_module(s, "[vdso]") != nullptr);

    sprov_context* ctx = nullptr;
    REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
    sprov_process* proc = nullptr;
    REQUIRE(sprov_process_open_core(ctx, path.c_str(), nullptr, &proc) == 0);
    CHECK(sprov_process_pid(proc) == pid);
    sprov_process_info info = {};
    info.sz = sizeof(info);
    REQUIRE(sprov_process_get_info(proc, &info) == 0);
    CHECK(info.signal == SIGSEGV);
    CHECK(info.signal_tid == pid);
    CHECK(std::string(info.signal_name) == "SIGSEGV");
    CHECK(std::string(info.signal_description) == "Segmentation fault");
    CHECK(info.has_siginfo == 1);
    CHECK(info.signal_code == SI_TKILL);
    CHECK(std::string(info.signal_code_name) == "SI_TKILL");
    CHECK(info.has_fault_address == 0);  // sent by raise(): si_addr is the sender's pid/uid
    CHECK(info.flags == 0);
    CHECK(std::string(info.program) == c.program_name());
    CHECK(std::string(info.command_line) == c.program_args());
    REQUIRE(sprov_process_thread_name(proc, 0) != nullptr);
    CHECK(std::string(sprov_process_thread_name(proc, 0)) == c.program_name());  // the main thread: pr_fname
    CHECK(sprov_process_thread_name(proc, 1) == nullptr);
    sprov_unwinder* uw = nullptr;
    sprov_symbolizer* sym = nullptr;
    REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
    REQUIRE(sprov_symbolizer_new(ctx, nullptr, &sym) == 0);
    sprov_stack* stack = nullptr;
    REQUIRE(sprov_unwinder_unwind(uw, sprov_process_thread(proc, 0), &stack) == 0);
    std::string all;
    for (size_t i = 0; i < sprov_stack_frame_count(stack); i++) {
      sprov_symbol sy = {};
      sy.sz = sizeof(sy);
      REQUIRE(sprov_symbolizer_frame(sym, stack, i, &sy) == 0);
      all += std::string(sy.name ? sy.name : "?") + " ";
    }
    INFO("frames: " << all);
    CHECK_THAT(all, Catch::Contains("raise ") && Catch::Contains("C_A_T_C_H_T_E_S_T") && Catch::Contains("main "));
    CHECK(sprov_stack_stop_reason(stack) == SPROV_STOP_END_OF_STACK);
    sprov_stack_free(stack);
    sprov_symbolizer_free(sym);
    sprov_unwinder_free(uw);
    sprov_process_free(proc);
    sprov_context_free(ctx);
  }
  SECTION("truncated inside the memory: threads stay, a warning names the truncation") {
    const std::vector<uint8_t> bytes = read_file(path);
    const size_t cut = static_cast<size_t>(c.segments()[c.segments().size() / 2].offset + 100);
    auto t = CoreFile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut), "cut");
    REQUIRE(t.ok());
    REQUIRE(t.value()->threads().size() == 1);
    CHECK(t.value()->truncated());
    auto cap = memory::capture_core(*t.value(), {}, nullptr);
    REQUIRE(cap.ok());
    CHECK_THAT(cap.value().warnings, Catch::Contains("core is truncated"));
    CHECK(cap.value().truncated);
  }
}

TEST_CASE("core_file: not a core, not ELF", "[core]") {
  auto t = CoreFile::open("/bin/true");
  REQUIRE(!t.ok());
  CHECK(t.error().code == SPROV_ERR_ELF);
  CHECK_THAT(t.error().message, Catch::Contains("/bin/true is not an ELF core file (e_type"));
  TempDir dir;
  write_file(dir.file("text"), "hello, this is not ELF\n");
  auto u = CoreFile::open(dir.file("text"));
  REQUIRE(!u.ok());
  CHECK_THAT(u.error().message, Catch::Contains("is not an ELF file"));
  auto v = CoreFile::open(dir.file("missing"));
  REQUIRE(!v.ok());
  CHECK(v.error().code == -ENOENT);
  CHECK_THAT(v.error().message, Catch::Contains(dir.file("missing")));
}

TEST_CASE("core_file: missing main program, --exe, --sysroot, build-id mismatch", "[core]") {
  if (!have_core_tools()) CORE_PREREQUISITE_MISSING("gcore, gdb or eu-readelf is not installed (make deps)");
  TempDir dir;
  REQUIRE(run("mkdir -p '" + dir.file("run") + "' '" + dir.file("keep") + "' '" + dir.file("other") + "'").status == 0);
  const std::string exe = dir.file("run/fixture");
  const std::string keep = dir.file("keep/fixture");
  const std::string other = dir.file("other/fixture");
  REQUIRE(compile_c(dir, kFixtureSource, "-g -O1 -pthread -Wl,--build-id=sha1", exe));
  REQUIRE(compile_c(dir, kOtherSource, "-O1 -Wl,--build-id=sha1", other));
  REQUIRE(run("cp '" + exe + "' '" + keep + "'").status == 0);
  const std::string exe_id = readelf_build_id(exe);
  const std::string other_id = readelf_build_id(other);
  REQUIRE(!exe_id.empty());
  REQUIRE(exe_id != other_id);

  std::string path;
  {
    Child child(exe);
    REQUIRE(child.ready());
    path = child.gcore(dir);
  }
  REQUIRE(!path.empty());
  REQUIRE(unlink(exe.c_str()) == 0);
  auto core = CoreFile::open(path);
  REQUIRE(core.ok());
  const CoreFile& c = *core.value();

  SECTION("the module is missing: a warning names it, the core's build-id is kept") {
    auto cap = memory::capture_core(c, {}, nullptr);
    REQUIRE(cap.ok());
    CHECK_THAT(cap.value().warnings, Catch::Contains("module " + exe + " not found (looked at " + exe + ")"));
    const memory::SnapshotModule* m = find_module(cap.value().threads[0], exe);
    REQUIRE(m != nullptr);
    CHECK(m->build_id.hex() == exe_id);
    CHECK(m->load_bias != 0);  // PIE: from the core's copy of the ELF header
  }
  SECTION("exe pointing to the right copy fixes it") {
    memory::CoreCaptureOptions o;
    o.exe = keep;
    auto cap = memory::capture_core(c, o, nullptr);
    REQUIRE(cap.ok());
    CHECK(cap.value().warnings.find("not found") == std::string::npos);
    CHECK(cap.value().warnings.find("mismatch") == std::string::npos);
    CHECK(!cap.value().build_id_mismatch);
    CHECK(find_module(cap.value().threads[0], exe) == nullptr);
    const memory::SnapshotModule* m = find_module(cap.value().threads[0], real(keep));
    REQUIRE(m != nullptr);
    CHECK(m->build_id.hex() == exe_id);
  }
  SECTION("exe pointing to a different binary: build-id mismatch with both ids") {
    memory::CoreCaptureOptions o;
    o.exe = other;
    auto cap = memory::capture_core(c, o, nullptr);
    REQUIRE(cap.ok());
    CHECK_THAT(cap.value().warnings, Catch::Contains("module " + real(other) + ": build-id mismatch: core has " +
                                                     exe_id + ", file has " + other_id));
    const memory::SnapshotModule* m = find_module(cap.value().threads[0], real(other));
    REQUIRE(m != nullptr);
    CHECK(m->build_id.hex() == exe_id);  // the unwinder refuses the mismatching file
    CHECK(cap.value().build_id_mismatch);
  }
  SECTION("exe of another architecture is an error naming both") {
    std::vector<uint8_t> b = read_file(keep);
    b[18] = EM_AARCH64 & 0xff;
    b[19] = EM_AARCH64 >> 8;
    write_bytes(dir.file("arm"), b);
    memory::CoreCaptureOptions o;
    o.exe = dir.file("arm");
    auto cap = memory::capture_core(c, o, nullptr);
    REQUIRE(!cap.ok());
    CHECK(cap.error().code == SPROV_ERR_ARCH_MISMATCH);
    CHECK_THAT(cap.error().message, Catch::Contains("arm64") && Catch::Contains("x86_64"));
  }
  SECTION("sysroot: modules are looked up under it") {
    const std::string root = dir.file("root");
    REQUIRE(run("mkdir -p '" + root + dir.file("run") + "' && cp '" + keep + "' '" + root + exe + "'").status == 0);
    memory::CoreCaptureOptions o;
    o.sysroot = root + "/";
    auto cap = memory::capture_core(c, o, nullptr);
    REQUIRE(cap.ok());
    const std::string& w = cap.value().warnings;
    CHECK(w.find("module " + exe + " not found") == std::string::npos);
    CHECK(w.find("module " + exe + ": build-id mismatch") == std::string::npos);
    // libc is not in the sysroot.
    CHECK_THAT(w, Catch::Contains("not found (looked at " + root + "/"));
    const memory::Snapshot& s = cap.value().threads[0];
    CHECK(s.module_root == root);
    const memory::SnapshotModule* m = find_module(s, exe);
    REQUIRE(m != nullptr);
    CHECK(m->build_id.hex() == exe_id);
    // A module of another architecture in the sysroot: named with both arches, not used.
    std::string libc;
    for (const CoreMappedFile& f : c.files())
      if (f.path.find("/libc.so") != std::string::npos) libc = f.path;
    REQUIRE(!libc.empty());
    std::vector<uint8_t> lb = read_file(libc);
    lb[18] = EM_AARCH64 & 0xff;
    lb[19] = EM_AARCH64 >> 8;
    REQUIRE(run("mkdir -p \"$(dirname '" + root + libc + "')\"").status == 0);
    write_bytes(root + libc, lb);
    auto cap_arch = memory::capture_core(c, o, nullptr);
    REQUIRE(cap_arch.ok());
    CHECK_THAT(cap_arch.value().warnings, Catch::Contains("module " + libc + " (" + root + libc + ") is arm64 (e_machine 183)"
                                                          ", the core is x86_64 (e_machine 62): not used"));
    // exe outside the sysroot: module paths become host paths.
    o.exe = keep;
    auto cap2 = memory::capture_core(c, o, nullptr);
    REQUIRE(cap2.ok());
    const memory::Snapshot& s2 = cap2.value().threads[0];
    REQUIRE(find_module(s2, real(keep)) != nullptr);
    CHECK(s2.module_root + real(keep) != real(keep));  // opened through the root prefix…
    CHECK(file_exists(s2.module_root + real(keep)));    // …which still names the file
  }
}

TEST_CASE("core_file: C ABI end to end, a child parked in core_a -> core_b -> pause()", "[core][gcore-self]") {
  if (!have_tool("gcore")) CORE_PREREQUISITE_MISSING("gcore is not installed (make deps)");
  TempDir dir;
  std::string path;
  pid_t pid = 0;
  {
    Child child;
    REQUIRE(child.ready());
    pid = child.pid();
    path = child.gcore(dir);
  }
  REQUIRE(!path.empty());

  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_process* proc = nullptr;
  sprov_process_opts opts = process_opts();
  opts.max_stack_bytes = 64 * 1024;
  const int open_rc = sprov_process_open_core(ctx, path.c_str(), &opts, &proc);
  INFO("sprov_process_open_core: " << sprov_last_error_message());
  REQUIRE(open_rc == 0);
  CHECK(sprov_process_pid(proc) == pid);
  REQUIRE(sprov_process_thread_count(proc) == 1);
  CHECK(std::string(sprov_process_warnings(proc)) == "");
  const sprov_snapshot* snap = sprov_process_thread(proc, 0);
  REQUIRE(snap != nullptr);
  CHECK(sprov_snapshot_tid(snap) == pid);

  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  sprov_symbolizer* sym = nullptr;
  REQUIRE(sprov_symbolizer_new(ctx, nullptr, &sym) == 0);
  sprov_stack* stack = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &stack) == 0);
  std::vector<std::string> names;
  for (size_t i = 0; i < sprov_stack_frame_count(stack); i++) {
    sprov_symbol s = {};
    s.sz = sizeof(s);
    REQUIRE(sprov_symbolizer_frame(sym, stack, i, &s) == 0);
    names.push_back(s.name ? s.name : "?");
  }
  std::string all;
  for (const std::string& n : names) all += n + " ";
  INFO("frames: " << all);
  auto b = std::find(names.begin(), names.end(), "core_b");
  REQUIRE(b != names.end());
  REQUIRE(b + 1 != names.end());
  CHECK(*(b + 1) == "core_a");
  CHECK(b - names.begin() <= 3);  // pause and its syscall wrapper above it
  CHECK(std::find(names.begin(), names.end(), "main") != names.end());
  CHECK(sprov_stack_stop_reason(stack) == SPROV_STOP_END_OF_STACK);

  // Options: a bad tid, unknown flags (bit 0 is SPROV_PROCESS_RUNTIME_FRAMES, bits 1 and 2 the kernel
  // stacks of a live process), a missing exe.
  sprov_process* p2 = nullptr;
  sprov_process_opts bad_tid = process_opts();
  bad_tid.tid = 1;
  CHECK(sprov_process_open_core(ctx, path.c_str(), &bad_tid, &p2) == SPROV_ERR_NOT_FOUND);
  sprov_process_opts bad_flags = process_opts();
  bad_flags.flags = 8;
  CHECK(sprov_process_open_core(ctx, path.c_str(), &bad_flags, &p2) == SPROV_ERR_INVALID_ARG);
  CHECK_THAT(std::string(sprov_last_error_message()), Catch::Contains("unknown bits 0x8"));
  bad_flags.flags = SPROV_PROCESS_KERNEL_STACKS;
  CHECK(sprov_process_open_core(ctx, path.c_str(), &bad_flags, &p2) == SPROV_ERR_INVALID_ARG);
  CHECK_THAT(std::string(sprov_last_error_message()), Catch::Contains("a core holds no kernel stack"));
  sprov_process_opts bad_exe = process_opts();
  bad_exe.exe = "/nonexistent/exe";
  CHECK(sprov_process_open_core(ctx, path.c_str(), &bad_exe, &p2) == SPROV_ERR_NOT_FOUND);
  CHECK_THAT(std::string(sprov_last_error_message()), Catch::Contains("/nonexistent/exe"));
  CHECK(sprov_process_open_core(ctx, "/bin/true", nullptr, &p2) == SPROV_ERR_ELF);
  CHECK_THAT(std::string(sprov_last_error_message()), Catch::Contains("not an ELF core file"));
  CHECK(p2 == nullptr);

  sprov_stack_free(stack);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_process_free(proc);
  sprov_context_free(ctx);
}
