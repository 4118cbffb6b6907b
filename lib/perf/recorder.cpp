// SPDX-License-Identifier: Apache-2.0
// perf_event recorder: samples a process (or a started command) and writes a capture file.
#include "perf/recorder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <sstream>

#include "arch/x86_64/registers.hpp"
#include "core/atomic_file.hpp"
#include "core/module_map.hpp"
#include "perf/capture_file.hpp"
#include "perf/kernel_sampler.hpp"
#include "perf/kernel_symbols.hpp"
#include "perf/module_tracker.hpp"
#include "perf/perf_data.hpp"
#include "stackprov/kernel.h"

namespace stackprov::perf {

namespace {

constexpr size_t kDataPages = 512;  // per-CPU ring buffer: 2 MiB of records
// Stopping: SIGINT, SIGTERM and SIGHUP (what a terminal, `timeout`, systemd and CI runners send)
// ask the recording to stop and finish its file; a second one aborts: the started command is
// killed, the temp file removed, and the signal's default action ends the process (issue 36).
std::atomic<bool> g_stop{false};
std::atomic<pid_t> g_child{-1};         // the started command, -1 none
char g_temp_path[4096];                 // the output's temp file, "" none (unlink is async-signal-safe)
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_stop_signal(int sig) {
  if (!g_stop.exchange(true)) return;
  const pid_t child = g_child.load();
  if (child > 0) kill(child, SIGKILL);
  if (g_temp_path[0] != '\0') unlink(g_temp_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

/// The stop signals' handlers while a recording runs; the previous ones come back at scope end.
struct StopSignals {
  struct sigaction old[3];
  StopSignals() {
    g_stop.store(false);
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &sa, &old[i]);
  }
  ~StopSignals() {
    for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &old[i], nullptr);
    g_child.store(-1);
  }
};

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Ring {
  int fd = -1;
  void* base = nullptr;
  size_t size = 0;  // data area bytes
  size_t page = 0;
};

/// Closes every fd and unmaps every ring on scope exit.
struct Events {
  std::vector<int> fds;
  std::vector<Ring> rings;
  ~Events() {
    for (Ring& r : rings)
      if (r.base) munmap(r.base, r.size + r.page);
    for (int fd : fds) close(fd);
  }
};

perf_event_attr make_attr(const RecordOptions& o, bool enable_on_exec, bool build_id, bool kernel) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.freq = 1;
  a.sample_freq = o.frequency;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN |
                  PERF_SAMPLE_PERIOD | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = arch::x86_64::kPerfRegsMask;
  a.sample_stack_user = o.stack_size;
  a.exclude_callchain_user = 1;
  a.exclude_kernel = kernel ? 0 : 1;
  a.exclude_hv = 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.sample_id_all = 1;
  a.inherit = 1;
  a.build_id = build_id ? 1 : 0;
  // Python frames are read when a sample arrives, so it must arrive at once: a wakeup per sample
  // (the default wakes at half the ring, or at the loop's 50 ms poll).
  if (o.python != nullptr) a.wakeup_events = 1;
  a.disabled = enable_on_exec ? 1 : 0;
  a.enable_on_exec = enable_on_exec ? 1 : 0;
  if (o.kernel_mode != 0) {
    // The eBPF sampler's events carry CLOCK_MONOTONIC times (bpf_ktime_get_ns): the side-band
    // records get the same clock. The event's own samples are dropped (the program returns 0), so
    // nothing is gathered for them: without PERF_SAMPLE_CALLCHAIN, bpf_get_stack also walks the
    // interrupted registers itself instead of copying the event's call chain (which starts with
    // the PERF_CONTEXT_KERNEL marker).
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD;
    a.sample_regs_user = 0;
    a.sample_stack_user = 0;
    a.exclude_callchain_user = 0;
  }
  if (o.kernel_mode == kKernelOffCpu) {
    // Off-CPU: the samples come from sched:sched_switch; this event only tracks the module map.
    a.config = PERF_COUNT_SW_DUMMY;
    a.freq = 0;
    a.sample_period = 0;
  }
  return a;
}

EventAttr to_event_attr(const perf_event_attr& a) {
  EventAttr e;
  e.type = a.type;
  e.config = a.config;
  e.sample_type = a.sample_type;
  e.sample_regs_user = a.sample_regs_user;
  e.sample_stack_user = a.sample_stack_user;
  e.flags = 1ull << 18;  // sample_id_all
  return e;
}

class Session {
 public:
  Session(const RecordOptions& o, FILE* f, const std::string& cmdline)
      : tracker_(o.root, {}, read_own_vdso()),
        writer_(f, arch::x86_64::kPerfRegsMask, o.stack_size, cmdline, o.frequency, o.python != nullptr),
        python_(o.python) {
    writer_.write_vdso(tracker_.vdso_bytes());
    // The kernel that is sampled, so that perf-import names its frames only on this kernel.
    auto kid = running_kernel_build_id();
    writer_.write_kernel(kid.ok() ? kid.value() : ModuleId{}, running_kernel_text());
  }
  Status init(const perf_event_attr& a) { return decoder_.init({to_event_attr(a)}); }
  ModuleTracker& tracker() { return tracker_; }
  void set_comm(uint32_t tid, const std::string& c) { tid_comm_[tid] = comm_id(c); }

  /// Processes records (already in time order).
  void process(const std::vector<std::vector<uint8_t>>& recs) {
    for (const auto& r : recs) one(r.data(), r.size());
  }
  Status finish(RecordStats* stats) {
    if (lost_) writer_.write_lost(lost_);
    stats->samples = samples_;
    stats->lost = lost_;
    stats->threads = tids_.size();
    stats->warnings = tracker_.warnings() + py_warnings_;
    stats->python_read = py_counts_[1];
    stats->python_torn = py_counts_[2];
    stats->python_damaged = py_counts_[3];
    stats->python_no_thread = py_counts_[0];
    stats->python_processes = py_processes_;
    return writer_.finish();
  }
  uint64_t samples() const { return samples_; }
  uint64_t lost() const { return lost_; }
  void flush() { writer_.flush(); }
  uint64_t record_time(const std::vector<uint8_t>& r) const { return decoder_.record_time(r.data(), r.size()); }

  /// One event of the eBPF sampler (struct sprov_kernel_event), checked, written as a sample:
  /// the kernel stack as the callchain's kernel part, the user pt_regs as perf user registers.
  void kernel_event(const uint8_t* ev, size_t len, uint64_t period) {
    sprov_kernel_event h;
    if (len < SPROV_KERNEL_EVENT_FIXED) {
      malformed_++;
      return;
    }
    std::memcpy(&h, ev, SPROV_KERNEL_EVENT_FIXED);
    if (h.magic != SPROV_KERNEL_EVENT_MAGIC || h.version != SPROV_KERNEL_EVENT_VERSION ||
        h.kernel_count > SPROV_KERNEL_MAX_FRAMES || h.stack_len > SPROV_KERNEL_MAX_STACK ||
        len < SPROV_KERNEL_EVENT_FIXED + h.stack_len) {
      malformed_++;
      return;
    }
    SampleView v;
    v.time = h.time_ns;
    v.pid = h.pid;
    v.tid = h.tid;
    v.period = period;
    v.has_callchain = true;
    v.kernel_mode = (h.flags & SPROV_KEV_IN_KERNEL) != 0 && h.kernel_count > 0;
    // perf's context markers (PERF_CONTEXT_KERNEL, ...: the top 4095 values) are not frames.
    for (uint32_t i = 0; i < h.kernel_count; i++)
      if (h.kernel_ips[i] < static_cast<uint64_t>(-4095)) v.kernel_ips.push_back(h.kernel_ips[i]);
    v.kernel_mode = v.kernel_mode && !v.kernel_ips.empty();
    v.user_regs = (h.flags & SPROV_KEV_USER_REGS) != 0;
    // struct pt_regs words (r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags
    // sp ss) in perf's order for kPerfRegsMask: AX BX CX DX SI DI BP SP IP FLAGS CS SS R8..R15.
    static constexpr int kFromPtRegs[20] = {10, 5, 11, 12, 13, 14, 4, 19, 16, 18, 17, 20, 9, 8, 7, 6, 3, 2, 1, 0};
    regs_.resize(sizeof(kFromPtRegs) / sizeof(int) * 8);
    for (size_t i = 0; i < 20; i++) std::memcpy(regs_.data() + 8 * i, &h.user_regs[kFromPtRegs[i]], 8);
    if (v.user_regs) {
      v.regs_mask = arch::x86_64::kPerfRegsMask;
      v.regs = regs_.data();
      v.regs_count = 20;
      v.sp = h.user_regs[19];
      v.stack = ev + SPROV_KERNEL_EVENT_FIXED;
      v.stack_len = h.stack_len;
      v.stack_requested = stack_size_;
    }
    v.ip = v.kernel_mode ? v.kernel_ips[0] : (v.user_regs ? h.user_regs[16] : 0);
    if (seen_pids_.insert(v.pid).second) seed_vdso(v.pid);
    tids_.insert(v.tid);
    if (!tid_comm_.count(v.tid)) tid_comm_[v.tid] = comm_id(std::string(h.comm, strnlen(h.comm, sizeof h.comm)));
    write_view(v);
  }
  void set_stack_size(uint32_t n) { stack_size_ = n; }
  void add_lost(uint64_t n) { lost_ += n; }

 private:
  uint32_t comm_id(const std::string& c) {
    auto [it, fresh] = comm_ids_.emplace(c, static_cast<uint32_t>(comm_ids_.size()));
    if (fresh) writer_.write_comm(it->second, c);
    return it->second;
  }
  void one(const uint8_t* rec, size_t len) {
    uint32_t type;
    std::memcpy(&type, rec, 4);
    switch (type) {
      case PERF_RECORD_MMAP:
      case PERF_RECORD_MMAP2: {
        RawMmap m;
        if (decoder_.decode_mmap(rec, len, &m).ok()) tracker_.on_mmap(m);
        break;
      }
      case PERF_RECORD_COMM: {
        RawComm c;
        if (decoder_.decode_comm(rec, len, &c).ok()) {
          tracker_.on_comm(c);
          set_comm(c.tid, c.comm);
          if (c.exec && c.pid == c.tid) {
            seen_pids_.erase(c.pid);  // a new image: its own vDSO, seeded anew
            if (py_procs_.erase(c.pid) && python_) python_->forget(c.pid);  // its interpreter, looked for anew
          }
        }
        break;
      }
      case PERF_RECORD_FORK: {
        RawTask t;
        if (decoder_.decode_task(rec, len, &t).ok()) {
          tracker_.on_fork(t);
          tids_.insert(t.tid);
          // A child inherits its parent's mappings, the vDSO seeded from the parent's maps with them:
          // no /proc/PID/maps read per child (thousands of lines for a server with many mappings).
          if (t.pid != t.ppid && seen_pids_.count(t.ppid)) seen_pids_.insert(t.pid);
          auto pc = tid_comm_.find(t.ptid);
          if (pc != tid_comm_.end() && !tid_comm_.count(t.tid)) tid_comm_[t.tid] = pc->second;
        }
        break;
      }
      case PERF_RECORD_EXIT: {
        RawTask t;
        if (decoder_.decode_task(rec, len, &t).ok()) {
          tracker_.on_exit(t);
          // The process is gone: a later one with its pid is looked at anew (another layout, addresses).
          if (t.pid == t.tid && py_procs_.erase(t.pid) && python_) python_->forget(t.pid);
        }
        break;
      }
      case PERF_RECORD_LOST:
      case PERF_RECORD_LOST_SAMPLES: {
        uint64_t n = 0;
        if (decoder_.decode_lost(rec, len, &n).ok()) lost_ += n;
        break;
      }
      case PERF_RECORD_SAMPLE: {
        RawSample s;
        if (!decoder_.decode_sample(rec, len, &s).ok()) {
          malformed_++;
          break;
        }
        if (seen_pids_.insert(s.pid).second) seed_vdso(s.pid);
        tids_.insert(s.tid);
        SampleView v;
        sample_view_from_perf(s, &v);
        write_view(v);
        break;
      }
      default:
        break;
    }
  }
  void write_view(const SampleView& v) {
    tracker_.on_sample(v.pid, v.tid);
    const uint32_t list = tracker_.list_for(v.pid);
    while (lists_written_ < tracker_.lists().size()) {
      writer_.write_modules(static_cast<uint32_t>(lists_written_), *tracker_.lists()[lists_written_]);
      lists_written_++;
    }
    auto c = tid_comm_.find(v.tid);
    // A thread without a COMM: ":TID", as perf names it. (Not ":" + to_string(): GCC 12's
    // -Wrestrict misfires on that concatenation.)
    std::string unnamed(1, ':');
    if (c == tid_comm_.end()) unnamed += std::to_string(v.tid);
    const uint32_t comm = c != tid_comm_.end() ? c->second : comm_id(unnamed);
    // The runtime's frames are read first: its PYEVAL and new PYCODE records go before the SAMPLE,
    // whose PYSTACK follows it directly.
    const bool py = python_ != nullptr && python_sample(v, list);
    writer_.write_sample(v, list, comm);
    samples_++;
    if (py) writer_.write_py_stack(py_state_, py_frames_, py_problem_);
  }

  /// The sampled thread's runtime frames, read now (the sample was taken moments ago), written
  /// as the PYSTACK record after its SAMPLE. A process is looked at for an interpreter once per
  /// module list it has (at most 16 lists: a process that keeps mapping files is no new one).
  struct PyProc {
    uint32_t checked_list = UINT32_MAX;
    uint32_t attempts = 0;
    bool attached = false;
    bool warned = false;  ///< a damaged read was reported
  };
  bool python_sample(const SampleView& v, uint32_t list) {
    PyProc& pp = py_procs_[v.pid];
    if (!pp.attached && pp.checked_list != list && pp.attempts < 16 && list < tracker_.lists().size()) {
      pp.checked_list = list;
      pp.attempts++;
      PyEval e;
      std::string warning;
      pp.attached = python_->attach(v.pid, *tracker_.lists()[list], &e, &warning);
      if (!warning.empty()) py_warn("pid " + std::to_string(v.pid) + ": " + warning);
      if (pp.attached) {
        e.pid = v.pid;
        writer_.write_py_eval(e);
        py_processes_++;
      }
    }
    if (!pp.attached) return false;
    py_read_.clear();
    py_problem_.clear();
    const uint8_t state = python_->read(v.pid, v.tid, &py_read_, &py_problem_);
    py_frames_.clear();
    uint8_t st = state < 4 ? state : 0;
    for (const RuntimeSampler::Frame& f : py_read_) {
      std::string key = f.function;
      key.push_back('\0');
      key += f.qualname;
      key.push_back('\0');
      key += f.file;
      auto it = py_code_ids_.find(key);
      if (it == py_code_ids_.end()) {
        // The code table is bounded (a target making code objects without end, or with huge names,
        // must not exhaust the recorder nor make the file unreadable): past it, the chain is cut.
        if (py_code_ids_.size() >= kMaxPyCodeIds || py_code_bytes_ + key.size() > kMaxPyCodeBytes) {
          st = 3;  // damaged
          py_problem_ = "more than " + std::to_string(kMaxPyCodeIds) + " distinct code objects or " +
                        std::to_string(kMaxPyCodeBytes >> 20) + " MiB of their names in the recording: the rest are left out";
          break;
        }
        py_code_bytes_ += key.size();
        it = py_code_ids_.emplace(std::move(key), static_cast<uint32_t>(py_code_ids_.size())).first;
        writer_.write_py_code(it->second, PyCode{f.function, f.qualname, f.file});
      }
      py_frames_.push_back(PyFrameRef{it->second, f.line, f.flags});
    }
    if (st == 3 && !py_problem_.empty() && !pp.warned) {  // once a process: each read may name other addresses
      pp.warned = true;
      py_warn("pid " + std::to_string(v.pid) + ": Python frames cut short (the first time; counted as damaged): " +
              py_problem_);
    }
    py_state_ = st;
    py_counts_[py_state_]++;
    return true;
  }
  void py_warn(const std::string& line) {
    if (py_warned_.size() < 64 && py_warned_.insert(line).second) py_warnings_ += line + "\n";
  }
  /// The kernel reports no MMAP for the vDSO; take it from the live maps.
  void seed_vdso(uint32_t pid) {
    std::string text = read_file("/proc/" + std::to_string(pid) + "/maps");
    auto maps = parse_maps(text);
    if (!maps.ok()) return;
    for (const MapsEntry& e : maps.value()) {
      if (e.path != kVdsoName) continue;
      RawMmap m;
      m.pid = pid;
      m.start = e.start;
      m.len = e.end - e.start;
      m.prot = PROT_READ | PROT_EXEC;
      m.path = e.path;
      tracker_.on_mmap(m);
    }
  }

  RecordDecoder decoder_;
  ModuleTracker tracker_;
  CaptureWriter writer_;
  std::map<std::string, uint32_t> comm_ids_;
  std::map<uint32_t, uint32_t> tid_comm_;
  std::set<uint32_t> seen_pids_, tids_;
  size_t lists_written_ = 0;
  uint64_t samples_ = 0, lost_ = 0, malformed_ = 0;
  std::vector<uint8_t> regs_;  ///< a kernel event's user registers in perf's order
  uint32_t stack_size_ = 0;
  std::shared_ptr<RuntimeSampler> python_;
  std::map<uint32_t, PyProc> py_procs_;
  std::vector<RuntimeSampler::Frame> py_read_;
  static constexpr size_t kMaxPyCodeIds = size_t{1} << 20;     ///< below the reader's 2^24
  static constexpr size_t kMaxPyCodeBytes = size_t{256} << 20;  ///< of their names
  size_t py_code_bytes_ = 0;
  uint8_t py_state_ = 0;
  std::string py_problem_;
  std::unordered_map<std::string, uint32_t> py_code_ids_;  ///< co_name \0 co_qualname \0 co_filename -> PYCODE id
  std::vector<PyFrameRef> py_frames_;
  uint64_t py_counts_[4] = {0, 0, 0, 0};
  uint64_t py_processes_ = 0;
  std::set<std::string> py_warned_;
  std::string py_warnings_;
};

/// Copies every complete record out of the ring and advances its tail.
void drain(Ring& r, std::vector<std::vector<uint8_t>>& out) {
  auto* meta = static_cast<perf_event_mmap_page*>(r.base);
  const uint8_t* data = static_cast<const uint8_t*>(r.base) + r.page;
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail + sizeof(perf_event_header) <= head) {
    perf_event_header h;
    for (size_t i = 0; i < sizeof(h); i++) reinterpret_cast<uint8_t*>(&h)[i] = data[(tail + i) % r.size];
    if (h.size < sizeof(h) || tail + h.size > head) break;
    std::vector<uint8_t> rec(h.size);
    const size_t off = tail % r.size;
    const size_t first = std::min<size_t>(h.size, r.size - off);
    std::memcpy(rec.data(), data + off, first);
    if (first < h.size) std::memcpy(rec.data() + first, data, h.size - first);
    out.push_back(std::move(rec));
    tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

int perf_event_open(perf_event_attr* a, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

Error open_error(int e, const std::string& what) {
  std::string hint;
  if (e == EACCES || e == EPERM) {
    hint = "; /proc/sys/kernel/perf_event_paranoid is " + read_file("/proc/sys/kernel/perf_event_paranoid");
    while (!hint.empty() && hint.back() == '\n') hint.pop_back();
    hint += " (needs <= 1 for other users' processes, or CAP_PERFMON)";
  }
  return make_error(-e, "perf_event_open for %s: %s%s", what.c_str(), strerror(e), hint.c_str());
}

}  // namespace

namespace {

/// Records into `f` (see record()).
Status record_to(const RecordOptions& o, FILE* f, RecordStats* stats) {
  if (o.python != nullptr && o.kernel_mode != 0)
    return make_error(SPROV_ERR_UNSUPPORTED, "Python frames with the eBPF kernel sampler are not supported (yet): "
                      "record either Python frames or kernel stacks");
  const int ncpu = static_cast<int>(sysconf(_SC_NPROCESSORS_CONF));
  if (ncpu <= 0 || ncpu > 4096) return make_error(SPROV_ERR_UNSUPPORTED, "%d CPUs are not supported", ncpu);
  // perf_event_open refuses a frequency above the kernel's limit with EINVAL: say so first.
  const std::string max_rate = read_file("/proc/sys/kernel/perf_event_max_sample_rate");
  if (!max_rate.empty() && o.frequency > std::strtoull(max_rate.c_str(), nullptr, 10))
    return make_error(SPROV_ERR_INVALID_ARG, "frequency %u Hz exceeds kernel.perf_event_max_sample_rate (%llu)",
                      o.frequency, std::strtoull(max_rate.c_str(), nullptr, 10));

  // Targets: a started command (stopped until the events exist) or the threads of `pid`.
  pid_t child = -1;
  int go_pipe[2] = {-1, -1};
  int exec_pipe[2] = {-1, -1};  // the child's execvp errno, or EOF (close-on-exec) once it ran
  // Off-CPU: the child is traced (PTRACE_SEIZE, PTRACE_O_TRACEEXEC) until its exec's event stop, and
  // sched:sched_switch is attached only then: its switches before the exec (still stackprov's
  // image, waiting for the go below or reading the new program's file inside execve) are not the
  // command's. An explicit event stop (no SIGTRAP to a tracee whose mask may block it); a signal
  // meanwhile is passed on; PTRACE_O_EXITKILL kills the child if the recorder dies in between.
  const bool exec_stop = !o.argv.empty() && o.kernel_mode == kKernelOffCpu;
  std::vector<pid_t> tids;
  std::string cmdline;
  if (!o.argv.empty()) {
    for (const std::string& a : o.argv) cmdline += (cmdline.empty() ? "" : " ") + a;
    if (pipe2(go_pipe, O_CLOEXEC) != 0) return make_error(-errno, "pipe: %s", strerror(errno));
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
      const int e = errno;
      close(go_pipe[0]);
      close(go_pipe[1]);
      return make_error(-e, "pipe: %s", strerror(e));
    }
    child = fork();
    if (child < 0) return make_error(-errno, "fork: %s", strerror(errno));
    if (child == 0) {
      close(go_pipe[1]);
      close(exec_pipe[0]);
      char c;
      if (read(go_pipe[0], &c, 1) != 1) _exit(127);
      std::vector<char*> args;
      for (const std::string& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      const int e = errno;
      if (write(exec_pipe[1], &e, sizeof(e)) != static_cast<ssize_t>(sizeof(e))) { /* the parent sees EOF */ }
      _exit(127);
    }
    close(go_pipe[0]);
    close(exec_pipe[1]);
    if (exec_stop && ptrace(PTRACE_SEIZE, child, nullptr, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) != 0) {
      const int e = errno;
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      close(go_pipe[1]);
      close(exec_pipe[0]);
      return make_error(-e, "cannot trace '%s' to its exec (ptrace(PTRACE_SEIZE), for --off-cpu: stackprov traced "
                        "itself, or kernel.yama.ptrace_scope 3?): %s", o.argv[0].c_str(), strerror(e));
    }
    tids.push_back(child);
  } else {
    const std::string task = "/proc/" + std::to_string(o.pid) + "/task";
    DIR* d = opendir(task.c_str());
    if (d == nullptr) {
      const int e = errno;
      if (e == ENOENT) return make_error(-ESRCH, "no process with pid %lld", static_cast<long long>(o.pid));
      return make_error(-e, "pid %lld: %s", static_cast<long long>(o.pid), strerror(e));
    }
    while (dirent* e = readdir(d))
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(static_cast<pid_t>(atoi(e->d_name)));
    closedir(d);
    std::sort(tids.begin(), tids.end());
    cmdline = read_file("/proc/" + std::to_string(o.pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
  }
  struct PipeCloser {
    int* fd;
    ~PipeCloser() {
      if (*fd >= 0) close(*fd);
    }
  } exec_closer{&exec_pipe[0]}, go_closer{&go_pipe[1]};
  auto abort_child = [&] {
    if (child > 0) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    }
  };

  // One event per (thread, CPU) with inherit; the events of one CPU share that CPU's ring.
  Events ev;
  ev.rings.resize(ncpu);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bool build_id = true, kernel = true;
  perf_event_attr attr{};
  for (pid_t t : tids) {
    for (int cpu = 0; cpu < ncpu; cpu++) {
      int fd = -1;
      for (;;) {
        attr = make_attr(o, child > 0, build_id, kernel);
        fd = perf_event_open(&attr, t, cpu);
        if (fd >= 0) break;
        if (errno == EINVAL && build_id) { build_id = false; continue; }   // kernel < 5.12
        if ((errno == EACCES || errno == EPERM) && kernel) { kernel = false; continue; }
        break;
      }
      if (fd < 0) {
        if (errno == ESRCH && child <= 0) break;  // the thread exited meanwhile
        if (errno == ENODEV || errno == EINVAL) break;  // offline CPU
        const int e = errno;
        abort_child();
        return open_error(e, "tid " + std::to_string(t) + " cpu " + std::to_string(cpu));
      }
      ev.fds.push_back(fd);
      Ring& r = ev.rings[cpu];
      if (r.fd < 0) {
        void* m = mmap(nullptr, (kDataPages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
          const int e = errno;
          abort_child();
          return make_error(-e, "mmap of the cpu %d ring (%zu pages): %s", cpu, kDataPages + 1, strerror(e));
        }
        r.fd = fd;
        r.base = m;
        r.page = page;
        r.size = kDataPages * page;
      } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r.fd) != 0) {
        const int e = errno;
        abort_child();
        return make_error(-e, "PERF_EVENT_IOC_SET_OUTPUT on cpu %d: %s", cpu, strerror(e));
      }
    }
  }
  if (ev.fds.empty()) {
    abort_child();
    return make_error(-ESRCH, "no thread of pid %lld could be sampled", static_cast<long long>(o.pid));
  }

  // The eBPF sampler (record --with-kernel): on the perf events just opened (cpu-clock), or on
  // sched:sched_switch (off-CPU).
  std::unique_ptr<KernelSampler> sampler;
  if (o.kernel_mode != 0) {
    KernelSamplerOptions ko;
    ko.tgid = static_cast<uint32_t>(child > 0 ? child : o.pid);
    ko.stack_bytes = o.stack_size;
    auto ks = KernelSampler::open(ko);
    if (!ks) {
      abort_child();
      return std::move(ks).error();
    }
    sampler = std::move(ks).value();
    if (o.kernel_mode == kKernelOffCpu) {
      if (!exec_stop) {  // else at the child's exec stop, below
        if (Status st = sampler->attach_sched_switch(); !st.ok()) {
          abort_child();
          return st;
        }
      }
    } else {
      for (int fd : ev.fds) {
        if (Status st = sampler->attach_perf_event(fd); !st.ok()) {
          abort_child();
          return st;
        }
      }
    }
  }
  const uint64_t kernel_period = o.kernel_mode == kKernelCpuClock ? 1000000000ull / o.frequency : 0;

  Session session(o, f, cmdline);
  session.set_stack_size(o.stack_size);
  if (Status st = session.init(attr); !st.ok()) {
    abort_child();
    return st;
  }
  if (child <= 0) {
    session.tracker().seed_maps(static_cast<uint32_t>(o.pid), read_file("/proc/" + std::to_string(o.pid) + "/maps"));
    // The mappings listed are checked against the files at their paths (a library replaced or
    // deleted since it was mapped is described by the mapped file, not the one at the path).
    session.tracker().set_live(static_cast<uint32_t>(o.pid), o.pid);
    for (pid_t t : tids) {
      std::string c = read_file("/proc/" + std::to_string(o.pid) + "/task/" + std::to_string(t) + "/comm");
      while (!c.empty() && c.back() == '\n') c.pop_back();
      session.set_comm(static_cast<uint32_t>(t), c);
    }
  }

  std::optional<StopSignals> stop_signals(std::in_place);
  g_child.store(child);
  if (child > 0) {
    if (write(go_pipe[1], "x", 1) != 1) { /* the child sees EOF and exits */ }
    close(go_pipe[1]);
    go_pipe[1] = -1;
    if (exec_stop) {
      // Until the exec's event stop: a signal-delivery stop passes its signal on, a group stop is
      // resumed; an exit before it is the exec's failure (its errno in the pipe) or a death.
      for (;;) {
        int status = 0;
        const pid_t w = waitpid(child, &status, __WALL);
        if (w < 0) {
          if (errno == EINTR) continue;
          const int e = errno;
          stop_signals.reset();
          g_child.store(-1);
          abort_child();
          return make_error(-e, "waiting for '%s' to exec: %s", o.argv[0].c_str(), strerror(e));
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
          stop_signals.reset();
          child = -1;  // reaped
          g_child.store(-1);
          int exec_errno = 0;
          if (read(exec_pipe[0], &exec_errno, sizeof(exec_errno)) == static_cast<ssize_t>(sizeof(exec_errno)))
            return make_error(-exec_errno, "cannot run '%s': %s", o.argv[0].c_str(), strerror(exec_errno));
          const std::string how = WIFSIGNALED(status) ? std::string("killed by ") + strsignal(WTERMSIG(status))
                                                      : "exit status " + std::to_string(WEXITSTATUS(status));
          return make_error(SPROV_ERR_CAPTURE, "'%s' ended before its exec (%s)", o.argv[0].c_str(), how.c_str());
        }
        if (!WIFSTOPPED(status)) continue;
        const int event = status >> 16;
        if (event == PTRACE_EVENT_EXEC) break;
        const int sig = event == 0 ? WSTOPSIG(status) : 0;  // PTRACE_EVENT_STOP: a group stop
        ptrace(PTRACE_CONT, child, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(sig)));
      }
      // The exec ran: the command stops before its first instruction. Its switches are sampled
      // from here on; then it goes on, untraced.
      Status st = sampler->attach_sched_switch();
      if (ptrace(PTRACE_DETACH, child, nullptr, nullptr) != 0 && st.ok())
        st = make_error(-errno, "ptrace(PTRACE_DETACH) of '%s' at its exec: %s", o.argv[0].c_str(), strerror(errno));
      if (!st.ok()) {
        stop_signals.reset();
        g_child.store(-1);
        abort_child();
        return st;
      }
    } else {
      int exec_errno = 0;
      ssize_t n;
      do n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
      while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
        stop_signals.reset();
        waitpid(child, nullptr, 0);
        return make_error(-exec_errno, "cannot run '%s': %s", o.argv[0].c_str(), strerror(exec_errno));
      }
    }
  }
  const double start = now_ms();
  bool target_gone = false;
  auto cycle = [&] {
    std::vector<std::vector<uint8_t>> recs;
    for (Ring& r : ev.rings)
      if (r.base) drain(r, recs);
    std::stable_sort(recs.begin(), recs.end(), [&](const auto& a, const auto& b) {
      return session.record_time(a) < session.record_time(b);
    });
    session.process(recs);
    if (sampler) {
      // Events in time order (the ring is shared by the CPUs: nearly ordered already).
      std::vector<std::vector<uint8_t>> kevs;
      (void)sampler->drain([&](const uint8_t* e, size_t len) { kevs.emplace_back(e, e + len); });
      auto time_of = [](const std::vector<uint8_t>& e) {
        uint64_t t = 0;
        if (e.size() >= offsetof(sprov_kernel_event, time_ns) + 8) std::memcpy(&t, e.data() + offsetof(sprov_kernel_event, time_ns), 8);
        return t;
      };
      std::stable_sort(kevs.begin(), kevs.end(), [&](const auto& a, const auto& b) { return time_of(a) < time_of(b); });
      for (const auto& e : kevs) session.kernel_event(e.data(), e.size(), kernel_period);
    }
  };
  std::vector<pollfd> pfds;
  for (const Ring& r : ev.rings)
    if (r.base) pfds.push_back({r.fd, POLLIN, 0});
  uint64_t last_progress = now_ms(), last_flush = now_ms();
  if (o.progress) o.progress(0, 0);  // sampling has started (the command runs, the events are on)
  while (!g_stop.load() && !target_gone) {
    poll(pfds.data(), pfds.size(), 50);
    cycle();
    // Four times a second the records reach the file and its header counts them: a copy of the
    // file taken meanwhile and cut short says how much it lost at least.
    if (now_ms() - last_flush >= 250) {
      last_flush = now_ms();
      session.flush();
    }
    if (o.progress && now_ms() - last_progress >= 250) {
      last_progress = now_ms();
      o.progress(session.samples(), session.lost());
    }
    if (child > 0) {
      int status = 0;
      if (waitpid(child, &status, WNOHANG) == child) {
        stats->exit_status = status;
        target_gone = true;
        child = -1;
        g_child.store(-1);
      }
    } else if (kill(static_cast<pid_t>(o.pid), 0) != 0 && errno == ESRCH) {
      target_gone = true;
    }
    if (o.duration_ms && now_ms() - start >= o.duration_ms) break;
  }
  for (int fd : ev.fds) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  cycle();
  if (child > 0) {  // duration elapsed or a stop signal: stop the command we started
    kill(child, SIGTERM);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {  // a stop signal meanwhile: wait on
    }
    stats->exit_status = status;
    g_child.store(-1);
  }
  // Finishing the file while a second stop signal would still abort it (the handlers stay).
  if (sampler) session.add_lost(sampler->dropped());
  return session.finish(stats);
}

}  // namespace

Status record(const RecordOptions& o, RecordStats* stats) {
  // The capture is written to a temp file beside the output and renamed over it only when the
  // recording succeeded: a failed record leaves no file behind (and an older one untouched).
  struct stat st;
  if (stat(o.output.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return make_error(SPROV_ERR_INVALID_ARG, "output '%s' is a directory", o.output.c_str());
  auto out = AtomicFile::create(o.output, 0644);
  if (!out) return std::move(out).error();
  const int fd = dup(out.value().fd());
  FILE* f = fd >= 0 ? fdopen(fd, "wb") : nullptr;
  if (f == nullptr) {
    const int e = errno;
    if (fd >= 0) close(fd);
    return make_error(-e, "%s: %s", out.value().temp_path().c_str(), strerror(e));
  }
  // A second stop signal during the recording removes this temp file (on_stop_signal).
  snprintf(g_temp_path, sizeof g_temp_path, "%s", out.value().temp_path().c_str());
  Status result = record_to(o, f, stats);
  const std::string& tmp = out.value().temp_path();
  if (fflush(f) != 0 && result.ok()) result = make_error(-errno, "write to '%s' failed: %s", tmp.c_str(), strerror(errno));
  if (fclose(f) != 0 && result.ok()) result = make_error(-errno, "write to '%s' failed: %s", tmp.c_str(), strerror(errno));
  if (result.ok()) result = out.value().commit();
  g_temp_path[0] = '\0';
  return result;  // an uncommitted AtomicFile removes its temp file
}

}  // namespace stackprov::perf
