// SPDX-License-Identifier: Apache-2.0
// `stackprov stack`: eu-stack-style stacks of every thread of a live process or an ELF core file.
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "command.hpp"
#include "print.hpp"
#include "stackprov/stackprov.h"

namespace {

constexpr const char* kUsage =
    "usage: stackprov stack --pid PID [--store DIR] [--tid TID] [--max-frames N] [--json] [--no-lines]\n"
    "       stackprov stack --core FILE [--exe PATH] [--sysroot DIR] [--store DIR] [--tid TID]\n"
    "                       [--max-frames N] [--json] [--no-lines]\n"
    "       stackprov stack --core FILE --offline [--store DIR] [--tid TID] [--max-frames N] [--json]\n"
    "       (all forms also take --resolvers LIST)\n";

constexpr const char* kHelp =
    "\n"
    "Prints the call stack of every thread of a live process (--pid) or of an ELF core file\n"
    "(--core), one thread after the other, in eu-stack's layout:\n"
    "\n"
    "  PID 1234 - process\n"
    "  TID 1234:\n"
    "  #0  0x00007f3c1a2e5f16 __futex_abstimed_wait_common+0xc6 - /lib/libc.so.6 [context]\n"
    "  #1  0x000055d0c4e0a1b3 main+0x43 - /usr/bin/app [cfi_eh_frame]\n"
    "  stop: end_of_stack\n"
    "\n"
    "Frame 0 is the thread's pc; for the other frames pc is the return address, as eu-stack -p\n"
    "and gdb print it (symbols are looked up at pc-1). The method in brackets says how the\n"
    "frame was found (context, cfi_eh_frame, cfi_debug_frame, cfi_bundle, frame_pointer,\n"
    "signal, scan, ...); the stop line says why the walk ended (end_of_stack, max_frames,\n"
    "no_unwind_info, ...).\n"
    "\n"
    "Offline (--core FILE --offline): no module file is opened. The module list and every\n"
    "module's build-id and load address come from the core alone (NT_FILE and the core's copy\n"
    "of each module's first page); each module is unwound from the unwind rows of its symbol\n"
    "bundle, found by build-id in the store (method cfi_bundle; see 'stackprov bundle build').\n"
    "The vDSO is read from the core. A module without a bundle gets a warning; frames through\n"
    "it are found by the frame pointer when there is one, else the walk stops there\n"
    "(no_unwind_info). A bundle row that needs the full CFI interpreter (DWARF expressions,\n"
    "e.g. a signal trampoline) is not in the bundle: that step falls to the next rung too.\n"
    "A frame whose step met such a row is marked cfi_not_in_bundle (JSON: \"flags\").\n"
    "With --store but without --offline, module files are used when present and a missing\n"
    "file falls back to its bundle.\n"
    "\n"
    "A live capture attaches to every thread with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT),\n"
    "copies registers and stacks, and detaches before unwinding: the target is stopped only\n"
    "for the capture. It needs the right to ptrace the target (same user and\n"
    "kernel.yama.ptrace_scope <= 1 for a non-child, or CAP_SYS_PTRACE).\n"
    "\n"
    "options:\n"
    "  --pid PID         capture the live process PID\n"
    "  --core FILE       read the ELF core file FILE (e.g. from gcore or the kernel)\n"
    "  --tid TID         only the thread TID (default: every thread)\n"
    "  --exe PATH        with --core: the main program's file (default: its path in the core)\n"
    "  --sysroot DIR     with --core: look up every module file under DIR\n"
    "  --offline         with --core: use no module file, only the core and bundles (not with\n"
    "                    --exe)\n"
    "  --store DIR       the bundle store (with --offline the default is $STACKPROV_STORE, else\n"
    "                    $XDG_DATA_HOME/stackprov/store, else ~/.local/share/stackprov/store;\n"
    "                    without --offline and --store: no store). Without --offline: bundles\n"
    "                    stand in for module files that are missing, and name the frames of the\n"
    "                    modules they hold (before DWARF: doc/bundles.md \"Resolver policy\")\n"
    "  --max-frames N    at most N frames per thread, 1 to 65536 (default 256)\n"
    "  --json            one JSON object instead of text:\n"
    "                    {\"pid\":n,\"threads\":[{\"tid\":n,\"frames\":[{\"index\",\"pc\",\"sp\",\n"
    "                    \"cfa\",\"module\",\"build_id\",\"module_offset\",\"function\",\n"
    "                    \"linkage_name\",\"function_offset\",\"resolver\",\"source\",\"bundle\",\"method\",\n"
    "                    \"resolved_function\",\"file\",\"line\",\"column\",\"inlined\":[{\"function\",\n"
    "                    \"linkage_name\",\"file\",\"line\",\"column\"}]}],\"stop_reason\"}]}\n"
    "                    (addresses as \"0x...\"\n"
    "                    strings; file/line/column are the physical function's location,\n"
    "                    inlined lists the functions inlined into it, innermost first;\n"
    "                    resolver is the step of the resolver policy that named the frame:\n"
    "                    bundle, dwarf, debuginfod, symtab, dynsym or none (with --no-lines:\n"
    "                    the symbol tables' answer), source the file, debuginfod URL or\n"
    "                    sha256:HEX of the bundle, bundle that sha256:HEX or \"\";\n"
    "                    function/linkage_name/function_offset are the symbol tables' (empty\n"
    "                    offline), resolved_function the physical function as the resolver\n"
    "                    named it, e.g. from a bundle offline)\n"
    "  --resolvers LIST  resolver policy, comma-separated from debuginfod, bundle, dwarf,\n"
    "                    symtab, dynsym, demangle (default debuginfod,bundle,dwarf,symtab,dynsym,\n"
    "                    demangle)\n"
    "  --no-lines        function names only: no DWARF source lines or inline chains\n"
    "  -h, --help        this text\n"
    "\n"
    "Non-fatal findings of the capture (a thread that exited meanwhile, a module file that is\n"
    "missing or has another build-id) go to stderr as 'stackprov: warning: ...'.\n"
    "\n"
    "Exit status: 0 when every thread was captured and unwound; 1 when the capture or the\n"
    "core could not be read, or a thread could not be unwound; 2 for bad options.\n";

/// One line on stderr naming the offending value; exit status 2.
__attribute__((format(printf, 1, 2))) int usage_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "stackprov stack: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see 'stackprov stack --help')\n");
  va_end(ap);
  return 2;
}

/// Parses a decimal integer in [lo, hi]; the whole string must be the number.
bool parse_int(const char* s, long long lo, long long hi, long long* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct StackArgs {
  const char* pid = nullptr;
  const char* tid = nullptr;
  const char* core = nullptr;
  const char* exe = nullptr;
  const char* sysroot = nullptr;
  const char* max_frames = nullptr;
  const char* store = nullptr;
  const char* resolvers = nullptr;
  bool offline = false;
  bool json = false;
  bool lines = true;
};

/// Reports a library failure naming `what` on one line, e.g. "cannot capture pid 42: ...".
/// Further lines of the library's message (findings that led to the failure) follow as warnings.
int library_error(const std::string& what, int rc) {
  const char* msg = sprov_last_error_message();
  if (msg == nullptr || *msg == '\0') msg = sprov_strerror(rc);
  const char* nl = strchr(msg, '\n');
  const int first_len = nl ? static_cast<int>(nl - msg) : static_cast<int>(strlen(msg));
  fprintf(stderr, "stackprov stack: %s: %.*s\n", what.c_str(), first_len, msg);
  if (nl) stackprov_cli::print_warnings(stderr, nl + 1);
  return 1;
}

int cmd_stack(int argc, char** argv) {
  StackArgs a;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printf("%s%s", kUsage, kHelp);
      return 0;
    }
    if (arg == "--json") {
      a.json = true;
      continue;
    }
    if (arg == "--no-lines") {
      a.lines = false;
      continue;
    }
    if (arg == "--offline") {
      a.offline = true;
      continue;
    }
    struct Valued {
      const char* name;
      const char** slot;
    };
    const Valued valued[] = {{"--pid", &a.pid},         {"--tid", &a.tid},
                             {"--core", &a.core},       {"--exe", &a.exe},
                             {"--sysroot", &a.sysroot}, {"--max-frames", &a.max_frames},
                             {"--store", &a.store},     {"--resolvers", &a.resolvers}};
    bool matched = false;
    for (const auto& v : valued) {
      const size_t n = strlen(v.name);
      if (arg == v.name) {
        if (i + 1 >= argc) return usage_error("option %s needs a value", v.name);
        if (*v.slot) return usage_error("option %s given twice", v.name);
        *v.slot = argv[++i];
        matched = true;
      } else if (arg.compare(0, n, v.name) == 0 && arg.size() > n && arg[n] == '=') {
        if (*v.slot) return usage_error("option %s given twice", v.name);
        *v.slot = argv[i] + n + 1;
        matched = true;
      }
      if (matched) break;
    }
    if (!matched) return usage_error("unknown option '%s'", argv[i]);
  }

  if (a.pid && a.core) {
    return usage_error("give either --pid or --core, not both (--pid '%s', --core '%s')", a.pid,
                       a.core);
  }
  if (!a.pid && !a.core) return usage_error("give --pid PID or --core FILE");
  long long pid = 0, tid = 0, max_frames = 0;
  if (a.pid && !parse_int(a.pid, 1, INT_MAX, &pid)) {
    return usage_error("invalid --pid value '%s' (expected a process id, 1 to 2147483647)", a.pid);
  }
  if (a.tid && !parse_int(a.tid, 1, INT_MAX, &tid)) {
    return usage_error("invalid --tid value '%s' (expected a thread id, 1 to 2147483647)", a.tid);
  }
  if (a.max_frames && !parse_int(a.max_frames, 1, 65536, &max_frames)) {
    return usage_error("invalid --max-frames value '%s' (expected an integer from 1 to 65536)",
                       a.max_frames);
  }
  if (a.pid && a.exe) return usage_error("--exe '%s' is only valid with --core", a.exe);
  if (a.pid && a.sysroot) return usage_error("--sysroot '%s' is only valid with --core", a.sysroot);
  if (a.core && *a.core == '\0') return usage_error("--core needs a file name");
  if (a.offline && !a.core) return usage_error("--offline is only valid with --core");
  if (a.offline && a.exe) return usage_error("--exe '%s' opens a module file: not valid with --offline", a.exe);
  if (a.store && *a.store == '\0') return usage_error("--store needs a directory");

  // Option structs are value-initialised (unnamed fields zero) with their size set.
  sprov_context_opts copts{};
  copts.sz = sizeof(copts);
  copts.sysroot = a.sysroot;
  // The store: --store DIR, else with --offline the default one ("").
  copts.bundle_store = a.store ? a.store : a.offline ? "" : nullptr;
  copts.flags = a.offline ? SPROV_CTX_OFFLINE : 0;
  copts.resolvers = a.resolvers;
  sprov_context* ctx = nullptr;
  if (int rc = sprov_context_new(&copts, &ctx); rc != 0) {
    return library_error(a.sysroot ? std::string("sysroot '") + a.sysroot + "'" : "context", rc);
  }

  sprov_process_opts popts{};
  popts.sz = sizeof(popts);
  popts.tid = tid;
  popts.exe = a.exe;
  sprov_process* proc = nullptr;
  int rc = 0;
  if (a.pid) {
    rc = sprov_process_capture(ctx, pid, &popts, &proc);
    if (rc != 0) {
      library_error("cannot capture pid " + std::to_string(pid), rc);
      sprov_context_free(ctx);
      return 1;
    }
  } else {
    rc = sprov_process_open_core(ctx, a.core, &popts, &proc);
    if (rc != 0) {
      library_error(std::string("cannot read core '") + a.core + "'", rc);
      sprov_context_free(ctx);
      return 1;
    }
  }
  stackprov_cli::print_warnings(stderr, sprov_process_warnings(proc));

  sprov_unwinder_opts uopts{};
  uopts.sz = sizeof(uopts);
  uopts.max_frames = static_cast<uint32_t>(max_frames);
  sprov_unwinder* uw = nullptr;
  sprov_symbolizer* sym = nullptr;
  if ((rc = sprov_unwinder_new(ctx, &uopts, &uw)) != 0 ||
      (rc = sprov_symbolizer_new(ctx, nullptr, &sym)) != 0) {
    library_error("unwinder", rc);
    sprov_unwinder_free(uw);
    sprov_process_free(proc);
    sprov_context_free(ctx);
    return 1;
  }

  int exit_code = 0;
  const int64_t ppid = sprov_process_pid(proc);
  const size_t n = sprov_process_thread_count(proc);
  if (a.json) {
    printf("{\"pid\":%" PRId64 ",\"threads\":[", ppid);
  } else {
    stackprov_cli::print_process_header_text(stdout, ppid, a.core != nullptr);
  }
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    const sprov_snapshot* snap = sprov_process_thread(proc, i);
    const int64_t t = sprov_snapshot_tid(snap);
    sprov_stack* stack = nullptr;
    if ((rc = sprov_unwinder_unwind(uw, snap, &stack)) != 0) {
      fflush(stdout);
      library_error("thread " + std::to_string(t), rc);
      exit_code = 1;
      continue;
    }
    if (a.json) {
      if (!first) printf(",");
      stackprov_cli::print_stack_json(stdout, sym, stack, t, a.lines);
    } else {
      stackprov_cli::print_stack_text(stdout, sym, stack, t, a.lines);
    }
    first = false;
    sprov_stack_free(stack);
  }
  if (a.json) printf("]}\n");
  if (n == 0) {
    fprintf(stderr, "stackprov stack: %s: no threads%s\n",
            a.pid ? ("pid " + std::to_string(pid)).c_str() : a.core,
            tid ? (" (thread " + std::to_string(tid) + " not found)").c_str() : "");
    exit_code = 1;
  }
  if (fflush(stdout) != 0) exit_code = 1;
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_process_free(proc);
  sprov_context_free(ctx);
  return exit_code;
}

}  // namespace

STACKPROV_COMMAND("stack", "eu-stack-style stacks of every thread of a live process or a core file",
                  cmd_stack);
