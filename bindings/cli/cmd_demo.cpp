// SPDX-License-Identifier: Apache-2.0
// `stackprov demo` (make demo): the trace pipeline end to end on the demo workload -- keys and log, capture, offline resolve, replay, gate.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "print.hpp"
#include "stackprov/stackprov.h"
#include "stackprov/trace.h"

namespace {

using stackprov_cli::Args;
using stackprov_cli::Json;
using stackprov_cli::LibStr;
using stackprov_cli::json_escape;
using stackprov_cli::usage_error;

constexpr int kSteps = 7;
constexpr int kSeeds = 5;
constexpr const char* kWorkloadName = "stackprov-demo-workload";
constexpr const char* kWorkloadRunMs = "30000";  // it is stopped after the capture; this is a bound
constexpr int kReadyTimeoutMs = 10000;

constexpr const char* kHelp =
    "usage: stackprov demo [--dir DIR] [--json]\n"
    "\n"
    "options:\n"
    "  --dir DIR   use DIR as the state dir: created if missing (its parent must exist), else it\n"
    "              must be an empty directory\n"
    "  --json      print one JSON object instead of the text report: {\"state_dir\",\"trace_store\",\n"
    "              \"workload\":{\"path\",\"pid\"},\"steps\":[{\"step\",\"name\",\"ms\",\"detail\"}],\n"
    "              \"trace_id\",\"trace\":<trace.capture event>,\"resolve\":<resolve report>,\n"
    "              \"replay\":<replay report>,\"summary\",\"junit\",\"exit_code\"}\n"
    "  -h, --help  this text\n"
    "\n"
    "Runs the whole trace pipeline on an embedded default (a SQLite trace store, a fresh key and\n"
    "transparency log) against a small demo program, in well under a minute:\n"
    "  1. state dir: a new directory $TMPDIR/stackprov-demo-XXXXXX ($TMPDIR default /tmp), or\n"
    "     --dir DIR; it is kept, and printed at the end\n"
    "  2. keygen + log init: a P-256 key DIR/signing.key (public key DIR/signing.pub) and a\n"
    "     transparency log DIR/log whose checkpoints it signs (trusted root\n"
    "     DIR/log/trusted_root.json)\n"
    "  3. workload: starts stackprov-demo-workload (the program next to this stackprov binary,\n"
    "     built with -g -O2) and waits until it reports \"ready\": 4 threads parked in distinct\n"
    "     named call chains -- nanosleep, pthread_cond_wait, read through an inlined function\n"
    "  4. trace-capture: captures every thread (ptrace), unwinds and resolves each, builds a\n"
    "     symbol bundle of the modules the frames touch, signs it and appends it to the log,\n"
    "     and stores the trace in sqlite:DIR/traces.db and the bundle in the bundle store\n"
    "     DIR/bundles; the workload is then stopped (SIGTERM)\n"
    "  5. trace-resolve --offline: resolves the stored trace again from its captured data with\n"
    "     the bundles only (no module file, debug file or network)\n"
    "  6. trace-replay: replays it with 5 seeds and evaluates the gate, trusting DIR/signing.pub\n"
    "     for the bundle's DSSE envelope and DIR/log/trusted_root.json for its inclusion proof;\n"
    "     the JUnit report goes to DIR/junit.xml\n"
    "  7. report: each step with its wall-clock time, then every thread's frames as\n"
    "     'stackprov trace-show' prints them (symbol, module, unwind method, resolver,\n"
    "     file:line:column, inline chain), the gate's summary line, the JUnit file and the state\n"
    "     dir. Explore further with 'stackprov trace-show ID --store sqlite:DIR/traces.db' and\n"
    "     the other trace commands.\n"
    "\n"
    "Exit status: the gate's (as 'stackprov trace-replay'): 0 passed; 3 coverage, 4 replay\n"
    "success, 5 DSSE, 6 inclusion proof, 7 module identity; 1 a step failed (one line names the\n"
    "step and the reason); 2 bad options or values.\n";

std::string trim_nl(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string lib_message() {
  const char* m = sprov_last_error_message();
  return m && *m ? m : sprov_strerror(sprov_last_error());
}

/// The demo workload process: stopped (SIGTERM) and reaped when it goes out of scope.
struct Workload {
  pid_t pid = -1;
  int err_fd = -1;  // its stderr
  Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
  ~Workload() { stop(); }
  int stop() {
    int status = 0;
    if (pid > 0) {
      kill(pid, SIGTERM);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
    }
    if (err_fd >= 0) close(err_fd);
    err_fd = -1;
    return status;
  }
};

/// Starts `path` with its stderr on a pipe and waits for its "ready" line; "" or why not.
std::string start_workload(const std::string& path, Workload* w) {
  int ep[2], errp[2];
  if (pipe2(ep, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  if (pipe2(errp, O_CLOEXEC) != 0) {
    close(ep[0]);
    close(ep[1]);
    return std::string("pipe: ") + strerror(errno);
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + strerror(errno);
  if (pid == 0) {
    dup2(errp[1], STDERR_FILENO);  // dup2 clears close-on-exec on the copy
    const int dn = open("/dev/null", O_RDONLY);
    if (dn >= 0) dup2(dn, STDIN_FILENO);
    char* argv[] = {const_cast<char*>(path.c_str()), const_cast<char*>(kWorkloadRunMs), nullptr};
    execv(path.c_str(), argv);
    const int e = errno;
    ssize_t n = write(ep[1], &e, sizeof e);
    (void)n;
    _exit(127);
  }
  close(ep[1]);
  close(errp[1]);
  w->pid = pid;
  w->err_fd = errp[0];
  int e = 0;
  ssize_t n;
  while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(ep[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    w->stop();
    return "cannot run '" + path + "': " + strerror(e);
  }
  std::string got;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (got.find("ready\n") != std::string::npos) return "";
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= kReadyTimeoutMs)
      return "'" + path + "' did not report \"ready\" within " + std::to_string(kReadyTimeoutMs) + " ms";
    struct pollfd pfd = {w->err_fd, POLLIN, 0};
    const int pr = poll(&pfd, 1, static_cast<int>(kReadyTimeoutMs - waited));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[256];
    const ssize_t r = read(w->err_fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      w->err_fd = (close(w->err_fd), -1);
      int status = 0;
      while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
      }
      w->pid = -1;
      std::string why = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status));
      return "'" + path + "' exited before it was ready (" + why + ")" + (got.empty() ? "" : ": " + trim_nl(got));
    }
    got.append(buf, static_cast<size_t>(r));
  }
}

/// The workload's path: next to this executable.
std::string workload_path() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return kWorkloadName;
  std::string s(self, static_cast<size_t>(n));
  const size_t slash = s.rfind('/');
  return (slash == std::string::npos ? std::string(".") : s.substr(0, slash)) + "/" + kWorkloadName;
}

/// The state dir: DIR (created, or an existing empty directory) or a new mkdtemp one; absolute.
/// Returns "" and sets *err on failure; *usage tells a bad --dir value.
std::string make_state_dir(const char* dir, std::string* err, bool* usage) {
  std::string path;
  if (dir) {
    struct stat st;
    if (stat(dir, &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        *usage = true;
        *err = std::string("--dir '") + dir + "' exists and is not a directory";
        return "";
      }
      // An existing directory must be empty: the demo creates its files without overwriting.
      bool empty = true;
      if (DIR* d = opendir(dir)) {
        while (struct dirent* e = readdir(d))
          if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
        closedir(d);
      }
      if (!empty) {
        *usage = true;
        *err = std::string("--dir '") + dir + "' is not empty (give a new or an empty directory)";
        return "";
      }
    } else if (mkdir(dir, 0700) != 0) {
      *usage = errno == ENOENT || errno == ENOTDIR;
      *err = std::string("--dir '") + dir + "': cannot create it: " + strerror(errno);
      return "";
    }
    path = dir;
  } else {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/stackprov-demo-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
      *err = "cannot create a state dir '" + tmpl + "': " + strerror(errno);
      return "";
    }
    path = buf.data();
  }
  char real[PATH_MAX];
  if (realpath(path.c_str(), real)) path = real;
  return path;
}

struct Step {
  int n;
  std::string name;
  double ms;
  std::string detail;
};

class Demo {
 public:
  explicit Demo(bool json) : json_(json) {}

  /// Starts timing the next step.
  void begin() { t0_ = std::chrono::steady_clock::now(); }
  /// Ends the current step: records and (text) prints it.
  void done(const std::string& name, const std::string& detail) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    steps_.push_back(Step{static_cast<int>(steps_.size()) + 1, name, ms, detail});
    if (!json_) {
      printf("[%d/%d] %-25s %7.0f ms  %s\n", steps_.back().n, kSteps, name.c_str(), ms, detail.c_str());
      fflush(stdout);
    }
  }
  /// A failed step: one line naming it; exit status 1.
  int failed(const std::string& name, const std::string& why) {
    fprintf(stderr, "stackprov demo: step %zu/%d (%s) failed: %s\n", steps_.size() + 1, kSteps, name.c_str(), why.c_str());
    if (!state_dir.empty()) fprintf(stderr, "stackprov demo: state dir %s\n", state_dir.c_str());
    return 1;
  }
  const std::vector<Step>& steps() const { return steps_; }

  std::string state_dir;

 private:
  bool json_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<Step> steps_;
};

/// The index of the signed bundle's envelope (its dsse.json in the bundle store) in the log; -1
/// when it cannot be told.
int64_t log_entry_of(const std::string& bundle_dir, const std::string& digest, const std::string& log_dir) {
  sprov_bundle_store* bs = nullptr;
  if (digest.empty() || sprov_bundle_store_open(bundle_dir.c_str(), 0, &bs) != 0) return -1;
  LibStr path;
  std::string env;
  if (sprov_bundle_store_sidecar_path(bs, digest.c_str(), "dsse.json", &path.p, &path.len) == 0) {
    if (FILE* f = fopen(path.p, "rb")) {
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0 && env.size() < (16u << 20)) env.append(buf, n);
      fclose(f);
    }
  }
  sprov_bundle_store_free(bs);
  sprov_tlog* log = nullptr;
  if (env.empty() || sprov_tlog_open(log_dir.c_str(), &log) != 0) return -1;
  uint64_t index = 0;
  const int rc = sprov_tlog_find(log, env.data(), env.size(), &index);
  sprov_tlog_free(log);
  return rc == 0 ? static_cast<int64_t>(index) : -1;
}

int cmd_demo(int argc, char** argv) {
  const char* cmd = "demo";
  Args a(argc, argv, {"dir"}, {"json"});
  if (a.help) {
    fputs(kHelp, stdout);
    return 0;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (a.count("dir") > 1) return usage_error(cmd, "option --dir given twice");
  if (!a.pos.empty()) return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
  if (a.has("dir") && !*a.get("dir")) return usage_error(cmd, "--dir needs a directory");
  const bool json = a.has("json");
  Demo demo(json);

  // 1. state dir
  demo.begin();
  std::string err;
  bool bad_value = false;
  const std::string dir = make_state_dir(a.get("dir"), &err, &bad_value);
  if (dir.empty()) return bad_value ? usage_error(cmd, err) : demo.failed("state dir", err);
  demo.state_dir = dir;
  if (!json) printf("stackprov %s demo: the trace pipeline on the demo workload, state dir %s\n", sprov_version(), dir.c_str());
  demo.done("state dir", dir);

  // 2. keygen + log init
  demo.begin();
  const std::string key = dir + "/signing.key", pub = dir + "/signing.pub", log_dir = dir + "/log";
  const std::string trusted_root = log_dir + "/trusted_root.json", origin = "stackprov.local/demo";
  char key_id[SPROV_KEY_ID_STRLEN] = {};
  if (sprov_key_generate(key.c_str(), pub.c_str(), key_id, sizeof key_id) != 0)
    return demo.failed("keygen", lib_message());
  sprov_tlog* log = nullptr;
  if (sprov_tlog_init(log_dir.c_str(), origin.c_str(), key.c_str(), &log) != 0)
    return demo.failed("log init", lib_message());
  sprov_tlog_free(log);
  demo.done("keygen + log init", std::string("key ") + std::string(key_id).substr(0, 16) + "..., log " + log_dir +
                                     " (origin " + origin + ")");

  // 3. the workload
  demo.begin();
  const std::string wpath = workload_path();
  if (access(wpath.c_str(), X_OK) != 0)
    return demo.failed("workload", "'" + wpath + "': " + strerror(errno) +
                                       " (it is built with stackprov: cmake --build build --target " + kWorkloadName + ")");
  Workload w;
  if (std::string why = start_workload(wpath, &w); !why.empty()) return demo.failed("workload", why);
  const pid_t wpid = w.pid;
  demo.done("workload", wpath + ", pid " + std::to_string(wpid) + ", ready");

  // 4. trace-capture into sqlite:DIR/traces.db, bundles into DIR/bundles, signed and logged
  demo.begin();
  const std::string store_url = "sqlite:" + dir + "/traces.db", bundle_dir = dir + "/bundles";
  sprov_trace_store* store = nullptr;
  if (sprov_trace_store_open(store_url.c_str(), &store) != 0) return demo.failed("trace-capture", lib_message());
  struct Cleanup {
    sprov_trace_store* s;
    sprov_context* c = nullptr;
    ~Cleanup() {
      sprov_context_free(c);
      sprov_trace_store_free(s);
    }
  } cleanup{store};
  sprov_bundle_store* bs = nullptr;
  if (sprov_bundle_store_open(bundle_dir.c_str(), SPROV_BUNDLE_STORE_CREATE, &bs) != 0)
    return demo.failed("trace-capture", lib_message());
  sprov_bundle_store_free(bs);
  sprov_context_opts copts{};
  copts.sz = sizeof copts;
  copts.log_fn = stackprov_cli::log_once_to_stderr;
  copts.log_level = SPROV_LOG_WARN;
  copts.bundle_store = bundle_dir.c_str();
  if (sprov_context_new(&copts, &cleanup.c) != 0) return demo.failed("trace-capture", lib_message());
  sprov_context* ctx = cleanup.c;
  const auto tc0 = std::chrono::steady_clock::now();
  sprov_process* proc = nullptr;
  if (sprov_process_capture(ctx, wpid, nullptr, &proc) != 0)
    return demo.failed("trace-capture", "pid " + std::to_string(wpid) + ": " + lib_message());
  const double ptrace_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tc0).count();
  stackprov_cli::print_warnings(stderr, sprov_process_warnings(proc));
  sprov_trace_capture_opts co{};
  co.sz = sizeof co;
  co.flags = SPROV_TRACE_BUNDLE;
  co.sign_key = key.c_str();
  co.log_dir = log_dir.c_str();
  char id[SPROV_TRACE_ID_STRLEN] = {};
  const int crc = sprov_trace_capture(ctx, proc, store, &co, id, sizeof id);
  sprov_process_free(proc);
  w.stop();
  if (crc != 0) return demo.failed("trace-capture", lib_message());
  LibStr event;
  if (sprov_trace_get_json(store, id, &event.p, &event.len) != 0) return demo.failed("trace-capture", lib_message());
  const std::string ev = trim_nl(event.str());
  Json evj;
  if (!stackprov_cli::parse_json(ev, &evj)) return demo.failed("trace-capture", "the stored trace's event is not JSON");
  const std::string bundle = evj.str("symbol_bundle_ref");
  const int64_t entry = log_entry_of(bundle_dir, bundle, log_dir);
  char ptrace_txt[48];
  snprintf(ptrace_txt, sizeof ptrace_txt, "%.0f", ptrace_ms);
  demo.done("trace-capture", std::string("trace ") + id + ": " + std::to_string(evj.array("threads").size()) +
                                 " threads, " + std::to_string(evj.array("frames").size()) + " frames, bundle " +
                                 (bundle.empty() ? "-" : bundle) +
                                 (entry >= 0 ? " (signed, log entry " + std::to_string(entry) + ")" : " (signed)") +
                                 "; ptrace " + ptrace_txt + " ms");

  // 5. trace-resolve --offline
  demo.begin();
  sprov_trace_resolve_opts ro{};
  ro.sz = sizeof ro;
  ro.flags = SPROV_TRACE_OFFLINE;
  LibStr resolve;
  if (sprov_trace_resolve(ctx, store, id, &ro, &resolve.p, &resolve.len) != 0)
    return demo.failed("trace-resolve --offline", lib_message());
  const std::string rep = trim_nl(resolve.str());
  Json rj;
  if (!stackprov_cli::parse_json(rep, &rj)) return demo.failed("trace-resolve --offline", "the report is not JSON");
  std::string resolvers;
  if (const Json* r = rj.get("resolvers"); r && r->kind == Json::kObject)
    for (const auto& [name, count] : r->members) resolvers += (resolvers.empty() ? "" : ", ") + name + "=" + count.text;
  char cov[32];
  snprintf(cov, sizeof cov, "%.1f", rj.number("symbol_coverage_pct"));
  demo.done("trace-resolve --offline", rj.str("frames") + " frames, " + rj.str("named") + " named, " +
                                           rj.str("with_lines") + " with file:line, " + cov + "% coverage (resolvers: " +
                                           resolvers + ")");

  // 6. trace-replay, 5 seeds, the gate
  demo.begin();
  const std::string junit = dir + "/junit.xml";
  const char* keys[] = {pub.c_str()};
  sprov_trace_replay_opts po{};
  po.sz = sizeof po;
  po.seeds = kSeeds;
  po.first_seed = 1;
  po.min_coverage_pct = -1;
  po.min_success_ratio = -1;
  po.key_paths = keys;
  po.key_count = 1;
  po.trusted_root_path = trusted_root.c_str();
  sprov_replay_report* report = nullptr;
  if (sprov_trace_replay(ctx, store, id, &po, &report) != 0) return demo.failed("trace-replay", lib_message());
  struct ReportHandle {
    sprov_replay_report* r;
    ~ReportHandle() { sprov_replay_report_free(r); }
  } rh{report};
  LibStr summary, replay_json, xml;
  if (sprov_replay_report_format(report, SPROV_REPORT_SUMMARY, &summary.p, &summary.len) != 0 ||
      sprov_replay_report_format(report, SPROV_REPORT_JSON, &replay_json.p, &replay_json.len) != 0 ||
      sprov_replay_report_format(report, SPROV_REPORT_JUNIT, &xml.p, &xml.len) != 0)
    return demo.failed("trace-replay", lib_message());
  if (sprov_file_write(junit.c_str(), xml.p, xml.len, 0644) != 0) return demo.failed("trace-replay", lib_message());
  const int code = sprov_replay_report_exit_code(report);
  const std::string sum = trim_nl(summary.str());
  demo.done("trace-replay --seeds 5", sum);

  // 7. the report
  demo.begin();
  if (json) {
    printf("{\"state_dir\":\"%s\",\"trace_store\":\"%s\",\"workload\":{\"path\":\"%s\",\"pid\":%d},\"steps\":[",
           json_escape(dir.c_str()).c_str(), json_escape(store_url.c_str()).c_str(), json_escape(wpath.c_str()).c_str(),
           static_cast<int>(wpid));
    demo.done("report", "JSON");
    bool first = true;
    for (const Step& s : demo.steps()) {
      printf("%s{\"step\":%d,\"name\":\"%s\",\"ms\":%.3f,\"detail\":\"%s\"}", first ? "" : ",", s.n,
             json_escape(s.name.c_str()).c_str(), s.ms, json_escape(s.detail.c_str()).c_str());
      first = false;
    }
    printf("],\"trace_id\":\"%s\",\"trace\":%s,\"resolve\":%s,\"replay\":%s,\"summary\":\"%s\",\"junit\":\"%s\","
           "\"exit_code\":%d}\n",
           id, ev.c_str(), rep.c_str(), trim_nl(replay_json.str()).c_str(), json_escape(sum.c_str()).c_str(),
           json_escape(junit.c_str()).c_str(), code);
    return fflush(stdout) == 0 ? code : 1;
  }
  demo.done("report", "the trace's threads (trace-show), the gate, the files");
  printf("\n");
  fflush(stdout);
  // Every thread's frames as trace-show prints them.
  int show_rc = 1;
  for (const auto& c : stackprov_cli::command_registry()) {
    if (strcmp(c.name, "trace-show") != 0) continue;
    std::string a0 = "trace-show", a1 = id, a2 = "--store", a3 = store_url;
    char* sargv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
    show_rc = c.fn(4, sargv);
  }
  if (show_rc != 0) fprintf(stderr, "stackprov demo: could not print trace %s\n", id);
  printf("\nsummary: %s\n", sum.c_str());
  printf("JUnit:   %s\n", junit.c_str());
  printf("state:   %s (trace store %s, bundles %s, log %s, keys %s %s)\n", dir.c_str(), store_url.c_str(),
         bundle_dir.c_str(), log_dir.c_str(), key.c_str(), pub.c_str());
  printf("gate:    %s (exit status %d)\n", code == SPROV_GATE_OK ? "PASS" : "FAIL", code);
  if (fflush(stdout) != 0) return 1;
  if (code != SPROV_GATE_OK) fprintf(stderr, "stackprov demo: gate FAILED (exit status %d): %s\n", code, sum.c_str());
  return code;
}

}  // namespace

STACKPROV_COMMAND("demo", "the trace pipeline on a demo workload: capture, sign, resolve offline, replay, gate",
                  cmd_demo);
