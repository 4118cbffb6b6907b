// SPDX-License-Identifier: Apache-2.0
// Live-process capture: PTRACE_SEIZE/INTERRUPT every thread, copy what an offline walk needs, detach on every path.
#include "memory/process_capture.hpp"

#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/module_map.hpp"
#include "elf/elf_image.hpp"
#include "memory/live_readers.hpp"
#include "memory/module_list.hpp"
#include "arch/host.hpp"

namespace stackprov::memory {

namespace {

using Clock = std::chrono::steady_clock;

/// Whether `addr` lies in the vDSO of `s`'s module list (its bytes are in every snapshot).
bool in_vdso(const Snapshot& s, uint64_t addr) {
  for (const SnapshotModule& m : s.modules)
    if (m.path == kVdsoName && addr >= m.start && addr < m.end) return true;
  return false;
}

constexpr int kMaxTracked = 8192;      // threads the signal handler can detach
constexpr int kMaxRounds = 10;         // task re-listings looking for new threads
constexpr size_t kMaxThreads = 65536;  // threads captured at most
constexpr auto kStopTimeout = std::chrono::milliseconds(2000);
constexpr auto kDetachGrace = std::chrono::milliseconds(100);
constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxVdsoBytes = 1u << 20;
constexpr int kCaughtSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
constexpr int kCapSysPtrace = 19;  // linux/capability.h

// ---- async-signal-safe detach list (read by on_fatal_signal)

std::atomic<pid_t> g_tracked[kMaxTracked];
std::atomic<int> g_inject[kMaxTracked];
std::atomic<int> g_tracked_count{0};
std::atomic<pid_t> g_tracer_tid{0};
std::atomic<int> g_caught_signal{0};
std::atomic<uint64_t> g_tracer_blocked{0};  // bit s: the tracer thread blocks signal s
struct sigaction g_old_actions[NSIG];
std::mutex g_capture_mutex;  // one capture at a time: the globals above are shared

static_assert(std::atomic<pid_t>::is_always_lock_free, "the signal handler needs lock-free atomics");

long raw_detach(pid_t tid, int sig) { return syscall(SYS_ptrace, PTRACE_DETACH, tid, 0L, static_cast<long>(sig)); }

/// SIGINT/SIGTERM/SIGHUP/SIGPIPE while attached. Only system calls: ptrace,
/// sigaction, gettid, getpid, tgkill. Only the tracer thread may detach (ptrace
/// is per thread), so another thread forwards the signal to it.
void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  const pid_t tracer = g_tracer_tid.load();
  if (tracer != 0 && self != tracer && !((g_tracer_blocked.load() >> sig) & 1)) {
    syscall(SYS_tgkill, getpid(), tracer, sig);
    errno = saved_errno;
    return;
  }
  if (tracer != 0 && self == tracer) {
    const int n = g_tracked_count.load();
    for (int i = 0; i < n && i < kMaxTracked; i++) {
      const pid_t t = g_tracked[i].load();
      if (t > 0 && raw_detach(t, g_inject[i].load()) == 0) g_tracked[i].store(0);
    }
  }
  g_caught_signal.store(sig);
  sigaction(sig, &g_old_actions[sig], nullptr);
  syscall(SYS_tgkill, getpid(), self, sig);  // delivered with the old disposition once we return
  errno = saved_errno;
}

/// Installs on_fatal_signal for the signals that are not ignored; restores the
/// previous dispositions when destroyed. Created on the tracer thread.
class SignalGuard {
 public:
  SignalGuard() {
    g_caught_signal.store(0);
    g_tracked_count.store(0);
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, nullptr, &cur);
    uint64_t blocked = 0;
    for (int s : kCaughtSignals)
      if (sigismember(&cur, s) == 1) blocked |= 1ull << s;
    g_tracer_blocked.store(blocked);
    g_tracer_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    for (int s : kCaughtSignals) {
      struct sigaction old;
      if (sigaction(s, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
      g_old_actions[s] = old;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      for (int o : kCaughtSignals) sigaddset(&sa.sa_mask, o);
      sa.sa_flags = SA_RESTART;
      if (sigaction(s, &sa, nullptr) == 0) installed_ |= 1ull << s;
    }
  }
  ~SignalGuard() {
    for (int s : kCaughtSignals) {
      if (!((installed_ >> s) & 1)) continue;
      struct sigaction cur;
      // Restore only our own handler: the handler itself, or the program, may have replaced it.
      if (sigaction(s, nullptr, &cur) == 0 && cur.sa_handler == on_fatal_signal)
        sigaction(s, &g_old_actions[s], nullptr);
    }
    g_tracer_tid.store(0);
    g_tracked_count.store(0);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  uint64_t installed_ = 0;
};

// ---- /proc helpers

/// The whole file ("" when unreadable), read(2) without iostreams: this runs
/// several times per thread while the target is stopped.
std::string read_small_file(const std::string& path) {
  std::string text;
  if (read_proc_text(path.c_str(), &text) != 0) text.clear();
  return text;
}

/// A task's name: /proc/PID/task/TID/comm (the whole process's with tid 0)
/// without its newline; "" when unreadable.
std::string comm_of(pid_t pid, pid_t tid) {
  std::string c = read_small_file("/proc/" + std::to_string(pid) +
                                  (tid ? "/task/" + std::to_string(tid) : std::string()) + "/comm");
  if (!c.empty() && c.back() == '\n') c.pop_back();
  return c;
}

/// Value of a "Key:\tvalue" line of /proc/PID/status; "" when absent.
std::string status_field(pid_t pid, const char* key) {
  std::string text = read_small_file("/proc/" + std::to_string(pid) + "/status");
  const std::string k = std::string(key) + ":";
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (text.compare(pos, k.size(), k) == 0) {
      size_t v = pos + k.size();
      while (v < eol && (text[v] == ' ' || text[v] == '\t')) v++;
      return text.substr(v, eol - v);
    }
    pos = eol + 1;
  }
  return {};
}

/// State letter (R S D T t Z X ...) and parent of a task from its stat file; 0 when unreadable.
char task_state(pid_t pid, pid_t tid, pid_t* ppid = nullptr) {
  std::string text =
      read_small_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  const size_t rp = text.rfind(')');  // comm may contain spaces and parentheses
  if (rp == std::string::npos || rp + 2 >= text.size()) return 0;
  if (ppid != nullptr) *ppid = static_cast<pid_t>(std::atoi(text.c_str() + rp + 4));
  return text[rp + 2];
}

Result<std::vector<pid_t>> list_tasks(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    const int e = errno;
    if (e == ENOENT) return make_error(-ESRCH, "no such process %d (%s is gone)", pid, dir.c_str());
    return make_error(-e, "cannot list %s: %s", dir.c_str(), std::strerror(e));
  }
  std::vector<pid_t> tids;
  while (dirent* ent = readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(ent->d_name, &end, 10);
    if (end != ent->d_name && *end == '\0' && v > 0) tids.push_back(static_cast<pid_t>(v));
    if (tids.size() > kMaxThreads) break;
  }
  closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

bool have_cap_sys_ptrace() {
  const std::string eff = status_field(getpid(), "CapEff");
  if (eff.empty()) return false;
  return (std::strtoull(eff.c_str(), nullptr, 16) >> kCapSysPtrace) & 1;
}

/// Whether `pid` is a kernel thread: PF_KTHREAD (0x00200000, include/linux/sched.h) in the flags
/// field of /proc/PID/stat, the 7th after the comm's closing parenthesis (proc(5)). ptrace refuses
/// kernel threads whatever the capabilities.
bool is_kernel_thread(pid_t pid) {
  const std::string stat = read_small_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  const char* p = stat.c_str() + close + 1;
  for (int field = 0; field < 7 && *p; field++) {
    while (*p == ' ') p++;
    if (field == 6) return (std::strtoull(p, nullptr, 10) & 0x00200000ull) != 0;
    while (*p && *p != ' ') p++;
  }
  return false;
}

/// -EPERM with what a user can act on (ptrace_permission_hint).
Error permission_error(pid_t pid, pid_t tid) {
  if (is_kernel_thread(pid))
    return make_error(-EPERM,
                      "process %d is a kernel thread: it has no user space to capture, and ptrace refuses it "
                      "(its kernel stack is /proc/%d/stack)",
                      pid, pid);
  const std::string tracer = status_field(pid, "TracerPid");
  const std::string hint = ptrace_permission_hint("/proc/sys/kernel/yama", have_cap_sys_ptrace(),
                                                  tracer == "0" ? std::string() : tracer,
                                                  "/proc/" + std::to_string(pid));
  return make_error(-EPERM, "permission denied attaching to process %d (thread %d): %s", pid, tid, hint.c_str());
}

Error interrupted_error(pid_t pid) {
  const int sig = g_caught_signal.load();
  return make_error(-EINTR, "capture of process %d interrupted by signal %d (%s); every thread was detached",
                    pid, sig, strsignal(sig));
}

/// Copies [lo, hi) into `s`: one bulk read, else page by page keeping every readable run.
size_t copy_range(Snapshot& s, MemoryReader& rd, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return 0;
  std::vector<uint8_t> buf(hi - lo);
  if (rd.read(lo, buf.data(), buf.size())) return s.add_memory(lo, buf.data(), buf.size()).ok() ? buf.size() : 0;
  size_t copied = 0;
  uint64_t run = lo, cur = lo;
  auto flush = [&](uint64_t end) {
    if (end > run && s.add_memory(run, buf.data() + (run - lo), end - run).ok()) copied += end - run;
  };
  while (cur < hi) {
    const uint64_t next = std::min(hi, (cur & ~(kPage - 1)) + kPage);
    if (!rd.read(cur, buf.data() + (cur - lo), next - cur)) {
      flush(cur);
      run = next;
    }
    cur = next;
  }
  flush(hi);
  return copied;
}

struct Tracee {
  pid_t tid = 0;
  int slot = -1;         // index into g_tracked; -1 when the list is full
  bool attached = false;
  bool stopped = false;
  bool foreign = false;  // the tid was reused by another process before the seize: detached, not captured
  int inject_sig = 0;    // signal found at a signal-delivery-stop, re-injected on detach
};

/// The ptrace work of one capture; runs on the tracer thread. The destructor
/// detaches whatever is still attached.
class Capturer {
 public:
  Capturer(pid_t pid, pid_t only_tid, uint32_t max_stack, const WhileStopped& cb, const TaskLister& lister)
      : pid_(pid), only_tid_(only_tid), max_stack_(max_stack), while_stopped_(cb), list_tasks_(lister) {}
  ~Capturer() { detach_all(); }
  Capturer(const Capturer&) = delete;
  Capturer& operator=(const Capturer&) = delete;

  Result<ProcessCapture> run();
  /// Detaches every attached thread (re-injecting pending signals); idempotent.
  void detach_all();
  /// Detaches, as soon as they stopped, the tracees whose tid named another process's thread.
  void release_foreign();
  std::string& warnings() { return warnings_; }

 private:
  Status check_target();
  Status attach_all();
  Status seize(pid_t tid, bool first);
  void wait_for_stops(std::vector<Tracee*> pending);
  Status capture_thread(Tracee& t, const std::vector<MapsEntry>& maps, Snapshot* out);
  void warn(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  pid_t pid_;
  pid_t only_tid_;
  uint32_t max_stack_;
  static constexpr uint64_t kMaxTotalStackBytes = uint64_t{1} << 30;
  uint64_t stack_budget_ = kMaxTotalStackBytes;
  /// Copies of module images read from memory into the threads' snapshots, all threads together.
  static constexpr uint64_t kMaxTotalImageCopies = uint64_t{256} << 20;
  uint64_t image_budget_ = kMaxTotalImageCopies;
  bool image_budget_warned_ = false;
  const WhileStopped& while_stopped_;
  TaskLister list_tasks_;  // by value: the caller's may be a temporary
  std::deque<Tracee> tracees_;  // a deque: Tracee* stay valid as threads are added
  std::set<pid_t> seen_;
  std::string warnings_;
};

void Capturer::warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  warnings_ += format_message_v(fmt, ap);
  va_end(ap);
  warnings_ += '\n';
}

Status Capturer::check_target() {
  if (pid_ <= 0) return make_error(SPROV_ERR_INVALID_ARG, "invalid pid %d", pid_);
  if (only_tid_ < 0) return make_error(SPROV_ERR_INVALID_ARG, "invalid tid %d", only_tid_);
  struct stat st;
  const std::string dir = "/proc/" + std::to_string(pid_);
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return make_error(-ESRCH, "no such process %d", pid_);
    return make_error(-errno, "cannot stat %s: %s", dir.c_str(), std::strerror(errno));
  }
  const std::string tgid = status_field(pid_, "Tgid");
  if (tgid.empty()) return make_error(-ESRCH, "no such process %d", pid_);
  if (std::atoi(tgid.c_str()) != pid_)
    return make_error(-ESRCH, "%d is a thread of process %s, not a process; pass pid %s and tid %d", pid_,
                      tgid.c_str(), tgid.c_str(), pid_);
  if (pid_ == getpid())
    return make_error(SPROV_ERR_CAPTURE,
                      "process %d is the calling process; use sprov_snapshot_capture_self", pid_);
  pid_t ppid = 0;
  const char state = task_state(pid_, pid_, &ppid);
  if (state == 'Z' || state == 'X') {
    auto tids = list_tasks_(pid_);
    bool all_dead = true;
    if (tids.ok())
      for (pid_t t : tids.value()) {
        const char s = t == pid_ ? state : task_state(pid_, t);
        if (s != 'Z' && s != 'X' && s != 0) all_dead = false;
      }
    if (all_dead)
      return make_error(SPROV_ERR_CAPTURE,
                        "process %d is a zombie (it has exited; its parent %d has not reaped it): "
                        "nothing to capture",
                        pid_, ppid);
  }
  if (only_tid_ != 0) {
    const std::string tdir = dir + "/task/" + std::to_string(only_tid_);
    if (stat(tdir.c_str(), &st) != 0)
      return make_error(-ESRCH, "thread %d is not a thread of process %d", only_tid_, pid_);
  }
  return {};
}

Status Capturer::seize(pid_t tid, bool first) {
  seen_.insert(tid);
  const char state = task_state(pid_, tid);
  if (state == 'Z' || state == 'X') {
    warn("thread %d has exited (state %c); skipped", tid, state);
    return {};
  }
  // Not a thread of the process (any more): it exited since the listing, and its number may
  // already name another process's thread, which must not be touched.
  const std::string task_dir = "/proc/" + std::to_string(pid_) + "/task/" + std::to_string(tid);
  struct stat st;
  if (state == 0 && stat(task_dir.c_str(), &st) != 0) {
    warn("thread %d exited before it could be attached", tid);
    return {};
  }
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    const int e = errno;
    if (e == ESRCH || stat(task_dir.c_str(), &st) != 0) {  // gone (EPERM: its number reused by another user's process)
      warn("thread %d exited before it could be attached", tid);
      return {};
    }
    if (e == EPERM && first) return permission_error(pid_, tid);
    if (e == EPERM) {  // another thread attached fine: this one is exiting
      warn("thread %d could not be attached (EPERM: exiting?); skipped", tid);
      return {};
    }
    if (first) return make_error(-e, "PTRACE_SEIZE of process %d thread %d: %s", pid_, tid, std::strerror(e));
    warn("thread %d: PTRACE_SEIZE failed: %s; skipped", tid, std::strerror(e));
    return {};
  }
  Tracee t;
  t.tid = tid;
  t.attached = true;
  // Attached, the tid cannot be reused until this tracer reaps it; between the check above and
  // the seize it could have been (the thread exited and another process got its number). Such a
  // thread is stopped and detached at once (release_foreign), and never captured.
  if (stat(task_dir.c_str(), &st) != 0) {
    t.foreign = true;
    const std::string tgid = status_field(tid, "Tgid");
    warn("thread %d: the tid now names a thread of another process (%s%s), not of process %d; detached, "
         "not captured",
         tid, tgid.empty() ? "process unknown" : "Tgid ", tgid.c_str(), pid_);
  }
  const int n = static_cast<int>(tracees_.size());
  if (n < kMaxTracked) {
    t.slot = n;
    g_inject[n].store(0);
    g_tracked[n].store(tid);
    g_tracked_count.store(n + 1);
  }
  tracees_.push_back(t);
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0 && errno == ESRCH) {
    // Exited between SEIZE and INTERRUPT; wait_for_stops reaps it.
  }
  return {};
}

void Capturer::wait_for_stops(std::vector<Tracee*> pending) {
  const auto deadline = Clock::now() + kStopTimeout;
  auto nap = std::chrono::microseconds(10);
  while (!pending.empty()) {
    for (size_t i = 0; i < pending.size();) {
      Tracee& t = *pending[i];
      int st = 0;
      const pid_t r = waitpid(t.tid, &st, __WALL | WNOHANG);
      bool done = true;
      if (r == 0 || (r < 0 && errno == EINTR)) {
        done = false;
      } else if (r < 0) {  // ECHILD: gone and reaped by someone else
        warn("thread %d exited during capture", t.tid);
        t.attached = false;
      } else if (WIFEXITED(st) || WIFSIGNALED(st)) {
        warn("thread %d exited during capture", t.tid);
        t.attached = false;
      } else if (WIFSTOPPED(st)) {
        t.stopped = true;
        // PTRACE_EVENT_STOP: the interrupt stop or a group-stop. Event 0: a
        // signal-delivery-stop that came first; the thread is stopped all the
        // same and the signal is handed back on detach.
        if ((st >> 16) == 0) {
          t.inject_sig = WSTOPSIG(st);
          if (t.slot >= 0) g_inject[t.slot].store(t.inject_sig);
        }
      } else {
        done = false;
      }
      if (done) {
        if (!t.attached && t.slot >= 0) g_tracked[t.slot].store(0);
        pending[i] = pending.back();
        pending.pop_back();
      } else {
        i++;
      }
    }
    if (pending.empty() || g_caught_signal.load() != 0) return;
    if (Clock::now() >= deadline) {
      for (Tracee* t : pending) {
        const char s = task_state(pid_, t->tid);
        warn("thread %d did not stop within %lld ms (state %c%s); not captured", t->tid,
             static_cast<long long>(kStopTimeout.count()), s ? s : '?',
             s == 'D' ? ": uninterruptible sleep or vfork" : "");
      }
      return;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(100));  // stops arrive within ~100 us
  }
}

Status Capturer::attach_all() {
  if (only_tid_ != 0) {
    if (Status st = seize(only_tid_, true); !st.ok()) return st;
    std::vector<Tracee*> pending;
    for (Tracee& t : tracees_) pending.push_back(&t);
    wait_for_stops(pending);
    release_foreign();
    return {};
  }
  bool first = true;
  for (int round = 0; round < kMaxRounds; round++) {
    auto tids = list_tasks_(pid_);
    if (!tids.ok()) {
      if (first) return tids.error();
      warn("re-listing threads failed: %s", tids.error().message.c_str());
      return {};
    }
    const size_t before = tracees_.size();
    bool newcomer = false;
    for (pid_t tid : tids.value()) {
      if (seen_.count(tid) != 0) continue;
      if (tracees_.size() >= kMaxThreads) {
        warn("more than %zu threads: the rest are not captured", kMaxThreads);
        break;
      }
      newcomer = true;
      if (Status st = seize(tid, first); !st.ok()) return st;
      if (!tracees_.empty() && !tracees_.back().foreign) first = false;
    }
    if (!newcomer) return {};
    size_t added = 0;
    for (size_t i = before; i < tracees_.size(); i++) added += !tracees_[i].foreign;
    if (round > 0 && added > 0) warn("%zu thread(s) appeared during capture and were captured", added);
    std::vector<Tracee*> pending;
    for (size_t i = before; i < tracees_.size(); i++) pending.push_back(&tracees_[i]);
    wait_for_stops(pending);
    release_foreign();
    if (g_caught_signal.load() != 0) return interrupted_error(pid_);
    if (round + 1 == kMaxRounds) warn("threads were still appearing after %d listings", kMaxRounds);
  }
  return {};
}

Status Capturer::capture_thread(Tracee& t, const std::vector<MapsEntry>& maps, Snapshot* out) {
  using Host = arch::HostTraits;
  // NT_PRSTATUS of every supported host fits (x86_64 216 bytes, arm64 272, mips o32 180).
  alignas(8) uint8_t raw[512];
  std::memset(raw, 0, sizeof(raw));
  iovec iov{raw, sizeof(raw)};
  if (ptrace(PTRACE_GETREGSET, t.tid, reinterpret_cast<void*>(NT_PRSTATUS), &iov) != 0)
    return make_error(-errno, "thread %d: PTRACE_GETREGSET: %s", t.tid, std::strerror(errno));
  arch::HostRegs regs{};
  if (Status st = arch::host_regs_from_user_regs(raw, iov.iov_len, &regs); !st.ok()) return st;
  Snapshot& s = *out;
  s.arch = Host::kArch;
  s.endian = Host::kBigEndian ? Endian::kBig : Endian::kLittle;
  s.pid = pid_;
  s.tid = t.tid;
  s.flags = 0;  // the pc is where the thread was interrupted, not a return address
  for (int r = 0; r < Host::kNumRegs; r++)
    if (regs.has(r)) s.set_reg(r, regs.get(r));
  if (!regs.has(Host::kSpReg)) return make_error(SPROV_ERR_CAPTURE, "thread %d: no stack pointer in NT_PRSTATUS", t.tid);
  const uint64_t sp = regs.get(Host::kSpReg);
  // /proc/PID/maps is sorted and disjoint: a binary search (65,536 threads x 1M mappings while the
  // target is stopped would be too slow for a linear one).
  const MapsEntry* sp_map = nullptr;
  auto above = std::upper_bound(maps.begin(), maps.end(), sp, [](uint64_t v, const MapsEntry& e) { return v < e.start; });
  if (above != maps.begin() && sp < std::prev(above)->end) sp_map = &*std::prev(above);
  if (sp_map == nullptr) {
    warn("thread %d: sp 0x%llx is not in any mapping; no stack copied", t.tid,
         static_cast<unsigned long long>(sp));
    return {};
  }
  // All threads' copies together stay within kMaxTotalStackBytes: 65,536 threads x 64 MiB would be 4 TiB.
  if (stack_budget_ == 0) {
    warn("thread %d: the %llu bytes of stack copies for all threads are spent; no stack copied", t.tid,
         static_cast<unsigned long long>(kMaxTotalStackBytes));
    return {};
  }
  FallbackReader rd(pid_, t.tid);
  const uint64_t end = sp + std::min<uint64_t>({sp_map->end - sp, max_stack_, stack_budget_});  // no wrap
  const size_t copied = copy_range(s, rd, sp, end);
  stack_budget_ -= std::min<uint64_t>(stack_budget_, end - sp);
  if (copied < end - sp)
    warn("thread %d: %zu of %llu stack bytes at 0x%llx readable", t.tid, copied,
         static_cast<unsigned long long>(end - sp), static_cast<unsigned long long>(sp));
  return {};
}

Result<ProcessCapture> Capturer::run() {
  if (Status st = check_target(); !st.ok()) return st.error();
  if (Status st = attach_all(); !st.ok()) return st.error();
  if (g_caught_signal.load() != 0) return interrupted_error(pid_);
  std::vector<Tracee*> stopped;
  for (Tracee& t : tracees_)
    if (t.attached && t.stopped && !t.foreign) stopped.push_back(&t);
  if (stopped.empty()) {
    std::string w = warnings_;
    while (!w.empty() && w.back() == '\n') w.pop_back();
    if (only_tid_ != 0)
      return make_error(SPROV_ERR_CAPTURE, "thread %d of process %d could not be stopped: %s", only_tid_, pid_,
                        w.c_str());
    return make_error(SPROV_ERR_CAPTURE, "no thread of process %d could be stopped: %s", pid_, w.c_str());
  }
  std::sort(stopped.begin(), stopped.end(), [](Tracee* a, Tracee* b) { return a->tid < b->tid; });

  // Everything below sees one consistent process state: every thread is stopped.
  auto text = read_maps_text(pid_);
  if (!text.ok()) return text.error();
  auto maps = parse_maps(text.value());
  if (!maps.ok()) return maps.error();

  // The vDSO bytes, then the module list (which parses the vDSO from them).
  Snapshot base;
  {
    FallbackReader rd(pid_, stopped.front()->tid);
    for (const MapsEntry& e : maps.value())
      if (e.path == kVdsoName && e.end - e.start <= kMaxVdsoBytes && copy_range(base, rd, e.start, e.end) == 0)
        warn("vdso at 0x%llx unreadable", static_cast<unsigned long long>(e.start));
  }
  const std::string root = "/proc/" + std::to_string(pid_) + "/root";
  if (Status st = add_modules_from_maps(base, maps.value(), root, &warnings_, pid_); !st.ok()) return st.error();

  ProcessCapture out;
  out.pid = pid_;
  out.program_name = comm_of(pid_, 0);
  for (Tracee* t : stopped) {
    if (g_caught_signal.load() != 0) return interrupted_error(pid_);
    Snapshot s;
    Status st = capture_thread(*t, maps.value(), &s);
    if (!st.ok()) {
      if (st.error().code == -ESRCH) warn("thread %d exited during capture", t->tid);
      else if (st.error().code == SPROV_ERR_UNSUPPORTED) return st.error();
      else warn("%s", st.error().message.c_str());
      continue;
    }
    // The vDSO's bytes go into every thread's snapshot. So do the read-only segments of modules
    // described from memory (add_modules_from_maps), within kMaxTotalImageCopies over all threads
    // (many threads and upgraded libraries): a thread past it has the module list without them,
    // and is walked through those modules by an unwinder that loaded them for an earlier thread.
    uint64_t images = 0;
    for (const MemoryRegion& r : base.memory)
      if (!in_vdso(base, r.addr)) images += r.size();
    const bool copy_images = images <= image_budget_;
    if (copy_images) image_budget_ -= images;
    else if (!image_budget_warned_) {
      image_budget_warned_ = true;
      warn("thread %d and later: the %llu bytes of module images read from memory are not copied (%llu bytes for all "
           "threads spent)", t->tid, static_cast<unsigned long long>(images),
           static_cast<unsigned long long>(kMaxTotalImageCopies));
    }
    for (const MemoryRegion& r : base.memory)
      if (copy_images || in_vdso(base, r.addr))
        if (Status a = s.add_memory(r.addr, r.data(), r.size()); !a.ok())
          warn("thread %d: %s", t->tid, a.error().message.c_str());
    s.modules = base.modules;
    s.module_root = root;
    if (while_stopped_) {
      FallbackReader live(pid_, t->tid);
      try {
        while_stopped_(s, live);
      } catch (const std::exception& e) {
        warn("thread %d: pre-walk failed: %s", t->tid, e.what());
      }
    }
    out.thread_names[t->tid] = comm_of(pid_, t->tid);  // read while stopped: it cannot exit meanwhile
    out.threads.push_back(std::move(s));
  }
  if (g_caught_signal.load() != 0) return interrupted_error(pid_);
  return out;
}

void Capturer::release_foreign() {
  for (Tracee& t : tracees_) {
    if (!t.foreign || !t.attached || !t.stopped) continue;  // not stopped yet: detach_all's grace period
    const pid_t tid = t.slot >= 0 ? g_tracked[t.slot].exchange(0) : t.tid;
    t.attached = false;
    if (tid != 0 && ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(t.inject_sig))) != 0 &&
        errno != ESRCH)
      warn("thread %d: PTRACE_DETACH failed: %s", tid, std::strerror(errno));
  }
}

void Capturer::detach_all() {
  std::vector<Tracee*> running;
  for (Tracee& t : tracees_) {
    if (!t.attached) continue;
    if (!t.stopped) {
      running.push_back(&t);
      continue;
    }
    const pid_t tid = t.slot >= 0 ? g_tracked[t.slot].exchange(0) : t.tid;
    t.attached = false;
    if (tid == 0) continue;  // the signal handler detached it
    if (ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(t.inject_sig))) != 0 &&
        errno != ESRCH)
      warn("thread %d: PTRACE_DETACH failed: %s", tid, std::strerror(errno));
  }
  if (running.empty()) return;
  // Threads that never stopped: give them a last chance, then leave them to the
  // kernel, which detaches every tracee of the tracer thread when it exits.
  const auto deadline = Clock::now() + kDetachGrace;
  while (!running.empty()) {
    for (size_t i = 0; i < running.size();) {
      Tracee& t = *running[i];
      int st = 0;
      const pid_t r = waitpid(t.tid, &st, __WALL | WNOHANG);
      if (r == 0) {
        i++;
        continue;
      }
      if (r > 0 && WIFSTOPPED(st)) {
        const int sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
        ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
      }
      if (t.slot >= 0) g_tracked[t.slot].store(0);
      t.attached = false;
      running[i] = running.back();
      running.pop_back();
    }
    if (running.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (Tracee* t : running) {
    if (t->slot >= 0) g_tracked[t->slot].store(0);
    t->attached = false;
    warn("thread %d never stopped; the kernel detaches it when the tracer thread exits", t->tid);
  }
}

}  // namespace

std::string ptrace_permission_hint(const std::string& yama_dir, bool cap_sys_ptrace, const std::string& tracer_pid,
                                   const std::string& proc_dir) {
  struct stat st;
  const bool yama = stat(yama_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  std::string scope;
  if (yama) {
    scope = read_small_file(yama_dir + "/ptrace_scope");
    while (!scope.empty() && (scope.back() == '\n' || scope.back() == ' ')) scope.pop_back();
  }
  const char* meaning = scope == "0"   ? "classic ptrace permissions"
                        : scope == "1" ? "only descendants can be traced"
                        : scope == "2" ? "only CAP_SYS_PTRACE can trace"
                        : scope == "3" ? "ptrace attach disabled"
                                       : "unknown value";
  std::string out;
  if (yama) out = yama_dir + "/ptrace_scope = " + (scope.empty() ? "unreadable" : scope + " (" + meaning + ")") + ", ";
  out += std::string("this process ") + (cap_sys_ptrace ? "has" : "lacks") + " CAP_SYS_PTRACE";
  if (!tracer_pid.empty())
    return out + "; it is already traced by pid " + tracer_pid + " (one tracer at a time: stop that one first)";
  if (cap_sys_ptrace && scope != "3" && !proc_dir.empty()) {
    // The kernel's ptrace access check (ptrace_may_access) also guards /proc/PID/exe: refused there
    // too, the capability does not count for this target.
    char buf[16];
    const std::string exe = proc_dir + "/exe";
    if (readlink(exe.c_str(), buf, sizeof buf) < 0 && (errno == EACCES || errno == EPERM))
      return out + ", yet the kernel refuses it access to this target (" + exe + ": " + strerror(errno) +
             "): the target is in a user namespace above this one, not dumpable under other credentials, or "
             "protected by a security module; neither another user nor more capabilities help here";
  }
  return out + (yama ? "; run as the target's user with ptrace_scope 0, or with CAP_SYS_PTRACE"
                     : "; run as the target's user, or with CAP_SYS_PTRACE");
}

Result<ProcessCapture> capture_process(pid_t pid, pid_t only_tid, uint32_t max_stack_bytes,
                                       const WhileStopped& while_stopped) {
  return capture_process(pid, only_tid, max_stack_bytes, while_stopped, TaskLister(list_tasks));
}

Result<ProcessCapture> capture_process(pid_t pid, pid_t only_tid, uint32_t max_stack_bytes,
                                       const WhileStopped& while_stopped, const TaskLister& lister) {
  if (pid <= 0) return make_error(SPROV_ERR_INVALID_ARG, "invalid pid %d", pid);
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  std::optional<Result<ProcessCapture>> result;
  // All ptrace requests come from one dedicated thread: ptrace ties a tracee to
  // the tracer *thread*, and when that thread exits the kernel detaches every
  // tracee still attached (exit_ptrace), whatever state it is in.
  auto body = [&]() noexcept {
    try {
      SignalGuard signals;
      // The module list and the walk while the target is stopped open each module file once.
      elf::ImageReuseScope reuse;
      Capturer c(pid, only_tid, max_stack_bytes, while_stopped, lister ? lister : TaskLister(list_tasks));
      auto r = c.run();
      c.detach_all();
      if (r.ok()) {
        r.value().warnings = std::move(c.warnings());
        result.emplace(std::move(r));
      } else {
        result.emplace(std::move(r).error());
      }
    } catch (const std::bad_alloc&) {
      result.emplace(Error{SPROV_ERR_NOMEM, "allocation failed during capture"});
    } catch (const std::exception& e) {
      result.emplace(make_error(SPROV_ERR_INTERNAL, "capture of process %d: %s", pid, e.what()));
    }
  };
  try {
    std::thread tracer(body);
    tracer.join();
  } catch (const std::system_error& e) {
    // EAGAIN: no memory for the thread's stack (RLIMIT_AS) or the thread limit was reached.
    if (e.code().value() == EAGAIN)
      return make_error(SPROV_ERR_NOMEM, "cannot start the tracer thread (address-space or thread limit): %s",
                        e.what());
    return make_error(SPROV_ERR_CAPTURE, "cannot start the tracer thread: %s", e.what());
  }
  if (!result) return make_error(SPROV_ERR_INTERNAL, "capture of process %d produced no result", pid);
  return std::move(*result);
}

}  // namespace stackprov::memory
