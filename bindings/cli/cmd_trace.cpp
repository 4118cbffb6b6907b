// SPDX-License-Identifier: Apache-2.0
// `stackprov trace-capture|trace-resolve|trace-replay|trace-list|trace-show`: traces in a trace store, on the public C ABI.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "print.hpp"
#include "stackprov/kernel.h"
#include "stackprov/stackprov.h"
#include "stackprov/trace.h"

namespace {

using stackprov_cli::Args;
using stackprov_cli::Json;
using stackprov_cli::LibStr;
using stackprov_cli::parse_uint;
using stackprov_cli::usage_error;
using stackprov_cli::write_file_atomic;

using stackprov_cli::kExitFail;
using stackprov_cli::kExitOk;

/// Parses a document the library returned; false (and a message on stderr) if it is not JSON.
bool parse_library_json(const char* cmd, std::string_view what, std::string_view text, Json* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  if (stackprov_cli::parse_json(text, out)) return true;
  fprintf(stderr, "stackprov %s: cannot parse the library's %.*s as JSON\n", cmd, static_cast<int>(what.size()),
          what.data());
  return false;
}

// ---------------------------------------------------------------- helpers

/// Reports a library failure on one line, "stackprov CMD: WHAT: MESSAGE"; further lines of the
/// message follow as warnings. Returns 1.
int lib_fail(const char* cmd, const std::string& what) {
  const char* msg = sprov_last_error_message();
  if (msg == nullptr || *msg == '\0') msg = sprov_strerror(sprov_last_error());
  const char* nl = strchr(msg, '\n');
  const int first = nl ? static_cast<int>(nl - msg) : static_cast<int>(strlen(msg));
  fprintf(stderr, "stackprov %s: %s%s%.*s\n", cmd, what.c_str(), what.empty() ? "" : ": ", first, msg);
  if (nl) stackprov_cli::print_warnings(stderr, nl + 1);
  return kExitFail;
}

int fail(const char* cmd, const std::string& msg) {
  fprintf(stderr, "stackprov %s: %s\n", cmd, msg.c_str());
  return kExitFail;
}

bool is_store_url(const std::string& s);

/// A context whose bundle store is `dir`, or without one (nullptr) the default directory
/// ($STACKPROV_STORE when it is not a trace store URL, else $XDG_DATA_HOME/stackprov/store, else
/// ~/.local/share/stackprov/store): with `create` it is made if missing; without, a default that
/// does not exist is left out (no store: nothing to read, and no warning per frame). Logs
/// warnings to stderr. *store_dir receives the store used ("" for none).
int make_context(const char* cmd, const char* dir, bool create, sprov_context** out, std::string* store_dir,
                 const char* debug_dirs = nullptr) {
  std::string use;
  if (dir) {
    use = dir;
  } else {
    LibStr def;
    if (sprov_bundle_store_default_dir(&def.p, &def.len) == 0 && !is_store_url(def.p)) use = def.p;
  }
  if (!use.empty()) {
    sprov_bundle_store* bs = nullptr;
    if (sprov_bundle_store_open(use.c_str(), create ? SPROV_BUNDLE_STORE_CREATE : 0, &bs) == 0) {
      sprov_bundle_store_free(bs);
    } else if (create || dir) {
      return lib_fail(cmd, "bundle store '" + use + "'");
    } else {
      use.clear();
    }
  }
  sprov_context_opts o{};
  o.sz = sizeof o;
  o.log_fn = stackprov_cli::log_once_to_stderr;
  o.log_level = SPROV_LOG_WARN;
  o.bundle_store = use.empty() ? nullptr : use.c_str();
  o.debug_dirs = debug_dirs;
  if (sprov_context_new(&o, out) != 0) return lib_fail(cmd, "context");
  if (store_dir) *store_dir = use;
  return 0;
}

bool is_store_url(const std::string& s) {
  return s.rfind("sqlite:", 0) == 0 || s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

/// Opens --store URL (nullptr: the default store). A value that is not a store URL, a malformed
/// one, or -- with `existing`, for the commands that only read traces -- an sqlite:PATH whose
/// file does not exist (opening would create an empty store) is a usage error (2); a store
/// that cannot be opened, 1. 0 on success.
int open_store(const char* cmd, const char* url, bool existing, sprov_trace_store** out) {
  if (url && !is_store_url(url))
    return usage_error(cmd, std::string("--store '") + url +
                                "' is not a trace store URL (sqlite:PATH, postgresql://... or postgres://...)");
  if (url && existing && strncmp(url, "sqlite:", 7) == 0 && url[7] != '\0' && strncmp(url + 7, "//", 2) != 0) {
    struct stat st;
    if (stat(url + 7, &st) != 0)
      return usage_error(cmd, std::string("--store '") + url + "': " + (url + 7) + ": " + strerror(errno));
  }
  if (sprov_trace_store_open(url, out) != 0) {
    if (url && sprov_last_error() == SPROV_ERR_INVALID_ARG) return usage_error(cmd, sprov_last_error_message());
    LibStr def;
    std::string shown = url ? url : "";
    if (!url && sprov_trace_store_default_url(&def.p, &def.len) == 0) shown = def.p;
    return lib_fail(cmd, "trace store '" + shown + "'");
  }
  return 0;
}

struct StoreHandle {
  sprov_trace_store* s = nullptr;
  ~StoreHandle() { sprov_trace_store_free(s); }
};
struct ContextHandle {
  sprov_context* c = nullptr;
  ~ContextHandle() { sprov_context_free(c); }
};

/// A trace id (UUID 8-4-4-4-12 hex; upper-case is taken as lower-case) into *id.
bool parse_trace_id(const std::string& s, std::string* id) {
  if (s.size() != SPROV_TRACE_ID_STRLEN - 1) return false;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (c >= 'A' && c <= 'F') {
      c = static_cast<char>(c - 'A' + 'a');
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
    out.push_back(c);
  }
  *id = out;
  return true;
}

/// A decimal integer in [lo, hi].
bool parse_range(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t v = 0;
  if (!parse_uint(s, &v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/// A finite decimal number in [lo, hi].
bool parse_real(const char* s, double lo, double hi, double* out) {
  if (!s || !*s) return false;
  errno = 0;
  char* end = nullptr;
  const double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/// "" when `path` is a readable file, else why not.
std::string unreadable_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return strerror(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (access(path.c_str(), R_OK) != 0) return strerror(errno);
  return "";
}

/// "" when `path` is a directory, else why not.
std::string not_a_directory(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  return "";
}

/// The first of `names` given more than once, as a usage error; 0 when none.
int once(const char* cmd, const Args& a, const std::vector<std::string>& names) {
  const std::string r = a.repeated(names);
  return r.empty() ? 0 : usage_error(cmd, "option --" + r + " given twice");
}

std::string read_small_file(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0 && out.size() < (16u << 20)) out.append(buf, n);
  fclose(f);
  return out;
}

std::string fmt_pct(double v) {
  char b[32];
  snprintf(b, sizeof b, "%.1f", v);
  return b;
}

/// The exit status of a child as text: "exit status N" or "signal N (NAME)".
std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return "killed by signal " + std::to_string(WTERMSIG(status)) + (name ? std::string(" (") + name + ")" : "");
  }
  return "status " + std::to_string(status);
}

/// The index of a signed bundle's envelope in the transparency log: its dsse.json in the bundle
/// store, found in the log. -1 when it cannot be told.
int64_t log_entry_of(const std::string& bundle_store, const std::string& digest, const char* log_dir) {
  sprov_bundle_store* bs = nullptr;
  if (bundle_store.empty() || sprov_bundle_store_open(bundle_store.c_str(), 0, &bs) != 0) return -1;
  LibStr path;
  std::string env;
  if (sprov_bundle_store_sidecar_path(bs, digest.c_str(), "dsse.json", &path.p, &path.len) == 0)
    env = read_small_file(path.p);
  sprov_bundle_store_free(bs);
  if (env.empty()) return -1;
  sprov_tlog* log = nullptr;
  if (sprov_tlog_open(log_dir, &log) != 0) return -1;
  uint64_t index = 0;
  const int rc = sprov_tlog_find(log, env.data(), env.size(), &index);
  sprov_tlog_free(log);
  return rc == 0 ? static_cast<int64_t>(index) : -1;
}

// ---------------------------------------------------------- trace-capture

constexpr const char* kCaptureHelp =
    "usage: stackprov trace-capture -p PID [options]\n"
    "       stackprov trace-capture --core FILE [--exe PATH] [options]\n"
    "       stackprov trace-capture --minidump FILE [--symbol-path DIRS] [options]\n"
    "       stackprov trace-capture --raw STATE.json|DIR [options]\n"
    "       stackprov trace-capture [--delay MS] [options] -- CMD [ARGS...]\n"
    "options: [--store URL] [--bundle] [--bundle-store DIR] [--sign KEY --log DIR [--log-key KEY]]\n"
    "         [--max-frames N] [--python auto|off] [--with-btf]\n"
    "\n"
    "what to capture (exactly one):\n"
    "  -p, --pid PID      the live process PID (ptrace: PTRACE_SEIZE + PTRACE_INTERRUPT, detached\n"
    "                     before returning: stopped only for the capture). Needs the right to\n"
    "                     ptrace it: the same user (and, on kernels with Yama,\n"
    "                     kernel.yama.ptrace_scope <= 1 for a non-child), or CAP_SYS_PTRACE\n"
    "  --core FILE        the ELF core file FILE\n"
    "  --exe PATH         with --core: the main program's file (default: its path in the core)\n"
    "  --minidump FILE    the Windows minidump FILE (as 'stack --minidump'; modules are keyed by\n"
    "                     PDB GUID+age, else by their code id: doc/windows.md)\n"
    "  --symbol-path DIRS with --minidump: ':'-separated directories of module files and PDBs\n"
    "                     (NAME.pdb/KEY/NAME.pdb), as for 'stack --minidump'\n"
    "  --raw PATH         raw machine state (doc/raw-state.md): one JSON document, or a directory of\n"
    "                     them (one thread each), as 'stack --raw'; Mach-O modules are keyed by\n"
    "                     their UUID\n"
    "  -- CMD [ARGS...]   runs CMD (found in PATH as the shell would; stdin, stdout and stderr\n"
    "                     inherited), waits --delay MS for it to reach a steady state, captures\n"
    "                     it, then waits for CMD to exit on its own and reports its exit status\n"
    "                     on stderr. If CMD cannot be run (exec fails) or exits before the\n"
    "                     capture, that is said on stderr and the exit status is 1. When the\n"
    "                     capture fails, CMD is still waited for.\n"
    "  --delay MS         with -- CMD: milliseconds between starting CMD and the capture, 0 to\n"
    "                     600000 (default 500)\n"
    "\n"
    "options:\n"
    "  --store URL        the trace store: sqlite:PATH (created if missing) or postgresql://...\n"
    "                     (postgres://... too; a libpq URI). Default: $STACKPROV_STORE when it\n"
    "                     is such a URL, else sqlite:$XDG_DATA_HOME/stackprov/traces.db\n"
    "                     ($XDG_DATA_HOME defaults to ~/.local/share)\n"
    "  --bundle           also build one symbol bundle of every module the trace's frames touch\n"
    "                     (doc/bundles.md), store it in the trace store and in the bundle store,\n"
    "                     and record it as the trace's symbol bundle\n"
    "  --bundle-store DIR the bundle store: with --bundle the bundle is also written there (the\n"
    "                     store is created if missing); the \"bundle\" resolver reads it when the\n"
    "                     frames are named. Without --bundle, DIR must exist. Default:\n"
    "                     $STACKPROV_STORE when it is a directory (not a store URL), else\n"
    "                     $XDG_DATA_HOME/stackprov/store, else ~/.local/share/stackprov/store;\n"
    "                     without --bundle, a default store that does not exist is not used\n"
    "  --sign KEY         with --bundle: sign the bundle with the P-256 private key KEY (PEM;\n"
    "                     'stackprov keygen') as a DSSE envelope, append the envelope to the\n"
    "                     transparency log --log DIR ('stackprov log init') and store envelope,\n"
    "                     inclusion proof and checkpoint with the bundle. Requires --bundle and\n"
    "                     --log\n"
    "  --log DIR          with --sign: the transparency log directory\n"
    "  --log-key KEY      with --sign: the key that signs the log's new checkpoint (default: the\n"
    "                     --sign key)\n"
    "  --max-frames N     at most N frames per thread, 1 to 65536 (default 256)\n"
    "  --python auto|off  with -p, --core or -- CMD: read CPython 3.11's frames too (default auto)\n"
    "                     and store them in the captured data; each thread's Python frames are\n"
    "                     trace frames of unwind method 'runtime' and resolver 'python', right\n"
    "                     before the _PyEval_EvalFrameDefault activation that runs them, as 'stack'\n"
    "                     shows them (doc/runtime-frames.md \"Traces\")\n"
    "  --with-btf         with -p PID or -- CMD: also store each thread's kernel stack as its own\n"
    "                     segment, read from /proc/PID/task/TID/stack before the capture attaches\n"
    "                     (as 'stack --kernel': names and offsets, root only), each frame with its\n"
    "                     C prototype from /sys/kernel/btf/vmlinux, with the running kernel's\n"
    "                     build-id and the sha256 of that BTF file (doc/traces.md \"Kernel\n"
    "                     segments\"). Without BTF, without root, or for a thread whose kernel\n"
    "                     stack cannot be read, a warning says why and no kernel segment is\n"
    "                     stored for it; the rest of the trace is as without --with-btf\n"
    "  -h, --help         this text\n"
    "\n"
    "Captures every thread of a process -- registers, stack copy, module list with build-ids --\n"
    "unwinds and resolves each thread, and stores the result as one trace in a trace store\n"
    "(doc/traces.md): the captured data (gzip, content-addressed) and every frame with how it\n"
    "was found (unwind method) and resolved (resolver, source, bundle). The trace is stored\n"
    "whole or not at all. JIT code named by the process's perf map (/tmp/perf-PID.map) gives\n"
    "frames of resolver perfmap and unwind method METHOD+jit; the map entries those frames use\n"
    "are kept in the captured data, so trace-resolve and trace-replay name them without the map.\n"
    "\n"
    "Prints the new trace's id (one line) on stdout, and a summary on stderr:\n"
    "  stackprov trace-capture: trace ID: T threads, F frames, bundle sha256:HEX (signed, log entry N)\n"
    "(the bundle with --bundle, \"signed\" with --sign). Live threads are named from\n"
    "/proc/PID/task/TID/comm.\n"
    "\n"
    "Non-fatal findings (a thread that exited during the capture, a module without a file for\n"
    "the bundle) go to stderr as 'stackprov: warning: ...'.\n"
    "\n"
    "Exit status: 0 the trace was stored (with -- CMD, also when CMD exits non-zero: stderr gives\n"
    "its status); 1 the capture, the store or the bundle failed, CMD could not be run or exited\n"
    "before the capture; 2 bad options or values (one line names the value).\n";

int cmd_trace_capture(int argc, char** argv) {
  const char* cmd = "trace-capture";
  Args a(argc, argv,
         {"pid", "core", "exe", "minidump", "symbol-path", "raw", "delay", "store", "bundle-store", "sign", "log",
          "log-key", "max-frames", "python"},
         {"bundle", "with-btf"}, {{"p", "pid"}});
  if (a.help) {
    fputs(kCaptureHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (int rc = once(cmd, a,
                    {"pid", "core", "exe", "minidump", "symbol-path", "raw", "delay", "store", "bundle-store", "sign",
                     "log", "log-key", "max-frames", "python"}))
    return rc;
  const std::string python = a.has("python") ? a.get("python") : "auto";
  if (python != "auto" && python != "off")
    return usage_error(cmd, "invalid --python value '" + python + "' (expected auto or off)");
  std::vector<std::string> command;
  if (a.dashdash >= 0) {
    if (a.dashdash > 0) return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
    command.assign(a.pos.begin(), a.pos.end());
    if (command.empty()) return usage_error(cmd, "'--' must be followed by a command to run");
    if (command[0].empty()) return usage_error(cmd, "the command after '--' is an empty string");
  } else if (!a.pos.empty()) {
    return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
  }
  const int modes = a.has("pid") + a.has("core") + a.has("minidump") + a.has("raw") + !command.empty();
  if (modes == 0) return usage_error(cmd, "give -p PID, --core FILE, --minidump FILE, --raw PATH or -- CMD [ARGS...]");
  if (modes > 1) return usage_error(cmd, "give only one of -p PID, --core FILE, --minidump FILE, --raw PATH and -- CMD");
  if (a.has("symbol-path") && !a.has("minidump"))
    return usage_error(cmd, std::string("--symbol-path '") + a.get("symbol-path") + "' is only valid with --minidump");
  if (a.has("raw") && !*a.get("raw")) return usage_error(cmd, "--raw needs a file or directory name");
  uint64_t pid = 0, max_frames = 0, delay_ms = 500;
  if (a.has("pid") && !parse_range(a.get("pid"), 1, INT_MAX, &pid))
    return usage_error(cmd, std::string("invalid --pid value '") + a.get("pid") + "' (expected a process id, 1 to 2147483647)");
  if (a.has("max-frames") && !parse_range(a.get("max-frames"), 1, 65536, &max_frames))
    return usage_error(cmd, std::string("invalid --max-frames value '") + a.get("max-frames") +
                                "' (expected an integer from 1 to 65536)");
  if (a.has("delay") && command.empty())
    return usage_error(cmd, std::string("--delay '") + a.get("delay") + "' is only valid with -- CMD");
  if (a.has("delay") && !parse_range(a.get("delay"), 0, 600000, &delay_ms))
    return usage_error(cmd, std::string("invalid --delay value '") + a.get("delay") +
                                "' (expected milliseconds, 0 to 600000)");
  if (a.has("exe") && !a.has("core")) return usage_error(cmd, std::string("--exe '") + a.get("exe") + "' is only valid with --core");
  if (a.has("with-btf") && !a.has("pid") && command.empty())
    return usage_error(cmd, "--with-btf is only valid with -p PID or -- CMD (a live process's kernel stacks)");
  for (const char* opt : {"core", "exe", "minidump"}) {
    if (!a.has(opt)) continue;
    if (std::string why = unreadable_file(a.get(opt)); !why.empty())
      return usage_error(cmd, std::string("--") + opt + " '" + a.get(opt) + "': " + why);
  }
  const bool bundle = a.has("bundle");
  if (a.has("sign") && !bundle) return usage_error(cmd, std::string("--sign '") + a.get("sign") + "' needs --bundle (only bundles are signed)");
  if (a.has("sign") && !a.has("log"))
    return usage_error(cmd, std::string("--sign '") + a.get("sign") + "' needs --log DIR (the transparency log)");
  if (!a.has("sign") && a.has("log")) return usage_error(cmd, std::string("--log '") + a.get("log") + "' is only valid with --sign");
  if (!a.has("sign") && a.has("log-key"))
    return usage_error(cmd, std::string("--log-key '") + a.get("log-key") + "' is only valid with --sign");
  for (const char* opt : {"sign", "log-key"}) {
    if (!a.has(opt)) continue;
    if (std::string why = unreadable_file(a.get(opt)); !why.empty())
      return usage_error(cmd, std::string("--") + opt + " '" + a.get(opt) + "': " + why);
  }
  if (a.has("log"))
    if (std::string why = not_a_directory(a.get("log")); !why.empty())
      return usage_error(cmd, std::string("--log '") + a.get("log") + "': " + why);
  if (a.has("bundle-store") && !*a.get("bundle-store")) return usage_error(cmd, "--bundle-store needs a directory");
  if (a.has("bundle-store") && !bundle)  // only read: it must exist
    if (std::string why = not_a_directory(a.get("bundle-store")); !why.empty())
      return usage_error(cmd, std::string("--bundle-store '") + a.get("bundle-store") + "': " + why);
  if (a.has("sign")) {  // keys that cannot sign: fail before CMD runs and before anything is stored
    sprov_bundle_sign_opts so{};
    so.sz = sizeof so;
    so.key_path = a.get("sign");
    so.log_dir = a.get("log");
    so.log_key = a.get("log-key");
    if (sprov_bundle_sign_check(&so) != 0) return lib_fail(cmd, "--sign");
  }

  StoreHandle store;
  if (int rc = open_store(cmd, a.get("store"), false, &store.s)) return rc;
  ContextHandle ctx;
  std::string bundle_store;
  // A symbol path is also where PDBs are looked for (DIR/NAME.pdb, DIR/NAME.pdb/KEY/NAME.pdb), after
  // the default debug directory, as for 'stack --minidump'.
  const std::string debug_dirs = a.has("symbol-path") ? std::string("/usr/lib/debug:") + a.get("symbol-path") : "";
  if (int rc = make_context(cmd, a.get("bundle-store"), bundle, &ctx.c, &bundle_store,
                            a.has("symbol-path") ? debug_dirs.c_str() : nullptr))
    return rc;

  // -- CMD: start it; exec failures come back through a close-on-exec pipe.
  pid_t child = -1;
  std::string shown;
  auto reap = [&](int* status) {
    while (waitpid(child, status, 0) < 0 && errno == EINTR) {
    }
  };
  if (!command.empty()) {
    shown = command[0];
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) return fail(cmd, std::string("pipe: ") + strerror(errno));
    std::vector<char*> cargv;
    for (auto& s : command) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    fflush(stdout);
    fflush(stderr);
    child = fork();
    if (child < 0) {
      close(ep[0]);
      close(ep[1]);
      return fail(cmd, std::string("fork: ") + strerror(errno));
    }
    if (child == 0) {
      close(ep[0]);
      execvp(cargv[0], cargv.data());
      const int e = errno;
      ssize_t w = write(ep[1], &e, sizeof e);
      (void)w;
      _exit(127);
    }
    close(ep[1]);
    int e = 0;
    ssize_t n;
    while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(ep[0]);
    if (n == static_cast<ssize_t>(sizeof e)) {
      int status = 0;
      reap(&status);
      return fail(cmd, "cannot run '" + shown + "': " + strerror(e));
    }
    // Wait for the steady state, noticing an early exit.
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      int status = 0;
      if (waitpid(child, &status, WNOHANG) == child)
        return fail(cmd, "'" + shown + "' exited before the capture (" + describe_status(status) + ")");
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      const int64_t elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      if (elapsed >= static_cast<int64_t>(delay_ms)) break;
      const int64_t step = std::min<int64_t>(20, static_cast<int64_t>(delay_ms) - elapsed);
      struct timespec ts = {0, static_cast<long>(step) * 1000000L};
      nanosleep(&ts, nullptr);
    }
    pid = static_cast<uint64_t>(child);
  }
  // After a failure with -- CMD, CMD is still waited for; its status is reported.
  auto finish = [&](int code) {
    if (child > 0) {
      int status = 0;
      reap(&status);
      fprintf(stderr, "stackprov %s: '%s' exited (%s)\n", cmd, shown.c_str(), describe_status(status).c_str());
    }
    return code;
  };

  sprov_process_opts popts{};
  popts.sz = sizeof popts;
  popts.exe = a.get("exe");
  if (a.has("with-btf")) {
    // Kernel segments need the kernel's BTF: without it (no file, a build without libbpf) the
    // trace is captured as without --with-btf, saying why.
    sprov_kernel_btf* btf = nullptr;
    if (sprov_kernel_btf_open(nullptr, &btf) == 0) {
      sprov_kernel_btf_free(btf);
      popts.flags |= SPROV_PROCESS_KERNEL_STACKS | SPROV_PROCESS_KERNEL_BTF;
    } else {
      fprintf(stderr, "stackprov %s: --with-btf: no kernel segment stored: the kernel's BTF: %s\n", cmd,
              sprov_last_error_message());
    }
  }
  // Python frames from a live process or a core (a minidump's or raw state's memory holds none we read).
  if (python == "auto" && !a.has("minidump") && !a.has("raw")) popts.flags |= SPROV_PROCESS_RUNTIME_FRAMES;
  sprov_process* proc = nullptr;
  if (a.has("core")) {
    if (sprov_process_open_core(ctx.c, a.get("core"), &popts, &proc) != 0)
      return lib_fail(cmd, std::string("cannot read core '") + a.get("core") + "'");
  } else if (a.has("minidump")) {
    popts.symbol_path = a.get("symbol-path");
    if (sprov_process_open_minidump(ctx.c, a.get("minidump"), &popts, &proc) != 0)
      return lib_fail(cmd, std::string("cannot read minidump '") + a.get("minidump") + "'");
  } else if (a.has("raw")) {
    if (sprov_process_open_raw(ctx.c, a.get("raw"), &popts, &proc) != 0)
      return lib_fail(cmd, std::string("cannot read raw state '") + a.get("raw") + "'");
  } else if (sprov_process_capture(ctx.c, static_cast<int64_t>(pid), &popts, &proc) != 0) {
    int status = 0;
    if (child > 0 && waitpid(child, &status, WNOHANG) == child)
      return fail(cmd, "'" + shown + "' exited before the capture (" + describe_status(status) + ")");
    const std::string what = child > 0 ? "cannot capture '" + shown + "' (pid " + std::to_string(pid) + ")"
                                       : "cannot capture pid " + std::to_string(pid);
    return finish(lib_fail(cmd, what));
  }
  stackprov_cli::print_warnings(stderr, sprov_process_warnings(proc));

  sprov_trace_capture_opts co{};
  co.sz = sizeof co;
  co.flags = bundle ? SPROV_TRACE_BUNDLE : 0;
  co.max_frames = static_cast<uint32_t>(max_frames);
  co.sign_key = a.get("sign");
  co.log_dir = a.get("log");
  co.log_key = a.get("log-key");
  char id[SPROV_TRACE_ID_STRLEN] = {};
  const int rc = sprov_trace_capture(ctx.c, proc, store.s, &co, id, sizeof id);
  sprov_process_free(proc);
  if (rc != 0) {
    const std::string what = a.has("core")       ? std::string("trace of core '") + a.get("core") + "'"
                             : a.has("minidump") ? std::string("trace of minidump '") + a.get("minidump") + "'"
                             : a.has("raw")      ? std::string("trace of raw state '") + a.get("raw") + "'"
                                                 : "trace of pid " + std::to_string(pid);
    return finish(lib_fail(cmd, what + " into '" + sprov_trace_store_url(store.s) + "'"));
  }
  printf("%s\n", id);
  fflush(stdout);

  // The summary, from the stored trace.
  LibStr ev;
  Json j;
  std::string summary = std::string("trace ") + id;
  if (sprov_trace_get_json(store.s, id, &ev.p, &ev.len) == 0 && parse_library_json(cmd, "trace", ev.view(), &j)) {
    summary += ": " + std::to_string(j.array("threads").size()) + " threads, " + std::to_string(j.array("frames").size()) +
               " frames";
    const std::string b = j.str("symbol_bundle_ref");
    if (!b.empty()) {
      summary += ", bundle " + b;
      if (a.has("sign")) {
        const int64_t idx = log_entry_of(bundle_store, b, a.get("log"));
        summary += idx >= 0 ? " (signed, log entry " + std::to_string(idx) + ")" : " (signed)";
      }
    }
  }
  fprintf(stderr, "stackprov %s: %s\n", cmd, summary.c_str());
  return finish(kExitOk);
}

// ---------------------------------------------------------- trace-resolve

constexpr const char* kResolveHelp =
    "usage: stackprov trace-resolve --trace ID [--bundle sha256:HEX|FILE]... [--offline] [--store URL]\n"
    "                               [--json]\n"
    "\n"
    "options:\n"
    "  --trace ID         the trace (its UUID, as trace-capture printed it)\n"
    "  --bundle B         also use bundle B (repeatable): sha256:HEX, a bundle of the trace store\n"
    "                     or, failing that, of the default bundle store ($STACKPROV_STORE when it\n"
    "                     is a directory, else $XDG_DATA_HOME/stackprov/store); or a bundle FILE,\n"
    "                     which is also added to the trace store\n"
    "  --offline          use bundles only: no module file, debug file or network\n"
    "  --store URL        the trace store (sqlite:PATH of an existing file, postgresql://...,\n"
    "                     postgres://...); default $STACKPROV_STORE when it is such a URL, else\n"
    "                     sqlite:$XDG_DATA_HOME/stackprov/traces.db\n"
    "  --json             print the library's JSON report instead: {\"trace_id\",\"frames\",\"named\",\n"
    "                     \"with_lines\",\"offline\",\"symbol_coverage_pct\",\"resolvers\":{name:count},\n"
    "                     \"bundles\":[\"sha256:...\"]}\n"
    "  -h, --help         this text\n"
    "\n"
    "Resolves a stored trace again from its captured data: every thread is unwound and every\n"
    "frame named anew, with the trace's own symbol bundle, the --bundle bundles and every bundle\n"
    "of the trace store that holds one of the trace's modules; the trace's frames are replaced\n"
    "in one transaction. Prints one line:\n"
    "  trace ID: F frames, N named, L with file:line, C% coverage (resolvers: bundle=.., dwarf=..)\n"
    "(C = N / F; a resolver's count is the frames it named, \"none\" the unnamed ones).\n"
    "\n"
    "Exit status: 0 resolved and stored; 1 the trace, a bundle or the store could not be read or\n"
    "written; 2 bad options or values (one line names the value).\n";

int cmd_trace_resolve(int argc, char** argv) {
  const char* cmd = "trace-resolve";
  Args a(argc, argv, {"trace", "bundle", "store"}, {"offline", "json"});
  if (a.help) {
    fputs(kResolveHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (int rc = once(cmd, a, {"trace", "store"})) return rc;
  if (!a.pos.empty()) return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
  if (!a.has("trace")) return usage_error(cmd, "--trace ID is required");
  std::string id;
  if (!parse_trace_id(a.get("trace"), &id))
    return usage_error(cmd, std::string("invalid --trace value '") + a.get("trace") +
                                "' (expected a trace id: UUID, 8-4-4-4-12 hex digits)");
  const std::vector<std::string> bundles = a.all("bundle");
  for (const auto& b : bundles) {
    if (b.rfind("sha256:", 0) == 0) {
      if (!stackprov_cli::is_sha256_digest(b))
        return usage_error(cmd, "invalid --bundle value '" + b + "' (expected sha256:<64 lower-case hex> or a file)");
    } else if (std::string why = unreadable_file(b); !why.empty()) {
      return usage_error(cmd, "--bundle '" + b + "': " + why + " (expected sha256:<64 lower-case hex> or a file)");
    }
  }
  StoreHandle store;
  if (int rc = open_store(cmd, a.get("store"), true, &store.s)) return rc;
  ContextHandle ctx;
  if (int rc = make_context(cmd, nullptr, false, &ctx.c, nullptr)) return rc;
  std::vector<const char*> bp;
  for (const auto& b : bundles) bp.push_back(b.c_str());
  sprov_trace_resolve_opts ro{};
  ro.sz = sizeof ro;
  ro.flags = a.has("offline") ? SPROV_TRACE_OFFLINE : 0;
  ro.bundles = bp.empty() ? nullptr : bp.data();
  ro.bundle_count = bp.size();
  LibStr report;
  if (sprov_trace_resolve(ctx.c, store.s, id.c_str(), &ro, &report.p, &report.len) != 0)
    return lib_fail(cmd, "trace " + id);
  if (a.has("json")) {
    std::string_view v = report.view();
    fwrite(v.data(), 1, v.size(), stdout);
    if (v.empty() || v.back() != '\n') fputc('\n', stdout);
    return fflush(stdout) == 0 ? kExitOk : kExitFail;
  }
  Json j;
  if (!parse_library_json(cmd, "resolve report", report.view(), &j)) return kExitFail;
  std::string res;
  if (const Json* r = j.get("resolvers"); r && r->kind == Json::kObject)
    for (const auto& [name, count] : r->members) res += (res.empty() ? "" : ", ") + name + "=" + count.text;
  printf("trace %s: %s frames, %s named, %s with file:line, %s%% coverage (resolvers: %s)\n", id.c_str(),
         j.str("frames").c_str(), j.str("named").c_str(), j.str("with_lines").c_str(),
         fmt_pct(j.number("symbol_coverage_pct")).c_str(), res.empty() ? "none" : res.c_str());
  return fflush(stdout) == 0 ? kExitOk : kExitFail;
}

// ----------------------------------------------------------- trace-replay

constexpr const char* kReplayHelp =
    "usage: stackprov trace-replay --trace ID [--seeds N] [--first-seed S] [--junit FILE] [--json]\n"
    "                              [--store URL] [--key PUB]... [--trusted-root FILE]\n"
    "                              [--min-coverage PCT] [--min-success RATIO]\n"
    "\n"
    "options:\n"
    "  --trace ID           the trace (its UUID)\n"
    "  --seeds N            replays, 1 to 1000 (default 5)\n"
    "  --first-seed S       seeds S .. S+N-1, S from 1 to 9223372036854775807 (default 1)\n"
    "  --junit FILE         also write the report as JUnit XML to FILE (one testcase per check\n"
    "                       and per seed); FILE's directory must exist\n"
    "  --json               print the JSON report (figures, checks, seeds with their\n"
    "                       mismatches) instead of the summary\n"
    "  --store URL          the trace store (sqlite:PATH of an existing file, postgresql://...,\n"
    "                       postgres://...); default $STACKPROV_STORE when it is such a URL, else\n"
    "                       sqlite:$XDG_DATA_HOME/stackprov/traces.db\n"
    "  --key PUB            a public key (PEM/DER, or a certificate) trusted for the bundles'\n"
    "                       DSSE envelopes (repeatable); without one the dsse check fails\n"
    "  --trusted-root FILE  the transparency log's pinned trusted_root.json, for the inclusion\n"
    "                       proofs; without it the inclusion check fails\n"
    "  --min-coverage PCT   gate: symbol coverage at least PCT percent, 0 to 100 (default 90)\n"
    "  --min-success RATIO  gate: replay success ratio at least RATIO, 0 to 1 (default 0.95)\n"
    "  -h, --help           this text\n"
    "\n"
    "Replays a stored trace N times (doc/traces.md \"Replay\"): each seed unwinds and resolves the\n"
    "captured data again under a perturbation drawn from the seed and compares the result frame\n"
    "by frame with the stored resolution; every replay is recorded in the store (replay.result).\n"
    "Then the trace's bundles are verified offline -- DSSE signatures with the --key keys,\n"
    "inclusion proofs against the --trusted-root log keys -- and every module's identity against\n"
    "its bundle's, and the gate is evaluated. A trace's kernel segments (trace-capture\n"
    "--with-btf) are re-derived where the running kernel is the trace's (kallsyms, and BTF when\n"
    "it is the captured file), else compared as recorded: each seed says which (JSON \"kernel\"),\n"
    "and platform-id fails when the trace's kernel build-id is not the running kernel's.\n"
    "A trace's CPython frames (trace-capture --python auto) are derived again from the\n"
    "interpreter data the capture kept and compared as recorded: each seed counts them as a\n"
    "segment of their own (JSON \"python\": frames, identical).\n"
    "Prints the one-line summary\n"
    "  ... % coverage, ... % success ...: PASS|FAIL <checks>\n"
    "on stdout (or the JSON report with --json).\n"
    "\n"
    "Exit status (the gate: the first failed check in this order decides):\n"
    "  0 passed; 3 symbol coverage below --min-coverage; 4 replay success below --min-success;\n"
    "  5 a bundle's DSSE envelope missing or not verified; 6 a bundle's inclusion proof missing\n"
    "  or not verified; 7 a module's identity differs from its bundle's, or no bundle holds it;\n"
    "  1 error (the trace, the store or FILE could not be read or written); 2 bad options or\n"
    "  values (one line names the value). On a failed gate one line goes to stderr:\n"
    "  'stackprov trace-replay: gate FAILED: <check>: <why>'.\n";

/// "<check>: <why>" of a failed gate: the JSON report's first failed check (its name and
/// detail), else what follows "FAIL" in the summary.
std::string gate_failure(std::string_view json, const std::string& summary) {
  Json j;
  if (stackprov_cli::parse_json(json, &j)) {
    for (const Json& c : j.array("checks")) {
      const Json* passed = c.get("passed");
      if (!passed || passed->kind != Json::kBool || passed->boolean) continue;
      const std::string name = c.str("name"), why = c.str("detail");
      if (!name.empty()) return why.empty() ? name : name + ": " + why;
    }
  }
  const size_t f = summary.find("FAIL");
  std::string s = f == std::string::npos ? summary : summary.substr(f + 4);
  while (!s.empty() && (s.front() == ' ' || s.front() == ':')) s.erase(0, 1);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int cmd_trace_replay(int argc, char** argv) {
  const char* cmd = "trace-replay";
  Args a(argc, argv, {"trace", "seeds", "first-seed", "junit", "store", "key", "trusted-root", "min-coverage", "min-success"},
         {"json"});
  if (a.help) {
    fputs(kReplayHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (int rc = once(cmd, a, {"trace", "seeds", "first-seed", "junit", "store", "trusted-root", "min-coverage", "min-success"}))
    return rc;
  if (!a.pos.empty()) return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
  if (!a.has("trace")) return usage_error(cmd, "--trace ID is required");
  std::string id;
  if (!parse_trace_id(a.get("trace"), &id))
    return usage_error(cmd, std::string("invalid --trace value '") + a.get("trace") +
                                "' (expected a trace id: UUID, 8-4-4-4-12 hex digits)");
  uint64_t seeds = 5, first = 1;
  if (a.has("seeds") && !parse_range(a.get("seeds"), 1, 1000, &seeds))
    return usage_error(cmd, std::string("invalid --seeds value '") + a.get("seeds") + "' (expected an integer from 1 to 1000)");
  constexpr uint64_t kMaxSeed = INT64_MAX;
  if (a.has("first-seed") && !parse_range(a.get("first-seed"), 1, kMaxSeed, &first))
    return usage_error(cmd, std::string("invalid --first-seed value '") + a.get("first-seed") +
                                "' (expected an integer from 1 to 9223372036854775807)");
  if (first > kMaxSeed - (seeds - 1))
    return usage_error(cmd, std::string("--first-seed '") + a.get("first-seed") + "' with --seeds " + std::to_string(seeds) +
                                " goes past the last seed 9223372036854775807");
  double min_cov = -1, min_succ = -1;
  if (a.has("min-coverage") && !parse_real(a.get("min-coverage"), 0, 100, &min_cov))
    return usage_error(cmd, std::string("invalid --min-coverage value '") + a.get("min-coverage") +
                                "' (expected a percentage from 0 to 100)");
  if (a.has("min-success") && !parse_real(a.get("min-success"), 0, 1, &min_succ))
    return usage_error(cmd, std::string("invalid --min-success value '") + a.get("min-success") +
                                "' (expected a ratio from 0 to 1)");
  const std::vector<std::string> keys = a.all("key");
  for (const auto& k : keys)
    if (std::string why = unreadable_file(k); !why.empty()) return usage_error(cmd, "--key '" + k + "': " + why);
  if (a.has("trusted-root"))
    if (std::string why = unreadable_file(a.get("trusted-root")); !why.empty())
      return usage_error(cmd, std::string("--trusted-root '") + a.get("trusted-root") + "': " + why);
  std::string junit = a.has("junit") ? a.get("junit") : "";
  if (a.has("junit")) {
    if (junit.empty()) return usage_error(cmd, "--junit needs a file name");
    const size_t slash = junit.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : junit.substr(0, slash);
    if (std::string why = not_a_directory(dir); !why.empty())
      return usage_error(cmd, "--junit '" + junit + "': directory '" + dir + "': " + why);
    struct stat st;
    if (stat(junit.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return usage_error(cmd, "--junit '" + junit + "' is a directory");
  }

  StoreHandle store;
  if (int rc = open_store(cmd, a.get("store"), true, &store.s)) return rc;
  ContextHandle ctx;
  if (int rc = make_context(cmd, nullptr, false, &ctx.c, nullptr)) return rc;
  std::vector<const char*> kp;
  for (const auto& k : keys) kp.push_back(k.c_str());
  sprov_trace_replay_opts ro{};
  ro.sz = sizeof ro;
  ro.seeds = static_cast<uint32_t>(seeds);
  ro.first_seed = first;
  ro.min_coverage_pct = min_cov;
  ro.min_success_ratio = min_succ;
  ro.key_paths = kp.empty() ? nullptr : kp.data();
  ro.key_count = kp.size();
  ro.trusted_root_path = a.get("trusted-root");
  sprov_replay_report* rep = nullptr;
  if (sprov_trace_replay(ctx.c, store.s, id.c_str(), &ro, &rep) != 0) return lib_fail(cmd, "trace " + id);
  struct ReportHandle {
    sprov_replay_report* r;
    ~ReportHandle() { sprov_replay_report_free(r); }
  } rh{rep};
  LibStr summary, json;
  if (sprov_replay_report_format(rep, SPROV_REPORT_SUMMARY, &summary.p, &summary.len) != 0 ||
      sprov_replay_report_format(rep, SPROV_REPORT_JSON, &json.p, &json.len) != 0)
    return lib_fail(cmd, "report");
  if (!junit.empty()) {
    LibStr xml;
    if (sprov_replay_report_format(rep, SPROV_REPORT_JUNIT, &xml.p, &xml.len) != 0) return lib_fail(cmd, "JUnit report");
    if (std::string err = write_file_atomic(junit, xml.view()); !err.empty()) return fail(cmd, err);
  }
  std::string_view out = a.has("json") ? json.view() : summary.view();
  fwrite(out.data(), 1, out.size(), stdout);
  if (out.empty() || out.back() != '\n') fputc('\n', stdout);
  if (fflush(stdout) != 0) return kExitFail;
  const int code = sprov_replay_report_exit_code(rep);
  if (code != SPROV_GATE_OK)
    fprintf(stderr, "stackprov %s: gate FAILED: %s\n", cmd, gate_failure(json.view(), std::string(summary.view())).c_str());
  return code;
}

// ------------------------------------------------------------- trace-list

constexpr const char* kListHelp =
    "usage: stackprov trace-list [--store URL] [--limit N] [--json]\n"
    "\n"
    "options:\n"
    "  --store URL   the trace store (sqlite:PATH of an existing file, postgresql://...,\n"
    "                postgres://...); default $STACKPROV_STORE when it is such a URL, else\n"
    "                sqlite:$XDG_DATA_HOME/stackprov/traces.db\n"
    "  --limit N     at most N traces, the oldest N; 0 to 1000000000 (default 0: all)\n"
    "  --json        one JSON array instead: [{\"trace_id\",\"platform\",\"arch\",\"captured_at\",\n"
    "                \"build_id\",\"frames\"}]\n"
    "  -h, --help    this text\n"
    "\n"
    "Lists the traces of a trace store, oldest capture first, one line each:\n"
    "  ID  CAPTURED_AT  PLATFORM/ARCH  FRAMES frames  build-id HEX\n"
    "(CAPTURED_AT in RFC 3339 UTC; HEX the main executable's build-id).\n"
    "\n"
    "Exit status: 0 listed (also when the store has no trace); 1 the store could not be read;\n"
    "2 bad options or values.\n";

int cmd_trace_list(int argc, char** argv) {
  const char* cmd = "trace-list";
  Args a(argc, argv, {"store", "limit"}, {"json"});
  if (a.help) {
    fputs(kListHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (int rc = once(cmd, a, {"store", "limit"})) return rc;
  if (!a.pos.empty()) return usage_error(cmd, "unexpected argument '" + a.pos[0] + "'");
  uint64_t limit = 0;
  if (a.has("limit") && !parse_range(a.get("limit"), 0, 1000000000, &limit))
    return usage_error(cmd, std::string("invalid --limit value '") + a.get("limit") +
                                "' (expected an integer from 0 to 1000000000)");
  StoreHandle store;
  if (int rc = open_store(cmd, a.get("store"), true, &store.s)) return rc;
  LibStr list;
  if (sprov_trace_list_json(store.s, static_cast<size_t>(limit), &list.p, &list.len) != 0)
    return lib_fail(cmd, std::string("trace store '") + sprov_trace_store_url(store.s) + "'");
  if (a.has("json")) {
    std::string_view v = list.view();
    fwrite(v.data(), 1, v.size(), stdout);
    if (v.empty() || v.back() != '\n') fputc('\n', stdout);
    return fflush(stdout) == 0 ? kExitOk : kExitFail;
  }
  Json j;
  if (!parse_library_json(cmd, "trace list", list.view(), &j)) return kExitFail;
  for (const Json& t : j.items) {
    printf("%s  %s  %s/%s  %s frames  build-id %s\n", t.str("trace_id").c_str(), t.str("captured_at").c_str(),
           t.str("platform").c_str(), t.str("arch").c_str(), t.str("frames").c_str(),
           t.str("build_id").empty() ? "-" : t.str("build_id").c_str());
  }
  return fflush(stdout) == 0 ? kExitOk : kExitFail;
}

// ------------------------------------------------------------- trace-show

constexpr const char* kShowHelp =
    "usage: stackprov trace-show ID [--store URL] [--json] [--no-tail-calls]\n"
    "\n"
    "options:\n"
    "  --store URL   the trace store (sqlite:PATH of an existing file, postgresql://...,\n"
    "                postgres://...); default $STACKPROV_STORE when it is such a URL, else\n"
    "                sqlite:$XDG_DATA_HOME/stackprov/traces.db\n"
    "  --json        the trace as one trace.capture event line (doc/traces.md \"Events\"), then\n"
    "                its replays as replay.result lines (every stored frame; an inferred\n"
    "                one has \"unwind\":\"tail_call+inferred\")\n"
    "  --no-tail-calls  without the inferred tail-call frames (text), as `stack --no-tail-calls`\n"
    "  -h, --help    this text\n"
    "\n"
    "Prints a stored trace: a header line, then per thread, as `stackprov stack` prints a thread\n"
    "(the library's one renderer)\n"
    "  TID n \"name\":\n"
    "  #k  0xIP symbol+0xOFF - module [unwind]\n"
    "      inlined F at file:line:column\n"
    "      file:line:column\n"
    "(k counts the thread's frames from 0, the innermost; IP is the address at capture -- a\n"
    "return address for caller frames; \"??\" an unknown symbol or module; +0xOFF is left out\n"
    "where the offset is unknown (\"symbol_offset\":null: named by a bundle, which carries no\n"
    "function starts, and no resolution from the files gave it); unwind how the frame was found\n"
    "(context, cfi_eh_frame, cfi_bundle, frame_pointer, ...; \"tail_call, inferred\": a frame a tail\n"
    "call left no trace of, inferred at capture from DWARF call sites, as `stack` shows it). The\n"
    "inlined lines list the functions inlined into the frame, innermost first, each at its own\n"
    "position; file:line:column is the physical function's position. What named each frame\n"
    "(resolver) is in --json. A trace captured with --with-btf shows each thread's kernel segment\n"
    "first, as `stack --kernel --with-btf` does: a \"kernel: system call N, user sp .. pc ..\" line,\n"
    "the kernel frames (#0.., address 0: /proc gives none; name+offset - [kernel.kallsyms] or\n"
    "[module] [kernel_stack], its BTF prototype below), then the user frames, the first marked\n"
    "kernel_user_boundary; --json has them in the event's \"kernel\" field. Then the trace's\n"
    "replays, oldest first.\n"
    "\n"
    "Exit status: 0 shown; 1 no such trace, or the store could not be read; 2 bad options or\n"
    "values (one line names the value).\n";

/// The text form of a trace.capture event (trace-show; also `stackprov demo`): a header, then the
/// threads through the library's one renderer (sprov_trace_render, as `stack` prints a thread).
bool print_trace_text(FILE* f, const Json& t, std::string_view event, bool tail_calls = true) {
  fprintf(f, "trace %s: %s/%s, captured %s, build-id %s\n", t.str("trace_id").c_str(), t.str("platform").c_str(),
          t.str("arch").c_str(), t.str("captured_at").c_str(), t.str("build_id").empty() ? "-" : t.str("build_id").c_str());
  const std::string bundle = t.str("symbol_bundle_ref");
  const std::string dsse = t.str("dsse_ref");
  if (!bundle.empty()) fprintf(f, "symbol bundle %s%s%s\n", bundle.c_str(), dsse.empty() ? "" : ", signed: ", dsse.c_str());
  LibStr text;
  const uint32_t flags = SPROV_RENDER_LINES | (tail_calls ? 0u : uint32_t{SPROV_RENDER_NO_INFERRED});
  if (sprov_trace_render(event.data(), event.size(), flags, &text.p, &text.len) != 0) return false;
  const std::string_view v = text.view();
  fwrite(v.data(), 1, v.size(), f);
  return true;
}

int cmd_trace_show(int argc, char** argv) {
  const char* cmd = "trace-show";
  Args a(argc, argv, {"store"}, {"json", "no-tail-calls"});
  if (a.help) {
    fputs(kShowHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return usage_error(cmd, a.error);
  if (int rc = once(cmd, a, {"store"})) return rc;
  if (a.pos.empty()) return usage_error(cmd, "give the trace's ID");
  if (a.pos.size() > 1) return usage_error(cmd, "unexpected argument '" + a.pos[1] + "'");
  std::string id;
  if (!parse_trace_id(a.pos[0], &id))
    return usage_error(cmd, "invalid trace id '" + a.pos[0] + "' (expected a UUID, 8-4-4-4-12 hex digits)");
  StoreHandle store;
  if (int rc = open_store(cmd, a.get("store"), true, &store.s)) return rc;
  LibStr ev, replays;
  if (sprov_trace_get_json(store.s, id.c_str(), &ev.p, &ev.len) != 0) return lib_fail(cmd, "trace " + id);
  if (sprov_trace_replays_json(store.s, id.c_str(), &replays.p, &replays.len) != 0)
    return lib_fail(cmd, "replays of trace " + id);
  if (a.has("json")) {
    std::string_view v = ev.view();
    fwrite(v.data(), 1, v.size(), stdout);
    if (v.empty() || v.back() != '\n') fputc('\n', stdout);
    v = replays.view();
    fwrite(v.data(), 1, v.size(), stdout);
    if (!v.empty() && v.back() != '\n') fputc('\n', stdout);
    return fflush(stdout) == 0 ? kExitOk : kExitFail;
  }
  Json t;
  if (!parse_library_json(cmd, "trace", ev.view(), &t)) return kExitFail;
  if (!print_trace_text(stdout, t, ev.view(), !a.has("no-tail-calls"))) return lib_fail(cmd, "trace " + id);
  std::string_view rest = replays.view();
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    Json r;
    if (line.empty() || !stackprov_cli::parse_json(line, &r)) continue;
    printf("replay %s seed %s: success %s, coverage %s%%, verify %s ms\n", r.str("replay_id").c_str(),
           r.str("seed").c_str(), r.str("replay_success_ratio").c_str(), r.str("symbol_coverage_pct").c_str(),
           r.str("verify_time_ms").c_str());
  }
  return fflush(stdout) == 0 ? kExitOk : kExitFail;
}

}  // namespace

STACKPROV_COMMAND("trace-capture", "capture a process, core or command into a trace store (frames with provenance)",
                  cmd_trace_capture);
STACKPROV_COMMAND("trace-resolve", "resolve a stored trace again from its captured data (bundles, offline)",
                  cmd_trace_resolve);
STACKPROV_COMMAND("trace-replay", "replay a stored trace under perturbations and evaluate the gate (JUnit)",
                  cmd_trace_replay);
STACKPROV_COMMAND("trace-list", "list the traces of a trace store", cmd_trace_list);
STACKPROV_COMMAND("trace-show", "print a stored trace's threads and frames, and its replays", cmd_trace_show);
