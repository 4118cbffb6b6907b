// SPDX-License-Identifier: Apache-2.0
// `stackprov stack`: eu-stack-style stacks of every thread of a live process, an ELF core file or a minidump.
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "args.hpp"
#include "command.hpp"
#include "print.hpp"
#include "stackprov/kernel.h"
#include "stackprov/stackprov.h"

namespace {

constexpr const char* kUsage =
    "usage: stackprov stack -p|--pid PID [--store DIR] [--tid TID] [--max-frames N] [--json] [--no-lines]\n"
    "       stackprov stack --core FILE [-e|--exe PATH] [--sysroot DIR] [--store DIR] [--tid TID]\n"
    "                       [--max-frames N] [--json] [--no-lines]\n"
    "       stackprov stack --core FILE --offline [--store DIR] [--tid TID] [--max-frames N] [--json]\n"
    "       stackprov stack --minidump FILE [--symbol-path DIRS] [--offline] [--store DIR] [--tid TID]\n"
    "                       [--max-frames N] [--json] [--no-lines]\n"
    "       stackprov stack --raw STATE.json|DIR [--offline] [--store DIR] [--max-frames N] [--json]\n"
    "                       [--no-lines]\n"
    "       stackprov stack --snapshot FILE|DIR [--offline] [--store DIR] [--tid TID] [--max-frames N]\n"
    "                       [--json] [--no-lines]\n"
    "       (all forms also take --resolvers LIST, --python auto|off|only, --no-tail-calls, --regs,\n"
    "       --args and --verbose; --pid also takes --kernel [--with-btf]; --pid and --core\n"
    "       also take --save-snapshots DIR)\n";

constexpr const char* kHelp =
    "\n"
    "options:\n"
    "  -p, --pid PID     capture the live process PID\n"
    "  --core FILE       read the ELF core file FILE (e.g. from gcore or the kernel)\n"
    "  --minidump FILE   read the Windows minidump FILE (x64; from MiniDumpWriteDump): the\n"
    "                    exception's thread first, with the exception's context; the header says\n"
    "                    the exception (code, name, address, thread) and, per module, where its\n"
    "                    pdb-guid-age identity came from (CodeView record, image headers in the\n"
    "                    dump's memory, module file) and which file was used (JSON: \"exception\",\n"
    "                    \"notes\")\n"
    "  --symbol-path DIRS with --minidump: ':'-separated directories of module files (DIR/NAME or\n"
    "                    DIR/NAME/<TIMESTAMP><SIZEOFIMAGE>/NAME); a file is used only when its\n"
    "                    TimeDateStamp, SizeOfImage and identity are the dump's; PDBs are looked\n"
    "                    up there too (DIR/NAME.pdb, DIR/NAME.pdb/<GUID><AGE>/NAME.pdb)\n"
    "  --raw PATH        unwind raw machine state (doc/raw-state.md): PATH is one JSON document of\n"
    "                    one thread's registers, memory blocks and modules (path + load address),\n"
    "                    or a directory whose *.json documents are one thread each, in name order\n"
    "                    (the thread's name is the document's file name); modules of any format\n"
    "                    (Mach-O, ELF) are opened from their paths, relative to the document\n"
    "  --snapshot PATH   show serialized snapshots: PATH is one snapshot file or a directory whose\n"
    "                    *.snap files are one thread each (as --save-snapshots writes them), shown\n"
    "                    in tid order (the thread's name is the file's name); the Python frames\n"
    "                    read when they were captured are shown as 'stack --pid' showed them\n"
    "                    (doc/runtime-frames.md); module files are opened from the paths they had\n"
    "  --save-snapshots DIR  with --pid or --core: also write each captured thread's snapshot to\n"
    "                    DIR/TID.snap (sprov_snapshot_serialize; with the Python frames read, unless\n"
    "                    --python=off), for 'stack --snapshot' later; DIR must exist\n"
    "  --tid TID         only the thread TID (default: every thread)\n"
    "  -e, --exe PATH    with --core: the main program's file (default: its path in the core)\n"
    "  --sysroot DIR     with --core: look up every module file under DIR\n"
    "  --offline         with --core, --minidump or --raw: use no module file, only the core,\n"
    "                    dump or state and bundles (not with --exe); a raw state's modules then\n"
    "                    need identity, link_address and size (doc/raw-state.md)\n"
    "  --store DIR       the bundle store (with --offline the default is $STACKPROV_STORE, else\n"
    "                    $XDG_DATA_HOME/stackprov/store, else ~/.local/share/stackprov/store;\n"
    "                    without --offline and --store: no store). Without --offline: bundles\n"
    "                    stand in for module files that are missing, and name the frames of the\n"
    "                    modules they hold (before DWARF: doc/bundles.md \"Resolver policy\")\n"
    "  --max-frames N    at most N frames per thread, 1 to 65536 (default 256)\n"
    "  --json            one JSON object instead of text:\n"
    "                    {\"pid\":n,\"program\",\"command_line\",\"signal\":{\"number\",\"name\",\n"
    "                    \"description\",\"tid\",\"code\",\"code_name\",\"fault_address\"}|null,\n"
    "                    \"threads\":[{\"tid\":n,\"name\",\"frames\":[{\"index\",\"pc\",\"sp\",\n"
    "                    \"cfa\",\"module\",\"build_id\",\"module_offset\",\"function\",\n"
    "                    \"linkage_name\",\"function_offset\",\"resolver\",\"source\",\"bundle\",\"method\",\n"
    "                    \"resolved_function\",\"file\",\"line\",\"column\",\"inlined\":[{\"function\",\n"
    "                    \"linkage_name\",\"file\",\"line\",\"column\"}]}],\"stop_reason\"}]}\n"
    "                    (addresses as \"0x...\"\n"
    "                    strings; file/line/column are the physical function's location,\n"
    "                    inlined lists the functions inlined into it, innermost first;\n"
    "                    resolver is the step of the resolver policy that named the frame:\n"
    "                    bundle, dwarf, debuginfod, gopclntab, symtab, dynsym or none (with --no-lines:\n"
    "                    the symbol tables' answer), source the file, debuginfod URL or\n"
    "                    sha256:HEX of the bundle, bundle that sha256:HEX or \"\";\n"
    "                    function/linkage_name/function_offset are the symbol tables' (empty\n"
    "                    offline), resolved_function the physical function as the resolver\n"
    "                    named it, e.g. from a bundle offline; a sigreturn trampoline has\n"
    "                    \"signal_handler_called\":true)\n"
    "  --resolvers LIST  resolver policy, comma-separated from debuginfod, bundle, dwarf,\n"
    "                    gopclntab, symtab, dynsym, demangle (default debuginfod,bundle,dwarf,\n"
    "                    gopclntab,symtab,dynsym,demangle)\n"
    "  --no-lines        function names only: no DWARF source lines, inline chains or tail-call\n"
    "                    frames\n"
    "  --no-tail-calls   leave out the tail-call frames. By default, as gdb, a function that\n"
    "                    tail-called (jumped to) the frame below it and so left no frame on the\n"
    "                    stack is shown where the DWARF call-site information (DW_TAG_call_site with\n"
    "                    DW_AT_call_tail_call, gcc -O2 -g) says so unambiguously: method tail_call,\n"
    "                    marked inferred (text \"[tail_call, inferred]\", JSON \"method\":\"tail_call\",\n"
    "                    \"flags\":[\"inferred\"]); pc is the return pc of its tail-call site, sp the\n"
    "                    frame below's CFA. Offline (and for a module whose file is missing)\n"
    "                    from its bundle's call sites (bundles built since this release); not\n"
    "                    with --no-lines (no DWARF is read); eu-stack and perf show no such frames\n"
    "  --regs            each frame's registers where the unwind knows them: frame 0 all captured\n"
    "                    registers, a caller its pc, sp and the callee-saved registers its unwind\n"
    "                    rule restored or kept (x86_64 rip rsp rbx rbp r12-r15), a frame restored\n"
    "                    from a signal frame all of them; text: a line \"    registers: rip 0x...\"\n"
    "                    after each frame, JSON: \"registers\":{\"rax\":null,\"rdx\":\"0x...\",...}\n"
    "                    (every register of the architecture, null when unknown)\n"
    "  --args            each frame's arguments, as gdb's 'info args': the DWARF formal parameters\n"
    "                    of the frame's function, each value read where its DWARF location can be\n"
    "                    evaluated from what the unwind knows (the registers --regs prints, the\n"
    "                    frame's CFA, the captured stack memory); text: a line\n"
    "                    \"    arg NAME: TYPE = VALUE\" each, JSON: \"args\":[{\"name\",\"type\",\"value\",\n"
    "                    \"status\":\"value\"|\"optimized_out\"|\"unknown\",\"reason\"}]. Values of\n"
    "                    integer, bool, char, float, double, pointer (the address) and enum types;\n"
    "                    <optimized out> where the DWARF says there is none at that pc, <unknown: WHY>\n"
    "                    for other types (structs), entry values, registers the frame does not know\n"
    "                    and memory outside the capture. Needs the module's DWARF (not offline)\n"
    "  --verbose, --why  on stderr, after each thread's stack, for each module of its frames once:\n"
    "                    each step of the resolver policy in order, each path and URL it looked\n"
    "                    at (the module, the build-id path under each debug directory, each\n"
    "                    .gnu_debuglink place, each DEBUGINFOD_URLS server) and why it did not\n"
    "                    serve (missing, identity mismatch naming both build-ids, crc mismatch,\n"
    "                    fetch failed with libdebuginfod's error, no DWARF); then each frame whose\n"
    "                    module has DWARF that does not cover its address. stdout is unchanged\n"
    "  --kernel          with --pid: each thread's kernel stack above its user frames (root only).\n"
    "                    Read from /proc/PID/task/TID/stack and .../syscall before the capture\n"
    "                    attaches (a ptrace stop would move the thread out of its system call):\n"
    "                    names and offsets only (the kernel shows no addresses: pc 0), without the\n"
    "                    scheduler's own functions (the kernel leaves out its .sched.text, e.g.\n"
    "                    __schedule, schedule, do_nanosleep). A line 'kernel: system call N, user sp\n"
    "                    0x.. pc 0x..' after the thread's header, kernel frames\n"
    "                    '#k  0x0000000000000000 hrtimer_nanosleep+0x74 - [kernel.kallsyms]\n"
    "                    [kernel_stack]', and the first user frame marked kernel_user_boundary; the\n"
    "                    user frames are the ones printed without --kernel. A thread whose kernel\n"
    "                    stack cannot be shown says why: 'kernel: unreadable: ...' (not root, a\n"
    "                    thread gone), 'kernel: running: ...' (on a CPU), 'kernel: stale: ...' (it\n"
    "                    returned to user mode before the capture); the exit status is not changed\n"
    "                    by it. JSON: the thread has \"kernel\":{\"state\":\"read\"|\"unreadable\"|\n"
    "                    \"running\"|\"stale\",\"syscall\",\"user_sp\",\"user_pc\",\"reason\"}, a kernel\n"
    "                    frame is {\"index\",\"pc\",\"sp\",\"domain\":\"kernel\",\"method\":\"kernel_stack\",\n"
    "                    \"module\",\"function\",\"function_offset\",\"function_size\"}, the boundary\n"
    "                    frame has \"flags\":[\"kernel_user_boundary\"]\n"
    "  --with-btf        with --kernel: each kernel frame's C prototype from the kernel's BTF\n"
    "                    (/sys/kernel/btf/vmlinux), a line '    btf: int f(struct x *a, ...)' (a\n"
    "                    compiler clone such as f.isra.0 or f.cold gets f's, marked approximate: its\n"
    "                    real arguments may differ); JSON \"btf\":{\"func_id\",\"ret_type_id\",\n"
    "                    \"approximate\",\"prototype\",\"params\":[{\"name\",\"type_id\"}]} (ids as\n"
    "                    bpftool btf dump prints them), null when BTF has no such function. Needs a\n"
    "                    stackprov built with libbpf (the eBPF kernel sampler on)\n"
    "  --python MODE     auto (default): Python frames interleaved with the native frames;\n"
    "                    only: the Python frames alone; off: native frames only. JSON: a\n"
    "                    runtime frame is {\"index\",\"pc\",\"sp\",\"method\":\"runtime\",\n"
    "                    \"runtime\":\"python\",\"function\",\"qualname\",\"file\",\"line\",\"entry\",\n"
    "                    \"native_index\",\"frame_address\",\"code_address\"} and the process has\n"
    "                    \"runtime\":\"CPython ...\" (\"\" when none)\n"
    "  -h, --help        this text\n"
    "Options take their value as --opt=VALUE or --opt VALUE.\n"
    "\n"
    "Prints the call stack of every thread of a live process (--pid) or of an ELF core file\n"
    "(--core), one thread after the other, in eu-stack's layout:\n"
    "\n"
    "  PID 1234 - process\n"
    "  TID 1234 \"app\":\n"
    "  #0  0x00007f3c1a2e5f16 __futex_abstimed_wait_common+0xc6 - /lib/libc.so.6 [context]\n"
    "  #1  0x000055d0c4e0a1b3 main+0x43 - /usr/bin/app [cfi_eh_frame]\n"
    "  stop: end_of_stack\n"
    "\n"
    "The thread's name (comm) follows its id in quotes, as gdb's 'info threads' shows it: live,\n"
    "/proc/PID/task/TID/comm; in a core only the main thread's is recorded (NT_PRPSINFO\n"
    "pr_fname), the other threads have none (gdb 13 shows none for any core thread).\n"
    "A core first says what gdb says first, then a summary of the signal, and lists the\n"
    "thread that received it first (gdb's current thread):\n"
    "\n"
    "  PID 4242 - core\n"
    "  Core was generated by `./app --serve'.\n"
    "  Program terminated with signal SIGSEGV, Segmentation fault.\n"
    "  signal: 11 SIGSEGV, code 1 SEGV_MAPERR, fault address 0x40, thread 4250\n"
    "  TID 4250:\n"
    "  #0  0x000055e9735e11a0 handler+0x10 - /usr/bin/app [context]\n"
    "  #1  0x00007f3f9ea5e050 <signal handler called> - /lib/libc.so.6 [cfi_eh_frame]\n"
    "  #2  0x000055e9735e11d1 crasher+0x11 - /usr/bin/app [signal]\n"
    "\n"
    "(the signal from the first NT_PRSTATUS with a pr_cursig, code and fault address from its\n"
    "NT_SIGINFO; the fault address only for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP raised\n"
    "by an instruction). A signal handler's sigreturn trampoline is named\n"
    "<signal handler called>, as gdb names it, between the handler and the frame the signal\n"
    "interrupted.\n"
    "\n"
    "Frame 0 is the thread's pc; for the other frames pc is the return address, as eu-stack -p\n"
    "and gdb print it (symbols are looked up at pc-1). The method in brackets says how the\n"
    "frame was found (context, cfi_eh_frame, cfi_debug_frame, cfi_bundle, frame_pointer,\n"
    "runtime (a Go function's pclntab SP delta), signal, scan, ...); the stop line says why\n"
    "the walk ended (end_of_stack, max_frames, no_unwind_info, ...). Go binaries, stripped\n"
    "too, are named from their pclntab (resolver gopclntab, with inline chains); JIT code\n"
    "outside every module from the process's /tmp/perf-PID.map (resolver perfmap), its\n"
    "frames marked jit (JSON: \"flags\"); see doc/runtime-frames.md.\n"
    "\n"
    "Python (--python, default auto): when the process runs CPython 3.11 (its executable or\n"
    "libpython has _PyRuntime), every thread's Python frames are read from the target's memory\n"
    "(the interpreter's thread states and _PyInterpreterFrame chains; for a core, from the\n"
    "core) and each is printed right before the _PyEval_EvalFrameDefault activation that runs\n"
    "it, as py-spy dump --native and pystack show them, with method runtime:\n"
    "\n"
    "  #4  python             Worker.step - /srv/app.py:42 [runtime]\n"
    "  #5  0x000055d0c4f03c51 _PyEval_EvalFrameDefault+0x1c11 - /usr/bin/python3.11 [cfi_eh_frame]\n"
    "\n"
    "(the code object's qualified name, its file and the line of the frame's last instruction,\n"
    "the numbers gdb's py-bt prints). A line 'runtime: CPython 3.11.2 (...)' after the process\n"
    "header names the interpreter and where its structure layout came from. --python=only\n"
    "prints the Python frames alone (innermost first), --python=off none. Python frames that no\n"
    "activation took (the native walk stopped early) follow the native frames. Other Python\n"
    "versions and interpreters that cannot be read are warnings, not errors\n"
    "(doc/runtime-frames.md).\n"
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
    "With --store but without --offline, module files are used when present; a missing file,\n"
    "or one with another build-id than the module's, falls back to the module's bundle.\n"
    "\n"
    "A live capture attaches to every thread with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT),\n"
    "copies registers and stacks, and detaches before unwinding: the target is stopped only\n"
    "for the capture. It needs the right to ptrace the target (same user and\n"
    "kernel.yama.ptrace_scope <= 1 for a non-child, or CAP_SYS_PTRACE).\n"
    "\n"
    "Findings of the capture (a thread that exited meanwhile, a module file that is missing\n"
    "or has another build-id, a truncated core) go to stderr as 'stackprov: warning: ...'.\n"
    "\n"
    "Exit status:\n"
    "  0  every thread was captured and unwound to the end of its stack (or to --max-frames)\n"
    "  1  the process or the core could not be read, or the --store directory does not exist;\n"
    "     or the stacks were printed but are not whole: a thread could not be unwound or its\n"
    "     walk stopped before the end of its stack (stop other than end_of_stack and\n"
    "     max_frames), a module file has another build-id than the core's copy of it, or the\n"
    "     core is truncated (one line on stderr says which);\n"
    "     out of memory (e.g. under a small RLIMIT_AS) is such a failure, its line says so\n"
    "  2  bad options (one line naming the offending value)\n";

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
  const char* minidump = nullptr;
  const char* raw = nullptr;
  const char* snapshot = nullptr;
  const char* save_snapshots = nullptr;
  const char* symbol_path = nullptr;
  const char* exe = nullptr;
  const char* sysroot = nullptr;
  const char* max_frames = nullptr;
  const char* store = nullptr;
  const char* resolvers = nullptr;
  const char* python = nullptr;
  bool offline = false;
  bool json = false;
  bool lines = true;
  bool verbose = false;
  bool tail_calls = true;
  bool regs = false;
  bool args = false;
  bool kernel = false;
  bool with_btf = false;
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

/// --save-snapshots: DIR/TID.snap for each of the process's threads. 0, or 1 after a message.
int save_snapshots(const sprov_process* proc, const char* dir) {
  for (size_t i = 0; i < sprov_process_thread_count(proc); i++) {
    const sprov_snapshot* snap = sprov_process_thread(proc, i);
    void* bytes = nullptr;
    size_t len = 0;
    const std::string path = std::string(dir) + "/" + std::to_string(sprov_snapshot_tid(snap)) + ".snap";
    int rc = sprov_snapshot_serialize(snap, &bytes, &len);
    if (rc == 0) rc = sprov_file_write(path.c_str(), bytes, len, 0644);
    sprov_free(bytes);
    if (rc != 0) return library_error("--save-snapshots: cannot write " + path, rc);
  }
  return 0;
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
    if (arg == "--no-tail-calls") {
      a.tail_calls = false;
      continue;
    }
    if (arg == "--regs") {
      a.regs = true;
      continue;
    }
    if (arg == "--with-btf") {
      a.with_btf = true;
      continue;
    }
    if (arg == "--kernel") {
      a.kernel = true;
      continue;
    }
    if (arg == "--args") {
      a.args = true;
      continue;
    }
    if (arg == "--verbose" || arg == "--why") {
      a.verbose = true;
      continue;
    }
    struct Valued {
      const char* name;
      const char* short_name;  // getopt style: "-p PID" or "-pPID"
      const char** slot;
    };
    const Valued valued[] = {{"--pid", "-p", &a.pid},          {"--tid", nullptr, &a.tid},
                             {"--core", nullptr, &a.core},      {"--exe", "-e", &a.exe},
                             {"--sysroot", nullptr, &a.sysroot}, {"--max-frames", nullptr, &a.max_frames},
                             {"--store", nullptr, &a.store},    {"--resolvers", nullptr, &a.resolvers},
                             {"--python", nullptr, &a.python},   {"--minidump", nullptr, &a.minidump},
                             {"--raw", nullptr, &a.raw},         {"--snapshot", nullptr, &a.snapshot},
                             {"--save-snapshots", nullptr, &a.save_snapshots},
                             {"--symbol-path", nullptr, &a.symbol_path}};
    bool matched = false;
    for (const auto& v : valued) {
      const size_t n = strlen(v.name);
      const char* value = nullptr;
      if (arg == v.name || (v.short_name && arg == v.short_name)) {
        if (i + 1 >= argc) return usage_error("option %s needs a value", v.name);
        value = argv[++i];
      } else if (arg.compare(0, n, v.name) == 0 && arg.size() > n && arg[n] == '=') {
        value = argv[i] + n + 1;
      } else if (v.short_name && arg.size() > 2 && arg.compare(0, 2, v.short_name) == 0) {
        value = argv[i] + 2;
      }
      if (value == nullptr) continue;
      if (*v.slot) return usage_error("option %s given twice ('%s' and '%s')", v.name, *v.slot, value);
      *v.slot = value;
      matched = true;
      break;
    }
    if (!matched) return usage_error("unknown option '%s'", argv[i]);
  }

  if (!!a.pid + !!a.core + !!a.minidump + !!a.raw + !!a.snapshot > 1) {
    return usage_error("give one of --pid, --core, --minidump, --raw and --snapshot (--pid '%s', --core '%s', --minidump "
                       "'%s', --raw '%s', --snapshot '%s')",
                       a.pid ? a.pid : "", a.core ? a.core : "", a.minidump ? a.minidump : "", a.raw ? a.raw : "",
                       a.snapshot ? a.snapshot : "");
  }
  if (!a.pid && !a.core && !a.minidump && !a.raw && !a.snapshot)
    return usage_error("give --pid PID, --core FILE, --minidump FILE, --raw PATH or --snapshot PATH");
  if (a.snapshot && *a.snapshot == '\0') return usage_error("--snapshot needs a file or directory name");
  if (a.snapshot && (a.exe || a.sysroot || a.symbol_path))
    return usage_error("--snapshot names its own modules: --exe, --sysroot and --symbol-path do not apply");
  if (a.save_snapshots && !a.pid && !a.core)
    return usage_error("--save-snapshots '%s' is only valid with --pid or --core", a.save_snapshots);
  if (a.save_snapshots && *a.save_snapshots == '\0') return usage_error("--save-snapshots needs a directory");
  if (a.raw && *a.raw == '\0') return usage_error("--raw needs a file or directory name");
  if (a.raw && (a.exe || a.sysroot || a.tid || a.symbol_path))
    return usage_error("--raw names its own modules and threads: --exe, --sysroot, --tid and --symbol-path do not apply");
  if (a.minidump && *a.minidump == '\0') return usage_error("--minidump needs a file name");
  if (a.symbol_path && !a.minidump) return usage_error("--symbol-path '%s' is only valid with --minidump", a.symbol_path);
  if (a.minidump && (a.exe || a.sysroot))
    return usage_error("--%s is only valid with --core (a minidump's modules are looked up with --symbol-path)",
                       a.exe ? "exe" : "sysroot");
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
  if (a.with_btf && !a.kernel) return usage_error("--with-btf is only valid with --kernel");
  if (a.kernel && !a.pid) return usage_error("--kernel is only valid with --pid (a live process)");
  if (a.pid && a.exe) return usage_error("--exe '%s' is only valid with --core", a.exe);
  if (a.pid && a.sysroot) return usage_error("--sysroot '%s' is only valid with --core", a.sysroot);
  if (a.core && *a.core == '\0') return usage_error("--core needs a file name");
  if (a.offline && !a.core && !a.minidump && !a.raw && !a.snapshot)
    return usage_error("--offline is only valid with --core, --minidump, --raw or --snapshot");
  if (a.offline && a.exe) return usage_error("--exe '%s' opens a module file: not valid with --offline", a.exe);
  if (a.store && *a.store == '\0') return usage_error("--store needs a directory");
  const std::string python = a.python ? a.python : "auto";
  if (python != "auto" && python != "off" && python != "only")
    return usage_error("invalid --python value '%s' (expected auto, off or only)", a.python);
  // Every option checked (exit 2) before the store is looked at (exit 1).
  if (std::string why = a.store ? stackprov_cli::store_not_found(a.store) : ""; !why.empty()) {
    fprintf(stderr, "stackprov stack: %s\n", why.c_str());
    return 1;
  }

  // Option structs are value-initialised (unnamed fields zero) with their size set.
  sprov_context_opts copts{};
  copts.sz = sizeof(copts);
  copts.sysroot = a.sysroot;
  // The store: --store DIR, else with --offline the default one ("").
  copts.bundle_store = a.store ? a.store : a.offline ? "" : nullptr;
  copts.flags = a.offline ? SPROV_CTX_OFFLINE : 0;
  copts.resolvers = a.resolvers;
  // --symbol-path is also a debug directory (after the default one): a module's PDB is found there
  // as DIR/NAME.pdb and in the symbol-store layout DIR/NAME.pdb/KEY/NAME.pdb, as with 'symbolize'.
  const std::string debug_dirs = a.symbol_path ? std::string("/usr/lib/debug:") + a.symbol_path : std::string();
  copts.debug_dirs = a.symbol_path ? debug_dirs.c_str() : nullptr;
  sprov_context* ctx = nullptr;
  if (int rc = sprov_context_new(&copts, &ctx); rc != 0) {
    return library_error(a.sysroot ? std::string("sysroot '") + a.sysroot + "'" : "context", rc);
  }

  sprov_process_opts popts{};
  popts.sz = sizeof(popts);
  popts.tid = tid;
  popts.exe = a.exe;
  popts.flags = python != "off" && !a.minidump && !a.raw ? SPROV_PROCESS_RUNTIME_FRAMES : 0;
  if (a.kernel) popts.flags |= SPROV_PROCESS_KERNEL_STACKS;
  if (a.with_btf) popts.flags |= SPROV_PROCESS_KERNEL_BTF;
  popts.symbol_path = a.symbol_path;
  sprov_process* proc = nullptr;
  int rc = 0;
  if (a.pid) {
    rc = sprov_process_capture(ctx, pid, &popts, &proc);
    if (rc != 0) {
      library_error("cannot capture pid " + std::to_string(pid), rc);
      sprov_context_free(ctx);
      return 1;
    }
  } else if (a.raw) {
    rc = sprov_process_open_raw(ctx, a.raw, &popts, &proc);
    if (rc != 0) {
      library_error(std::string("cannot read raw state '") + a.raw + "'", rc);
      sprov_context_free(ctx);
      return 1;
    }
  } else if (a.snapshot) {
    popts.flags &= SPROV_PROCESS_RUNTIME_FRAMES;  // kernel stacks are refused above
    rc = sprov_process_open_snapshot(ctx, a.snapshot, &popts, &proc);
    if (rc != 0) {
      library_error(std::string("cannot read snapshot '") + a.snapshot + "'", rc);
      sprov_context_free(ctx);
      return 1;
    }
  } else if (a.minidump) {
    rc = sprov_process_open_minidump(ctx, a.minidump, &popts, &proc);
    if (rc != 0) {
      library_error(std::string("cannot read minidump '") + a.minidump + "'", rc);
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
  if (a.save_snapshots && save_snapshots(proc, a.save_snapshots) != 0) {
    sprov_process_free(proc);
    sprov_context_free(ctx);
    return 1;
  }
  sprov_process_info info{};
  info.sz = sizeof(info);
  if ((rc = sprov_process_get_info(proc, &info)) != 0) {
    library_error("process", rc);
    sprov_process_free(proc);
    sprov_context_free(ctx);
    return 1;
  }

  sprov_unwinder_opts uopts{};
  uopts.sz = sizeof(uopts);
  uopts.max_frames = static_cast<uint32_t>(max_frames);
  uopts.flags = a.regs || a.args ? SPROV_UNWIND_KEEP_REGISTERS : 0;  // --args: register locations
  sprov_unwinder* uw = nullptr;
  sprov_symbolizer* sym = nullptr;
  sprov_symbolizer_opts sopts{};
  sopts.sz = sizeof(sopts);
  sopts.flags = a.verbose ? SPROV_SYM_EXPLAIN : 0;  // without it the resolvers gather nothing for --verbose
  std::set<std::string> explained;                 // --verbose: modules whose attempts were printed
  if ((rc = sprov_unwinder_new(ctx, &uopts, &uw)) != 0 ||
      (rc = sprov_symbolizer_new(ctx, &sopts, &sym)) != 0) {
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
    printf("{\"pid\":%" PRId64, ppid);
    stackprov_cli::print_process_json(stdout, info);
    if (a.minidump) stackprov_cli::print_minidump_json(stdout, info, sprov_process_notes(proc));
    printf(",\"runtime\":\"%s\"", stackprov_cli::json_escape(sprov_process_runtime(proc)).c_str());
    printf(",\"threads\":[");
  } else {
    if (a.raw)
      printf("raw state %s\n", a.raw);
    else if (a.snapshot)
      printf("snapshot %s\n", a.snapshot);
    else if (a.minidump)
      stackprov_cli::print_minidump_header_text(stdout, ppid, info, sprov_process_notes(proc));
    else
      stackprov_cli::print_process_header_text(stdout, ppid, a.core != nullptr, info);
    if (*sprov_process_runtime(proc)) printf("runtime: %s\n", sprov_process_runtime(proc));
  }
  bool first = true;
  std::string incomplete;  // the first thread whose walk stopped short, for the exit-status line
  size_t incomplete_threads = 0;
  for (size_t i = 0; i < n; i++) {
    const sprov_snapshot* snap = sprov_process_thread(proc, i);
    const int64_t t = sprov_snapshot_tid(snap);
    const char* name = sprov_process_thread_name(proc, i);
    const int regs_arch = a.regs ? sprov_snapshot_arch(snap) : 0;
    const std::string runtime_name = python != "off" ? sprov_process_runtime_thread_name(proc, i) : "";
    sprov_stack* stack = nullptr;
    if ((rc = sprov_unwinder_unwind(uw, snap, &stack)) != 0) {
      fflush(stdout);
      library_error("pid " + std::to_string(ppid) + " thread " + std::to_string(t), rc);
      exit_code = 1;
      continue;
    }
    if (a.tail_calls && a.lines) {
      // Tail-call frames from DWARF call sites (gdb's; offline, the bundles' call-site sections),
      // before the runtime frames are interleaved.
      sprov_stack* with_tails = nullptr;
      // A failure here (e.g. out of memory reading the DWARF) loses only the inferred frames: the
      // thread's walk is printed without them, and the exit status says something failed.
      if ((rc = sprov_symbolizer_tail_calls(sym, stack, &with_tails)) != 0) {
        fflush(stdout);
        library_error("pid " + std::to_string(ppid) + " thread " + std::to_string(t) +
                          ": no tail-call frames",
                      rc);
        exit_code = 1;
      } else {
        sprov_stack_free(stack);
        stack = with_tails;
      }
    }
    if (python != "off" && !a.raw) {
      sprov_stack* merged = nullptr;
      if ((rc = sprov_process_interleave(proc, i, stack, python == "only" ? SPROV_RUNTIME_ONLY : SPROV_RUNTIME_INTERLEAVE,
                                         &merged)) != 0) {
        fflush(stdout);
        library_error("pid " + std::to_string(ppid) + " thread " + std::to_string(t), rc);
        sprov_stack_free(stack);
        exit_code = 1;
        continue;
      }
      sprov_stack_free(stack);
      stack = merged;
    }
    if (a.kernel) {  // the kernel segment above the user frames, last (the other merges refuse it)
      sprov_stack* merged = nullptr;
      if ((rc = sprov_process_kernel_stack(proc, i, stack, &merged)) != 0) {
        fflush(stdout);
        library_error("pid " + std::to_string(ppid) + " thread " + std::to_string(t) + ": no kernel stack", rc);
        exit_code = 1;
      } else {
        sprov_stack_free(stack);
        stack = merged;
      }
    }
    int render_rc = 0;
    if (a.json) {
      if (!first) printf(",");
      render_rc = stackprov_cli::print_stack_json(stdout, sym, stack, t, name ? name : "", a.lines, regs_arch,
                                                  runtime_name, a.args, snap);
    } else {
      render_rc = stackprov_cli::print_stack_text(stdout, sym, stack, t, name ? name : "", a.lines, regs_arch,
                                                  runtime_name, a.args, snap);
    }
    if (render_rc != 0) {  // e.g. out of memory under a small RLIMIT_AS: said with the pid and thread
      fflush(stdout);
      library_error("pid " + std::to_string(ppid) + " thread " + std::to_string(t), render_rc);
      exit_code = 1;
    }
    if (a.verbose) {
      fflush(stdout);  // this thread's stack, then why its modules are named as they are
      stackprov_cli::print_stack_attempts(stderr, sym, stack, t, &explained);
    }
    const int stop = sprov_stack_stop_reason(stack);
    if (stop != SPROV_STOP_END_OF_STACK && stop != SPROV_STOP_MAX_FRAMES && stop != SPROV_STOP_COROUTINE_ENTRY &&
        incomplete_threads++ == 0)
      incomplete = "thread " + std::to_string(t) + " stopped after " + std::to_string(sprov_stack_frame_count(stack)) +
                   " frames (" + sprov_stop_reason_name(stop) + ")";
    first = false;
    sprov_stack_free(stack);
  }
  if (a.json) printf("]}\n");
  fflush(stdout);
  // The stacks are printed; an incomplete answer still fails, with one line saying why.
  std::string why;
  if (info.flags & SPROV_PROCESS_CORE_TRUNCATED) why += "; the core is truncated (memory is missing)";
  if (info.flags & SPROV_PROCESS_BUILD_ID_MISMATCH)
    why += "; a module file has another build-id than the core's copy of it (warning above)";
  // A module that could not be mapped for lack of address space (RLIMIT_AS) is a warning from the
  // library; when a stack stopped short, the failure line names that cause, which the stop reason
  // alone (no_unwind_info) hides.
  if (const char* w = sprov_process_warnings(proc);
      incomplete_threads > 0 && w != nullptr && strstr(w, strerror(ENOMEM)) != nullptr)
    why += "; out of memory: a module file could not be mapped (warning above)";
  if (incomplete_threads > 0)
    why += "; " + incomplete +
           (incomplete_threads > 1 ? " and " + std::to_string(incomplete_threads - 1) + " more thread(s) stopped short"
                                   : std::string());
  if (!why.empty()) {
    fprintf(stderr, "stackprov stack: %s: the stacks are not whole: %s\n",
            a.core       ? (std::string("core '") + a.core + "'").c_str()
            : a.raw      ? (std::string("raw state '") + a.raw + "'").c_str()
            : a.snapshot ? (std::string("snapshot '") + a.snapshot + "'").c_str()
            : a.minidump ? (std::string("minidump '") + a.minidump + "'").c_str()
                         : ("pid " + std::to_string(pid)).c_str(),
            why.c_str() + 2);
    exit_code = 1;
  }
  if (n == 0) {
    fprintf(stderr, "stackprov stack: %s: no threads%s\n",
            a.pid        ? ("pid " + std::to_string(pid)).c_str()
            : a.core     ? a.core
            : a.minidump ? a.minidump
            : a.raw      ? a.raw
                         : a.snapshot,
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
