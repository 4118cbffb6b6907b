// SPDX-License-Identifier: Apache-2.0
// Python extension `stackprov._stackprov`: pybind11 over the public C ABI only (include/stackprov/).
// Every call into the library runs with the GIL released; C handles are owned by shared_ptrs that
// free them when the last Python object (or a dependent handle) lets go. Errors become
// stackprov.Error subclasses (stackprov/_errors.py) carrying the C code and the library's message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "../cli/utf8.hpp"  // header-only: the CLI's UTF-8 check
#include "stackprov/bundle.h"
#include "stackprov/stackprov.h"
#include "stackprov/symbol_bundle.h"
#include "stackprov/trace.h"

namespace py = pybind11;

namespace {

/// A failed C call: its code and this thread's last-error message (read before the GIL is retaken).
struct CallError {
  int code;
  std::string message;
};

[[noreturn]] void fail(int rc) {
  const char* msg = sprov_last_error_message();
  if (msg == nullptr || *msg == '\0') msg = sprov_strerror(rc);
  throw CallError{rc, msg};
}

inline void check(int rc) {
  if (rc != 0) fail(rc);
}

[[noreturn]] void fail_arg(const std::string& message) {
  throw CallError{SPROV_ERR_INVALID_ARG, message};
}

/// Lowercase hex of raw bytes (bytes.hex(); needs the GIL).
std::string hex(const std::string& raw) { return py::bytes(raw).attr("hex")().cast<std::string>(); }

/// A C string from the library as Python gets it: names and paths are bytes (a symbol, a thread
/// name set with prctl, a path), and pybind11 decodes std::string as strict UTF-8, so a byte that
/// is not part of a well-formed UTF-8 sequence becomes U+FFFD here (as in the CLI's JSON), not a
/// UnicodeDecodeError when the attribute is read.
std::string str(const char* s) {
  if (s == nullptr) return "";
  const std::string_view v(s);
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size();) {
    if (const size_t n = stackprov_cli::utf8_sequence(v, i); n != 0) {
      out.append(v.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      i++;
    }
  }
  return out;
}

/// An optional argument as the C ABI takes it (NULL: not given).
const char* cstr(const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; }

// ------------------------------------------------------------------ handles

using CtxPtr = std::shared_ptr<sprov_context>;

struct Context {
  CtxPtr ctx;
  void close() { ctx.reset(); }
  CtxPtr get() const {
    if (!ctx) fail_arg("the Context is closed");
    return ctx;
  }
};

/// A snapshot: owned (capture_self, from_bytes) or borrowed from a Process it keeps alive.
struct Snapshot {
  std::shared_ptr<const sprov_snapshot> snap;
};

struct InlineFrame {
  std::string function, linkage_name, file, start_file;
  uint32_t line = 0, column = 0, discriminator = 0, start_line = 0;
  std::optional<uint64_t> start_address;
  std::string resolver, source;
};

struct Frame {
  uint64_t pc = 0, sp = 0, cfa = 0, module_offset = 0;
  std::string method;
  int32_t module_index = -1;
  std::optional<std::string> module;
  std::string build_id;  // raw bytes
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
};

struct Stack {
  std::vector<Frame> frames;
  std::string stop_reason;
};

struct Thread {
  int64_t tid = 0;
  std::string name;
  std::vector<Frame> frames;
  std::string stop_reason;
};

struct ProcessInfo {
  int64_t pid = 0;
  bool core = false;
  std::string program, command_line, warnings;
  std::string runtime;  // the interpreter that was read ("" when none)
  int32_t signal = 0, signal_code = 0;
  int64_t signal_tid = 0;
  std::string signal_name, signal_description, signal_code_name;
  std::optional<uint64_t> fault_address;
  bool core_truncated = false, build_id_mismatch = false, has_siginfo = false;
};

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
    if (fr.flags & SPROV_FRAME_CFI_NOT_IN_BUNDLE) f.flags.push_back("cfi_not_in_bundle");
    if (fr.flags & SPROV_FRAME_JIT) f.flags.push_back("jit");
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

Unwinder make_unwinder(const CtxPtr& ctx, uint32_t max_frames, bool frame_pointer, bool scan) {
  sprov_unwinder_opts o{};
  o.sz = sizeof(o);
  o.max_frames = max_frames;
  o.flags = (frame_pointer ? 0 : SPROV_UNWIND_NO_FRAME_POINTER) | (scan ? SPROV_UNWIND_ALLOW_SCAN : 0);
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

/// A live capture or a core: the threads (snapshots borrowed from it), names and findings.
struct Process {
  CtxPtr ctx;
  std::shared_ptr<sprov_process> proc;
  ProcessInfo info;
  void close() {
    proc.reset();
    ctx.reset();
  }
};

Process open_process(const CtxPtr& ctx, std::optional<int64_t> pid, std::optional<std::string> core,
                     std::optional<std::string> exe, int64_t tid, bool runtime_frames = false) {
  sprov_process_opts o{};
  o.sz = sizeof(o);
  o.tid = tid;
  o.flags = runtime_frames ? SPROV_PROCESS_RUNTIME_FRAMES : 0;
  o.exe = cstr(exe);
  sprov_process* p = nullptr;
  if (pid) check(sprov_process_capture(ctx.get(), *pid, &o, &p));
  else check(sprov_process_open_core(ctx.get(), core->c_str(), &o, &p));
  Process out{ctx, std::shared_ptr<sprov_process>(p, sprov_process_free), {}};
  sprov_process_info in{};
  in.sz = sizeof(in);
  check(sprov_process_get_info(p, &in));
  ProcessInfo& i = out.info;
  i.pid = sprov_process_pid(p);
  i.core = core.has_value();
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
  return out;
}

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

StackResult stack_of(const CtxPtr& ctx, std::optional<int64_t> pid, std::optional<std::string> core,
                     std::optional<std::string> exe, int64_t tid, uint32_t max_frames, bool lines,
                     const std::string& python) {
  check_target(pid, core, exe);
  if (max_frames > 65536) fail_arg("invalid max_frames " + std::to_string(max_frames) + " (1 to 65536)");
  if (python != "auto" && python != "off" && python != "only")
    fail_arg("invalid python '" + python + "' (expected auto, off or only)");
  StackResult r;
  py::gil_scoped_release nogil;
  Process p = open_process(ctx, pid, core, exe, tid, python != "off");
  r.info = p.info;
  Unwinder uw = make_unwinder(ctx, max_frames, true, false);
  Symbolizer sym = make_symbolizer(ctx, true);
  const size_t n = sprov_process_thread_count(p.proc.get());
  for (size_t i = 0; i < n; i++) {
    const sprov_snapshot* snap = sprov_process_thread(p.proc.get(), i);
    sprov_stack* st = nullptr;
    check(sprov_unwinder_unwind(uw.uw.get(), snap, &st));
    std::unique_ptr<sprov_stack, void (*)(sprov_stack*)> owned(st, sprov_stack_free);
    if (python != "off") {
      sprov_stack* merged = nullptr;
      check(sprov_process_interleave(p.proc.get(), i, st, python == "only" ? SPROV_RUNTIME_ONLY : SPROV_RUNTIME_INTERLEAVE,
                                     &merged));
      owned.reset(merged);
    }
    Stack s = describe(sym.sym.get(), owned.get(), lines);
    Thread t;
    t.tid = sprov_snapshot_tid(snap);
    t.name = str(sprov_process_thread_name(p.proc.get(), i));
    t.frames = std::move(s.frames);
    t.stop_reason = std::move(s.stop_reason);
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

std::string repr_addr(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

/// A trace store (include/stackprov/trace.h): SQLite or PostgreSQL, by URL.
struct TraceStore {
  std::shared_ptr<sprov_trace_store> store;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    store.reset();
  }
  sprov_trace_store* get() const {
    if (!store) fail_arg("the TraceStore is closed");
    return store.get();
  }
};

/// A string the library allocated (sprov_free).
std::string take(char* p, size_t n) {
  std::string s(p ? p : "", p ? n : 0);
  sprov_free(p);
  return s;
}

/// The string a library call returns through (char** out, size_t* out_len), e.g.
/// lib_str([&](char** out, size_t* len) { return sprov_...(..., out, len); }).
template <class F>
std::string lib_str(F&& call) {
  char* out = nullptr;
  size_t n = 0;
  check(call(&out, &n));
  return take(out, n);
}


// ------------------------------------------------------------------ bundles

/// A module of a bundle (sprov_bundle_module), copied out.
struct BundleModule {
  size_t index = 0;
  std::string id_kind, id, name, sha256_file, sha256_debug;
  uint64_t ranges = 0, return_pads = 0, unwind_rows = 0, debug_blob = 0;
};

/// An open symbol bundle (immutable, thread-safe in the C ABI) and where its bytes are.
struct Bundle {
  std::shared_ptr<sprov_bundle> b;
  std::string digest;
  std::shared_ptr<const std::string> data;  // the bytes, when built or opened from bytes
  std::string path;                         // else the file they were mapped from
};

Bundle wrap_bundle(sprov_bundle* raw, std::shared_ptr<const std::string> data, std::string path) {
  Bundle out{std::shared_ptr<sprov_bundle>(raw, sprov_bundle_free), "", std::move(data), std::move(path)};
  char digest[SPROV_DIGEST_STRLEN] = {};
  check(sprov_bundle_digest(raw, digest, sizeof(digest)));
  out.digest = digest;
  return out;
}

/// A whole file's bytes; FileMissingError etc. naming it (errno as the C ABI reports it).
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CallError{-(errno ? errno : EIO), "cannot read '" + path + "': " + std::strerror(errno ? errno : EIO)};
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

std::vector<BundleModule> bundle_modules(const Bundle& b) {
  std::vector<BundleModule> out;
  const size_t n = sprov_bundle_module_count(b.b.get());
  for (size_t i = 0; i < n; i++) {
    sprov_bundle_module m{};
    m.sz = sizeof(m);
    check(sprov_bundle_module_info(b.b.get(), i, &m));
    BundleModule o;
    o.index = i;
    o.id_kind = str(sprov_bundle_id_kind_name(static_cast<int>(m.id_kind)));
    o.id = str(m.id_hex);
    o.name = str(m.name);
    o.sha256_file = str(m.sha256_file);
    o.sha256_debug = str(m.sha256_debug);
    o.ranges = m.range_count;
    o.return_pads = m.pad_count;
    o.unwind_rows = m.unwind_row_count;
    o.debug_blob = m.debug_blob_size;
    out.push_back(std::move(o));
  }
  return out;
}

/// The id kind's number for its name ("elf-build-id", ...).
int id_kind_of(const std::string& name) {
  for (int k = SPROV_BUNDLE_ID_ELF_BUILD_ID; k <= SPROV_BUNDLE_ID_MACHO_UUID; k++)
    if (name == sprov_bundle_id_kind_name(k)) return k;
  fail_arg("invalid id kind '" + name + "' (expected elf-build-id, pdb-guid-age or macho-uuid)");
}

/// The module a lookup is about: build_id= (ELF), module= (index), or the only one.
size_t pick_module(const Bundle& b, std::optional<size_t> module, const std::optional<std::string>& build_id) {
  const size_t n = sprov_bundle_module_count(b.b.get());
  if (module && build_id) fail_arg("give module= or build_id=, not both (build_id '" + *build_id + "')");
  if (build_id) {
    size_t idx = 0;
    check(sprov_bundle_find_module(b.b.get(), SPROV_BUNDLE_ID_ELF_BUILD_ID, build_id->c_str(), &idx));
    return idx;
  }
  if (module) {
    if (*module >= n)
      fail_arg("invalid module " + std::to_string(*module) + " (the bundle " + b.digest + " holds " + std::to_string(n) +
               " module(s))");
    return *module;
  }
  if (n != 1)
    fail_arg("the bundle " + b.digest + " holds " + std::to_string(n) + " modules: give module= or build_id=");
  return 0;
}

/// Progress of Bundle.build, forwarded to a Python callable (the GIL is taken for the call); an
/// exception it raises is kept and re-raised when the build returns.
struct BuildProgress {
  py::object fn;
  std::unique_ptr<py::error_already_set> err;
  static void report(void* p, size_t done, size_t count, uint64_t bytes_done, uint64_t bytes_total) {
    auto* self = static_cast<BuildProgress*>(p);
    py::gil_scoped_acquire gil;
    if (self->err) return;
    try {
      self->fn(done, count, bytes_done, bytes_total);
    } catch (py::error_already_set& e) {
      self->err = std::make_unique<py::error_already_set>(std::move(e));
    }
  }
};

Bundle build_bundle(const std::vector<std::string>& paths, const std::optional<std::vector<std::optional<std::string>>>& names,
                    const std::optional<std::vector<std::string>>& debug_dirs, bool include_debug, py::object progress) {
  if (paths.empty()) fail_arg("Bundle.build needs at least one module file (paths is empty)");
  if (names && names->size() != paths.size())
    fail_arg("names has " + std::to_string(names->size()) + " entries for " + std::to_string(paths.size()) +
             " path(s): give one name (or None) per path");
  std::vector<const char*> pp, np, dp;
  for (const auto& p : paths) pp.push_back(p.c_str());
  if (names)
    for (const auto& n : *names) np.push_back(cstr(n));
  if (debug_dirs)
    for (const auto& d : *debug_dirs) dp.push_back(d.c_str());
  BuildProgress prog{progress, nullptr};
  sprov_bundle_build_opts o{};
  o.sz = sizeof(o);
  o.names = names ? np.data() : nullptr;
  o.debug_dirs = debug_dirs ? dp.data() : nullptr;
  o.debug_dir_count = dp.size();
  o.flags = include_debug ? SPROV_BUNDLE_INCLUDE_DEBUG : 0;
  o.progress = progress.is_none() ? nullptr : &BuildProgress::report;
  o.progress_ctx = &prog;
  void* out = nullptr;
  size_t len = 0;
  int rc = 0;
  std::string msg;
  {
    py::gil_scoped_release nogil;
    rc = sprov_bundle_build(pp.data(), pp.size(), &o, &out, &len, nullptr, 0);
    if (rc != 0) msg = sprov_last_error_message() ? sprov_last_error_message() : "";
  }
  if (prog.err) {
    sprov_free(out);
    throw *prog.err;
  }
  if (rc != 0) throw CallError{rc, msg.empty() ? sprov_strerror(rc) : msg};
  auto data = std::make_shared<const std::string>(static_cast<const char*>(out), len);
  sprov_free(out);
  py::gil_scoped_release nogil;
  sprov_bundle* b = nullptr;
  check(sprov_bundle_open_buf(data->data(), data->size(), &b));
  return wrap_bundle(b, data, "");
}

/// A content-addressed bundle store directory (doc/bundles.md "Store").
struct BundleStore {
  std::shared_ptr<sprov_bundle_store> s;
  void close() { s.reset(); }
  sprov_bundle_store* get() const {
    if (!s) fail_arg("the Store is closed");
    return s.get();
  }
};

std::string store_blob_path(const BundleStore& st, const std::string& digest) {
  char* out = nullptr;
  size_t n = 0;
  check(sprov_bundle_store_blob_path(st.get(), digest.c_str(), &out, &n));
  std::string s(out, n);
  sprov_free(out);
  return s;
}

std::string store_find(const BundleStore& st, const std::string& id_hex, const std::string& kind) {
  const int k = id_kind_of(kind);
  char digest[SPROV_DIGEST_STRLEN] = {};
  check(sprov_bundle_store_find(st.get(), k, id_hex.c_str(), digest, sizeof(digest)));
  return digest;
}

/// The digest given, or the one the store's id map names for build_id (exactly one of them).
std::string digest_or_find(const BundleStore& s, const std::optional<std::string>& digest,
                           const std::optional<std::string>& build_id, const std::string& kind) {
  if (digest && build_id) fail_arg("give digest or build_id=, not both (build_id '" + *build_id + "')");
  if (!digest && !build_id) fail_arg("give a digest or build_id=");
  return digest ? *digest : store_find(s, *build_id, kind);
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

/// The outcome of a trace replay (sprov_replay_report).
struct ReplayReport {
  std::shared_ptr<sprov_replay_report> r;
  std::string format(int fmt) const {
    return lib_str([&](char** out, size_t* len) { return sprov_replay_report_format(r.get(), fmt, out, len); });
  }
};

/// A JSON document of the trace store (sprov_trace_*_json), read without the GIL under the store's lock.
template <class F>
std::string store_json(TraceStore& t, F&& call) {
  char* out = nullptr;
  size_t n = 0;
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(*t.mu);
  check(call(t.get(), &out, &n));
  return take(out, n);
}

/// A transparency log directory (sprov_tlog: one handle per thread, so calls are serialized).
struct Log {
  std::shared_ptr<sprov_tlog> l;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  void close() {
    std::lock_guard<std::mutex> lock(*mu);
    l.reset();
  }
  sprov_tlog* get() const {
    if (!l) fail_arg("the Log is closed");
    return l.get();
  }
};

/// close(), and the context-manager protocol that calls it on exit.
template <class T>
void closable(py::class_<T>& cls, const char* doc) {
  cls.def("close", [](T& t) {
       py::gil_scoped_release nogil;
       t.close();
     }, doc)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](T& t, py::args) {
        py::gil_scoped_release nogil;
        t.close();
      });
}

}  // namespace

PYBIND11_MODULE(_stackprov, m) {
  m.doc() = "stackprov C ABI binding (use the `stackprov` package)";
  m.attr("__version__") = std::string(sprov_version());
  m.attr("ABI_VERSION_NUMBER") = SPROV_VERSION_NUMBER;

  // C errors -> stackprov._errors.from_code(code, message): the Error subclass instance.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CallError& e) {
      py::object exc = py::module_::import("stackprov._errors").attr("from_code")(e.code, e.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  m.def("strerror", [](int code) { return std::string(sprov_strerror(code)); },
        "The library's message for an error code.");
  m.def("error_codes", []() {
    std::vector<std::pair<std::string, int>> v;
#define SPROV_X_PAIR(name, value, msg) v.emplace_back(#name, value);
    SPROV_ERRORS(SPROV_X_PAIR)
#undef SPROV_X_PAIR
    return v;
  }, "[(name, code)] of the library's own error codes (errors.h).");

  py::class_<InlineFrame>(m, "InlineFrame", "One function of an inline chain (innermost first).")
      .def_readonly("function", &InlineFrame::function)
      .def_readonly("linkage_name", &InlineFrame::linkage_name)
      .def_readonly("file", &InlineFrame::file)
      .def_readonly("line", &InlineFrame::line)
      .def_readonly("column", &InlineFrame::column)
      .def_readonly("discriminator", &InlineFrame::discriminator)
      .def_readonly("start_line", &InlineFrame::start_line)
      .def_readonly("start_file", &InlineFrame::start_file)
      .def_readonly("start_address", &InlineFrame::start_address)
      .def_readonly("resolver", &InlineFrame::resolver)
      .def_readonly("source", &InlineFrame::source)
      .def("__repr__", [](const InlineFrame& f) {
        return "InlineFrame(" + f.function + " at " + f.file + ":" + std::to_string(f.line) + ":" +
               std::to_string(f.column) + ")";
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
      .def_property_readonly("line", [](const Frame& f) -> py::object {
        if (f.line == 0) return py::none();
        return py::int_(f.line);
      }, "source line, None when unknown (as file)")
      .def_readonly("column", &Frame::column)
      .def_readonly("inlined", &Frame::inlined, "functions inlined at this pc, innermost first")
      .def_readonly("signal_handler_called", &Frame::signal_handler_called)
      .def_readonly("runtime", &Frame::runtime, "\"python\" for a CPython frame (method \"runtime\"), else None")
      .def_readonly("qualname", &Frame::qualname, "a runtime frame's qualified name (CPython co_qualname)")
      .def_readonly("entry", &Frame::entry, "a runtime frame that its eval activation entered first")
      .def_readonly("native_index", &Frame::native_index,
                    "a runtime frame's native frame (the eval activation running it), -1 when none")
      .def_readonly("frame_address", &Frame::frame_address, "a runtime frame's address in the target")
      .def_readonly("code_address", &Frame::code_address, "a runtime frame's code object in the target")
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

  py::class_<Thread>(m, "Thread", "One thread's stack.")
      .def_readonly("tid", &Thread::tid)
      .def_readonly("name", &Thread::name)
      .def_readonly("frames", &Thread::frames)
      .def_readonly("stop_reason", &Thread::stop_reason)
      .def("__repr__", [](const Thread& t) {
        return "Thread(tid=" + std::to_string(t.tid) + ", name='" + t.name + "', " +
               std::to_string(t.frames.size()) + " frames, stop=" + t.stop_reason + ")";
      });

  py::class_<ProcessInfo>(m, "ProcessInfo", "What a capture knows besides the registers.")
      .def_readonly("pid", &ProcessInfo::pid)
      .def_readonly("core", &ProcessInfo::core)
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
      .def_readonly("build_id_mismatch", &ProcessInfo::build_id_mismatch);

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
           "One inline chain (innermost first, physical function last) per address.");

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
      }, py::arg("index"));

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
      .def("capture", [](const Context& c, int64_t pid, int64_t tid) {
        CtxPtr ctx = c.get();
        check_target(pid, std::nullopt, std::nullopt);
        py::gil_scoped_release nogil;
        return open_process(ctx, pid, std::nullopt, std::nullopt, tid);
      }, py::arg("pid"), py::kw_only(), py::arg("tid") = 0, "Captures every thread (or `tid`) of a live process.")
      .def("open_core", [](const Context& c, std::string core, std::optional<std::string> exe, int64_t tid) {
        CtxPtr ctx = c.get();
        py::gil_scoped_release nogil;
        return open_process(ctx, std::nullopt, core, exe, tid);
      }, py::arg("core"), py::kw_only(), py::arg("exe") = py::none(), py::arg("tid") = 0)
      .def("_stack", [](const Context& c, std::optional<int64_t> pid, std::optional<std::string> core,
                        std::optional<std::string> exe, int64_t tid, uint32_t max_frames, bool lines,
                        std::string python) {
        StackResult r = stack_of(c.get(), pid, core, exe, tid, max_frames, lines, python);
        return std::make_pair(r.info, r.threads);
      }, py::arg("pid"), py::arg("core"), py::arg("exe"), py::arg("tid"), py::arg("max_frames"), py::arg("lines"),
      py::arg("python") = "auto");

  closable(unwinder_cls, "Frees the C unwinder now (also done by the GC).");
  closable(symbolizer_cls, "Frees the C symbolizer now (also done by the GC).");
  closable(process_cls, "Drops the process (snapshots taken from it keep it alive while they live).");
  closable(context_cls,
           "Drops this object's reference; the C context is freed once no unwinder, symbolizer or process uses it.");

  py::class_<TraceStore> trace_store_cls(m, "TraceStore",
      "A trace store (sqlite:PATH or postgresql://...; None: the default store, doc/traces.md).");
  trace_store_cls
      .def(py::init([](std::optional<std::string> url) {
             sprov_trace_store* t = nullptr;
             {
               py::gil_scoped_release nogil;
               check(sprov_trace_store_open(cstr(url), &t));
             }
             return TraceStore{std::shared_ptr<sprov_trace_store>(t, sprov_trace_store_free)};
           }),
           py::arg("url") = py::none())
      .def_property_readonly("url", [](const TraceStore& t) { return std::string(sprov_trace_store_url(t.get())); },
                             "The store's URL, any password replaced by ***.")
      .def("_capture", [](TraceStore& t, const Context& c, const Process& p, bool bundle, uint32_t max_frames,
                          std::optional<std::string> sign_key, std::optional<std::string> log_dir,
                          std::optional<std::string> log_key) {
        CtxPtr ctx = c.get();
        if (!p.proc) fail_arg("the Process is closed");
        char id[SPROV_TRACE_ID_STRLEN] = {};
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_capture_opts o{};
        o.sz = sizeof(o);
        o.flags = bundle ? SPROV_TRACE_BUNDLE : 0;
        o.max_frames = max_frames;
        o.sign_key = cstr(sign_key);
        o.log_dir = cstr(log_dir);
        o.log_key = cstr(log_key);
        check(sprov_trace_capture(ctx.get(), p.proc.get(), t.get(), &o, id, sizeof(id)));
        return std::string(id);
      }, py::arg("context"), py::arg("process"), py::arg("bundle"), py::arg("max_frames"),
         py::arg("sign_key") = py::none(), py::arg("log_dir") = py::none(), py::arg("log_key") = py::none())
      .def("_resolve", [](TraceStore& t, const Context& c, const std::string& id, bool offline,
                          const std::vector<std::string>& bundles) {
        CtxPtr ctx = c.get();
        std::vector<const char*> bp;
        for (const auto& b : bundles) bp.push_back(b.c_str());
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_resolve_opts o{};
        o.sz = sizeof(o);
        o.flags = offline ? SPROV_TRACE_OFFLINE : 0;
        o.bundles = bp.empty() ? nullptr : bp.data();
        o.bundle_count = bp.size();
        check(sprov_trace_resolve(ctx.get(), t.get(), id.c_str(), &o, &out, &n));
        return take(out, n);
      }, py::arg("context"), py::arg("trace_id"), py::arg("offline"), py::arg("bundles"))
      .def("_replay", [](TraceStore& t, const Context& c, const std::string& id, uint32_t seeds, uint64_t first_seed,
                         double min_coverage, double min_success, const std::vector<std::string>& keys,
                         std::optional<std::string> trusted_root) {
        CtxPtr ctx = c.get();
        std::vector<const char*> kp;
        for (const auto& k : keys) kp.push_back(k.c_str());
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        sprov_trace_replay_opts o{};
        o.sz = sizeof(o);
        o.seeds = seeds;
        o.first_seed = first_seed;
        o.min_coverage_pct = min_coverage;
        o.min_success_ratio = min_success;
        o.key_paths = kp.empty() ? nullptr : kp.data();
        o.key_count = kp.size();
        o.trusted_root_path = cstr(trusted_root);
        sprov_replay_report* r = nullptr;
        check(sprov_trace_replay(ctx.get(), t.get(), id.c_str(), &o, &r));
        return ReplayReport{std::shared_ptr<sprov_replay_report>(r, sprov_replay_report_free)};
      }, py::arg("context"), py::arg("trace_id"), py::arg("seeds"), py::arg("first_seed"), py::arg("min_coverage"),
         py::arg("min_success"), py::arg("keys"), py::arg("trusted_root"))
      .def("replays_json", [](TraceStore& t, const std::string& id) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_replays_json(s, id.c_str(), o, n); });
      }, py::arg("trace_id"), "The replays of a trace as replay.result event lines (JSON), oldest first.")
      .def("export_bundle", [](TraceStore& t, const std::string& digest, const BundleStore& bs) {
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*t.mu);
        check(sprov_trace_store_export_bundle(t.get(), digest.c_str(), bs.get()));
      }, py::arg("digest"), py::arg("bundle_store"),
         "Copies the trace store's bundle `digest` (and its signature sidecars) into a bundle Store.")
      .def("get_json", [](TraceStore& t, const std::string& id) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_get_json(s, id.c_str(), o, n); });
      }, py::arg("trace_id"), "The stored trace as one trace.capture event line (JSON).")
      .def("list_json", [](TraceStore& t, size_t limit) {
        return store_json(t, [&](sprov_trace_store* s, char** o, size_t* n) { return sprov_trace_list_json(s, limit, o, n); });
      }, py::arg("limit") = 0, "Every trace as a JSON array, oldest first (at most `limit`; 0: all).");
  closable(trace_store_cls, "Closes the store now (also done by the GC).");

  m.def("_default_context", []() { return Context{default_context()}; });
  m.def("_trace_context", []() {
    py::gil_scoped_release nogil;
    return Context{trace_context()};
  }, "A context whose bundle store is the default directory when it exists (as the CLI's trace commands).");

  // ---- evidence (include/stackprov/bundle.h): digests, keys, DSSE, the local log, offline verification
  m.def("digest_file", [](const std::string& path) {
    char out[SPROV_DIGEST_STRLEN] = {};
    py::gil_scoped_release nogil;
    check(sprov_digest_file(path.c_str(), out, sizeof(out)));
    return std::string(out);
  }, py::arg("path"), "'sha256:<hex>' of a file.");
  m.def("key_generate", [](const std::string& private_path, std::optional<std::string> public_path) {
    const std::string pub = public_path ? *public_path : private_path + ".pub";
    char id[SPROV_KEY_ID_STRLEN] = {};
    py::gil_scoped_release nogil;
    check(sprov_key_generate(private_path.c_str(), pub.c_str(), id, sizeof(id)));
    return std::string(id);
  }, py::arg("private_path"), py::arg("public_path") = py::none(),
     "Generates an ECDSA P-256 key: the private key (SEC1 PEM, mode 0600; must not exist) and the public\n"
     "key (SPKI PEM; default private_path + '.pub'), as `stackprov keygen`. Returns the key id.");
  m.def("key_id", [](const std::string& path) {
    char id[SPROV_KEY_ID_STRLEN] = {};
    check(sprov_key_id(path.c_str(), id, sizeof(id)));
    return std::string(id);
  }, py::arg("path"), "The key id (hex sha256 of the DER SubjectPublicKeyInfo) of a key or certificate file.");
  m.def("log_init", [](const std::string& dir, const std::string& key, std::optional<std::string> origin) {
    std::filesystem::path base(dir);
    if (base.filename().empty()) base = base.parent_path();  // "log/" as "log"
    std::string o = origin ? *origin : "stackprov.local/" + base.filename().string();
    py::gil_scoped_release nogil;
    sprov_tlog* log = nullptr;
    check(sprov_tlog_init(dir.c_str(), o.c_str(), key.c_str(), &log));
    sprov_tlog_free(log);
  }, py::arg("dir"), py::kw_only(), py::arg("key"), py::arg("origin") = py::none(),
     "Creates an empty transparency log in `dir` whose checkpoints `key` signs (also writes\n"
     "dir/log.pub and dir/trusted_root.json), as `stackprov log init`.");
  py::class_<Log> log_cls(m, "Log",
      "A transparency log in the C2SP tlog-tiles layout (doc/provenance.md), as `stackprov log`:\n"
      "append entries, sign checkpoints, prove inclusion and consistency. Calls are serialized.");
  log_cls
      .def(py::init([](const std::string& dir) {
             py::gil_scoped_release nogil;
             sprov_tlog* l = nullptr;
             check(sprov_tlog_open(dir.c_str(), &l));
             return Log{std::shared_ptr<sprov_tlog>(l, sprov_tlog_free)};
           }),
           py::arg("dir"), "Opens the log in `dir` (made by log_init or `stackprov log init`).")
      .def_property_readonly("size", [](const Log& g) {
        std::lock_guard<std::mutex> lock(*g.mu);
        return sprov_tlog_size(g.get());
      }, "Committed number of entries (may be ahead of the signed checkpoint).")
      .def("append", [](Log& g, const std::vector<py::bytes>& entries, std::optional<std::string> key) {
        std::vector<std::string> e(entries.begin(), entries.end());
        std::vector<const void*> ptrs;
        std::vector<size_t> lens;
        for (const auto& x : e) ptrs.push_back(x.data()), lens.push_back(x.size());
        uint64_t first = 0;
        char* note = nullptr;
        size_t n = 0;
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lock(*g.mu);
          check(sprov_tlog_append_checkpoint(g.get(), ptrs.data(), lens.data(), ptrs.size(), cstr(key), &first,
                                             key ? &note : nullptr, key ? &n : nullptr));
        }
        py::object signed_note = py::none();
        if (note) signed_note = py::str(take(note, n));
        return py::make_tuple(first, signed_note);
      }, py::arg("entries"), py::kw_only(), py::arg("key") = py::none(),
         "Appends entries (bytes, each 1..65535 bytes) in one crash-safe step; returns (index of the\n"
         "first, the signed checkpoint of the new size when `key` (the log's private key) is given,\n"
         "else None). With a key that is not the log's, nothing is written.")
      .def("checkpoint", [](Log& g, const std::string& key) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_checkpoint(g.get(), key.c_str(), &out, &n));
        return take(out, n);
      }, py::kw_only(), py::arg("key"), "Signs a checkpoint of the committed size; returns the signed note.")
      .def("find", [](Log& g, py::bytes entry) -> std::optional<uint64_t> {
        std::string e = entry;
        uint64_t index = 0;
        int rc;
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lock(*g.mu);
          rc = sprov_tlog_find(g.get(), e.data(), e.size(), &index);
        }
        if (rc == SPROV_ERR_NOT_FOUND) return std::nullopt;
        check(rc);
        return index;
      }, py::arg("entry"), "Index of the first entry equal to the bytes, or None.")
      .def("prove", [](Log& g, uint64_t index) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_prove(g.get(), index, &out, &n));
        return take(out, n);
      }, py::arg("index"), "Inclusion proof of entry `index` against the stored checkpoint (tlog-proof@v1 text).")
      .def("consistency", [](Log& g, uint64_t old_size, uint64_t new_size) {
        char* out = nullptr;
        size_t n = 0;
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_consistency(g.get(), old_size, new_size, &out, &n));
        return take(out, n);
      }, py::arg("old_size"), py::arg("new_size") = 0,
         "Consistency proof from old_size to new_size (0: the stored checkpoint's size), as text.")
      .def("fsck", [](Log& g) {
        py::gil_scoped_release nogil;
        std::lock_guard<std::mutex> lock(*g.mu);
        check(sprov_tlog_fsck(g.get()));
      }, "Re-derives every tile hash and the root from the entries and checks the checkpoint.");
  closable(log_cls, "Releases the log (also at the end of a `with` block).");
  m.def("log_verify_proof", [](const std::string& proof, py::bytes entry, const std::string& log_key,
                               const std::string& origin) {
    std::string e = entry;
    py::gil_scoped_release nogil;
    check(sprov_tlog_verify_proof(proof.data(), proof.size(), e.data(), e.size(), log_key.c_str(), origin.c_str()));
  }, py::arg("proof"), py::arg("entry"), py::kw_only(), py::arg("log_key"), py::arg("origin"),
     "Offline: verifies a tlog-proof@v1 for `entry` (bytes): the checkpoint signed by `log_key` (a\n"
     "public key file) under `origin`, the entry included; VerificationError when not.");
  m.def("log_verify_consistency", [](const std::string& old_note, const std::string& new_note, const std::string& proof,
                                     const std::string& log_key, const std::string& origin) {
    py::gil_scoped_release nogil;
    check(sprov_tlog_verify_consistency(old_note.c_str(), new_note.c_str(), proof.c_str(), log_key.c_str(),
                                        origin.c_str()));
  }, py::arg("old_note"), py::arg("new_note"), py::arg("proof"), py::kw_only(), py::arg("log_key"), py::arg("origin"),
     "Offline: verifies that the signed checkpoint new_note extends old_note with a proof from\n"
     "Log.consistency; VerificationError when not.");
  m.def("dsse_sign_file", [](const std::string& key, const std::string& artifact, std::optional<std::string> subject_name,
                             std::optional<std::string> predicate_type, std::optional<std::string> predicate_json) {
    sprov_sign_opts o{};
    o.sz = sizeof(o);
    o.subject_name = cstr(subject_name);
    o.predicate_type = cstr(predicate_type);
    o.predicate_json = cstr(predicate_json);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_dsse_sign_file(key.c_str(), artifact.c_str(), &o, out, len); });
  }, py::arg("key"), py::arg("artifact"), py::kw_only(), py::arg("subject_name") = py::none(),
     py::arg("predicate_type") = py::none(), py::arg("predicate_json") = py::none(),
     "A DSSE envelope (JSON) over an in-toto statement whose subject is the file's sha256, signed with `key`.");
  m.def("dsse_verify", [](py::bytes envelope, const std::vector<std::string>& keys, uint32_t threshold,
                          std::optional<std::string> payload_type, std::optional<std::string> subject_digest) {
    std::string env = envelope;
    std::vector<const char*> kp;
    for (const auto& k : keys) kp.push_back(k.c_str());
    sprov_dsse_verify_opts o{};
    o.sz = sizeof(o);
    o.key_paths = kp.empty() ? nullptr : kp.data();
    o.key_count = kp.size();
    o.threshold = threshold;
    o.payload_type = cstr(payload_type);
    o.subject_digest = cstr(subject_digest);
    py::gil_scoped_release nogil;
    check(sprov_dsse_verify(env.data(), env.size(), &o));
  }, py::arg("envelope"), py::kw_only(), py::arg("keys"), py::arg("threshold") = 0, py::arg("payload_type") = py::none(),
     py::arg("subject_digest") = py::none(),
     "Verifies a DSSE envelope (bytes) with trusted public key files; VerificationError when it does not verify.");
  m.def("trace_verify", [](const std::string& digest, std::optional<std::string> envelope, std::optional<std::string> artifact,
                           const std::vector<std::string>& keys, uint32_t threshold, bool dsse, bool log,
                           std::optional<std::string> trusted_root, std::optional<std::string> log_dir,
                           std::optional<std::string> proof) {
    std::vector<const char*> kp;
    for (const auto& k : keys) kp.push_back(k.c_str());
    sprov_trace_verify_opts o{};
    o.sz = sizeof(o);
    o.digest = digest.c_str();
    o.artifact_path = cstr(artifact);
    o.envelope_path = cstr(envelope);
    o.check_dsse = dsse;
    o.check_log = log;
    o.key_paths = kp.empty() ? nullptr : kp.data();
    o.key_count = kp.size();
    o.threshold = threshold;
    o.trusted_root_path = cstr(trusted_root);
    o.log_dir = cstr(log_dir);
    o.proof_path = cstr(proof);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_trace_verify(&o, out, len); });
  }, py::arg("digest"), py::kw_only(), py::arg("envelope") = py::none(), py::arg("artifact") = py::none(),
     py::arg("keys") = std::vector<std::string>{}, py::arg("threshold") = 0, py::arg("dsse") = true, py::arg("log") = false,
     py::arg("trusted_root") = py::none(), py::arg("log_dir") = py::none(), py::arg("proof") = py::none(),
     "Verifies offline an artifact's DSSE envelope (dsse=True, with `keys`) and/or its inclusion in a\n"
     "transparency log (log=True: log_dir= or proof=, trusted_root=); returns the report ('ok <check>' lines).");
  m.def("sigstore_verify", [](const std::string& bundle, const std::string& trusted_root, std::optional<std::string> artifact,
                              std::optional<std::string> artifact_digest) {
    sprov_sigstore_opts o{};
    o.sz = sizeof(o);
    o.artifact_path = cstr(artifact);
    o.artifact_digest = cstr(artifact_digest);
    py::gil_scoped_release nogil;
    return lib_str([&](char** out, size_t* len) { return sprov_sigstore_verify(bundle.c_str(), trusted_root.c_str(), &o, out, len); });
  }, py::arg("bundle"), py::arg("trusted_root"), py::kw_only(), py::arg("artifact") = py::none(),
     py::arg("artifact_digest") = py::none(),
     "Offline verification of a Sigstore bundle file against a trusted root JSON file; returns the report.");

  py::class_<ReplayReport>(m, "ReplayReport",
      "The outcome of trace_replay: figures, the gate's checks and per-seed results (doc/traces.md \"Replay\").")
      .def_property_readonly("exit_code", [](const ReplayReport& r) { return sprov_replay_report_exit_code(r.r.get()); },
                             "the gate: 0 passed; 3 coverage, 4 success, 5 dsse, 6 inclusion, 7 platform-id "
                             "(the first failed check, as `stackprov trace-replay` exits)")
      .def_property_readonly("passed", [](const ReplayReport& r) { return sprov_replay_report_exit_code(r.r.get()) == 0; })
      .def_property_readonly("coverage_pct", [](const ReplayReport& r) { return sprov_replay_report_coverage_pct(r.r.get()); },
                             "symbol coverage of the trace, percent")
      .def_property_readonly("success_ratio", [](const ReplayReport& r) { return sprov_replay_report_success_ratio(r.r.get()); },
                             "replayed frames identical to the stored resolution, 0 to 1")
      .def("json", [](const ReplayReport& r) { return r.format(SPROV_REPORT_JSON); },
           "The JSON report (what `stackprov trace-replay --json` prints): figures, checks, seeds.")
      .def("junit", [](const ReplayReport& r) { return r.format(SPROV_REPORT_JUNIT); },
           "The JUnit XML report: one testcase per check and per seed (`trace-replay --junit FILE`).")
      .def("summary", [](const ReplayReport& r) { return r.format(SPROV_REPORT_SUMMARY); },
           "One line: '... % coverage, ... % success ...: PASS|FAIL <checks>'.")
      .def("to_dict", [](const ReplayReport& r) { return py::module_::import("json").attr("loads")(r.format(SPROV_REPORT_JSON)); },
           "json() parsed.")
      .def("__repr__", [](const ReplayReport& r) {
        return "ReplayReport(exit_code=" + std::to_string(sprov_replay_report_exit_code(r.r.get())) + ", coverage_pct=" +
               std::to_string(sprov_replay_report_coverage_pct(r.r.get())) + ", success_ratio=" +
               std::to_string(sprov_replay_report_success_ratio(r.r.get())) + ")";
      });

  py::class_<BundleModule>(m, "BundleModule", "One module of a symbol bundle (sprov_bundle_module).")
      .def_readonly("index", &BundleModule::index)
      .def_readonly("id_kind", &BundleModule::id_kind, "elf-build-id, pdb-guid-age or macho-uuid")
      .def_readonly("id", &BundleModule::id, "the identity, lower-case hex (ELF: the GNU build-id)")
      .def_readonly("name", &BundleModule::name)
      .def_readonly("sha256_file", &BundleModule::sha256_file, "64 hex digits (zeros: unknown)")
      .def_readonly("sha256_debug", &BundleModule::sha256_debug)
      .def_readonly("ranges", &BundleModule::ranges)
      .def_readonly("return_pads", &BundleModule::return_pads)
      .def_readonly("unwind_rows", &BundleModule::unwind_rows)
      .def_readonly("debug_blob", &BundleModule::debug_blob, "bytes of the embedded debug file (0: none)")
      .def("__repr__", [](const BundleModule& b) { return "BundleModule(" + b.id_kind + " " + b.id + ", name='" + b.name + "')"; });

  py::class_<Bundle>(m, "Bundle",
      "A symbol bundle (doc/bundles.md): one file per set of modules, named by the sha256 of its bytes.")
      .def_static("build", &build_bundle, py::arg("paths"), py::kw_only(), py::arg("names") = py::none(),
                  py::arg("debug_dirs") = py::none(), py::arg("include_debug") = false, py::arg("progress") = py::none(),
                  "Builds one bundle with a module for each ELF file of `paths` (each needs a GNU build-id;\n"
                  "deterministic: equal inputs give equal bytes, as `stackprov bundle build`). names: one module\n"
                  "name (or None: the basename) per path; debug_dirs: where separate debug files are searched\n"
                  "(None: /usr/lib/debug); include_debug: embed each module's debug file; progress: a callable\n"
                  "(modules_done, module_count, bytes_done, bytes_total). Runs without the GIL.")
      .def_static("open", [](const std::string& path) {
        py::gil_scoped_release nogil;
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_file(path.c_str(), &b));
        return wrap_bundle(b, nullptr, path);
      }, py::arg("path"), "Maps the bundle file at `path` (validated).")
      .def_static("from_bytes", [](py::bytes data) {
        auto d = std::make_shared<const std::string>(data);
        py::gil_scoped_release nogil;
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_buf(d->data(), d->size(), &b));
        return wrap_bundle(b, d, "");
      }, py::arg("data"), "Opens a bundle from its bytes (validated).")
      .def_readonly("digest", &Bundle::digest, "'sha256:<hex>' of the bundle's bytes")
      .def_property_readonly("size", [](const Bundle& b) { return sprov_bundle_size(b.b.get()); })
      .def_property_readonly("modules", &bundle_modules, "the modules, in the bundle's order")
      .def("to_bytes", [](const Bundle& b) {
        if (b.data) return py::bytes(*b.data);
        std::string s;
        {
          py::gil_scoped_release nogil;
          s = read_file(b.path);
        }
        return py::bytes(s);
      }, "The bundle's bytes (their sha256 is `digest`).")
      .def("save", [](const Bundle& b, const std::string& path) {
        std::string s = b.data ? *b.data : std::string();
        py::gil_scoped_release nogil;
        if (!b.data) s = read_file(b.path);
        // temp (O_EXCL) + fsync + rename, as every stackprov writer: readers never see a partial
        // file and a name planted beside `path` is never opened.
        check(sprov_file_write(path.c_str(), s.data(), s.size(), 0644));
      }, py::arg("path"), "Writes the bundle's bytes to `path` (temp file + fsync + rename; mode 0644).")
      .def("lookup", [](const Bundle& b, uint64_t address, std::optional<size_t> module, std::optional<std::string> build_id) {
        const size_t idx = pick_module(b, module, build_id);
        sprov_bundle_chain* chain = nullptr;
        check(sprov_bundle_lookup(b.b.get(), idx, address, &chain));
        std::vector<InlineFrame> out;
        for (size_t i = 0; i < chain->count; i++) {
          InlineFrame f;
          f.function = f.linkage_name = str(chain->frames[i].function);
          f.file = str(chain->frames[i].file);
          f.line = chain->frames[i].line;
          f.column = chain->frames[i].column;
          f.resolver = "bundle";
          f.source = b.digest;
          out.push_back(std::move(f));
        }
        sprov_free(chain);
        return out;
      }, py::arg("address"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The inline chain at a module-relative (link-time) address, innermost first (function: the\n"
         "linkage name); [] when no range covers it. module=/build_id= pick the module (needed when\n"
         "the bundle holds several), as `stackprov bundle lookup`.")
      .def("unwind_row", [](const Bundle& b, uint64_t address, std::optional<size_t> module, std::optional<std::string> build_id) {
        const size_t idx = pick_module(b, module, build_id);
        return lib_str([&](char** out, size_t* len) { return sprov_bundle_unwind_row_text(b.b.get(), idx, address, out, len); });
      }, py::arg("address"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The unwind row covering `address` as text (llvm-dwarfdump notation), or end-of-stack, full, none.")
      .def("export", [](const Bundle& b, const std::string& format, std::optional<size_t> module,
                        std::optional<std::string> build_id) {
        int fmt = 0;
        if (format == "symbol-index-json") fmt = SPROV_BUNDLE_EXPORT_SYMBOL_INDEX_JSON;
        else if (format == "symbfile") fmt = SPROV_BUNDLE_EXPORT_SYMBFILE;
        else fail_arg("invalid format '" + format + "' (expected symbol-index-json or symbfile)");
        std::optional<size_t> idx;
        if (module || build_id) idx = pick_module(b, module, build_id);
        void* out = nullptr;
        size_t n = 0;
        {
          py::gil_scoped_release nogil;
          check(sprov_bundle_export(b.b.get(), fmt, idx ? &*idx : nullptr, &out, &n));
        }
        py::bytes r(static_cast<const char*>(out), n);
        sprov_free(out);
        return r;
      }, py::arg("format"), py::kw_only(), py::arg("module") = py::none(), py::arg("build_id") = py::none(),
         "The bundle's records as symbol-index-json (every module, or one) or symbfile (one module).")
      .def("__repr__", [](const Bundle& b) {
        return "Bundle(" + b.digest + ", " + std::to_string(sprov_bundle_module_count(b.b.get())) + " module(s))";
      });

  py::class_<BundleStore> store_cls(m, "Store",
      "A content-addressed bundle store directory (doc/bundles.md \"Store\"): blobs named by their\n"
      "sha256, an id map from module identities (build-ids) to bundles, signature sidecars.");
  store_cls
      .def(py::init([](std::optional<std::string> dir, bool create) {
             py::gil_scoped_release nogil;
             sprov_bundle_store* s = nullptr;
             check(sprov_bundle_store_open(cstr(dir), create ? SPROV_BUNDLE_STORE_CREATE : 0, &s));
             return BundleStore{std::shared_ptr<sprov_bundle_store>(s, sprov_bundle_store_free)};
           }),
           py::arg("dir") = py::none(), py::kw_only(), py::arg("create") = false,
           "Opens the store at `dir` (None: $STACKPROV_STORE, else $XDG_DATA_HOME/stackprov/store, else\n"
           "~/.local/share/stackprov/store); create=True makes it when missing.")
      .def_static("default_dir", []() {
        char* out = nullptr;
        size_t n = 0;
        check(sprov_bundle_store_default_dir(&out, &n));
        return take(out, n);
      }, "The default store directory.")
      .def_property_readonly("dir", [](const BundleStore& s) { return std::string(sprov_bundle_store_dir(s.get())); })
      .def("put", [](BundleStore& s, const Bundle& b, bool index) {
        std::string d = b.data ? *b.data : std::string();
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        if (!b.data) d = read_file(b.path);
        check(index ? sprov_bundle_store_put(s.get(), d.data(), d.size(), digest, sizeof(digest))
                    : sprov_bundle_store_put_blob(s.get(), d.data(), d.size(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("bundle"), py::kw_only(), py::arg("index") = true,
         "Stores a Bundle; returns its digest. index=True (an explicit act of the store's user) makes the\n"
         "store serve its modules' identities from it; index=False stores it by content only (a bundle\n"
         "built from files you do not trust: found by digest, never by identity).")
      .def("put", [](BundleStore& s, py::bytes data, bool index) {
        std::string d = data;
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        check(index ? sprov_bundle_store_put(s.get(), d.data(), d.size(), digest, sizeof(digest))
                    : sprov_bundle_store_put_blob(s.get(), d.data(), d.size(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("data"), py::kw_only(), py::arg("index") = true,
         "Validates and stores a bundle's bytes (index as for put(Bundle)); returns its digest.")
      .def("put_file", [](BundleStore& s, const std::string& path) {
        char digest[SPROV_DIGEST_STRLEN] = {};
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_put_file(s.get(), path.c_str(), digest, sizeof(digest)));
        return std::string(digest);
      }, py::arg("path"), "As put(), for a bundle file (indexed).")
      .def("promote", [](BundleStore& s, const std::string& digest) {
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_promote(s.get(), digest.c_str()));
      }, py::arg("digest"), "Indexes the modules of a bundle stored by content (an explicit act).")
      .def("find", [](const BundleStore& s, const std::string& id, const std::string& kind) {
        py::gil_scoped_release nogil;
        return store_find(s, id, kind);
      }, py::arg("build_id"), py::kw_only(), py::arg("kind") = "elf-build-id",
         "The digest of the bundle the id map names for a module identity (hex); NotFoundError when none.")
      .def("blob_path", [](const BundleStore& s, const std::string& digest) { return store_blob_path(s, digest); },
           py::arg("digest"), "The path of a stored bundle's blob; NotFoundError when absent.")
      .def("get", [](const BundleStore& s, std::optional<std::string> digest, std::optional<std::string> build_id,
                     const std::string& kind) {
        std::string data;
        {
          py::gil_scoped_release nogil;
          data = read_file(store_blob_path(s, digest_or_find(s, digest, build_id, kind)));
        }
        return py::bytes(data);
      }, py::arg("digest") = py::none(), py::kw_only(), py::arg("build_id") = py::none(), py::arg("kind") = "elf-build-id",
         "A stored bundle's bytes, by digest ('sha256:<hex>' or 64 hex) or by a module's build_id=.")
      .def("open", [](const BundleStore& s, std::optional<std::string> digest, std::optional<std::string> build_id,
                      const std::string& kind) {
        py::gil_scoped_release nogil;
        const std::string d = digest_or_find(s, digest, build_id, kind);
        sprov_bundle* b = nullptr;
        check(sprov_bundle_open_digest(s.get(), d.c_str(), &b));
        return wrap_bundle(b, nullptr, store_blob_path(s, d));
      }, py::arg("digest") = py::none(), py::kw_only(), py::arg("build_id") = py::none(), py::arg("kind") = "elf-build-id",
         "Opens a stored bundle (by digest or a module's build_id=) as a Bundle.")
      .def("list", [](const BundleStore& s) {
        // The C ABI has no listing: the blobs are the files blobs/sha256/<hh>/<64 hex> (doc/bundles.md "Store").
        namespace fs = std::filesystem;
        std::vector<std::string> out;
        const fs::path root = fs::path(sprov_bundle_store_dir(s.get())) / "blobs" / "sha256";
        std::error_code ec;
        for (fs::directory_iterator d(root, ec), end; !ec && d != end; d.increment(ec)) {
          const std::string hh = d->path().filename().string();
          if (hh.size() != 2 || !d->is_directory()) continue;
          std::error_code ec2;
          for (fs::directory_iterator f(d->path(), ec2), e2; !ec2 && f != e2; f.increment(ec2)) {
            const std::string n = f->path().filename().string();
            if (n.size() == 64 && n.compare(0, 2, hh) == 0 && n.find_first_not_of("0123456789abcdef") == std::string::npos)
              out.push_back("sha256:" + n);
          }
        }
        std::sort(out.begin(), out.end());
        return out;
      }, "The digests of every stored bundle, sorted.")
      .def("__contains__", [](const BundleStore& s, const std::string& digest) {
        char* out = nullptr;
        size_t n = 0;
        const int rc = sprov_bundle_store_blob_path(s.get(), digest.c_str(), &out, &n);
        sprov_free(out);
        if (rc == SPROV_ERR_NOT_FOUND) return false;
        check(rc);
        return true;
      })
      .def("put_sidecar", [](BundleStore& s, const std::string& digest, const std::string& name, py::bytes data) {
        std::string d = data;
        py::gil_scoped_release nogil;
        check(sprov_bundle_store_put_sidecar(s.get(), digest.c_str(), name.c_str(), d.data(), d.size()));
      }, py::arg("digest"), py::arg("name"), py::arg("data"),
         "Stores a sidecar of a bundle (dsse.json, tlog-proof, checkpoint, or a name [a-z0-9.-]{1,32}).")
      .def("sidecar_path", [](const BundleStore& s, const std::string& digest, const std::string& name) {
        return lib_str([&](char** out, size_t* len) { return sprov_bundle_store_sidecar_path(s.get(), digest.c_str(), name.c_str(), out, len); });
      }, py::arg("digest"), py::arg("name"), "The path of a sidecar; NotFoundError when absent.")
      .def("sign", [](BundleStore& s, const std::string& digest, const std::string& key, const std::string& log_dir,
                      std::optional<std::string> log_key) {
        sprov_bundle_sign_opts o{};
        o.sz = sizeof(o);
        o.key_path = key.c_str();
        o.log_dir = log_dir.c_str();
        o.log_key = cstr(log_key);
        uint64_t index = 0;
        py::gil_scoped_release nogil;
        check(sprov_bundle_sign_check(&o));
        check(sprov_bundle_store_sign(s.get(), digest.c_str(), &o, &index));
        return index;
      }, py::arg("digest"), py::kw_only(), py::arg("key"), py::arg("log_dir"), py::arg("log_key") = py::none(),
         "Signs the stored bundle (DSSE envelope, appended to the transparency log `log_dir`, whose\n"
         "checkpoint log_key (default key) signs) and stores the sidecars; returns the log index.\n"
         "Keys that cannot sign raise before the store or the log changes.")
      .def("fsck", [](const BundleStore& s) {
        char* out = nullptr;
        size_t n = 0, errors = 0;
        {
          py::gil_scoped_release nogil;
          check(sprov_bundle_store_fsck(s.get(), &out, &n, &errors));
        }
        return std::make_pair(take(out, n), errors);
      }, "Checks the whole store: (report, number of errors); report lines as `stackprov bundle fsck`.");
  closable(store_cls, "Closes the store now (also done by the GC).");
}
