// SPDX-License-Identifier: Apache-2.0
// stackprov-memleak: outstanding heap allocations of a process, by call stack. The BPF side
// (memleak.bpf.c) sends the registers, the top of the user stack and the shadow stack of each
// sampled allocation; this loader unwinds them with stackprov's public C ABI, pairs them with
// the returned pointers and the frees, and reports the stacks holding the most bytes.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackprov/stackprov.h"
// The raw entry point of the fast path: registers in pt_regs layout + stack bytes + an address
// space + shadow-stack records -> frames.
#include "stackprov/fast.h"

#include "memleak.h"
#include "memleak_bpf.skel.h"
#include "print.hpp"           // bindings/cli: json_escape
#include "profile_output.hpp"  // bindings/cli: folded lines and the flame-graph SVG

namespace {

const char* const kProg = "stackprov-memleak";
const char* const kPreloadName = "stackprov-memleak-preload.so";  // the in-process sampler (preload.c)

// ------------------------------------------------------------------------------ options

struct Options {
  int64_t pid = 0;
  std::vector<std::string> command;
  double interval = 5.0;
  double duration = 0;
  uint32_t top = 10;
  uint64_t min_size = 0;
  uint64_t stack_bytes = 16384;
  uint64_t sample_bytes = 0;
  bool json = false;
  std::string folded, svg;
  std::vector<std::string> scopes;
  bool repair = true;
  bool verbose = false;
};

void usage(FILE* f) {
  fprintf(f,
          "Usage: %s [OPTIONS] -p PID\n"
          "       %s [OPTIONS] -- COMMAND [ARGS...]\n"
          "Traces the heap allocations of one process (uprobes on malloc, calloc, realloc, free,\n"
          "posix_memalign, aligned_alloc, memalign and valloc in the libc the process maps, and\n"
          "uretprobes for the returned pointers), unwinds each sampled allocation's stack with\n"
          "stackprov and prints the call stacks holding the most outstanding (not yet freed) bytes:\n"
          "every --interval while the process runs, and once at the end (Ctrl-C, --duration, or\n"
          "the end of COMMAND). Needs root (CAP_BPF + CAP_PERFMON), a kernel with BTF and uprobes.\n"
          "\n"
          "Options:\n"
          "  -p, --pid PID          trace a running process\n"
          "  -- COMMAND [ARGS...]   run COMMAND and trace it from its first instruction; the report\n"
          "                         when it ends lists what it never freed (its leaks)\n"
          "  --interval SECONDS     report period while tracing; 0: only the final report (default 5)\n"
          "  --duration SECONDS     stop tracing after SECONDS (default: until Ctrl-C / the end of COMMAND)\n"
          "  --top N                stacks per report (default 10; 0: all)\n"
          "  --min-size BYTES       ignore allocations smaller than BYTES (default 0)\n"
          "  --stack-bytes BYTES    user stack copied per allocation, from sp up (default 16384,\n"
          "                         at most %u; deeper frames are cut: stop memory_unreadable).\n"
          "                         The in-process sampler (below) unwinds on the live stack and\n"
          "                         copies nothing; BYTES applies to its fallback only\n"
          "  --sample-bytes N       sample one allocation per N bytes allocated on average, as\n"
          "                         tcmalloc does (exponential intervals); bytes and counts are\n"
          "                         then estimates, size/(1-exp(-size/N)) per sample; 0 (default):\n"
          "                         every allocation, exact. With -- COMMAND (a glibc program, no\n"
          "                         --scope) the sampling is done inside COMMAND by %s\n"
          "                         (LD_PRELOAD, appended to any LD_PRELOAD already set; looked for\n"
          "                         in ../lib/ from this program, then beside it): only sampled\n"
          "                         allocations and their frees cost anything; each sample is\n"
          "                         unwound there (the library, linked into the sampler) and its\n"
          "                         frames reach this loader through shared memory, not uprobes\n"
          "                         (STACKPROV_MEMLEAK_UNWIND=loader: stacks are copied and\n"
          "                         unwound here instead); a child COMMAND forks is not sampled.\n"
          "                         Sampled blocks are 16 bytes (or their alignment) larger, with a\n"
          "                         tag in front. With -p PID (a running process cannot be\n"
          "                         preloaded) the BPF side samples: every call still traps\n"
          "  --scope FUNC           count only allocations made while FUNC (a function of the\n"
          "                         program, or LIB:FUNC) is running on the thread: an entry probe\n"
          "                         and a uretprobe on FUNC; frames above FUNC return through the\n"
          "                         [uprobes] trampoline and are repaired from the shadow stack\n"
          "                         (method trampoline). Repeatable\n"
          "  --no-trampoline-repair keep the [uprobes] trampoline frames as the kernel left them\n"
          "                         (the walk stops there); shows what the repair fixes\n"
          "  --json                 final report as JSON on stdout (no interval reports): for each\n"
          "                         stack its bytes, allocations and frames (function, file, line,\n"
          "                         method, inline chains)\n"
          "  --folded FILE          also write the final outstanding bytes as folded stacks\n"
          "                         (\"comm;outer;...;inner BYTES\": flamegraph.pl, inferno)\n"
          "  --svg FILE             also write them as a flame-graph SVG (the CLI's writer: widths\n"
          "                         and the \"samples\" in its tooltips are bytes)\n"
          "  -v, --verbose          libbpf messages and per-report statistics on stderr\n"
          "  -h, --help             this text\n"
          "\n"
          "Exit status:\n"
          "  0  the final report was written\n"
          "  1  tracing failed: no such process, no libc mapped, no root/BTF/uprobe support, the BPF\n"
          "     program did not load or attach, the in-process sampler library is missing, an output\n"
          "     file could not be written\n"
          "  2  usage error (unknown option, bad value, neither or both of -p and COMMAND)\n",
          kProg, kProg, ML_STACK_MAX, kPreloadName);
}

// One line on stderr, then exit: 2 (usage, pointing at --help) or 1 (the work failed).
[[noreturn]] void vdie(int code, const char* fmt, va_list ap) {
  fprintf(stderr, "%s: ", kProg);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, code == 2 ? " (see --help)\n" : "\n");
  exit(code);
}

[[noreturn]] void die_usage(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(2, fmt, ap);
}

[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(1, fmt, ap);
}

uint64_t parse_u64(const char* opt, const char* v, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  if (v == nullptr || *v == '\0' || *v == '-') die_usage("%s: not a number: '%s'", opt, v ? v : "");
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end) die_usage("%s: not a number: '%s'", opt, v);
  if (x > max) die_usage("%s: %s is more than %" PRIu64, opt, v, max);
  return x;
}

double parse_seconds(const char* opt, const char* v) {
  char* end = nullptr;
  errno = 0;
  if (v == nullptr || *v == '\0') die_usage("%s: not a number of seconds: ''", opt);
  double x = strtod(v, &end);
  if (errno || *end || !(x >= 0) || x > 1e7) die_usage("%s: not a number of seconds: '%s'", opt, v);
  return x;
}

Options parse_args(int argc, char** argv) {
  Options o;
  bool have_pid = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      std::string pre = std::string(name) + "=";
      if (a.rfind(pre, 0) == 0) return argv[i] + pre.size();
      if (i + 1 >= argc) die_usage("%s needs a value", name);
      return argv[++i];
    };
    auto is = [&](const char* name) { return a == name || a.rfind(std::string(name) + "=", 0) == 0; };
    if (a == "--") {
      for (int j = i + 1; j < argc; j++) o.command.push_back(argv[j]);
      if (o.command.empty()) die_usage("'--' needs a COMMAND");
      break;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      exit(0);
    } else if (a == "-p" || is("--pid")) {
      const char* v = a == "-p" ? (i + 1 < argc ? argv[++i] : nullptr) : value("--pid");
      if (v == nullptr) die_usage("-p needs a PID");
      o.pid = static_cast<int64_t>(parse_u64("--pid", v, 0x7fffffff));
      if (o.pid <= 0) die_usage("--pid: not a process id: '%s'", v);
      have_pid = true;
    } else if (is("--interval")) {
      o.interval = parse_seconds("--interval", value("--interval"));
    } else if (is("--duration")) {
      o.duration = parse_seconds("--duration", value("--duration"));
    } else if (is("--top")) {
      o.top = static_cast<uint32_t>(parse_u64("--top", value("--top"), 1000000));
    } else if (is("--min-size")) {
      o.min_size = parse_u64("--min-size", value("--min-size"), UINT64_MAX);
    } else if (is("--stack-bytes")) {
      const char* v = value("--stack-bytes");
      o.stack_bytes = parse_u64("--stack-bytes", v, ML_STACK_MAX);
      if (o.stack_bytes < 64) die_usage("--stack-bytes: %s is less than 64", v);
    } else if (is("--sample-bytes")) {
      o.sample_bytes = parse_u64("--sample-bytes", value("--sample-bytes"), uint64_t(1) << 40);
    } else if (is("--scope")) {
      const char* v = value("--scope");
      if (*v == '\0') die_usage("--scope: empty function name");
      o.scopes.push_back(v);
    } else if (a == "--no-trampoline-repair") {
      o.repair = false;
    } else if (a == "--json") {
      o.json = true;
    } else if (is("--folded")) {
      o.folded = value("--folded");
    } else if (is("--svg")) {
      o.svg = value("--svg");
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else {
      die_usage("unknown option '%s'", a.c_str());
    }
  }
  if (have_pid && !o.command.empty()) die_usage("give either -p PID or -- COMMAND, not both");
  if (!have_pid && o.command.empty()) die_usage("give -p PID or -- COMMAND");
  return o;
}

// ------------------------------------------------------------------------------ helpers

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Mapping {
  uint64_t start = 0, end = 0;
  std::string path;
};

std::vector<Mapping> parse_maps(const std::string& text) {
  std::vector<Mapping> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    Mapping m;
    char perms[8] = {};
    int pos = 0;
    unsigned long long s = 0, e = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %n", &s, &e, perms, &pos) < 3) continue;
    m.start = s;
    m.end = e;
    if (pos > 0 && static_cast<size_t>(pos) <= line.size()) m.path = line.substr(pos);
    out.push_back(std::move(m));
  }
  return out;
}

bool is_libc_name(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  return base == "libc.so.6" || base == "libc.so" || (base.rfind("libc-", 0) == 0 && base.find(".so") != std::string::npos) ||
         base.rfind("ld-musl-", 0) == 0;
}

// The libc a command will map: the dynamic loader's answer (ldd).
std::string libc_of_command(const std::string& exe) {
  std::string cmd = "ldd '" + exe + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  char line[4096];
  std::string found;
  while (fgets(line, sizeof(line), p)) {
    const char* arrow = strstr(line, "=> ");
    if (!arrow) continue;
    std::string path = arrow + 3;
    path = path.substr(0, path.find(' '));
    if (found.empty() && is_libc_name(path)) found = path;
  }
  pclose(p);
  return found;
}

std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return {};
}

std::string last_libbpf_message;
bool libbpf_verbose = false;

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  static char buf[1 << 24];  // a verifier log comes in one message
  vsnprintf(buf, sizeof(buf), fmt, ap);
  if (level != LIBBPF_DEBUG) {
    last_libbpf_message = buf;
    while (!last_libbpf_message.empty() && last_libbpf_message.back() == '\n') last_libbpf_message.pop_back();
  }
  if (libbpf_verbose) fputs(buf, stderr);
  return 0;
}

// Address of each defined function symbol of an ELF file's .dynsym (aliases such as glibc's
// memalign and aligned_alloc share one): one probe per address, not two traps per call.
std::map<std::string, uint64_t> dynsym_addresses(const std::string& path) {
  std::map<std::string, uint64_t> out;
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_value == 0 || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
          continue;
        if (const char* name = elf_strptr(elf, sh.sh_link, sym.st_name)) out.emplace(name, sym.st_value);
      }
    }
    elf_end(elf);
  }
  close(fd);
  return out;
}

// The in-process sampler, next to this executable: ../lib/ (build tree and install layout), or
// the same directory. Its canonical path: the one /proc/PID/maps shows.
std::string find_preload() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(".");
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& cand : {dir + "/../lib/" + kPreloadName, dir + "/" + kPreloadName}) {
    char real[PATH_MAX];
    if (access(cand.c_str(), R_OK) == 0 && realpath(cand.c_str(), real)) return real;
  }
  die("the in-process sampler %s is missing (looked in %s/../lib and %s): -- COMMAND with --sample-bytes "
      "needs it (build target stackprov-memleak-preload, or install it beside the program)",
      kPreloadName, dir.c_str(), dir.c_str());
}

/// Shim mode: the ring the preloaded sampler writes its events into (memleak.h, ml_shm_head): a
/// memfd that COMMAND inherits (its number in STACKPROV_MEMLEAK_RING_FD), mapped here too.
class ShmRing {
 public:
  static constexpr uint64_t kDataBytes = 16ull << 20;  // the sampler faults it all in at its start

  void create() {
    fd_ = memfd_create("stackprov-memleak-ring", 0);  // no CLOEXEC: COMMAND inherits it
    if (fd_ < 0 || ftruncate(fd_, ML_SHM_DATA_OFFSET + kDataBytes) != 0) die("shared ring (memfd): %s", strerror(errno));
    void* m = mmap(nullptr, ML_SHM_DATA_OFFSET + kDataBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) die("shared ring (mmap): %s", strerror(errno));
    head_ = static_cast<ml_shm_head*>(m);
    head_->magic = ML_SHM_MAGIC;
    head_->data_bytes = kDataBytes;
  }
  int fd() const { return fd_; }
  /// After the fork: COMMAND holds its own copy of the fd.
  void close_fd() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  const ml_shm_head* head() const { return head_; }
  /// Bytes written and not consumed yet.
  uint64_t used() const { return head_ ? __atomic_load_n(&head_->head, __ATOMIC_ACQUIRE) - head_->tail : 0; }

  /// Passes each published record to f(data, len), then frees their room.
  template <class F>
  void consume(F&& f) {
    if (!head_) return;
    const char* data = reinterpret_cast<const char*>(head_) + ML_SHM_DATA_OFFSET;
    uint64_t tail = head_->tail, head = __atomic_load_n(&head_->head, __ATOMIC_ACQUIRE);
    while (tail < head) {
      uint64_t pos = tail & (kDataBytes - 1);
      const auto* rec = reinterpret_cast<const ml_shm_record*>(data + pos);
      if (rec->len == ML_SHM_SKIP) {
        tail += kDataBytes - pos;
        continue;
      }
      uint64_t need = sizeof(ml_shm_record) + ((uint64_t{rec->len} + 7) & ~uint64_t{7});
      if (need > kDataBytes - pos) break;  // not a record this ring can hold: stop reading
      f(const_cast<void*>(static_cast<const void*>(rec + 1)), size_t{rec->len});
      tail += need;
    }
    __atomic_store_n(&head_->tail, tail, __ATOMIC_RELEASE);
  }

 private:
  int fd_ = -1;
  ml_shm_head* head_ = nullptr;
};

// COMMAND's environment with the sampler preloaded (after any LD_PRELOAD the user set) and its
// settings (the user's own STACKPROV_MEMLEAK_* replaced, but STACKPROV_MEMLEAK_UNWIND=loader, which
// makes the sampler send stacks for this program to unwind instead of unwinding them itself);
// built before fork (the child allocates nothing before exec).
std::vector<std::string> preload_environment(const std::string& preload, int ring_fd, const Options& o) {
  std::vector<std::string> env;
  std::string user_preload;
  for (char** e = environ; e && *e; e++) {
    std::string kv = *e;
    if (kv.rfind("LD_PRELOAD=", 0) == 0) user_preload = kv.substr(11);
    else if (kv.rfind("STACKPROV_MEMLEAK_", 0) != 0 || kv.rfind("STACKPROV_MEMLEAK_UNWIND=", 0) == 0) env.push_back(kv);
  }
  env.push_back("LD_PRELOAD=" + (user_preload.empty() ? preload : user_preload + ":" + preload));
  env.push_back("STACKPROV_MEMLEAK_SAMPLE_BYTES=" + std::to_string(o.sample_bytes));
  env.push_back("STACKPROV_MEMLEAK_MIN_SIZE=" + std::to_string(o.min_size));
  env.push_back("STACKPROV_MEMLEAK_STACK_BYTES=" + std::to_string(o.stack_bytes));
  env.push_back("STACKPROV_MEMLEAK_RING_FD=" + std::to_string(ring_fd));
  return env;
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// ------------------------------------------------------------------------------ unwinding

/// One frame of an unwound allocation stack (before symbolization).
struct RawFrame {
  uint64_t pc = 0;
  uint64_t module_offset = 0;
  std::string module;   // path as mapped; "[uprobes]" for a trampoline left in place
  int32_t method = 0;   // sprov_method; SPROV_METHOD_TRAMPOLINE for a repaired return address
  bool return_address = false;  // symbolize at pc - 1
};

struct UnwindResult {
  std::vector<RawFrame> frames;
  int stop_reason = 0;
  uint32_t repaired = 0;
};

/// The traced process's mappings, read from /proc/PID/maps once and again when the maps
/// change (checked before each report and when a walk stops at a pc in no module); the
/// unwinder's sprov_address_space follows the same changes.
struct ProcessModules {
  std::string maps_text;
  std::vector<Mapping> maps;
  uint64_t uprobes_start = 0, uprobes_end = 0;  // the [uprobes] trampoline page
};

class Unwinder {
 public:
  Unwinder(int64_t pid, bool same_root, bool repair) : pid_(pid), repair_(repair) {
    root_ = same_root ? std::string() : "/proc/" + std::to_string(pid) + "/root";
    SPROV_OPTS(sprov_context_opts, co, .sysroot = root_.empty() ? nullptr : root_.c_str());
    if (sprov_context_new(&co, &ctx_) != 0) die("stackprov context: %s", sprov_last_error_message());
    SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = 128);
    if (sprov_unwinder_new(ctx_, &uo, &uw_) != 0) die("stackprov unwinder: %s", sprov_last_error_message());
    SPROV_OPTS(sprov_symbolizer_opts, so);
    if (sprov_symbolizer_new(ctx_, &so, &sym_) != 0) die("stackprov symbolizer: %s", sprov_last_error_message());
  }
  ~Unwinder() {
    sprov_address_space_free(as_);
    sprov_symbolizer_free(sym_);
    sprov_unwinder_free(uw_);
    sprov_context_free(ctx_);
  }

  /// Re-reads /proc/PID/maps; true when it changed (or on the first call).
  bool refresh() {
    std::string text = read_file("/proc/" + std::to_string(pid_) + "/maps");
    if (text.empty() || text == mods_.maps_text) return false;
    ProcessModules m;
    m.maps_text = text;
    m.maps = parse_maps(text);
    for (const auto& mp : m.maps)
      if (mp.path == "[uprobes]") m.uprobes_start = mp.start, m.uprobes_end = mp.end;
    if (as_ == nullptr) {
      SPROV_OPTS(sprov_address_space_opts, ao, .pid = pid_);
      if (sprov_address_space_new(ctx_, &ao, &as_) != 0)
        fprintf(stderr, "%s: address space of pid %" PRId64 ": %s\n", kProg, pid_, sprov_last_error_message());
    } else if (sprov_address_space_load_maps(as_, text.c_str()) != 0 && verbose) {
      fprintf(stderr, "%s: reading the module list: %s\n", kProg, sprov_last_error_message());
    }
    if (verbose && as_)
      fprintf(stderr, "%s: %zu modules mapped by pid %" PRId64 "\n", kProg, sprov_address_space_module_count(as_), pid_);
    mods_ = std::move(m);
    return true;
  }


  /// The module whose executable range holds pc (nullptr: none); valid until the next refresh().
  const sprov_module_info* module_at(uint64_t pc) {
    static sprov_module_info mi;
    for (size_t i = 0; as_ && i < sprov_address_space_module_count(as_); i++) {
      mi = {};
      mi.sz = sizeof(mi);
      if (sprov_address_space_module(as_, i, &mi) == 0 && pc >= mi.start && pc < mi.end) return &mi;
    }
    return nullptr;
  }
  sprov_symbolizer* symbolizer() { return sym_; }
  bool verbose = false;

  /// The one place that turns an event into frames. Interim implementation through the
  /// snapshot ABI (sprov_snapshot_new / set_reg / add_memory / add_module, then
  /// sprov_unwinder_unwind), to be replaced by the raw entry point (registers in pt_regs
  /// layout + stack bytes + address space + shadow-stack records -> frames) when it lands.
  UnwindResult unwind_event(const ml_alloc_entry& e) {
    // the first event, or the [uprobes] page not seen yet while a shadow record says it is used
    if (mods_.maps_text.empty() || (e.shadow_count && mods_.uprobes_end == 0)) refresh();
    UnwindResult r = unwind_once(e);
    if (r.stop_reason == SPROV_STOP_INVALID_PC && refresh()) r = unwind_once(e);  // dlopen since
    if (e.entry_pc) from_allocator_entry(r, e.entry_pc);
    return r;
  }

  /// Shim mode, a sample the sampler unwound in the process: its frames, each given the module
  /// that maps its pc here (the same mappings: the loader reads the process's /proc/PID/maps).
  UnwindResult frames_event(const ml_alloc_frames& e) {
    if (mods_.maps_text.empty()) refresh();
    UnwindResult r;
    uint32_t n = std::min<uint32_t>(e.count, ML_FRAMES_MAX);
    bool refreshed = false;
    for (uint32_t i = 0; i < n; i++) {
      RawFrame f;
      f.pc = e.frames[i].pc;
      f.method = e.frames[i].method;
      f.return_address = (e.frames[i].flags & SPROV_FRAME_RETURN_ADDRESS) != 0;
      const sprov_module_info* m = module_at(f.pc);
      if (m == nullptr && !refreshed) {  // mapped since the last read (dlopen)
        refreshed = true;
        if (refresh()) m = module_at(f.pc);
      }
      if (m != nullptr) {
        f.module = m->path ? m->path : "";
        f.module_offset = f.pc - m->load_bias;
      }
      r.frames.push_back(std::move(f));
    }
    r.stop_reason = e.stop_reason;
    if (e.entry_pc) from_allocator_entry(r, e.entry_pc);
    return r;
  }

  /// Shim mode: the in-process sampler's file as mapped (its frames are dropped).
  std::string shim_path;

  /// Shim mode: the walk starts in the preloaded sampler (the marker, the interposed allocator);
  /// drop those frames and put frame 0 at the libc allocator the shim called, at its entry, as a
  /// uprobe on that allocator reports it (method context), so both modes give the same stacks.
  void from_allocator_entry(UnwindResult& r, uint64_t entry_pc) {
    size_t skip = 0;
    while (skip < r.frames.size() && r.frames[skip].module == shim_path) skip++;
    r.frames.erase(r.frames.begin(), r.frames.begin() + static_cast<std::ptrdiff_t>(skip));
    RawFrame f;
    f.pc = entry_pc;
    f.method = SPROV_METHOD_CONTEXT;
    if (const sprov_module_info* m = module_at(entry_pc)) {
      f.module = m->path ? m->path : "";
      f.module_offset = entry_pc - m->load_bias;
    }
    r.frames.insert(r.frames.begin(), std::move(f));
  }

 private:
  /// sprov_unwinder_unwind_raw: the library repairs the trampolines from the shadow records
  /// (frames tagged SPROV_METHOD_TRAMPOLINE); --no-trampoline-repair passes no records.
  UnwindResult unwind_once(const ml_alloc_entry& e) {
    UnwindResult r;
    if (as_ == nullptr) return r;
    SPROV_OPTS(sprov_raw_input, in, .regs_format = SPROV_REGS_PT_REGS);
    in.regs = e.regs;
    in.regs_len = sizeof(e.regs);
    in.stack_addr = e.stack_addr;
    in.stack = e.stack;
    in.stack_len = std::min<uint32_t>(e.stack_len, ML_STACK_MAX);
    static_assert(sizeof(ml_shadow) == sizeof(sprov_shadow_entry), "shadow record layout");
    if (repair_) {
      in.shadow = reinterpret_cast<const sprov_shadow_entry*>(e.shadow);
      in.shadow_count = std::min<uint32_t>(e.shadow_count, ML_SHADOW_MAX);
    }
    sprov_raw_frame frames[128];
    sprov_unwind_buf buf = {};
    buf.sz = sizeof(buf);
    buf.frames = frames;
    buf.capacity = 128;
    buf.frame_sz = sizeof(sprov_raw_frame);
    if (sprov_unwinder_unwind_raw(uw_, as_, &in, &buf) != 0) {
      if (verbose) fprintf(stderr, "%s: unwind: %s\n", kProg, sprov_last_error_message());
      return r;
    }
    for (uint32_t i = 0; i < buf.count; i++) {
      const sprov_raw_frame& fr = frames[i];
      RawFrame f;
      f.pc = fr.pc;
      f.module_offset = fr.module_offset;
      f.method = fr.method;
      f.return_address = (fr.flags & SPROV_FRAME_RETURN_ADDRESS) != 0;
      sprov_module_info mi = {};
      mi.sz = sizeof(mi);
      if (fr.module_index >= 0 && sprov_address_space_module(as_, static_cast<size_t>(fr.module_index), &mi) == 0 && mi.path)
        f.module = mi.path;
      else if (fr.pc >= mods_.uprobes_start && fr.pc < mods_.uprobes_end)
        f.module = "[uprobes]";
      r.frames.push_back(std::move(f));
    }
    r.stop_reason = buf.stop_reason;
    r.repaired = buf.repaired;
    return r;
  }

  int64_t pid_;
  bool repair_;
  std::string root_;
  sprov_address_space* as_ = nullptr;
  sprov_context* ctx_ = nullptr;
  sprov_unwinder* uw_ = nullptr;
  sprov_symbolizer* sym_ = nullptr;
  ProcessModules mods_;
};

// ------------------------------------------------------------------------------ accounting

struct SymFrame {
  std::string function, file;
  uint32_t line = 0;
  bool inlined = false;  // an inlined call inside the physical frame that follows it
};

struct FrameOut {
  RawFrame raw;
  std::vector<SymFrame> chain;  // innermost first; the physical function last
};

struct StackInfo {
  std::vector<FrameOut> frames;
  int stop_reason = 0;
  double bytes = 0, count = 0;  // outstanding (estimates with --sample-bytes)
};

struct Live {
  size_t stack = 0;
  double bytes = 0, count = 0;
};

struct Pending {
  size_t stack = SIZE_MAX;
};

class Tracker {
 public:
  Tracker(Unwinder& uw, const Options& o) : uw_(uw), opt_(o) {}

  void on_entry(const ml_alloc_entry& e) { on_unwound(uw_.unwind_event(e), e.h.tid); }
  void on_frames(const ml_alloc_frames& e) { on_unwound(uw_.frames_event(e), e.h.tid); }

  void on_unwound(UnwindResult r, uint32_t tid) {
    repaired_ += r.repaired;
    std::vector<uint64_t> key;
    for (const auto& f : r.frames) key.push_back(f.pc);
    key.push_back(static_cast<uint64_t>(r.stop_reason));
    auto it = index_.find(key);
    size_t id;
    if (it == index_.end()) {
      id = stacks_.size();
      stacks_.push_back(symbolize(r));
      index_.emplace(std::move(key), id);
    } else {
      id = it->second;
    }
    pending_[tid].stack = id;
    entries_++;
  }

  void on_return(const ml_event_head& h) {
    auto it = pending_.find(h.tid);
    if (it == pending_.end()) return;
    size_t id = it->second.stack;
    pending_.erase(it);
    if (h.ptr == 0 || id == SIZE_MAX) return;
    double bytes = static_cast<double>(h.size), count = 1;
    if (opt_.sample_bytes && h.size > 0) {  // the sample stands for 1/P allocations, P = 1-exp(-size/N)
      double p = -std::expm1(-static_cast<double>(h.size) / static_cast<double>(opt_.sample_bytes));
      if (p > 0) bytes /= p, count /= p;
    }
    auto lit = live_.find(h.ptr);
    if (lit != live_.end()) release(lit);  // a free we did not see (should not happen)
    live_[h.ptr] = Live{id, bytes, count};
    stacks_[id].bytes += bytes;
    stacks_[id].count += count;
  }

  void on_free(const ml_event_head& h) {
    auto it = live_.find(h.ptr);
    if (it != live_.end()) release(it);
  }

  uint64_t entries() const { return entries_; }
  uint64_t repaired() const { return repaired_; }

  std::vector<size_t> top(uint32_t n) const {
    std::vector<size_t> ids;
    for (size_t i = 0; i < stacks_.size(); i++)
      if (stacks_[i].count > 0.5) ids.push_back(i);
    std::sort(ids.begin(), ids.end(), [&](size_t a, size_t b) {
      if (stacks_[a].bytes != stacks_[b].bytes) return stacks_[a].bytes > stacks_[b].bytes;
      return a < b;
    });
    if (n && ids.size() > n) ids.resize(n);
    return ids;
  }
  const StackInfo& stack(size_t id) const { return stacks_[id]; }
  double total_bytes() const {
    double t = 0;
    for (const auto& s : stacks_) t += s.bytes;
    return t;
  }
  double total_count() const {
    double t = 0;
    for (const auto& s : stacks_) t += s.count;
    return t;
  }

 private:
  void release(std::unordered_map<uint64_t, Live>::iterator it) {
    StackInfo& s = stacks_[it->second.stack];
    s.bytes -= it->second.bytes;
    s.count -= it->second.count;
    if (s.count < 0.5) s.bytes = 0, s.count = 0;
    live_.erase(it);
  }

  // Symbolizes each frame once per process (cache by pc): the inline chain with lines.
  StackInfo symbolize(const UnwindResult& r) {
    StackInfo s;
    s.stop_reason = r.stop_reason;
    for (const auto& f : r.frames) {
      FrameOut fo;
      fo.raw = f;
      uint64_t key = f.pc;
      auto it = sym_cache_.find(key);
      if (it != sym_cache_.end()) {
        fo.chain = it->second;
      } else {
        fo.chain = symbolize_frame(f);
        sym_cache_.emplace(key, fo.chain);
      }
      s.frames.push_back(std::move(fo));
    }
    return s;
  }

  std::vector<SymFrame> symbolize_frame(const RawFrame& f) {
    std::vector<SymFrame> out;
    if (f.module.empty() || f.module == "[uprobes]") {
      SymFrame sf;
      sf.function = f.module.empty() ? "??" : "[uprobes]";
      out.push_back(sf);
      return out;
    }
    sprov_symbolizer* sym = uw_.symbolizer();
    sprov_symbol_info info = {};
    info.sz = sizeof(info);
    uint64_t addr = f.module_offset - (f.return_address ? 1 : 0);
    std::string path = f.module;
    if (sprov_symbolizer_addr_ex(sym, path.c_str(), addr, 0, &info) == 0 && info.frame_count > 0) {
      for (uint32_t k = 0; k < info.frame_count; k++) {
        sprov_symbol_frame fr = {};
        fr.sz = sizeof(fr);
        if (sprov_symbolizer_inline_frame(sym, k, &fr) != 0) break;
        SymFrame sf;
        sf.function = fr.name && *fr.name ? fr.name : "??";
        sf.file = fr.file ? fr.file : "";
        sf.line = fr.line;
        sf.inlined = k + 1 < info.frame_count;
        out.push_back(std::move(sf));
      }
    }
    if (out.empty()) {
      SymFrame sf;
      sf.function = "??";
      out.push_back(sf);
    }
    return out;
  }

  Unwinder& uw_;
  const Options& opt_;
  std::vector<StackInfo> stacks_;
  std::map<std::vector<uint64_t>, size_t> index_;
  std::unordered_map<uint32_t, Pending> pending_;
  std::unordered_map<uint64_t, Live> live_;
  std::unordered_map<uint64_t, std::vector<SymFrame>> sym_cache_;
  uint64_t entries_ = 0, repaired_ = 0;
};

// ------------------------------------------------------------------------------ output

std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

void report_text(FILE* f, const Tracker& t, const Options& o, int64_t pid, bool final) {
  time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  char ts[16];
  strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
  auto ids = t.top(o.top);
  fprintf(f, "[%s] %s outstanding allocations of pid %" PRId64 ": %.0f bytes in %.0f allocations%s\n", ts,
          final ? "Final report:" : "Top", pid, t.total_bytes(), t.total_count(),
          o.sample_bytes ? " (estimated from samples)" : "");
  for (size_t id : ids) {
    const StackInfo& s = t.stack(id);
    fprintf(f, "\t%.0f bytes in %.0f allocations from stack\n", s.bytes, s.count);
    for (size_t i = 0; i < s.frames.size(); i++) {
      const FrameOut& fr = s.frames[i];
      for (const auto& c : fr.chain) {
        fprintf(f, "\t\t%s0x%" PRIx64 " %s", c.inlined ? "(inline) " : "", fr.raw.pc, c.function.c_str());
        if (!c.file.empty()) fprintf(f, " at %s:%u", c.file.c_str(), c.line);
        if (!c.inlined) fprintf(f, " [%s] [%s]", base_name(fr.raw.module).c_str(), sprov_method_name(fr.raw.method));
        fputc('\n', f);
      }
    }
    fprintf(f, "\t\tstop: %s\n", sprov_stop_reason_name(s.stop_reason));
  }
  fflush(f);
}

void report_json(FILE* f, const Tracker& t, const Options& o, int64_t pid) {
  using stackprov_cli::json_escape;
  auto ids = t.top(o.top);
  fprintf(f, "{\"pid\": %" PRId64 ", \"sample_bytes\": %" PRIu64 ", \"total_bytes\": %.0f, \"total_allocations\": %.0f, "
             "\"trampolines_repaired\": %" PRIu64 ", \"stacks\": [",
          pid, o.sample_bytes, t.total_bytes(), t.total_count(), t.repaired());
  for (size_t n = 0; n < ids.size(); n++) {
    const StackInfo& s = t.stack(ids[n]);
    fprintf(f, "%s\n  {\"bytes\": %.0f, \"allocations\": %.0f, \"stop\": \"%s\", \"frames\": [", n ? "," : "", s.bytes,
            s.count, sprov_stop_reason_name(s.stop_reason));
    bool first = true;
    for (const auto& fr : s.frames) {
      for (const auto& c : fr.chain) {
        fprintf(f,
                "%s\n    {\"pc\": \"0x%" PRIx64 "\", \"module\": \"%s\", \"module_offset\": \"0x%" PRIx64
                "\", \"method\": \"%s\", \"function\": \"%s\", \"file\": \"%s\", \"line\": %u, \"inlined\": %s}",
                first ? "" : ",", fr.raw.pc, json_escape(fr.raw.module.c_str()).c_str(), fr.raw.module_offset,
                sprov_method_name(fr.raw.method), json_escape(c.function.c_str()).c_str(),
                json_escape(c.file.c_str()).c_str(), c.line, c.inlined ? "true" : "false");
        first = false;
      }
    }
    fprintf(f, "]}");
  }
  fprintf(f, "\n]}\n");
  fflush(f);
}

std::map<std::string, uint64_t> folded_lines(const Tracker& t, const std::string& comm) {
  std::map<std::string, uint64_t> out;
  for (size_t id : t.top(0)) {
    const StackInfo& s = t.stack(id);
    std::string line = comm;
    for (size_t i = s.frames.size(); i-- > 0;) {
      const auto& chain = s.frames[i].chain;
      for (size_t k = chain.size(); k-- > 0;) {
        std::string name = chain[k].function;
        std::replace(name.begin(), name.end(), ';', ':');
        std::replace(name.begin(), name.end(), ' ', '_');
        line += ";" + name;
      }
    }
    out[line] += static_cast<uint64_t>(std::llround(s.bytes));
  }
  return out;
}

// ------------------------------------------------------------------------------ main

struct Loop {
  Tracker* tracker;
};

int handle_event(void* ctx, void* data, size_t len) {
  Tracker* t = static_cast<Loop*>(ctx)->tracker;
  if (len < sizeof(ml_event_head)) return 0;
  const auto* h = static_cast<const ml_event_head*>(data);
  switch (h->type) {
    case ML_EV_ALLOC_ENTRY:
      if (len >= ML_ENTRY_FIXED) {
        // the ring holds only stack_len bytes of stack: copy into a full-size event
        static ml_alloc_entry e;
        memcpy(&e, data, std::min(len, sizeof(e)));
        if (e.stack_len > len - ML_ENTRY_FIXED) e.stack_len = static_cast<uint32_t>(len - ML_ENTRY_FIXED);
        t->on_entry(e);
      }
      break;
    case ML_EV_ALLOC_FRAMES:
      if (len >= ML_FRAMES_FIXED) {
        // only `count` frames are in the ring: copy into a full-size event, the count bounded by
        // what arrived
        static ml_alloc_frames e;
        memcpy(&e, data, std::min(len, sizeof(e)));
        e.count = static_cast<uint32_t>(std::min<uint64_t>(e.count, (len - ML_FRAMES_FIXED) / sizeof(ml_frame)));
        t->on_frames(e);
      }
      break;
    case ML_EV_ALLOC_RET: t->on_return(*h); break;
    case ML_EV_FREE: t->on_free(*h); break;
  }
  return 0;
}

struct Probe {
  const char* func;
  bpf_program* prog;
  bool ret;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  libbpf_verbose = o.verbose;
  libbpf_set_print(libbpf_print);

  // Requirements, each with its own message.
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    die("the kernel has no BTF (/sys/kernel/btf/vmlinux: %s): needs CONFIG_DEBUG_INFO_BTF", strerror(errno));
  if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0)
    die("the kernel has no uprobe support (/sys/bus/event_source/devices/uprobe: %s): needs CONFIG_UPROBE_EVENTS",
        strerror(errno));
  if (geteuid() != 0)
    die("needs root (CAP_BPF and CAP_PERFMON to load BPF programs and attach uprobes); run it with sudo");

  // The target: a running process, or COMMAND started behind a gate until the probes are in.
  int64_t pid = o.pid;
  std::string libc_path;    // as the kernel resolves it for the uprobes (through /proc/PID/root)
  std::string libc_shown;   // as the process maps it
  std::string exe_path;     // the program's file (for --scope FUNC)
  int gate[2] = {-1, -1};
  pid_t child = 0;
  std::string preload;  // shim mode: the in-process sampler COMMAND runs with (LD_PRELOAD)
  ShmRing ring;         // shim mode: where it writes its events
  if (pid) {
    std::string maps = read_file("/proc/" + std::to_string(pid) + "/maps");
    if (maps.empty()) {
      if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) die("no such process: %" PRId64, pid);
      die("cannot read /proc/%" PRId64 "/maps", pid);
    }
    for (const auto& m : parse_maps(maps))
      if (libc_shown.empty() && !m.path.empty() && m.path[0] == '/' && is_libc_name(m.path)) libc_shown = m.path;
    if (libc_shown.empty()) die("process %" PRId64 " maps no libc (statically linked?): nothing to probe", pid);
    libc_path = "/proc/" + std::to_string(pid) + "/root" + libc_shown;
    exe_path = "/proc/" + std::to_string(pid) + "/exe";
  } else {
    exe_path = which(o.command[0]);
    if (exe_path.empty()) die("command not found: %s", o.command[0].c_str());
    libc_shown = libc_path = libc_of_command(exe_path);
    if (libc_path.empty()) die("%s links no libc (statically linked?): nothing to probe", exe_path.c_str());
    // --sample-bytes with COMMAND: sample in the process (LD_PRELOAD) and hand the samples over in
    // shared memory, so that no call traps; glibc only (the sampler forwards to its __libc_* entry
    // points); not with --scope (the shadow stack of the scope functions is kept by the BPF side).
    if (o.sample_bytes > 0 && o.scopes.empty()) {
      if (base_name(libc_path) == "libc.so.6") preload = find_preload();
      else fprintf(stderr, "%s: %s is not glibc: --sample-bytes samples in the kernel (a uprobe trap per call)\n",
                   kProg, libc_path.c_str());
    }
    if (!preload.empty()) ring.create();
    if (pipe2(gate, O_CLOEXEC) != 0) die("pipe: %s", strerror(errno));
    std::vector<char*> args;  // built before fork: the child allocates nothing before exec
    for (auto& s : o.command) args.push_back(s.data());
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    std::vector<char*> envp;
    if (!preload.empty()) {
      env_strings = preload_environment(preload, ring.fd(), o);
      for (auto& s : env_strings) envp.push_back(s.data());
      envp.push_back(nullptr);
    }
    child = fork();
    if (child < 0) die("fork: %s", strerror(errno));
    if (child == 0) {
      close(gate[1]);
      char c;
      if (read(gate[0], &c, 1) != 1) _exit(127);  // the loader failed: do not run untraced
      if (envp.empty()) execv(exe_path.c_str(), args.data());
      else execve(exe_path.c_str(), args.data(), envp.data());
      fprintf(stderr, "%s: exec %s: %s\n", kProg, exe_path.c_str(), strerror(errno));
      _exit(127);
    }
    close(gate[0]);
    ring.close_fd();
    pid = child;
    // Hold COMMAND at its exit (PTRACE_O_TRACEEXIT) until its last events are unwound: its
    // module list is read from /proc/PID/maps, which an exited process no longer has.
    if (ptrace(PTRACE_SEIZE, child, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACEEXIT)) != 0) {
      kill(child, SIGKILL);
      die("ptrace(PTRACE_SEIZE) of pid %d: %s", child, strerror(errno));
    }
  }

  memleak_bpf* skel = memleak_bpf__open();
  if (!skel) die("opening the BPF object: %s", strerror(errno));
  skel->rodata->target_tgid = static_cast<uint32_t>(pid);
  skel->rodata->stack_bytes = o.stack_bytes;
  skel->rodata->sample_bytes = preload.empty() ? o.sample_bytes : 0;  // shim mode: sampled in the process
  skel->rodata->min_size = o.min_size;
  skel->rodata->scope_on = o.scopes.empty() ? 0 : 1;
  for (int i = 0; i < 256; i++)
    skel->rodata->exp_table[i] = static_cast<uint32_t>(std::lround(-std::log((i + 0.5) / 256.0) * 1024.0));
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu > 0) bpf_map__set_max_entries(skel->maps.scratch, static_cast<uint32_t>(ncpu));
  if (int err = memleak_bpf__load(skel); err != 0) {
    if (child) kill(child, SIGKILL);
    die("loading the BPF program failed: %s%s%s", strerror(-err), last_libbpf_message.empty() ? "" : ": ",
        last_libbpf_message.c_str());
  }

  std::vector<Probe> probes = {
      {"malloc", skel->progs.malloc_entry, false},       {"malloc", skel->progs.alloc_return, true},
      {"calloc", skel->progs.calloc_entry, false},       {"calloc", skel->progs.alloc_return, true},
      {"realloc", skel->progs.realloc_entry, false},     {"realloc", skel->progs.alloc_return, true},
      {"posix_memalign", skel->progs.posix_memalign_entry, false},
      {"posix_memalign", skel->progs.alloc_return, true},
      {"aligned_alloc", skel->progs.aligned_alloc_entry, false},
      {"aligned_alloc", skel->progs.alloc_return, true},
      {"memalign", skel->progs.memalign_entry, false},   {"memalign", skel->progs.alloc_return, true},
      {"valloc", skel->progs.valloc_entry, false},       {"valloc", skel->progs.alloc_return, true},
      {"free", skel->progs.free_entry, false},
  };
  std::vector<bpf_link*> links;
  auto attach = [&](const std::string& binary, const std::string& func, bpf_program* prog, bool ret) {
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret, .func_name = func.c_str());
    bpf_link* l = bpf_program__attach_uprobe_opts(prog, static_cast<pid_t>(pid), binary.c_str(), 0, &uo);
    // EINVAL: another tracer's uprobe at the same offset of the same libc file, anywhere on the
    // system, registered with a different reference-counter offset (bcc 0.26 registers one;
    // dmesg "ref_ctr_offset mismatch"). One that is just going away (memleak-bpfcc ended a
    // moment ago) is gone within moments: try again for up to 2 s before giving up.
    for (int tries = 0; !l && errno == EINVAL && tries < 20; tries++) {
      usleep(100 * 1000);
      l = bpf_program__attach_uprobe_opts(prog, static_cast<pid_t>(pid), binary.c_str(), 0, &uo);
    }
    if (!l) {
      int err = errno;
      if (child) kill(child, SIGKILL);
      die("attaching a %s to %s in %s failed: %s%s%s%s", ret ? "uretprobe" : "uprobe", func.c_str(), binary.c_str(),
          strerror(err), last_libbpf_message.empty() ? "" : ": ", last_libbpf_message.c_str(),
          err == EINVAL ? " (is another tracer, e.g. memleak-bpfcc, probing the same function? see dmesg)" : "");
    }
    links.push_back(l);
  };
  if (!preload.empty()) probes.clear();  // shim mode: no probe, the sampler writes to the shared ring
  auto addrs = dynsym_addresses(libc_path);
  std::map<uint64_t, std::string> probed;  // address -> the function whose probes cover it
  for (const auto& p : probes) {
    auto a = addrs.find(p.func);
    if (a != addrs.end()) {
      auto [it, fresh] = probed.emplace(a->second, p.func);
      if (!fresh && it->second != p.func) continue;  // an alias of a probed function
    }
    attach(libc_path, p.func, p.prog, p.ret);
  }
  for (const auto& s : o.scopes) {
    std::string bin = exe_path, func = s;
    if (size_t colon = s.rfind(':'); colon != std::string::npos) {
      bin = s.substr(0, colon);
      func = s.substr(colon + 1);
      if (o.pid && !bin.empty() && bin[0] == '/') bin = "/proc/" + std::to_string(pid) + "/root" + bin;
    }
    attach(bin, func, skel->progs.scope_entry, false);
    attach(bin, func, skel->progs.scope_return, true);
  }

  Unwinder uw(pid, child != 0, o.repair);
  uw.verbose = o.verbose;
  uw.shim_path = preload;
  Tracker tracker(uw, o);
  Loop loop{&tracker};
  ring_buffer* rb = ring_buffer__new(bpf_map__fd(skel->maps.events), handle_event, &loop, nullptr);
  if (!rb) die("ring buffer: %s", strerror(errno));

  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  if (preload.empty())
    fprintf(stderr, "%s: tracing pid %" PRId64 " (%s): %zu probes attached; Ctrl-C to end\n", kProg, pid,
            libc_shown.c_str(), links.size());
  else
    fprintf(stderr, "%s: tracing pid %" PRId64 " (%s): sampling in the process (LD_PRELOAD %s); Ctrl-C to end\n",
            kProg, pid, libc_shown.c_str(), preload.c_str());
  auto consume_ring = [&] { ring.consume([&](void* data, size_t len) { handle_event(&loop, data, len); }); };
  if (child) {
    if (write(gate[1], "g", 1) != 1) die("starting %s: %s", exe_path.c_str(), strerror(errno));
    close(gate[1]);
  }

  const double start = now_s();
  double next_report = o.interval > 0 ? start + o.interval : 0;
  int child_status = 0;
  bool child_done = false;
  while (!g_stop) {
    int n = ring_buffer__poll(rb, 100);
    if (n < 0 && n != -EINTR) die("ring buffer poll: %s", strerror(-n));
    // Shim mode: unwind in batches (a quarter of the ring, a report, the end), not every 100 ms:
    // the loader's bursts then compete less with COMMAND for the CPUs while it runs.
    if (ring.used() > ShmRing::kDataBytes / 4) consume_ring();
    double t = now_s();
    if (child && !child_done) {
      int st = 0;
      if (waitpid(child, &st, WNOHANG | __WALL) == child) {
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
          child_done = true;
          child_status = st;
        } else if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_EXIT) {
          ring_buffer__consume(rb);  // its last events, while its maps are still there
          consume_ring();
          ptrace(PTRACE_DETACH, child, nullptr, nullptr);
          if (waitpid(child, &child_status, __WALL) == child) child_done = true;
        } else if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP) {
          ptrace(PTRACE_LISTEN, child, nullptr, nullptr);  // group stop: stay stopped, as untraced
        } else if (WIFSTOPPED(st)) {
          ptrace(PTRACE_CONT, child, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(WSTOPSIG(st))));
        }
      }
    }
    if (!child && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) child_done = true;
    if (child_done) break;
    if (o.duration > 0 && t - start >= o.duration) break;
    if (next_report > 0 && t >= next_report) {
      consume_ring();
      uw.refresh();
      if (!o.json) report_text(stdout, tracker, o, pid, false);
      next_report = t + o.interval;
    }
  }
  ring_buffer__consume(rb);
  for (auto* l : links) bpf_link__destroy(l);
  ring_buffer__consume(rb);
  consume_ring();

  uint64_t st[6] = {};
  {
    int nc = libbpf_num_possible_cpus();
    std::vector<uint64_t> vals(static_cast<size_t>(nc > 0 ? nc : 1));
    for (uint32_t k = 0; k < 6; k++) {
      if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stats), &k, vals.data()) == 0)
        for (auto v : vals) st[k] += v;
    }
  }
  if (const ml_shm_head* h = ring.head()) {  // shim mode: the sampler's counts
    st[4] = st[3] = h->samples;
    st[5] = h->dropped;
    st[0] = h->lost_frees;  // st[1] (pointers not tracked) stays 0: the sampler keeps no pointer set
  }
  if (st[5])
    fprintf(stderr, "%s: warning: %" PRIu64 " allocations not traced: the ring buffer was full of stacks the "
            "loader had not unwound yet; the counts are a lower bound (--sample-bytes or a smaller "
            "--stack-bytes sends less)\n", kProg, st[5]);
  if (st[0] || st[1])
    fprintf(stderr, "%s: warning: %" PRIu64 " events lost (ring buffer full) and %" PRIu64
            " pointers not tracked (live map full): the counts are incomplete; --sample-bytes or a smaller "
            "--stack-bytes sends less\n", kProg, st[0], st[1]);
  if (o.verbose) {
    fprintf(stderr,
            "%s: %" PRIu64 " %s, %" PRIu64 " sampled, %" PRIu64 " stacks unwound, %" PRIu64
            " events dropped (ring full), %" PRIu64 " pointers not tracked (live map full), %" PRIu64
            " stacks read page by page, %" PRIu64 " trampolines repaired\n",
            kProg, st[4], preload.empty() ? "allocator calls" : "samples from the in-process sampler", st[3],
            tracker.entries(), st[0], st[1], st[2], tracker.repaired());
    if (const ml_shm_head* h = ring.head())
      fprintf(stderr, "%s: %llu samples unwound in the process (%llu walks reused), %llu sent their stack to the loader\n",
              kProg, static_cast<unsigned long long>(h->unwound), static_cast<unsigned long long>(h->reused),
              static_cast<unsigned long long>(h->samples - h->dropped - h->unwound));
  }

  if (o.json) report_json(stdout, tracker, o, pid);
  else report_text(stdout, tracker, o, pid, true);
  std::string comm = child ? base_name(exe_path) : read_file("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  if (comm.empty()) comm = "pid" + std::to_string(pid);
  int rc = 0;
  if (!o.folded.empty() || !o.svg.empty()) {
    auto lines = folded_lines(tracker, comm);
    auto write_out = [&](const std::string& path, bool svg) {
      FILE* f = fopen(path.c_str(), "w");
      if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", kProg, path.c_str(), strerror(errno));
        rc = 1;
        return;
      }
      if (svg) stackprov_cli::write_flamegraph_svg(f, lines, "Outstanding bytes of " + comm);
      else stackprov_cli::write_folded(f, lines);
      fclose(f);
    };
    if (!o.folded.empty()) write_out(o.folded, false);
    if (!o.svg.empty()) write_out(o.svg, true);
  }
  ring_buffer__free(rb);
  memleak_bpf__destroy(skel);
  if (child && !child_done) {  // --duration or Ctrl-C before COMMAND ended: leave it running untraced
    ptrace(PTRACE_DETACH, child, nullptr, nullptr);
    fprintf(stderr, "%s: stopped tracing; pid %d keeps running\n", kProg, child);
  } else if (child && WIFEXITED(child_status)) {
    fprintf(stderr, "%s: %s exited with status %d\n", kProg, o.command[0].c_str(), WEXITSTATUS(child_status));
  } else if (child && WIFSIGNALED(child_status)) {
    fprintf(stderr, "%s: %s was killed by signal %d\n", kProg, o.command[0].c_str(), WTERMSIG(child_status));
  }
  return rc;
}
