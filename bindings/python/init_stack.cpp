// SPDX-License-Identifier: Apache-2.0
// Stacks (include/stackprov/stackprov.h): frames, snapshots, unwinder, symbolizer, processes and cores, contexts.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "stackprov/kernel.h"

namespace stackprov_py {
namespace {

/// A snapshot: owned (capture_self, from_bytes) or borrowed from a Process it keeps alive.
struct Snapshot {
  std::shared_ptr<const sprov_snapshot> snap;
};

/// One formal parameter of a frame's function (sprov_symbolizer_frame_arg, `stackprov stack --args`).
struct Argument {
  std::string name;
  std::optional<std::string> type;    ///< gdb's spelling; None when not known
  std::optional<std::string> value;   ///< as gdb's `info args` prints it; None unless status is "value"
  std::string status;                 ///< "value", "optimized_out" or "unknown"
  std::optional<std::string> reason;  ///< why unknown; None otherwise
};

struct Frame {
  uint64_t pc = 0, sp = 0, cfa = 0, module_offset = 0;
  std::string method;
  int32_t module_index = -1;
  std::optional<std::string> module;
  std::string build_id;  // raw bytes
  // The module's identity of any kind: its kind's name ("" without one), bytes (raw; hex in
  // Python) and key (sprov_id_key: the symbol-server key, the UUID, the build-id).
  std::string id_kind, module_id, module_key;
  std::vector<std::string> flags;
  // Symbol tables' answer (sprov_symbolizer_frame): what `stackprov stack` prints.
  std::optional<std::string> function;
  std::string linkage_name;
  uint64_t function_offset = 0;
  // Resolver chain's answer (sprov_symbolizer_frame_ex).
  std::string resolver = "none", source, bundle, resolved_function;
  std::optional<std::string> file;
  uint32_t line = 0, column = 0;
  std::vector<InlineFrame> inlined;  // functions inlined into this frame, innermost first
  bool signal_handler_called = false;
  // A language runtime's frame (method "runtime", sprov_runtime_frame): runtime is "python".
  std::optional<std::string> runtime;
  std::string qualname;
  bool entry = false;
  int64_t native_index = -1;
  uint64_t frame_address = 0, code_address = 0;
  /// The function's arguments in this frame (stack(args=True)); None when not asked for.
  std::optional<std::vector<Argument>> args;
  /// Whose frame: "user", "kernel", "runtime" or "async" (sprov_frame.domain).
  std::string domain = "user";
  /// A kernel frame (method "kernel_stack", stack(kernel=True)): its function's C prototype from the
  /// kernel's BTF (with_btf=True), None without; its BTF FUNC id (0 without); approximate for a clone.
  std::optional<std::string> prototype;
  uint32_t btf_func_id = 0;
  bool btf_approximate = false;
};

/// A thread's kernel segment (stack(kernel=True); sprov_stack_kernel_info).
struct KernelStack {
  std::string state;    ///< "read", "unreadable", "running" or "stale"
  int64_t syscall = -1; ///< the system call it is blocked in (x86_64 numbering); -1 outside one or unknown
  uint64_t user_sp = 0, user_pc = 0;
  std::string reason;   ///< why there are no kernel frames; "" when read
};

struct Stack {
  std::vector<Frame> frames;
  std::string stop_reason;
};

struct Thread {
  int64_t tid = 0;
  std::string name;
  std::optional<std::string> runtime_name;  ///< the Python thread's threading name (python != "off")
  std::vector<Frame> frames;
  std::string stop_reason;
  std::optional<KernelStack> kernel;  ///< stack(kernel=True): its kernel segment's state; else None
  /// The thread as the library's one renderer writes it (sprov_stack_render: `stackprov stack`'s
  /// text or JSON), when asked for; else "".
  std::string rendered;
};

/// Lowercase hex of raw bytes without Python (calls that run with the GIL released).
std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; i++) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

/// The kind number of an identity kind's name; InvalidArgumentError naming it otherwise.
int parse_id_kind(const std::string& kind) {
  int k = 0;
  check(sprov_bundle_id_kind_parse(kind.c_str(), &k));
  return k;
}

/// The identity bytes (hex, as bundles store them) of a key of `kind` (sprov_id_from_key).
std::string id_hex_of_key(int kind, const std::string& key) {
  return lib_str([&](char** out, size_t* n) { return sprov_id_from_key(kind, key.c_str(), out, n); });
}

std::vector<InlineFrame> inline_chain(sprov_symbolizer* sym, const sprov_symbol_info& info) {
  std::vector<InlineFrame> out;
  for (uint32_t k = 0; k < info.frame_count; k++) {
    sprov_symbol_frame f{};
    f.sz = sizeof(f);
    check(sprov_symbolizer_inline_frame(sym, k, &f));
    InlineFrame in;
    in.function = str(f.name);
    in.linkage_name = str(f.linkage_name);
    in.file = str(f.file);
    in.line = f.line;
    in.column = f.column;
    in.discriminator = f.discriminator;
    in.start_line = f.start_line;
    in.start_file = str(f.start_file);
    if (f.has_start_address) in.start_address = f.start_address;
    in.resolver = str(info.resolver_name);
    in.source = str(info.source_path);
    out.push_back(std::move(in));
  }
  return out;
}

/// Frames of an unwound stack, named as `stackprov stack` names them (bindings/cli/print.cpp).
Stack describe(sprov_symbolizer* sym, const sprov_stack* stack, bool lines) {
  Stack out;
  const size_t n = sprov_stack_frame_count(stack);
  std::vector<sprov_frame> raw(n);
  for (size_t i = 0; i < n; i++) {
    raw[i] = {};
    raw[i].sz = sizeof(sprov_frame);
    check(sprov_stack_frame(stack, i, &raw[i]));
  }
  for (size_t i = 0; i < n; i++) {
    const sprov_frame& fr = raw[i];
    Frame f;
    f.pc = fr.pc;
    f.sp = fr.sp;
    f.cfa = fr.cfa;
    f.module_offset = fr.module_offset;
    f.method = str(sprov_method_name(fr.method));
    f.module_index = fr.module_index;
    if (fr.module_path) f.module = str(fr.module_path);
    f.build_id.assign(reinterpret_cast<const char*>(fr.build_id), fr.build_id_len);  // raw; hex in Python
    if (fr.id_kind != SPROV_ID_NONE && fr.module_id != nullptr && fr.module_id_len > 0) {
      f.id_kind = sprov_bundle_id_kind_name(fr.id_kind);
      f.module_id.assign(reinterpret_cast<const char*>(fr.module_id), fr.module_id_len);
      const std::string idh = hex_bytes(fr.module_id, fr.module_id_len);
      char* key = nullptr;
      size_t key_len = 0;
      if (sprov_id_key(fr.id_kind, idh.c_str(), &key, &key_len) == 0) f.module_key = take(key, key_len);
    }
    if (fr.flags & SPROV_FRAME_CFI_NOT_IN_BUNDLE) f.flags.push_back("cfi_not_in_bundle");
    if (fr.flags & SPROV_FRAME_JIT) f.flags.push_back("jit");
    if (fr.flags & SPROV_FRAME_INFERRED) f.flags.push_back("inferred");
    if (fr.flags & SPROV_FRAME_KERNEL_USER_BOUNDARY) f.flags.push_back("kernel_user_boundary");
    static const char* const kDomains[] = {"user", "kernel", "runtime", "async"};
    f.domain = fr.domain >= 0 && fr.domain <= 3 ? kDomains[fr.domain] : "user";
    f.signal_handler_called = i + 1 < n && raw[i + 1].method == SPROV_METHOD_SIGNAL;
    sprov_runtime_frame rf{};
    rf.sz = sizeof(rf);
    if (fr.method == SPROV_METHOD_RUNTIME && sprov_stack_runtime_frame(stack, i, &rf) == 0) {
      f.runtime = str(rf.runtime);
      f.function = str(rf.function);
      f.qualname = str(rf.qualname);
      f.file = str(rf.file);
      f.line = rf.line;
      f.entry = rf.flags & SPROV_RUNTIME_FRAME_ENTRY;
      f.native_index = rf.native_index;
      f.frame_address = rf.frame_address;
      f.code_address = rf.code_address;
      f.resolver = "runtime";
      out.frames.push_back(std::move(f));
      continue;
    }
    sprov_kernel_frame kf{};
    kf.sz = sizeof(kf);
    if (fr.method == SPROV_METHOD_KERNEL_STACK && sprov_stack_kernel_frame(stack, i, &kf) == 0) {
      // Named by the kernel (/proc/PID/task/TID/stack), as `stackprov stack --kernel` prints it.
      if (kf.symbol && *kf.symbol) f.function = str(kf.symbol);
      f.function_offset = kf.symbol_offset;
      f.module = str(kf.module);
      if (kf.prototype) f.prototype = str(kf.prototype);
      f.btf_func_id = kf.btf_func_id;
      f.btf_approximate = kf.flags & SPROV_KERNEL_FRAME_BTF_APPROXIMATE;
      f.resolver = "kernel";
      out.frames.push_back(std::move(f));
      continue;
    }
    if (sym) {
      sprov_symbol s{};
      s.sz = sizeof(s);
      if (sprov_symbolizer_frame(sym, stack, i, &s) == 0 && s.resolver != SPROV_RESOLVER_NONE) {
        if (s.name && *s.name) f.function = str(s.name);
        f.linkage_name = str(s.linkage_name);
        f.function_offset = s.offset;
        f.resolver = str(sprov_resolver_name(s.resolver));
        f.source = str(s.source_path);
      }
      sprov_symbol_info info{};
      info.sz = sizeof(info);
      if (lines && sprov_symbolizer_frame_ex(sym, stack, i, 0, &info) == 0 && info.frame_count > 0) {
        const int32_t resolver = info.resolver;
        f.resolver = str(sprov_resolver_name(resolver));
        f.source = str(info.source_path);
        f.bundle = str(info.bundle_digest);
        std::vector<InlineFrame> chain = inline_chain(sym, info);
        f.resolved_function = chain.back().function;
        if (sprov_resolver_gives_lines(resolver)) {  // the library's one rule, as the CLI
          const InlineFrame& phys = chain.back();
          if (!phys.file.empty()) {
            f.file = phys.file;
            f.line = phys.line;
            f.column = phys.column;
          }
          chain.pop_back();
          f.inlined = std::move(chain);
        }
      }
    }
    out.frames.push_back(std::move(f));
  }
  out.stop_reason = str(sprov_stop_reason_name(sprov_stack_stop_reason(stack)));
  return out;
}

/// An unwinder or symbolizer: used by one thread at a time (the C ABI's rule), so each call
/// takes its mutex (Python threads run the calls with the GIL released).
struct Unwinder {
  CtxPtr ctx;
  std::shared_ptr<sprov_unwinder> uw;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    uw.reset();
    ctx.reset();
  }
};

struct Symbolizer {
  CtxPtr ctx;
  std::shared_ptr<sprov_symbolizer> sym;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    sym.reset();
    ctx.reset();
  }
};

Symbolizer make_symbolizer(const CtxPtr& ctx, bool demangle) {
  sprov_symbolizer_opts o{};
  o.sz = sizeof(o);
  o.flags = demangle ? 0 : SPROV_SYM_NO_DEMANGLE;
  sprov_symbolizer* s = nullptr;
  check(sprov_symbolizer_new(ctx.get(), &o, &s));
  return Symbolizer{ctx, std::shared_ptr<sprov_symbolizer>(s, sprov_symbolizer_free)};
}

Unwinder make_unwinder(const CtxPtr& ctx, uint32_t max_frames, bool frame_pointer, bool scan,
                       bool keep_registers = false) {
  sprov_unwinder_opts o{};
  o.sz = sizeof(o);
  o.max_frames = max_frames;
  o.flags = (frame_pointer ? 0 : SPROV_UNWIND_NO_FRAME_POINTER) | (scan ? SPROV_UNWIND_ALLOW_SCAN : 0) |
            (keep_registers ? SPROV_UNWIND_KEEP_REGISTERS : 0);
  sprov_unwinder* u = nullptr;
  check(sprov_unwinder_new(ctx.get(), &o, &u));
  return Unwinder{ctx, std::shared_ptr<sprov_unwinder>(u, sprov_unwinder_free)};
}

CtxPtr make_context(std::optional<std::vector<std::string>> debug_dirs, std::optional<std::string> sysroot,
                    std::optional<std::string> bundle_store, std::optional<std::vector<std::string>> resolvers,
                    bool offline, uint32_t module_cache_capacity) {
  std::string dirs, res;
  if (debug_dirs)
    for (const auto& d : *debug_dirs) dirs += (dirs.empty() ? "" : ":") + d;
  if (resolvers)
    for (const auto& r : *resolvers) res += (res.empty() ? "" : ",") + r;
  sprov_context_opts o{};
  o.sz = sizeof(o);
  o.module_cache_capacity = module_cache_capacity;
  o.debug_dirs = debug_dirs ? dirs.c_str() : nullptr;
  o.sysroot = cstr(sysroot);
  o.bundle_store = cstr(bundle_store);
  o.resolvers = resolvers ? res.c_str() : nullptr;
  o.flags = offline ? SPROV_CTX_OFFLINE : 0;
  sprov_context* c = nullptr;
  {
    py::gil_scoped_release nogil;
    check(sprov_context_new(&o, &c));
  }
  return CtxPtr(c, sprov_context_free);
}

Process open_process(const CtxPtr& ctx, std::optional<int64_t> pid, std::optional<std::string> core,
                     std::optional<std::string> exe, int64_t tid, bool runtime_frames = false,
                     std::optional<std::string> minidump = std::nullopt,
                     std::optional<std::string> symbol_path = std::nullopt,
                     std::optional<std::string> raw = std::nullopt,
                     std::optional<std::string> snapshot = std::nullopt, uint32_t kernel_flags = 0) {
  sprov_process_opts o{};
  o.sz = sizeof(o);
  o.tid = tid;
  o.flags = (runtime_frames ? SPROV_PROCESS_RUNTIME_FRAMES : 0) | kernel_flags;
  o.exe = cstr(exe);
  o.symbol_path = cstr(symbol_path);
  sprov_process* p = nullptr;
  if (pid) check(sprov_process_capture(ctx.get(), *pid, &o, &p));
  else if (minidump) check(sprov_process_open_minidump(ctx.get(), minidump->c_str(), &o, &p));
  else if (raw) check(sprov_process_open_raw(ctx.get(), raw->c_str(), &o, &p));
  else if (snapshot) check(sprov_process_open_snapshot(ctx.get(), snapshot->c_str(), &o, &p));
  else check(sprov_process_open_core(ctx.get(), core->c_str(), &o, &p));
  Process out{ctx, std::shared_ptr<sprov_process>(p, sprov_process_free), {}};
  sprov_process_info in{};
  in.sz = sizeof(in);
  check(sprov_process_get_info(p, &in));
  ProcessInfo& i = out.info;
  i.pid = sprov_process_pid(p);
  i.core = core.has_value();
  i.source = pid ? "live" : minidump ? "minidump" : raw ? "raw" : snapshot ? "snapshot" : "core";
  i.program = str(in.program);
  i.command_line = str(in.command_line);
  i.warnings = str(sprov_process_warnings(p));
  i.runtime = str(sprov_process_runtime(p));
  i.signal = in.signal;
  i.signal_code = in.signal_code;
  i.signal_tid = in.signal_tid;
  i.signal_name = str(in.signal_name);
  i.signal_description = str(in.signal_description);
  i.signal_code_name = str(in.signal_code_name);
  if (in.has_fault_address) i.fault_address = in.fault_address;
  i.has_siginfo = in.has_siginfo;
  i.core_truncated = in.flags & SPROV_PROCESS_CORE_TRUNCATED;
  i.build_id_mismatch = in.flags & SPROV_PROCESS_BUILD_ID_MISMATCH;
  if (in.has_exception) {
    i.exception_code = in.exception_code;
    i.exception_address = in.exception_address;
    i.exception_tid = in.exception_tid;
    i.exception_name = str(in.exception_name);
  }
  i.notes = str(sprov_process_notes(p));
  return out;
}

/// What stack() reads: a live process, a core file, a minidump, raw machine state or saved
/// snapshots (one of them).
struct Target {
  std::optional<int64_t> pid;
  std::optional<std::string> core, exe, minidump, raw, symbol_path, snapshot;
};

void check_target(const std::optional<int64_t>& pid, const std::optional<std::string>& core,
                  const std::optional<std::string>& exe) {
  if (pid && core) fail_arg("give either pid or core, not both (pid " + std::to_string(*pid) + ", core '" + *core + "')");
  if (!pid && !core) fail_arg("give pid= or core=");
  if (pid && (*pid < 1 || *pid > INT32_MAX))
    fail_arg("invalid pid " + std::to_string(*pid) + " (expected a process id, 1 to 2147483647)");
  if (pid && exe) fail_arg("exe '" + *exe + "' is only valid with core");
}

struct StackResult {
  ProcessInfo info;
  std::vector<Thread> threads;
};

/// Exactly one of pid, core, minidump, raw and snapshot; the options that apply to it (the CLI's rules).
void check_stack_target(const Target& t, int64_t tid) {
  const int given = !!t.pid + !!t.core + !!t.minidump + !!t.raw + !!t.snapshot;
  if (given > 1)
    fail_arg("give one of pid=, core=, minidump=, raw= and snapshot= (pid " + (t.pid ? std::to_string(*t.pid) : "None") +
             ", core " + (t.core ? "'" + *t.core + "'" : "None") + ", minidump " +
             (t.minidump ? "'" + *t.minidump + "'" : "None") + ", raw " + (t.raw ? "'" + *t.raw + "'" : "None") +
             ", snapshot " + (t.snapshot ? "'" + *t.snapshot + "'" : "None") + ")");
  if (given == 0) fail_arg("give pid=, core=, minidump=, raw= or snapshot=");
  if (t.pid || t.core) check_target(t.pid, t.core, t.exe);
  if (t.minidump && t.minidump->empty()) fail_arg("minidump needs a file name");
  if (t.raw && t.raw->empty()) fail_arg("raw needs a file or directory name");
  if (t.snapshot && t.snapshot->empty()) fail_arg("snapshot needs a file or directory name");
  if ((t.minidump || t.raw || t.snapshot) && t.exe)
    fail_arg("exe '" + *t.exe + "' is only valid with core (a minidump's modules are looked up on symbol_path, a raw "
             "state names its own, a snapshot holds its modules)");
  if (t.symbol_path && !t.minidump) fail_arg("symbol_path '" + *t.symbol_path + "' is only valid with minidump");
  if (t.raw && tid != 0)
    fail_arg("tid " + std::to_string(tid) + " does not apply to raw '" + *t.raw + "' (its documents name their threads)");
}

/// The arguments of every frame of `stack` (sprov_symbolizer_frame_args; memory from `snap`), into `frames`.
void frame_arguments(sprov_symbolizer* sym, const sprov_snapshot* snap, const sprov_stack* stack,
                     std::vector<Frame>& frames) {
  static const char* const kStatus[] = {"value", "optimized_out", "unknown"};
  for (size_t i = 0; i < frames.size(); i++) {
    size_t count = 0;
    check(sprov_symbolizer_frame_args(sym, snap, stack, i, &count));
    std::vector<Argument> out;
    out.reserve(count);
    for (size_t k = 0; k < count; k++) {
      sprov_frame_arg a{};
      a.sz = sizeof(a);
      check(sprov_symbolizer_frame_arg(sym, k, &a));
      Argument arg;
      arg.name = str(a.name);
      if (a.type && *a.type) arg.type = str(a.type);
      arg.status = kStatus[a.status >= 0 && a.status <= 2 ? a.status : 2];
      if (a.status == SPROV_ARG_VALUE) arg.value = str(a.value);
      if (arg.status == "unknown") arg.reason = str(a.reason);
      out.push_back(std::move(arg));
    }
    frames[i].args = std::move(out);
  }
}

StackResult stack_of(const CtxPtr& ctx, const Target& target, int64_t tid, uint32_t max_frames, bool lines,
                     const std::string& python, bool tail_calls, const std::string& render = "", bool args = false,
                     bool kernel = false, bool with_btf = false) {
  check_stack_target(target, tid);
  // As `stackprov stack --kernel [--with-btf]`: a live process only.
  if (with_btf && !kernel) fail_arg("with_btf=True is only valid with kernel=True");
  if (kernel && !target.pid) fail_arg("kernel=True is only valid with pid= (a live process)");
  if (render != "" && render != "text" && render != "json")
    fail_arg("invalid render '" + render + "' (expected text, json or \"\")");
  if (max_frames > 65536) fail_arg("invalid max_frames " + std::to_string(max_frames) + " (1 to 65536)");
  if (python != "auto" && python != "off" && python != "only")
    fail_arg("invalid python '" + python + "' (expected auto, off or only)");
  StackResult r;
  py::gil_scoped_release nogil;
  // Runtime (CPython) frames are read from live processes and cores, and taken from snapshots that
  // saved them (as the CLI does).
  const bool runtime = python != "off" && !target.minidump && !target.raw;
  const uint32_t kernel_flags =
      (kernel ? uint32_t{SPROV_PROCESS_KERNEL_STACKS} : 0u) | (with_btf ? uint32_t{SPROV_PROCESS_KERNEL_BTF} : 0u);
  Process p = open_process(ctx, target.pid, target.core, target.exe, tid, runtime, target.minidump, target.symbol_path,
                           target.raw, target.snapshot, kernel_flags);
  r.info = p.info;
  // Arguments in registers need each frame's registers (`stackprov stack --args`).
  Unwinder uw = make_unwinder(ctx, max_frames, true, false, args);
  Symbolizer sym = make_symbolizer(ctx, true);
  const size_t n = sprov_process_thread_count(p.proc.get());
  for (size_t i = 0; i < n; i++) {
    const sprov_snapshot* snap = sprov_process_thread(p.proc.get(), i);
    sprov_stack* st = nullptr;
    check(sprov_unwinder_unwind(uw.uw.get(), snap, &st));
    std::unique_ptr<sprov_stack, void (*)(sprov_stack*)> owned(st, sprov_stack_free);
    if (tail_calls && lines) {
      // Tail-call frames from DWARF call sites, as `stackprov stack` adds them (none offline). A
      // failure (e.g. out of memory reading the DWARF) loses only these frames: it becomes a
      // warning line, as the CLI prints it.
      sprov_stack* with_tails = nullptr;
      if (sprov_symbolizer_tail_calls(sym.sym.get(), owned.get(), &with_tails) == 0) {
        owned.reset(with_tails);
      } else {
        const char* msg = sprov_last_error_message();
        r.info.warnings += "pid " + std::to_string(r.info.pid) + " thread " + std::to_string(sprov_snapshot_tid(snap)) +
                           ": no tail-call frames: " + std::string(msg ? msg : "") + "\n";
      }
    }
    if (python != "off" && !target.raw) {
      sprov_stack* merged = nullptr;
      check(sprov_process_interleave(p.proc.get(), i, owned.get(), python == "only" ? SPROV_RUNTIME_ONLY : SPROV_RUNTIME_INTERLEAVE,
                                     &merged));
      owned.reset(merged);
    }
    std::optional<KernelStack> kstate;
    if (kernel) {  // the kernel segment above the user frames, last (the other merges refuse it)
      static const char* const kStates[] = {"none", "read", "unreadable", "running", "stale"};
      KernelStack k;
      sprov_stack* merged = nullptr;
      if (sprov_process_kernel_stack(p.proc.get(), i, owned.get(), &merged) == 0) {
        owned.reset(merged);
        sprov_kernel_stack_info ki{};
        ki.sz = sizeof(ki);
        check(sprov_stack_kernel_info(owned.get(), &ki));
        k.state = ki.state >= 0 && ki.state <= 4 ? kStates[ki.state] : "none";
        k.syscall = ki.syscall;
        k.user_sp = ki.user_sp;
        k.user_pc = ki.user_pc;
        k.reason = str(ki.reason);
      } else {
        // As `stackprov stack --kernel`: the user frames stay, the failure is a warning line (and
        // `python3 -m stackprov stack` exits 1, as the CLI).
        const char* msg = sprov_last_error_message();
        k.state = "unreadable";
        k.reason = str(msg);
        r.info.warnings += "pid " + std::to_string(r.info.pid) + " thread " + std::to_string(sprov_snapshot_tid(snap)) +
                           ": no kernel stack: " + k.reason + "\n";
      }
      kstate = std::move(k);
    }
    Stack s = describe(sym.sym.get(), owned.get(), lines);
    if (args) frame_arguments(sym.sym.get(), snap, owned.get(), s.frames);
    Thread t;
    t.tid = sprov_snapshot_tid(snap);
    t.name = str(sprov_process_thread_name(p.proc.get(), i));
    if (const char* rn = sprov_process_runtime_thread_name(p.proc.get(), i); python != "off" && rn && *rn)
      t.runtime_name = str(rn);
    t.frames = std::move(s.frames);
    t.stop_reason = std::move(s.stop_reason);
    t.kernel = std::move(kstate);
    if (!render.empty()) {
      sprov_render_opts o{};
      o.sz = sizeof(o);
      o.flags = (render == "json" ? uint32_t{SPROV_RENDER_JSON} : 0u) | (lines ? uint32_t{SPROV_RENDER_LINES} : 0u) |
                (args ? uint32_t{SPROV_RENDER_ARGS} : 0u);
      o.snapshot = snap;  // SPROV_RENDER_ARGS: the memory arguments are read from
      o.tid = t.tid;
      o.name = t.name.c_str();
      o.runtime_name = t.runtime_name ? t.runtime_name->c_str() : nullptr;
      char* text = nullptr;
      size_t len = 0;
      check(sprov_stack_render(sym.sym.get(), owned.get(), &o, &text, &len));
      t.rendered.assign(text, len);
      sprov_free(text);
    }
    r.threads.push_back(std::move(t));
  }
  return r;
}

CtxPtr default_context() {
  static CtxPtr ctx;  // guarded by the GIL (created before any release)
  if (!ctx) ctx = make_context(std::nullopt, std::nullopt, std::nullopt, std::nullopt, false, 0);
  return ctx;
}

std::vector<std::vector<InlineFrame>> symbolize_with(Symbolizer& s, const std::string& path,
                                                      const std::vector<uint64_t>& addrs, bool inlines,
                                                      bool llvm_compat, bool short_names, bool demangle) {
  const uint32_t flags = (inlines ? 0 : SPROV_SYMBOLIZE_NO_INLINES) | (llvm_compat ? SPROV_SYMBOLIZE_LLVM_COMPAT : 0) |
                         (short_names ? SPROV_SYMBOLIZE_SHORT_NAMES : 0) | (demangle ? 0 : SPROV_SYMBOLIZE_NO_DEMANGLE);
  std::vector<std::vector<InlineFrame>> out;
  out.reserve(addrs.size());
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(*s.mu);
  if (!s.sym) fail_arg("the Symbolizer is closed");
  for (uint64_t a : addrs) {
    sprov_symbol_info info{};
    info.sz = sizeof(info);
    check(sprov_symbolizer_addr_ex(s.sym.get(), path.c_str(), a, flags, &info));
    out.push_back(inline_chain(s.sym.get(), info));
  }
  return out;
}

/// The chains of `addrs` of the module whose identity of `kind` has the key `key`, from a bundle
/// alone (sprov_symbolizer_addr_id): no module file.
std::vector<std::vector<InlineFrame>> symbolize_id_with(Symbolizer& s, const std::string& kind, const std::string& key,
                                                         const std::vector<uint64_t>& addrs, bool inlines,
                                                         bool llvm_compat, bool short_names, bool demangle) {
  const uint32_t flags = (inlines ? 0 : SPROV_SYMBOLIZE_NO_INLINES) | (llvm_compat ? SPROV_SYMBOLIZE_LLVM_COMPAT : 0) |
                         (short_names ? SPROV_SYMBOLIZE_SHORT_NAMES : 0) | (demangle ? 0 : SPROV_SYMBOLIZE_NO_DEMANGLE);
  std::vector<std::vector<InlineFrame>> out;
  out.reserve(addrs.size());
  py::gil_scoped_release nogil;
  const int k = parse_id_kind(kind);
  const std::string id_hex = id_hex_of_key(k, key);
  std::lock_guard<std::mutex> lock(*s.mu);
  if (!s.sym) fail_arg("the Symbolizer is closed");
  for (uint64_t a : addrs) {
    sprov_symbol_info info{};
    info.sz = sizeof(info);
    check(sprov_symbolizer_addr_id(s.sym.get(), k, id_hex.c_str(), a, flags, &info));
    out.push_back(inline_chain(s.sym.get(), info));
  }
  return out;
}

/// A source position's part as Python reads it: None when unknown ("" file, DWARF's line or column 0).
std::optional<std::string> known(const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); }
std::optional<uint32_t> known(uint32_t v) { return v == 0 ? std::nullopt : std::optional<uint32_t>(v); }

std::string repr_addr(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

/// The bundle store the CLI's trace commands use (bindings/cli/cmd_trace.cpp make_context): the
/// default directory when it is one and can be opened, else none.
CtxPtr trace_context() {
  std::string use;
  char* def = nullptr;
  size_t n = 0;
  if (sprov_bundle_store_default_dir(&def, &n) == 0) {
    use.assign(def, n);
    sprov_free(def);
  }
  if (use.rfind("sqlite:", 0) == 0 || use.rfind("postgresql://", 0) == 0 || use.rfind("postgres://", 0) == 0) use.clear();
  if (!use.empty()) {
    sprov_bundle_store* bs = nullptr;
    if (sprov_bundle_store_open(use.c_str(), 0, &bs) == 0) sprov_bundle_store_free(bs);
    else use.clear();
  }
  sprov_context_opts o{};
  o.sz = sizeof(o);
  o.bundle_store = use.empty() ? nullptr : use.c_str();
  sprov_context* c = nullptr;
  check(sprov_context_new(&o, &c));
  return CtxPtr(c, sprov_context_free);
}

}  // namespace

void init_stack(py::module_& m) {
  py::class_<InlineFrame>(m, "InlineFrame", "One function of an inline chain (innermost first).")
      .def_readonly("function", &InlineFrame::function)
      .def_readonly("linkage_name", &InlineFrame::linkage_name)
      .def_property_readonly("file", [](const InlineFrame& f) { return known(f.file); }, "source file, None when unknown")
      .def_property_readonly("line", [](const InlineFrame& f) { return known(f.line); },
                             "source line, None when unknown (DWARF's line 0)")
      .def_property_readonly("column", [](const InlineFrame& f) { return known(f.column); },
                             "source column, None when unknown (DWARF's column 0)")
      .def_readonly("discriminator", &InlineFrame::discriminator)
      .def_property_readonly("start_line", [](const InlineFrame& f) { return known(f.start_line); },
                             "the function's first line (DW_AT_decl_line), None when unknown")
      .def_property_readonly("start_file", [](const InlineFrame& f) { return known(f.start_file); },
                             "the function's declaring file (DW_AT_decl_file), None when unknown")
      .def_readonly("start_address", &InlineFrame::start_address)
      .def_readonly("resolver", &InlineFrame::resolver)
      .def_readonly("source", &InlineFrame::source)
      .def("__repr__", [](const InlineFrame& f) {
        // Unknown parts as llvm-symbolizer leaves them out: "??" for a function or file, no :0 line or column.
        std::string at = f.file.empty() ? "??" : f.file;
        if (f.line != 0) at += ":" + std::to_string(f.line) + (f.column != 0 ? ":" + std::to_string(f.column) : "");
        return "InlineFrame(" + (f.function.empty() ? std::string("??") : f.function) + " at " + at + ")";
      });

  py::class_<Argument>(m, "Argument",
                       "One argument of a frame's function, as gdb's `info args` (stack(args=True)).")
      .def_readonly("name", &Argument::name, "the parameter's name (DW_AT_name; '' when it has none)")
      .def_readonly("type", &Argument::type, "the C type as gdb spells it ('int', 'const char *'), None when unknown")
      .def_readonly("value", &Argument::value,
                    "the value as gdb prints it (a pointer: its address), None unless status is 'value'")
      .def_readonly("status", &Argument::status,
                    "'value', 'optimized_out' (gdb: <optimized out>) or 'unknown' (reason says why)")
      .def_readonly("reason", &Argument::reason, "why the value is unknown; None otherwise")
      .def("__repr__", [](const Argument& a) {
        std::string v = a.status == "value" ? *a.value : a.status == "optimized_out" ? "<optimized out>"
                                                                                        : "<unknown: " + *a.reason + ">";
        return "Argument(" + a.name + ": " + (a.type ? *a.type : "?") + " = " + v + ")";
      });

  py::class_<Frame>(m, "Frame", "One frame of an unwound stack, symbolized.")
      .def_readonly("pc", &Frame::pc, "unwound pc (a return address for caller frames)")
      .def_readonly("sp", &Frame::sp)
      .def_readonly("cfa", &Frame::cfa, "0 when unknown")
      .def_readonly("module", &Frame::module, "module path, None when the pc is in no module")
      .def_readonly("module_index", &Frame::module_index)
      .def_property_readonly("build_id", [](const Frame& f) { return hex(f.build_id); },
                             "lowercase hex GNU build-id ('' when none)")
      .def_readonly("module_offset", &Frame::module_offset, "link-time address in the module")
      .def_readonly("id_kind", &Frame::id_kind,
                    "the module's identity kind: elf-build-id, pdb-guid-age or macho-uuid ('' when none)")
      .def_property_readonly("module_id", [](const Frame& f) { return hex(f.module_id); },
                             "the module's identity bytes, lowercase hex as bundles store them ('' when none)")
      .def_readonly("module_key", &Frame::module_key,
                    "the identity as the platform writes it: the PDB symbol-server key (GUID + age), the Mach-O "
                    "UUID (8-4-4-4-12), the ELF build-id; what symbolize_id(id_kind, key, ...) takes ('' when none)")
      .def_readonly("method", &Frame::method, "how the frame was found: context, cfi_eh_frame, ...")
      .def_readonly("flags", &Frame::flags)
      .def_readonly("function", &Frame::function, "symbol tables' name, None when unresolved")
      .def_readonly("linkage_name", &Frame::linkage_name)
      .def_readonly("function_offset", &Frame::function_offset)
      .def_readonly("resolver", &Frame::resolver, "resolver step that named the frame")
      .def_readonly("source", &Frame::source)
      .def_readonly("bundle", &Frame::bundle)
      .def_readonly("resolved_function", &Frame::resolved_function,
                    "the physical function as the resolver chain named it")
      .def_readonly("file", &Frame::file, "source file of the physical function (DWARF/bundle)")
      .def_property_readonly("line", [](const Frame& f) { return known(f.line); },
                             "source line, None when unknown (as file)")
      .def_property_readonly("column", [](const Frame& f) { return known(f.column); },
                             "source column, None when unknown (DWARF's column 0)")
      .def_readonly("inlined", &Frame::inlined, "functions inlined at this pc, innermost first")
      .def_readonly("signal_handler_called", &Frame::signal_handler_called)
      .def_readonly("runtime", &Frame::runtime, "\"python\" for a CPython frame (method \"runtime\"), else None")
      .def_readonly("qualname", &Frame::qualname, "a runtime frame's qualified name (CPython co_qualname)")
      .def_readonly("entry", &Frame::entry, "a runtime frame that its eval activation entered first")
      .def_readonly("native_index", &Frame::native_index,
                    "a runtime frame's native frame (the eval activation running it), -1 when none")
      .def_readonly("frame_address", &Frame::frame_address, "a runtime frame's address in the target")
      .def_readonly("code_address", &Frame::code_address, "a runtime frame's code object in the target")
      .def_readonly("args", &Frame::args,
                    "the arguments of the frame's function in DWARF order (list of Argument) with stack(args=True), "
                    "[] when none are known (no DWARF, an inferred or runtime frame); None when not asked for")
      .def_readonly("domain", &Frame::domain,
                    "whose frame: \"user\", \"kernel\" (stack(kernel=True)), \"runtime\" (a CPython frame) or "
                    "\"async\"")
      .def_readonly("prototype", &Frame::prototype,
                    "a kernel frame's C prototype from the kernel's BTF (stack(kernel=True, with_btf=True)), None "
                    "when not asked for or BTF has no such function")
      .def_readonly("btf_func_id", &Frame::btf_func_id, "a kernel frame's BTF FUNC id (bpftool's [ID]); 0 without")
      .def_readonly("btf_approximate", &Frame::btf_approximate,
                    "the kernel frame is a compiler clone (f.isra.0, ...): its prototype is f's")
      .def("__repr__", [](const Frame& f) {
        return "Frame(pc=" + repr_addr(f.pc) + ", function=" + (f.function ? *f.function : "??") +
               ", module=" + (f.module ? *f.module : "??") + ", method=" + f.method + ")";
      });

  py::class_<Stack>(m, "Stack", "An unwound stack: frames and why the walk stopped.")
      .def_readonly("frames", &Stack::frames)
      .def_readonly("stop_reason", &Stack::stop_reason)
      .def("__len__", [](const Stack& s) { return s.frames.size(); })
      .def("__iter__", [](const Stack& s) { return py::make_iterator(s.frames.begin(), s.frames.end()); },
           py::keep_alive<0, 1>());

  py::class_<KernelStack>(m, "KernelStack",
                          "A thread's kernel segment (stack(kernel=True)): read from /proc/PID/task/TID/{stack,syscall} "
                          "before the capture (root only; doc/kernel-stacks.md)")
      .def_readonly("state", &KernelStack::state,
                    "\"read\" (the kernel frames are at the top of the thread's frames), \"unreadable\" (reason "
                    "says why: not root, the thread gone, a kernel thread), \"running\" (on a CPU: the kernel shows "
                    "no stack) or \"stale\" (it left the kernel before the capture)")
      .def_readonly("syscall", &KernelStack::syscall,
                    "the system call it is blocked in (x86_64 numbering); -1 outside one or unknown")
      .def_readonly("user_sp", &KernelStack::user_sp, "the user sp the kernel saved; 0 unknown")
      .def_readonly("user_pc", &KernelStack::user_pc, "the user pc the kernel saved; 0 unknown")
      .def_readonly("reason", &KernelStack::reason, "why there are no kernel frames; \"\" when read")
      .def("__repr__", [](const KernelStack& k) {
        return "KernelStack(state=" + k.state + ", syscall=" + std::to_string(k.syscall) +
               (k.reason.empty() ? "" : ", reason='" + k.reason + "'") + ")";
      });

  py::class_<Thread>(m, "Thread", "One thread's stack.")
      .def_readonly("tid", &Thread::tid)
      .def_readonly("name", &Thread::name, "the OS thread's name (comm)")
      .def_readonly("runtime_name", &Thread::runtime_name,
                    "a Python thread's threading.Thread name (\"MainThread\", \"worker-1\"), None when none was read")
      .def_readonly("frames", &Thread::frames)
      .def_readonly("stop_reason", &Thread::stop_reason)
      .def_readonly("kernel", &Thread::kernel,
                    "stack(kernel=True): the thread's kernel segment (KernelStack: state, syscall, user_sp, user_pc, "
                    "reason); None when not asked for")
      .def_readonly("rendered", &Thread::rendered,
                    "the thread as `stackprov stack` prints it (the library's renderer), when stack_with_info was "
                    "given render=\"text\" or \"json\"; else \"\"")
      .def("__repr__", [](const Thread& t) {
        return "Thread(tid=" + std::to_string(t.tid) + ", name='" + t.name + "', " +
               std::to_string(t.frames.size()) + " frames, stop=" + t.stop_reason + ")";
      });

  py::class_<ProcessInfo>(m, "ProcessInfo", "What a capture knows besides the registers.")
      .def_readonly("pid", &ProcessInfo::pid)
      .def_readonly("core", &ProcessInfo::core)
      .def_readonly("source", &ProcessInfo::source, "what was read: \"live\", \"core\", \"minidump\", \"raw\" or \"snapshot\"")
      .def_readonly("program", &ProcessInfo::program)
      .def_readonly("command_line", &ProcessInfo::command_line)
      .def_readonly("warnings", &ProcessInfo::warnings)
      .def_readonly("runtime", &ProcessInfo::runtime, "the language runtime that was read (\"\" when none)")
      .def_readonly("signal", &ProcessInfo::signal)
      .def_readonly("signal_code", &ProcessInfo::signal_code)
      .def_readonly("signal_tid", &ProcessInfo::signal_tid)
      .def_readonly("signal_name", &ProcessInfo::signal_name)
      .def_readonly("signal_description", &ProcessInfo::signal_description)
      .def_readonly("signal_code_name", &ProcessInfo::signal_code_name)
      .def_readonly("fault_address", &ProcessInfo::fault_address)
      .def_readonly("has_siginfo", &ProcessInfo::has_siginfo)
      .def_readonly("core_truncated", &ProcessInfo::core_truncated)
      .def_readonly("build_id_mismatch", &ProcessInfo::build_id_mismatch)
      .def_readonly("exception_code", &ProcessInfo::exception_code, "a minidump's ExceptionCode (None without one)")
      .def_readonly("exception_address", &ProcessInfo::exception_address)
      .def_readonly("exception_tid", &ProcessInfo::exception_tid)
      .def_readonly("exception_name", &ProcessInfo::exception_name, "\"EXCEPTION_ACCESS_VIOLATION\", ...; \"\" unknown")
      .def_readonly("notes", &ProcessInfo::notes,
                    "a minidump's notes, one line per module: where its identity and file came from");

  py::class_<Snapshot>(m, "Snapshot", "One thread's registers, stack copy and module list.")
      .def_static("from_bytes", [](py::bytes b) {
        std::string data = b;
        sprov_snapshot* s = nullptr;
        {
          py::gil_scoped_release nogil;
          check(sprov_snapshot_deserialize(data.data(), data.size(), &s));
        }
        return Snapshot{std::shared_ptr<const sprov_snapshot>(s, [](const sprov_snapshot* p) {
          sprov_snapshot_free(const_cast<sprov_snapshot*>(p));
        })};
      }, py::arg("data"), "Parses bytes from to_bytes() (or sprov_snapshot_serialize).")
      .def("to_bytes", [](const Snapshot& s) {
        void* buf = nullptr;
        size_t len = 0;
        {
          py::gil_scoped_release nogil;
          check(sprov_snapshot_serialize(s.snap.get(), &buf, &len));
        }
        py::bytes out(static_cast<const char*>(buf), len);
        sprov_free(buf);
        return out;
      }, "The self-describing serialized form (sprov_snapshot_serialize).")
      .def_property_readonly("arch", [](const Snapshot& s) { return std::string(sprov_arch_name(sprov_snapshot_arch(s.snap.get()))); })
      .def_property_readonly("pid", [](const Snapshot& s) { return sprov_snapshot_pid(s.snap.get()); })
      .def_property_readonly("tid", [](const Snapshot& s) { return sprov_snapshot_tid(s.snap.get()); })
      .def("reg", [](const Snapshot& s, uint32_t r) -> std::optional<uint64_t> {
        uint64_t v = 0;
        if (sprov_snapshot_reg(s.snap.get(), r, &v) != 0) return std::nullopt;
        return v;
      }, py::arg("dwarf_reg"), "A captured register by DWARF number; None if not captured.")
      .def("read_memory", [](const Snapshot& s, uint64_t addr, size_t len) {
        std::string buf(len, '\0');
        check(sprov_snapshot_read_memory(s.snap.get(), addr, buf.data(), len));
        return py::bytes(buf);
      }, py::arg("address"), py::arg("length"), "Captured target memory; MemoryUnreadableError outside it.")
      .def_property_readonly("modules", [](const Snapshot& s) {
        py::list out;
        const size_t n = sprov_snapshot_module_count(s.snap.get());
        for (size_t i = 0; i < n; i++) {
          sprov_module_info mi{};
          mi.sz = sizeof(mi);
          check(sprov_snapshot_module(s.snap.get(), i, &mi));
          py::dict d;
          d["path"] = str(mi.path);
          d["start"] = mi.start;
          d["end"] = mi.end;
          d["file_offset"] = mi.file_offset;
          d["load_bias"] = mi.load_bias;
          d["build_id"] = hex(std::string(reinterpret_cast<const char*>(mi.build_id), mi.build_id_len));
          out.append(d);
        }
        return out;
      }, "Module list: dicts with path, start, end, file_offset, load_bias, build_id (hex).");

  py::class_<Unwinder> unwinder_cls(m, "Unwinder", "Unwinds snapshots (one call at a time; calls from other threads wait).");
  unwinder_cls
      .def("unwind", [](Unwinder& u, const Snapshot& snap, bool symbolize, bool lines) {
        Stack out;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*u.mu);
        if (!u.uw) fail_arg("the Unwinder is closed");
        sprov_stack* st = nullptr;
        check(sprov_unwinder_unwind(u.uw.get(), snap.snap.get(), &st));
        std::unique_ptr<sprov_stack, void (*)(sprov_stack*)> owned(st, sprov_stack_free);
        if (symbolize) {
          Symbolizer s = make_symbolizer(u.ctx, true);
          return describe(s.sym.get(), st, lines);
        }
        return describe(nullptr, st, false);
      }, py::arg("snapshot"), py::arg("symbolize") = true, py::arg("lines") = true,
         "Unwinds `snapshot` into a Stack (frames named unless symbolize=False).");

  py::class_<Symbolizer> symbolizer_cls(m, "Symbolizer", "Names link-time addresses of module files.");
  symbolizer_cls
      .def("symbolize", &symbolize_with, py::arg("path"), py::arg("addresses"), py::kw_only(), py::arg("inlines") = true,
           py::arg("llvm_compat") = false, py::arg("short_names") = false, py::arg("demangle") = true,
           "One inline chain (innermost first, physical function last) per address.")
      .def("symbolize_id", &symbolize_id_with, py::arg("kind"), py::arg("key"), py::arg("addresses"), py::kw_only(),
           py::arg("inlines") = true, py::arg("llvm_compat") = false, py::arg("short_names") = false,
           py::arg("demangle") = true,
           "The same for the module of identity `kind` (elf-build-id, pdb-guid-age, macho-uuid) and `key`\n"
           "(Frame.module_key's form: build-id hex, PDB symbol-server key, UUID) with no module file: only\n"
           "a bundle answers (the context's bundle store, or the one given to use_bundle).")
      .def("use_bundle", [](Symbolizer& s, const std::string& bundle) {
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*s.mu);
        if (!s.sym) fail_arg("the Symbolizer is closed");
        check(sprov_symbolizer_use_bundle(s.sym.get(), bundle.c_str()));
      }, py::arg("bundle"),
      "Answers every module from this bundle (\"sha256:<hex>\" in the context's store, or a bundle file) instead\n"
      "of the store's id map; a module it does not hold is an error naming both identities.");

  py::class_<Process> process_cls(m, "Process", "A multi-thread capture of a live process or a core file.");
  process_cls
      .def_property_readonly("info", [](const Process& p) { return p.info; })
      .def_property_readonly("threads", [](const Process& p) {
        if (!p.proc) fail_arg("the Process is closed");
        std::vector<Snapshot> out;
        const size_t n = sprov_process_thread_count(p.proc.get());
        for (size_t i = 0; i < n; i++) {
          // Borrowed snapshot: the aliasing shared_ptr keeps the process alive.
          out.push_back(Snapshot{std::shared_ptr<const sprov_snapshot>(p.proc, sprov_process_thread(p.proc.get(), i))});
        }
        return out;
      }, "One Snapshot per thread.")
      .def("thread_name", [](const Process& p, size_t i) {
        if (!p.proc) fail_arg("the Process is closed");
        const char* n = sprov_process_thread_name(p.proc.get(), i);
        if (!n) throw py::index_error("thread index " + std::to_string(i) + " out of range");
        return std::string(n);
      }, py::arg("index"))
      .def("runtime_thread_name", [](const Process& p, size_t i) -> std::optional<std::string> {
        if (!p.proc) fail_arg("the Process is closed");
        if (i >= sprov_process_thread_count(p.proc.get()))
          throw py::index_error("thread index " + std::to_string(i) + " out of range");
        const char* n = sprov_process_runtime_thread_name(p.proc.get(), i);
        if (n == nullptr || *n == '\0') return std::nullopt;
        return str(n);
      }, py::arg("index"), "thread `index`'s Python threading name (captured with python frames), None when none");

  py::class_<Context> context_cls(m, "Context", "Library context: module cache, debug directories, resolver policy (thread-safe).");
  context_cls
      .def(py::init([](std::optional<std::vector<std::string>> debug_dirs, std::optional<std::string> sysroot,
                       std::optional<std::string> bundle_store, std::optional<std::vector<std::string>> resolvers,
                       bool offline, uint32_t module_cache_capacity) {
             return Context{make_context(debug_dirs, sysroot, bundle_store, resolvers, offline, module_cache_capacity)};
           }),
           py::kw_only(), py::arg("debug_dirs") = py::none(), py::arg("sysroot") = py::none(),
           py::arg("bundle_store") = py::none(), py::arg("resolvers") = py::none(), py::arg("offline") = false,
           py::arg("module_cache_capacity") = 0)
      .def_property_readonly("closed", [](const Context& c) { return !c.ctx; })
      .def("capture_self", [](const Context& c, uint32_t max_stack_bytes) {
        CtxPtr ctx = c.get();
        sprov_capture_opts o{};
        o.sz = sizeof(o);
        o.max_stack_bytes = max_stack_bytes;
        sprov_snapshot* s = nullptr;
        {
          py::gil_scoped_release nogil;
          check(sprov_snapshot_capture_self(ctx.get(), &o, &s));
        }
        return Snapshot{std::shared_ptr<const sprov_snapshot>(s, [](const sprov_snapshot* p) {
          sprov_snapshot_free(const_cast<sprov_snapshot*>(p));
        })};
      }, py::kw_only(), py::arg("max_stack_bytes") = 0, "Captures the calling thread.")
      .def("unwinder", [](const Context& c, uint32_t max_frames, bool frame_pointer, bool scan) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return make_unwinder(ctx, max_frames, frame_pointer, scan);
      }, py::kw_only(), py::arg("max_frames") = 0, py::arg("frame_pointer") = true, py::arg("scan") = false)
      .def("symbolizer", [](const Context& c, bool demangle) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return make_symbolizer(ctx, demangle);
      }, py::kw_only(), py::arg("demangle") = true)
      .def("capture", [](const Context& c, int64_t pid, int64_t tid, bool python, bool kernel, bool with_btf) {
        CtxPtr ctx = c.get();
        check_target(pid, std::nullopt, std::nullopt);
        if (with_btf && !kernel) fail_arg("with_btf=True is only valid with kernel=True");
        const uint32_t kflags =
            (kernel ? uint32_t{SPROV_PROCESS_KERNEL_STACKS} : 0u) | (with_btf ? uint32_t{SPROV_PROCESS_KERNEL_BTF} : 0u);
        py::gil_scoped_release nogil;
        return open_process(ctx, pid, std::nullopt, std::nullopt, tid, python, std::nullopt, std::nullopt, std::nullopt,
                            std::nullopt, kflags);
      }, py::arg("pid"), py::kw_only(), py::arg("tid") = 0, py::arg("python") = false, py::arg("kernel") = false,
      py::arg("with_btf") = false,
      "Captures every thread (or `tid`) of a live process; python=True: CPython 3.11's frames too "
      "(SPROV_PROCESS_RUNTIME_FRAMES); kernel=True: each thread's kernel stack read before the capture "
      "(SPROV_PROCESS_KERNEL_STACKS, root only), with_btf=True: with its functions' prototypes from the "
      "kernel's BTF (SPROV_PROCESS_KERNEL_BTF; a trace stores them as its kernel segments).")
      .def("open_core", [](const Context& c, std::string core, std::optional<std::string> exe, int64_t tid, bool python) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return open_process(ctx, std::nullopt, core, exe, tid, python);
      }, py::arg("core"), py::kw_only(), py::arg("exe") = py::none(), py::arg("tid") = 0, py::arg("python") = false)
      .def("open_minidump", [](const Context& c, std::string path, std::optional<std::string> symbol_path, int64_t tid) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return open_process(ctx, std::nullopt, std::nullopt, std::nullopt, tid, false, path, symbol_path);
      }, py::arg("path"), py::kw_only(), py::arg("symbol_path") = py::none(), py::arg("tid") = 0,
      "Opens a Windows minidump (x64): the exception's thread first; symbol_path: ':'-separated directories "
      "of module files.")
      .def("open_raw", [](const Context& c, std::string path) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return open_process(ctx, std::nullopt, std::nullopt, std::nullopt, 0, false, std::nullopt, std::nullopt, path);
      }, py::arg("path"),
      "Opens raw machine state (doc/raw-state.md): one JSON document of a thread's registers, memory and modules,\n"
      "or a directory of them (one thread each, in name order).")
      .def("open_snapshot", [](const Context& c, std::string path, int64_t tid) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return open_process(ctx, std::nullopt, std::nullopt, std::nullopt, tid, true, std::nullopt, std::nullopt,
                            std::nullopt, path);
      }, py::arg("path"), py::kw_only(), py::arg("tid") = 0,
      "Opens saved snapshots (`stackprov stack --save-snapshots DIR`): one .snap file or a directory of them\n"
      "(one thread each, in tid order), with the CPython frames the capture read.")
      .def("_stack", [](const Context& c, std::optional<int64_t> pid, std::optional<std::string> core,
                        std::optional<std::string> exe, int64_t tid, uint32_t max_frames, bool lines,
                        std::string python, bool tail_calls, std::optional<std::string> minidump,
                        std::optional<std::string> raw, std::optional<std::string> symbol_path, std::string render,
                        bool args, std::optional<std::string> snapshot, bool kernel, bool with_btf) {
        StackResult r = stack_of(c.get(), Target{pid, core, exe, minidump, raw, symbol_path, snapshot}, tid, max_frames,
                                 lines, python, tail_calls, render, args, kernel, with_btf);
        return std::make_pair(r.info, r.threads);
      }, py::arg("pid"), py::arg("core"), py::arg("exe"), py::arg("tid"), py::arg("max_frames"), py::arg("lines"),
      py::arg("python") = "auto", py::arg("tail_calls") = true, py::arg("minidump") = py::none(),
      py::arg("raw") = py::none(), py::arg("symbol_path") = py::none(), py::arg("render") = "",
      py::arg("args") = false, py::arg("snapshot") = py::none(), py::arg("kernel") = false,
      py::arg("with_btf") = false);

  closable(unwinder_cls, "Frees the C unwinder now (also done by the GC).");
  closable(symbolizer_cls, "Frees the C symbolizer now (also done by the GC).");
  closable(process_cls, "Drops the process (snapshots taken from it keep it alive while they live).");
  closable(context_cls,
           "Drops this object's reference; the C context is freed once no unwinder, symbolizer or process uses it.");
}

void init_default_contexts(py::module_& m) {
  m.def("_kernel_btf_error", []() -> std::optional<std::string> {
    py::gil_scoped_release nogil;  // libbpf parses all of vmlinux's BTF
    sprov_kernel_btf* btf = nullptr;
    if (sprov_kernel_btf_open(nullptr, &btf) == 0) {
      sprov_kernel_btf_free(btf);
      return std::nullopt;
    }
    const char* msg = sprov_last_error_message();  // thread-local: this thread's
    return std::string(msg ? msg : "unknown error");
  }, "None when the kernel's BTF (/sys/kernel/btf/vmlinux) can be read by this build, else why not "
     "(`trace-capture --with-btf` stores no kernel segment then).");
  m.def("_default_context", []() { return Context{default_context()}; });
  m.def("_trace_context", []() {
    py::gil_scoped_release nogil;
    return Context{trace_context()};
  }, "A context whose bundle store is the default directory when it exists (as the CLI's trace commands).");
}

}  // namespace stackprov_py
