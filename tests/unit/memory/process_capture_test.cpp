// SPDX-License-Identifier: Apache-2.0
// Live-process capture tests: forked multi-thread children, thread churn, errors, signals, C ABI unwind round trip.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/process_capture.hpp"
#include "stackprov/stackprov.h"

using namespace stackprov;
using namespace stackprov::memory;

// A known call chain for the unwind test: parked_a -> parked_b -> pause().
extern "C" {
volatile int stackprov_test_parked_stop = 0;
volatile int stackprov_test_parked_count = 0;

__attribute__((noinline)) void stackprov_test_parked_b(int fd) {
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (write(fd, &tid, sizeof(tid)) != static_cast<ssize_t>(sizeof(tid))) _exit(5);
  while (!stackprov_test_parked_stop) pause();
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void stackprov_test_parked_a(int fd) {
  stackprov_test_parked_b(fd);
  asm volatile("" ::: "memory");
  stackprov_test_parked_count = stackprov_test_parked_count + 1;  // no tail call
}
}

namespace {

/// A forked child process, killed and reaped by the destructor.
struct CaptureChild {
  pid_t pid = -1;
  ~CaptureChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      int st;
      waitpid(pid, &st, 0);
    }
  }
};

std::string status_field(const std::string& status_path, const char* key) {
  std::ifstream f(status_path);
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.compare(0, k.size(), k) == 0) {
      size_t v = k.size();
      while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) v++;
      return line.substr(v);
    }
  return {};
}

std::vector<pid_t> task_ids(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

/// "0" for every thread of pid that still exists.
bool no_thread_traced(pid_t pid) {
  for (pid_t t : task_ids(pid)) {
    const std::string tracer =
        status_field("/proc/" + std::to_string(pid) + "/task/" + std::to_string(t) + "/status", "TracerPid");
    if (!tracer.empty() && tracer != "0") return false;
  }
  return true;
}

bool eventually_untraced(pid_t pid, int ms) {
  for (int i = 0; i < ms; i++) {
    if (no_thread_traced(pid)) return true;
    usleep(1000);
  }
  return no_thread_traced(pid);
}

/// Reads exactly n bytes with a timeout; false on timeout or EOF.
bool read_timeout(int fd, void* buf, size_t n, int ms) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) <= 0) return false;
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct Mapping {
  uint64_t start, end;
  std::string path;
};

std::vector<Mapping> maps_of(pid_t pid) {
  std::vector<Mapping> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(f, line)) {
    Mapping m{};
    char path[4096] = {};
    unsigned long long s = 0, e = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %*s %*s %*s %*s %4095[^\n]", &s, &e, path) >= 2) {
      m.start = s;
      m.end = e;
      m.path = path;
      out.push_back(m);
    }
  }
  return out;
}

// ---- the multi-thread child: threads blocked in nanosleep, read on a pipe, pthread_cond_wait

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
pthread_barrier_t g_barrier;
int g_block_fd = -1;

/// Words every child thread writes on its own stack before it blocks: kStackMark ^ (tid << 8) ^ i.
constexpr uint64_t kStackMark = 0x5350524f56535441ull;  // "SPROVSTA"
constexpr int kStackMarkWords = 16;

/// Fills `mark` (on the caller's stack) with the thread's pattern; the compiler must keep it.
void write_stack_mark(volatile uint64_t* mark) {
  const uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));
  for (int i = 0; i < kStackMarkWords; i++) mark[i] = kStackMark ^ (tid << 8) ^ static_cast<uint64_t>(i);
}

void* blocked_thread(void* arg) {
  const long kind = reinterpret_cast<long>(arg) % 3;
  volatile uint64_t mark[kStackMarkWords];
  write_stack_mark(mark);
  pthread_barrier_wait(&g_barrier);
  for (;;) {
    if (kind == 0) {
      timespec ts{1000, 0};
      nanosleep(&ts, nullptr);
    } else if (kind == 1) {
      char c;
      if (read(g_block_fd, &c, 1) <= 0) pause();
    } else {
      pthread_mutex_lock(&g_mu);
      pthread_cond_wait(&g_cond, &g_mu);
      pthread_mutex_unlock(&g_mu);
    }
  }
  return nullptr;
}

/// Forks a child with `threads` threads in total: the main one blocked in
/// read(ctl) (answers 'A' on resp for each byte), the others blocked in syscalls.
void spawn_blocked(CaptureChild* c, int threads, int* ctl_w, int* resp_r) {
  int ctl[2], resp[2], block[2];
  REQUIRE(pipe(ctl) == 0);
  REQUIRE(pipe(resp) == 0);
  REQUIRE(pipe(block) == 0);
  c->pid = fork();
  REQUIRE(c->pid >= 0);
  if (c->pid == 0) {
    g_block_fd = block[0];
    volatile uint64_t mark[kStackMarkWords];
    write_stack_mark(mark);
    pthread_barrier_init(&g_barrier, nullptr, static_cast<unsigned>(threads));
    for (long i = 1; i < threads; i++) {
      pthread_t t;
      if (pthread_create(&t, nullptr, blocked_thread, reinterpret_cast<void*>(i)) != 0) _exit(2);
    }
    pthread_barrier_wait(&g_barrier);
    if (write(resp[1], "R", 1) != 1) _exit(3);
    for (;;) {
      char ch;
      if (read(ctl[0], &ch, 1) != 1) _exit(0);
      if (write(resp[1], "A", 1) != 1) _exit(4);
    }
  }
  close(ctl[0]);
  close(resp[1]);
  close(block[0]);
  // block[1] stays open in the parent (leaked on purpose: the readers must not see EOF).
  *ctl_w = ctl[1];
  *resp_r = resp[0];
  char r = 0;
  REQUIRE(read_timeout(*resp_r, &r, 1, 5000));
  REQUIRE(r == 'R');
  usleep(100 * 1000);  // let every thread enter its system call
}

bool in_libc(uint64_t pc) {
  Dl_info info{};
  // The child is a fork of this process: libc is mapped at the same addresses here.
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fname == nullptr) return false;
  return std::strstr(info.dli_fname, "libc.so") != nullptr;
}

}  // namespace

TEST_CASE("capture_process stops every thread, copies stacks, and leaves the child running", "[process]") {
  constexpr int kThreads = 16;
  CaptureChild child;
  int ctl_w = -1, resp_r = -1;
  spawn_blocked(&child, kThreads, &ctl_w, &resp_r);

  int callbacks = 0;
  auto cap = capture_process(child.pid, 0, 512 * 1024, [&](Snapshot& s, MemoryReader& live) {
    callbacks++;
    uint64_t word = 0;
    CHECK(live.read(s.regs[7], &word, sizeof(word)));  // the thread's sp, read live while stopped
  });
  REQUIRE(cap.ok());
  CHECK(cap->pid == child.pid);
  CHECK(callbacks == kThreads);
  CHECK(cap->warnings.find("thread") == std::string::npos);

  // The same tids as /proc/PID/task, sorted.
  const std::vector<pid_t> tasks = task_ids(child.pid);
  REQUIRE(tasks.size() == static_cast<size_t>(kThreads));
  std::vector<pid_t> captured;
  for (const Snapshot& s : cap->threads) captured.push_back(static_cast<pid_t>(s.tid));
  CHECK(captured == tasks);

  const std::vector<Mapping> maps = maps_of(child.pid);
  for (const Snapshot& s : cap->threads) {
    INFO("tid " << s.tid);
    CHECK(s.pid == child.pid);
    CHECK(s.arch == Arch::kX86_64);
    CHECK(s.flags == 0);
    REQUIRE(s.has_reg(16));
    REQUIRE(s.has_reg(7));
    CHECK(in_libc(s.regs[16]));  // blocked in a libc system-call wrapper
    const uint64_t sp = s.regs[7];
    const auto m = std::find_if(maps.begin(), maps.end(), [&](const Mapping& e) { return sp >= e.start && sp < e.end; });
    REQUIRE(m != maps.end());
    // The stack copy starts at sp and is what the child has there: it holds the words this
    // thread wrote on its stack before blocking (kStackMark..., at the address the thread put
    // them), and from sp up to them it is byte for byte what the kernel shows in /proc/PID/mem
    // (those frames, the blocked call chain, cannot change while the thread stays blocked; the
    // rest of the mapping, e.g. glibc's thread descriptor at its top, may be written by others).
    const auto region = std::find_if(s.memory.begin(), s.memory.end(), [&](const MemoryRegion& r) {
      return sp >= r.addr && sp < r.addr + r.bytes.size();
    });
    REQUIRE(region != s.memory.end());
    CHECK(region->addr == sp);
    CHECK(region->addr + region->bytes.size() <= m->end);
    std::vector<uint64_t> want(kStackMarkWords);
    for (int i = 0; i < kStackMarkWords; i++)
      want[i] = kStackMark ^ (static_cast<uint64_t>(s.tid) << 8) ^ static_cast<uint64_t>(i);
    const auto* w0 = reinterpret_cast<const uint8_t*>(want.data());
    const auto found = std::search(region->bytes.begin(), region->bytes.end(), w0, w0 + want.size() * 8);
    REQUIRE(found != region->bytes.end());
    {
      const size_t n = static_cast<size_t>(found - region->bytes.begin()) + want.size() * 8;
      std::vector<uint8_t> kernel(n);
      const int mem = open(("/proc/" + std::to_string(child.pid) + "/mem").c_str(), O_RDONLY);
      REQUIRE(mem >= 0);
      const ssize_t got = pread(mem, kernel.data(), n, static_cast<off_t>(region->addr));
      close(mem);
      REQUIRE(got == static_cast<ssize_t>(n));
      size_t first_diff = 0, diffs = 0;
      for (size_t i = 0; i < n; i++)
        if (kernel[i] != region->bytes[i] && diffs++ == 0) first_diff = i;
      INFO("bytes differing from /proc/PID/mem: " << diffs << ", first at sp+" << first_diff << " of " << n);
      CHECK(diffs == 0);
    }
    CHECK(s.module_root == "/proc/" + std::to_string(child.pid) + "/root");
    // The vDSO is a module, and its bytes are in the snapshot.
    const auto vdso = std::find_if(s.modules.begin(), s.modules.end(),
                                   [](const SnapshotModule& mm) { return mm.path == "[vdso]"; });
    REQUIRE(vdso != s.modules.end());
    uint8_t elf_magic[4] = {};
    CHECK(SnapshotReader(s).read(vdso->start, elf_magic, 4));
    CHECK(std::memcmp(elf_magic, "\x7f" "ELF", 4) == 0);
    CHECK(s.module_list_hash() == cap->threads.front().module_list_hash());
  }

  // Detached: nobody traces the child, and it still answers.
  CHECK(no_thread_traced(child.pid));
  REQUIRE(write(ctl_w, "x", 1) == 1);
  char a = 0;
  CHECK(read_timeout(resp_r, &a, 1, 2000));
  CHECK(a == 'A');
  close(ctl_w);
  close(resp_r);
}

TEST_CASE("capture_process with a tid captures that thread only", "[process]") {
  CaptureChild child;
  int ctl_w = -1, resp_r = -1;
  spawn_blocked(&child, 4, &ctl_w, &resp_r);
  const std::vector<pid_t> tasks = task_ids(child.pid);
  REQUIRE(tasks.size() == 4);
  auto cap = capture_process(child.pid, tasks[2], 64 * 1024, nullptr);
  REQUIRE(cap.ok());
  REQUIRE(cap->threads.size() == 1);
  CHECK(cap->threads[0].tid == tasks[2]);
  CHECK(no_thread_traced(child.pid));

  auto bad = capture_process(child.pid, getpid(), 64 * 1024, nullptr);
  REQUIRE(!bad.ok());
  CHECK(bad.error().code == -ESRCH);
  CHECK(bad.error().message.find(std::to_string(getpid())) != std::string::npos);
  close(ctl_w);
  close(resp_r);
}

TEST_CASE("capture_process leaves out a listed tid that another process reused before the seize", "[process]") {
  CaptureChild target, other;
  int ctl_w = -1, resp_r = -1, other_ctl = -1, other_resp = -1;
  spawn_blocked(&target, 4, &ctl_w, &resp_r);
  spawn_blocked(&other, 3, &other_ctl, &other_resp);
  const std::vector<pid_t> tasks = task_ids(target.pid);
  const std::vector<pid_t> other_tasks = task_ids(other.pid);
  REQUIRE(other_tasks.size() == 3);
  const pid_t reused = other_tasks[1];  // a thread of the other process, as a reused number would be
  // The listing names the target's threads and the reused tid, as /proc/PID/task did just before
  // that thread exited and its number went to the other process.
  TaskLister lister = [&](pid_t pid) -> Result<std::vector<pid_t>> {
    std::vector<pid_t> v = task_ids(pid);
    v.push_back(reused);
    std::sort(v.begin(), v.end());
    return v;
  };
  auto cap = capture_process(target.pid, 0, 64 * 1024, nullptr, lister);
  REQUIRE(cap.ok());
  std::vector<pid_t> captured;
  for (const Snapshot& s : cap->threads) captured.push_back(static_cast<pid_t>(s.tid));
  CHECK(captured == tasks);
  INFO(cap->warnings);
  // Not under /proc/PID/task: never attached (had the number been reused between that check and
  // the seize, the check after the seize would detach it: "the tid now names a thread of another
  // process").
  CHECK(cap->warnings.find("thread " + std::to_string(reused) + " exited before it could be attached") !=
        std::string::npos);
  // Both processes detached and running: the other one still answers.
  CHECK(no_thread_traced(target.pid));
  CHECK(no_thread_traced(other.pid));
  for (int fd : {ctl_w, other_ctl}) REQUIRE(write(fd, "x", 1) == 1);
  for (int fd : {resp_r, other_resp}) {
    char a = 0;
    CHECK(read_timeout(fd, &a, 1, 2000));
    CHECK(a == 'A');
  }
  for (int fd : {ctl_w, resp_r, other_ctl, other_resp}) close(fd);
}

TEST_CASE("capture_process of a stopped process leaves it stopped", "[process]") {
  CaptureChild child;
  int ctl_w = -1, resp_r = -1;
  spawn_blocked(&child, 4, &ctl_w, &resp_r);
  REQUIRE(kill(child.pid, SIGSTOP) == 0);
  const std::string status = "/proc/" + std::to_string(child.pid) + "/status";
  for (int i = 0; i < 2000 && status_field(status, "State").rfind("T", 0) != 0; i++) usleep(1000);
  REQUIRE(status_field(status, "State").rfind("T", 0) == 0);

  auto cap = capture_process(child.pid, 0, 64 * 1024, nullptr);
  REQUIRE(cap.ok());
  CHECK(cap->threads.size() == 4);
  CHECK(no_thread_traced(child.pid));
  usleep(50 * 1000);
  CHECK(status_field(status, "State").rfind("T", 0) == 0);  // still group-stopped, as before
  REQUIRE(kill(child.pid, SIGCONT) == 0);
  REQUIRE(write(ctl_w, "x", 1) == 1);
  char a = 0;
  CHECK(read_timeout(resp_r, &a, 1, 2000));
  CHECK(a == 'A');
  close(ctl_w);
  close(resp_r);
}

namespace {

int g_vfork_fd = -1;

void* vfork_thread(void*) {
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (write(g_vfork_fd, &tid, sizeof(tid)) != static_cast<ssize_t>(sizeof(tid))) _exit(5);
  const pid_t k = vfork();
  if (k == 0) {
    timespec ts{3, 0};
    syscall(SYS_nanosleep, &ts, nullptr);  // the parent thread waits, unstoppable, meanwhile
    _exit(0);
  }
  if (k > 0) waitpid(k, nullptr, 0);
  if (write(g_vfork_fd, "V", 1) != 1) _exit(6);
  return nullptr;
}

}  // namespace

TEST_CASE("capture_process reports a thread that cannot stop (vfork parent) and does not leave it traced",
          "[process]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  CaptureChild child;
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    g_vfork_fd = fds[1];
    pthread_t t;
    if (pthread_create(&t, nullptr, vfork_thread, nullptr) != 0) _exit(2);
    for (;;) pause();
  }
  close(fds[1]);
  pid_t vfork_tid = 0;
  REQUIRE(read_timeout(fds[0], &vfork_tid, sizeof(vfork_tid), 5000));
  usleep(200 * 1000);  // inside vfork, waiting for the vfork child

  auto cap = capture_process(child.pid, 0, 64 * 1024, nullptr);
  REQUIRE(cap.ok());
  INFO("warnings: " << cap->warnings);
  REQUIRE(cap->threads.size() == 1);  // the main thread only
  CHECK(cap->threads[0].tid == child.pid);
  CHECK(cap->warnings.find("thread " + std::to_string(vfork_tid) + " did not stop") != std::string::npos);
  CHECK(eventually_untraced(child.pid, 1000));
  // Once the vfork child exits, the thread runs on: it was not left in a ptrace stop.
  char v = 0;
  CHECK(read_timeout(fds[0], &v, 1, 6000));
  CHECK(v == 'V');
  close(fds[0]);
}

namespace {

std::atomic<bool> g_churn_stop{false};

void* noop_thread(void*) { return nullptr; }

void* churn_thread(void*) {
  while (!g_churn_stop.load()) {
    pthread_t t;
    if (pthread_create(&t, nullptr, noop_thread, nullptr) == 0) pthread_join(t, nullptr);
  }
  return nullptr;
}

}  // namespace

TEST_CASE("capture_process survives threads that appear and exit during the capture", "[process]") {
  CaptureChild child;
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    for (int i = 0; i < 4; i++) {
      pthread_t t;
      if (pthread_create(&t, nullptr, churn_thread, nullptr) != 0) _exit(2);
    }
    if (write(ready[1], "R", 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  char r = 0;
  REQUIRE(read_timeout(ready[0], &r, 1, 5000));
  close(ready[0]);

  int with_churn_warnings = 0;
  for (int i = 0; i < 50; i++) {
    INFO("capture " << i);
    auto cap = capture_process(child.pid, 0, 64 * 1024, nullptr);
    REQUIRE(cap.ok());
    CHECK(cap->threads.size() >= 5);  // main + 4 churners, plus any short-lived one caught
    if (!cap->warnings.empty()) with_churn_warnings++;
    CHECK(no_thread_traced(child.pid));
  }
  // The child still runs: its thread list keeps changing.
  std::set<pid_t> seen;
  for (int i = 0; i < 50 && seen.size() < 8; i++) {
    for (pid_t t : task_ids(child.pid)) seen.insert(t);
    usleep(1000);
  }
  CHECK(seen.size() >= 8);
  std::printf("capture_process churn: %d of 50 captures had warnings\n", with_churn_warnings);
}

TEST_CASE("capture_process reports a missing process and a zombie clearly", "[process]") {
  SECTION("no such process") {
    const pid_t gone = fork();
    REQUIRE(gone >= 0);
    if (gone == 0) _exit(0);
    int st;
    REQUIRE(waitpid(gone, &st, 0) == gone);
    auto cap = capture_process(gone, 0, 64 * 1024, nullptr);
    REQUIRE(!cap.ok());
    CHECK(cap.error().code == -ESRCH);
    CHECK(cap.error().message.find("no such process " + std::to_string(gone)) != std::string::npos);
  }
  SECTION("zombie") {
    CaptureChild z;
    z.pid = fork();
    REQUIRE(z.pid >= 0);
    if (z.pid == 0) _exit(0);
    const std::string stat_path = "/proc/" + std::to_string(z.pid) + "/status";
    for (int i = 0; i < 2000 && status_field(stat_path, "State").rfind("Z", 0) != 0; i++) usleep(1000);
    REQUIRE(status_field(stat_path, "State").rfind("Z", 0) == 0);
    auto cap = capture_process(z.pid, 0, 64 * 1024, nullptr);
    REQUIRE(!cap.ok());
    CHECK(cap.error().code == SPROV_ERR_CAPTURE);
    CHECK(cap.error().message.find("process " + std::to_string(z.pid) + " is a zombie") != std::string::npos);
  }
  SECTION("own process") {
    auto cap = capture_process(getpid(), 0, 64 * 1024, nullptr);
    REQUIRE(!cap.ok());
    CHECK(cap.error().code == SPROV_ERR_CAPTURE);
  }
}

TEST_CASE("capture_process without permission is -EPERM with the ptrace_scope / CAP_SYS_PTRACE hint", "[process]") {
  // Tests run as root (CI, make test): dropping to another user is part of what is tested.
  INFO("this test must run as root to drop to user nobody; it never skips");
  REQUIRE(geteuid() == 0);
  CaptureChild target;
  int ctl_w = -1, resp_r = -1;
  spawn_blocked(&target, 2, &ctl_w, &resp_r);
  int result[2];
  REQUIRE(pipe(result) == 0);
  CaptureChild capturer;
  capturer.pid = fork();
  REQUIRE(capturer.pid >= 0);
  if (capturer.pid == 0) {
    // nobody: neither the target's user nor CAP_SYS_PTRACE.
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    auto cap = capture_process(target.pid, 0, 64 * 1024, nullptr);
    const std::string msg = cap.ok() ? "ok" : std::to_string(cap.error().code) + " " + cap.error().message;
    if (write(result[1], msg.data(), msg.size()) < 0) _exit(3);
    _exit(0);
  }
  close(result[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(result[0], buf, sizeof(buf))) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(result[0]);
  INFO(msg);
  CHECK(msg.rfind(std::to_string(-EPERM) + " ", 0) == 0);
  CHECK(msg.find("process " + std::to_string(target.pid)) != std::string::npos);
  // Yama is named only where the kernel has it.
  struct stat yama;
  const bool has_yama = stat("/proc/sys/kernel/yama", &yama) == 0;
  CHECK((msg.find("ptrace_scope") != std::string::npos) == has_yama);
  CHECK((msg.find("yama") != std::string::npos) == has_yama);
  CHECK(msg.find("lacks CAP_SYS_PTRACE") != std::string::npos);
  CHECK(no_thread_traced(target.pid));
  close(ctl_w);
  close(resp_r);
}

TEST_CASE("ptrace_permission_hint names Yama's ptrace_scope only when the Yama directory exists", "[process]") {
  char tmpl[] = "/tmp/stackprov-yama-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string scope_file = dir + "/ptrace_scope";
  {
    std::ofstream f(scope_file);
    f << "1\n";
  }
  const std::string with = ptrace_permission_hint(dir, false, "");
  CHECK(with == dir + "/ptrace_scope = 1 (only descendants can be traced), this process lacks CAP_SYS_PTRACE; "
                      "run as the target's user with ptrace_scope 0, or with CAP_SYS_PTRACE");
  const std::string traced = ptrace_permission_hint(dir, true, "4242");
  CHECK(traced == dir + "/ptrace_scope = 1 (only descendants can be traced), this process has CAP_SYS_PTRACE; "
                        "it is already traced by pid 4242 (one tracer at a time: stop that one first)");
  std::remove(scope_file.c_str());
  rmdir(dir.c_str());
  // No Yama (a kernel built without it): classic permissions only, nothing about Yama.
  const std::string without = ptrace_permission_hint(dir, false, "");
  CHECK(without == "this process lacks CAP_SYS_PTRACE; run as the target's user, or with CAP_SYS_PTRACE");
  CHECK(without.find("yama") == std::string::npos);
  CHECK(without.find("ptrace_scope") == std::string::npos);
}

TEST_CASE("ptrace_permission_hint says when the kernel refuses a process with CAP_SYS_PTRACE", "[process]") {
  // The independent answer: whether the kernel shows this process /proc/1/exe (its ptrace access
  // check). Where it refuses (a sandbox's init, another user namespace's), "run as the target's
  // user or with CAP_SYS_PTRACE" would be wrong advice for a process that has it.
  char buf[16];
  const bool refused = readlink("/proc/1/exe", buf, sizeof buf) < 0 && (errno == EACCES || errno == EPERM);
  const std::string hint = ptrace_permission_hint("/nonexistent-yama", true, "", "/proc/1");
  INFO(hint);
  if (refused) {
    CHECK(hint.rfind("this process has CAP_SYS_PTRACE, yet the kernel refuses it access to this target (/proc/1/exe: ", 0) == 0);
    CHECK(hint.find("run as the target's user") == std::string::npos);
  } else {
    CHECK(hint == "this process has CAP_SYS_PTRACE; run as the target's user, or with CAP_SYS_PTRACE");
  }
  // A directory whose exe link is readable (this process's own): the classic advice.
  CHECK(ptrace_permission_hint("/nonexistent-yama", true, "", "/proc/self") ==
        "this process has CAP_SYS_PTRACE; run as the target's user, or with CAP_SYS_PTRACE");
}

namespace {

std::atomic<int> g_user_handler_sig{0};
void user_handler(int sig) { g_user_handler_sig.store(sig); }

/// Forks a capturer of `target` whose while_stopped callback announces itself
/// on `in_cb` and then sleeps 2 s, so that a signal lands mid-capture. With
/// `own_handler`, the capturer survives SIGTERM and reports the capture's
/// error code on `result`.
pid_t spawn_capturer(pid_t target, bool own_handler, int in_cb, int result) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  signal(SIGTERM, own_handler ? user_handler : SIG_DFL);  // not Catch2's fatal-signal handler
  bool announced = false;
  auto cap = capture_process(target, 0, 64 * 1024, [&](Snapshot&, MemoryReader&) {
    if (!announced && write(in_cb, "C", 1) == 1) announced = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until) usleep(10 * 1000);
  });
  const int code = cap.ok() ? 0 : cap.error().code;
  const int sig = g_user_handler_sig.load();
  int msg[2] = {code, sig};
  if (write(result, msg, sizeof(msg)) != static_cast<ssize_t>(sizeof(msg))) _exit(3);
  _exit(0);
}

}  // namespace

TEST_CASE("SIGTERM to the capturing process mid-capture leaves the target untraced", "[process]") {
  CaptureChild target;
  int ctl_w = -1, resp_r = -1;
  spawn_blocked(&target, 3, &ctl_w, &resp_r);

  for (bool own_handler : {false, true}) {
    INFO((own_handler ? "capturer with its own SIGTERM handler" : "capturer with the default SIGTERM action"));
    int in_cb[2], result[2];
    REQUIRE(pipe(in_cb) == 0);
    REQUIRE(pipe(result) == 0);
    CaptureChild capturer;
    capturer.pid = spawn_capturer(target.pid, own_handler, in_cb[1], result[1]);
    REQUIRE(capturer.pid > 0);
    close(in_cb[1]);
    close(result[1]);
    char c = 0;
    REQUIRE(read_timeout(in_cb[0], &c, 1, 5000));  // every target thread is stopped and traced now
    CHECK_FALSE(no_thread_traced(target.pid));
    REQUIRE(kill(capturer.pid, SIGTERM) == 0);
    if (own_handler) {
      // The capturer is still alive (its callback sleeps 2 s): the handler itself detached.
      CHECK(eventually_untraced(target.pid, 500));
      int msg[2] = {};
      REQUIRE(read_timeout(result[0], msg, sizeof(msg), 5000));
      CHECK(msg[0] == -EINTR);
      CHECK(msg[1] == SIGTERM);  // the program's own handler still ran
    } else {
      int st = 0;
      REQUIRE(waitpid(capturer.pid, &st, 0) == capturer.pid);
      capturer.pid = -1;
      CHECK(WIFSIGNALED(st));
      CHECK(WTERMSIG(st) == SIGTERM);
      CHECK(eventually_untraced(target.pid, 500));
    }
    close(in_cb[0]);
    close(result[0]);
  }
  // The target runs on.
  REQUIRE(write(ctl_w, "x", 1) == 1);
  char a = 0;
  CHECK(read_timeout(resp_r, &a, 1, 2000));
  CHECK(a == 'A');
  close(ctl_w);
  close(resp_r);
}

namespace {

void* parked_thread(void* arg) {
  stackprov_test_parked_a(static_cast<int>(reinterpret_cast<long>(arg)));
  return nullptr;
}

struct Named {
  uint64_t pc, sp;
  int method;
  std::string name;
};

std::vector<Named> unwind_named(sprov_unwinder* uw, sprov_symbolizer* sym, const sprov_snapshot* snap,
                                int* stop) {
  sprov_stack* stack = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &stack) == 0);
  std::vector<Named> out;
  for (size_t i = 0; i < sprov_stack_frame_count(stack); i++) {
    sprov_frame f = {};
    f.sz = sizeof(f);
    REQUIRE(sprov_stack_frame(stack, i, &f) == 0);
    sprov_symbol s = {};
    s.sz = sizeof(s);
    REQUIRE(sprov_symbolizer_frame(sym, stack, i, &s) == 0);
    out.push_back({f.pc, f.sp, f.method, s.name ? s.name : ""});
  }
  *stop = sprov_stack_stop_reason(stack);
  sprov_stack_free(stack);
  return out;
}

}  // namespace

TEST_CASE("C ABI: a parked thread unwinds to its call chain, and its snapshot is self-contained", "[process][capi]") {
  int tid_pipe[2];
  REQUIRE(pipe(tid_pipe) == 0);
  CaptureChild child;
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    pthread_t t;
    if (pthread_create(&t, nullptr, parked_thread, reinterpret_cast<void*>(static_cast<long>(tid_pipe[1]))) != 0)
      _exit(2);
    for (;;) pause();
  }
  close(tid_pipe[1]);
  pid_t parked_tid = 0;
  REQUIRE(read_timeout(tid_pipe[0], &parked_tid, sizeof(parked_tid), 5000));
  close(tid_pipe[0]);
  usleep(100 * 1000);  // into pause()

  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  sprov_symbolizer* sym = nullptr;
  REQUIRE(sprov_symbolizer_new(ctx, nullptr, &sym) == 0);

  sprov_process_opts opts = {};
  opts.sz = sizeof(opts);
  opts.tid = parked_tid;
  sprov_process* proc = nullptr;
  REQUIRE(sprov_process_capture(ctx, child.pid, &opts, &proc) == 0);
  CHECK(sprov_process_pid(proc) == child.pid);
  REQUIRE(sprov_process_thread_count(proc) == 1);
  const sprov_snapshot* snap = sprov_process_thread(proc, 0);
  REQUIRE(snap != nullptr);
  CHECK(sprov_snapshot_tid(snap) == parked_tid);
  CHECK(std::string(sprov_process_warnings(proc)).find("thread") == std::string::npos);

  int stop = 0;
  const std::vector<Named> live = unwind_named(uw, sym, snap, &stop);
  std::string listing;
  for (const Named& n : live) listing += n.name + " / ";
  INFO("frames: " << listing);
  CHECK(stop == SPROV_STOP_END_OF_STACK);
  REQUIRE(live.size() >= 3);
  CHECK(in_libc(live[0].pc));  // frame 0: inside pause()
  const auto b = std::find_if(live.begin(), live.end(),
                              [](const Named& n) { return n.name == "stackprov_test_parked_b"; });
  REQUIRE(b != live.end());
  REQUIRE(b + 1 != live.end());
  CHECK((b + 1)->name == "stackprov_test_parked_a");
  CHECK(std::none_of(live.begin(), b, [](const Named& n) { return n.name.find("stackprov_test") == 0; }));

  // Serialize, kill the child, and unwind the copy offline: the same frames.
  void* bytes = nullptr;
  size_t len = 0;
  REQUIRE(sprov_snapshot_serialize(snap, &bytes, &len) == 0);
  sprov_process_free(proc);
  kill(child.pid, SIGKILL);
  int st;
  waitpid(child.pid, &st, 0);
  child.pid = -1;
  sprov_snapshot* copy = nullptr;
  REQUIRE(sprov_snapshot_deserialize(bytes, len, &copy) == 0);
  sprov_free(bytes);
  int stop2 = 0;
  const std::vector<Named> offline = unwind_named(uw, sym, copy, &stop2);
  CHECK(stop2 == stop);
  REQUIRE(offline.size() == live.size());
  for (size_t i = 0; i < live.size(); i++) {
    INFO("frame " << i);
    CHECK(offline[i].pc == live[i].pc);
    CHECK(offline[i].sp == live[i].sp);
    CHECK(offline[i].method == live[i].method);
    CHECK(offline[i].name == live[i].name);
  }
  sprov_snapshot_free(copy);

  // Options: reserved flags and the core-only exe are rejected, naming the value.
  sprov_process_opts bad_flags = {};
  bad_flags.sz = sizeof(bad_flags);
  bad_flags.flags = 8;  // the first bit no flag uses (4 is SPROV_PROCESS_KERNEL_BTF)
  sprov_process* none = nullptr;
  CHECK(sprov_process_capture(ctx, 1, &bad_flags, &none) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("0x8") != std::string::npos);
  // --with-btf without --kernel: refused, naming both flags.
  bad_flags.flags = SPROV_PROCESS_KERNEL_BTF;
  CHECK(sprov_process_capture(ctx, 1, &bad_flags, &none) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("SPROV_PROCESS_KERNEL_STACKS") != std::string::npos);
  sprov_process_opts bad_exe = {};
  bad_exe.sz = sizeof(bad_exe);
  bad_exe.exe = "/bin/true";
  CHECK(sprov_process_capture(ctx, 1, &bad_exe, &none) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("/bin/true") != std::string::npos);
  CHECK(none == nullptr);

  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
}

TEST_CASE("C ABI: sprov_process_capture of a missing pid is -ESRCH naming the pid", "[process][capi]") {
  const pid_t gone = fork();
  REQUIRE(gone >= 0);
  if (gone == 0) _exit(0);
  int st;
  REQUIRE(waitpid(gone, &st, 0) == gone);
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_process* proc = nullptr;
  CHECK(sprov_process_capture(ctx, gone, nullptr, &proc) == -ESRCH);
  CHECK(proc == nullptr);
  CHECK(sprov_last_error() == -ESRCH);
  CHECK(std::string(sprov_last_error_message()).find(std::to_string(gone)) != std::string::npos);
  sprov_context_free(ctx);
}
