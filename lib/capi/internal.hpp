// SPDX-License-Identifier: Apache-2.0
// C ABI shims: the structs behind the opaque handles, options checking, exception barrier.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/context.hpp"
#include "pipeline/module_source.hpp"
#include "pipeline/snapshot_walk.hpp"
#include "core/error.hpp"
#include "core/module_cache.hpp"
#include "core/open_file.hpp"
#include "memory/kernel_stack.hpp"
#include "perf/kernel_btf.hpp"
#include "memory/snapshot.hpp"
#include "runtime/python.hpp"
#include "stackprov/kernel.h"
#include "stackprov/stackprov.h"
#include "symbolize/bundle_store.hpp"
#include "symbolize/perf_map.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/resolver_chain.hpp"
#include "symbolize/symbolizer.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/walk.hpp"

/// A pipeline session (ctx, modules, modules_loaded): the C ABI hands it to lib/pipeline as is.
struct sprov_context : stackprov::pipeline::Session {
  using Session::Session;
};

struct sprov_bundle_store {
  explicit sprov_bundle_store(stackprov::symbolize::BundleStore s) : store(std::move(s)) {}
  stackprov::symbolize::BundleStore store;
};

struct sprov_snapshot {
  stackprov::memory::Snapshot snap;
  /// module_list_hash() memoised. A snapshot may be unwound from several
  /// threads at once (the header allows it), so the memo is an atomic: racing
  /// readers compute the same value and store it (relaxed is enough, the value
  /// is a pure function of the immutable module list). 0 means "not computed";
  /// a list whose hash is 0 is simply recomputed each time. Builders that change
  /// the module list (single-threaded by contract) call invalidate_modules_key().
  mutable std::atomic<uint64_t> module_hash{0};
  uint64_t modules_key() const {
    uint64_t h = module_hash.load(std::memory_order_relaxed);
    if (h == 0) {
      h = stackprov::pipeline::modules_key(snap);
      module_hash.store(h, std::memory_order_relaxed);
    }
    return h;
  }
  void invalidate_modules_key() { module_hash.store(0, std::memory_order_relaxed); }
};

/// Language runtime frames read at capture (SPROV_PROCESS_RUNTIME_FRAMES), per OS thread.
struct RuntimeCapture {
  bool attempted = false;        ///< read once, from the first thread's capture callback
  std::string description;       ///< the interpreter that was read ("" when none)
  std::vector<stackprov::runtime::PythonTarget::Range> eval;  ///< _PyEval_EvalFrameDefault (and .cold)
  std::vector<stackprov::runtime::PythonThread> python;
  std::string warnings;          ///< findings, one per line, for sprov_process_warnings
  const stackprov::runtime::PythonThread* thread(int64_t tid) const {
    for (const auto& t : python)
      if (t.tid == tid) return &t;
    return nullptr;
  }
};

struct sprov_process {
  int64_t pid = 0;
  RuntimeCapture runtime;
  std::vector<std::unique_ptr<sprov_snapshot>> threads;  // live: by tid; core: NT_PRSTATUS order
  std::string warnings;                                   // one finding per line
  bool from_core = false;                                 // sprov_process_open_core (no live /proc/PID)
  /// Live: the process's root, held open from before the capture, so that its files are opened
  /// inside it (core/open_file.hpp) for as long as this handle lives, also after the process exits.
  std::shared_ptr<stackprov::HeldRoot> root;
  std::vector<std::string> thread_names;                  // parallel to threads ("" unknown)
  // sprov_process_get_info; its strings point into the std::string members below.
  struct sprov_process_info info = {};
  std::string program, command_line, signal_name, signal_description, signal_code_name, exception_name;
  std::string notes;  // sprov_process_notes: one line each
  /// SPROV_PROCESS_KERNEL_STACKS: each thread's kernel stack, read before the capture attached
  /// (matched to `threads` by tid); `kernel_read` false when not asked for.
  bool kernel_read = false;
  std::vector<stackprov::memory::KernelThread> kernel;
  /// SPROV_PROCESS_KERNEL_BTF: the kernel's BTF, opened at the capture (null when not asked for).
  std::shared_ptr<const stackprov::perf::KernelBtf> btf;
};

/// A stack's kernel segment (sprov_process_kernel_stack): frames [0, frames.size()) of the stack
/// are these, named; the first frame after them is the kernel->user boundary.
struct KernelSegment {
  int32_t state = 0;  ///< enum sprov_kernel_stack_state
  std::vector<stackprov::memory::KernelFrame> frames;
  std::vector<std::string> modules;  ///< parallel: "[kernel.kallsyms]" or "[MODULE]"
  bool with_btf = false;             ///< prototypes asked for (SPROV_PROCESS_KERNEL_BTF)
  std::vector<stackprov::perf::BtfPrototype> protos;  ///< parallel when with_btf; func_id 0: none
  int64_t syscall = -1;
  uint64_t user_sp = 0, user_pc = 0;
  std::string reason;
};

struct sprov_stack {
  std::vector<stackprov::unwind::Frame> frames;
  /// Parallel to `frames` when the unwinder kept registers (SPROV_UNWIND_KEEP_REGISTERS), else empty.
  std::vector<stackprov::unwind::FrameRegs> regs;
  stackprov::Arch arch = stackprov::Arch::kUnknown;
  stackprov::unwind::StopReason stop = stackprov::unwind::StopReason::kNone;
  std::vector<stackprov::unwind::CoroutineLink> links;  ///< uc_link annotations (sprov_stack_coroutine_link)
  /// Shared with the unwinder's module table: the stack outlives the snapshot.
  std::shared_ptr<const std::vector<stackprov::memory::SnapshotModule>> modules;
  /// Parallel to `modules`: the module the walk used (null where none loaded). A module whose image
  /// was rebuilt from the snapshot's memory is named through it, with no snapshot at hand.
  std::shared_ptr<const std::vector<std::shared_ptr<stackprov::unwind::LoadedModule>>> loaded;
  std::string module_root;  // Snapshot::module_root at unwind time
  /// Interleaved stacks (sprov_process_interleave): for each frame, its index into `runtime`
  /// (-1 for native frames); empty for stacks without runtime frames.
  std::vector<int32_t> runtime_of;
  std::vector<stackprov::runtime::PythonFrame> runtime;
  std::vector<int64_t> runtime_native;  ///< parallel to `runtime`: the native frame that runs it, -1 none
  int64_t pid = 0;          // the process whose perf map (/tmp/perf-PID.map) names JIT frames; 0: none
  /// The perf map the walk used for JIT ranges (a trace's captured entries, or /tmp/perf-PID.map):
  /// it names the JIT frames too, offline as well. Null: none was used.
  std::shared_ptr<const stackprov::symbolize::PerfMap> jit;
  KernelSegment kernel;  ///< state 0 (none) unless merged by sprov_process_kernel_stack
};

/// Frame `f` of `st` runs code outside every file-backed module (JIT code, named by a perf map):
/// no module, or perf's "//anon" mapping of a recorded profile.
inline bool outside_modules(const sprov_stack* st, const stackprov::unwind::Frame& f) {
  if (f.module_index < 0) return true;
  return st->modules && static_cast<size_t>(f.module_index) < st->modules->size() &&
         (*st->modules)[f.module_index].path == "//anon";
}

struct sprov_unwinder {
  sprov_context* ctx = nullptr;
  stackprov::unwind::WalkOptions opts;
  stackprov::unwind::RuleCache cache;
  stackprov::unwind::ModuleTable table;
  std::shared_ptr<const std::vector<stackprov::memory::SnapshotModule>> table_modules;
  std::shared_ptr<const std::vector<std::shared_ptr<stackprov::unwind::LoadedModule>>> table_loaded;  ///< parallel
  /// The tables of the module lists unwound before `table`, most recent first:
  /// a switch back to one (interleaved processes: perf-import, agents) swaps it
  /// in instead of resolving every module again (capi/unwinder.cpp build_table).
  struct RecentTable {
    stackprov::unwind::ModuleTable table;
    std::shared_ptr<const std::vector<stackprov::memory::SnapshotModule>> modules;
    std::shared_ptr<const std::vector<std::shared_ptr<stackprov::unwind::LoadedModule>>> loaded;
  };
  std::array<RecentTable, 3> recent_tables;
  stackprov::unwind::WalkResult scratch;  ///< capacity reserved to opts.max_frames at creation
  uint64_t stack_lo = 0, stack_hi = 0;     ///< sprov_unwinder_set_stack
  stackprov::symbolize::PerfMaps perf_maps;  // JIT code ranges of the snapshots' processes
  /// A trace's captured perf-map entries (capi/trace.cpp resolve_threads): the JIT ranges of
  /// every walk instead of /tmp/perf-PID.map, also in offline contexts. Null: none.
  std::shared_ptr<const stackprov::symbolize::PerfMap> captured_jit;
  /// The perf map of the last pid walked (jit_ranges()): a walk of the same pid
  /// takes neither perf_maps' lock nor an allocation.
  int64_t jit_pid = 0;
  std::shared_ptr<const stackprov::symbolize::PerfMap> jit_map;
  /// This process's perf map as sprov_unwinder_set_stack read it: the JIT ranges of
  /// sprov_unwinder_unwind_signal, which reads no file. Null: none (or offline).
  std::shared_ptr<const stackprov::symbolize::PerfMap> signal_jit;
  uint64_t frames = 0;
  uint64_t walks = 0;
};

struct sprov_symbolizer {
  sprov_context* ctx = nullptr;
  std::unique_ptr<stackprov::symbolize::Symbolizer> sym;
  // The resolver chain of sprov_symbolizer_*_ex (context policy): created on first use.
  std::unique_ptr<stackprov::symbolize::ResolverChain> chain;
  stackprov::symbolize::Resolution last;  // the answer whose strings *_ex returned
  bool explain = false;                   // SPROV_SYM_EXPLAIN: *_ex calls fill `attempts`
  std::vector<stackprov::symbolize::ResolveAttempt> attempts;  // why `last` is what it is
  stackprov::symbolize::PerfMaps perf_maps;  // JIT frames: /tmp/perf-PID.map by pid (resolver perfmap)
  uint32_t last_flags = 0;
  std::string last_build_id;
  std::vector<std::string> last_names;  // display names per frame for last_flags
  stackprov::ModuleId last_build_id_raw;  // what last_build_id is the hex of
  // The module of the last path given to sprov_symbolizer_addr / _addr_ex (symbolizer_module).
  std::string path_cached;
  std::shared_ptr<stackprov::unwind::LoadedModule> path_module;
  uint64_t path_checked_ns = 0;
  /// The answer of the last sprov_symbolizer_frame_args (strings of sprov_symbolizer_frame_arg).
  struct Arg {
    std::string name, type, value, reason;
    int32_t status = SPROV_ARG_UNKNOWN;
  };
  std::vector<Arg> args;
};

/// The perf map that names the JIT frames of `st` (doc/runtime-frames.md "JIT code"): the one
/// its walk used, else its process's /tmp/perf-PID.map when `sym`'s context is online; null
/// when there is none.
inline std::shared_ptr<const stackprov::symbolize::PerfMap> stack_perf_map(sprov_symbolizer* sym,
                                                                           const sprov_stack* st) {
  if (st->jit) return st->jit;
  if (st->pid <= 0 || sym->ctx->ctx.config().offline) return nullptr;
  return sym->perf_maps.get(st->pid);
}

namespace stackprov::capi {

/// Stack bytes copied per thread: the caps and defaults of the public option
/// structs (sprov_capture_opts: 256 KiB, sprov_process_opts: 512 KiB).
constexpr uint32_t kMaxStackBytes = 64u << 20;
constexpr uint32_t kSelfDefaultStackBytes = 256 * 1024;
constexpr uint32_t kProcessDefaultStackBytes = 512 * 1024;

/// Validates an options struct like libbpf's OPTS_VALID: NULL is fine; sz must
/// be at least sizeof(size_t); bytes past `known` (what this library knows)
/// must be zero.
template <class T>
int check_opts(const T* opts, size_t known, const char* type_name) {
  if (opts == nullptr) return 0;
  if (opts->sz < sizeof(size_t)) {
    set_last_error(make_error(SPROV_ERR_INVALID_ARG, "%s.sz = %zu is too small", type_name, opts->sz));
    return SPROV_ERR_INVALID_ARG;
  }
  if (opts->sz > known) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(opts);
    for (size_t i = known; i < opts->sz; i++) {
      if (p[i] != 0) {
        set_last_error(make_error(SPROV_ERR_OPTS_TAIL,
                                  "%s: byte %zu of %zu is non-zero; this library knows %zu bytes",
                                  type_name, i, opts->sz, known));
        return SPROV_ERR_OPTS_TAIL;
      }
    }
  }
  return 0;
}

#define SPROV_OFFSETOFEND(TYPE, FIELD) (offsetof(TYPE, FIELD) + sizeof(((TYPE*)0)->FIELD))
#define SPROV_OPTS_KNOWN(TYPE) SPROV_OFFSETOFEND(struct TYPE, TYPE##__last_field)
#define SPROV_OPTS_HAS(opts, TYPE, FIELD) \
  ((opts) != nullptr && (opts)->sz >= SPROV_OFFSETOFEND(struct TYPE, FIELD))
#define SPROV_OPTS_GET(opts, TYPE, FIELD, DEF) (SPROV_OPTS_HAS(opts, TYPE, FIELD) ? (opts)->FIELD : (DEF))

using pipeline::resolver_gives_lines;

/// Records `err` as the thread's last error and returns its code.
inline int fail(const Error& err) {
  set_last_error(err);
  return err.code;
}

}  // namespace stackprov::capi

namespace stackprov {
/// The thread's last error from a code and an optional detail (an exception's what()), without
/// building an Error; never throws (core/error.cpp: the code's own message when memory is short).
void set_last_error(int code, const char* detail) noexcept;
}  // namespace stackprov

namespace stackprov::capi {

/// Runs `fn` (returning int) and converts exceptions into error codes. The handlers allocate
/// nothing (an Error's std::string could throw again while memory is short).
template <class Fn>
int guard(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    set_last_error(SPROV_ERR_NOMEM, "allocation failed");
    return SPROV_ERR_NOMEM;
  } catch (const std::exception& e) {
    set_last_error(SPROV_ERR_INTERNAL, e.what());
    return SPROV_ERR_INTERNAL;
  } catch (...) {
    set_last_error(SPROV_ERR_INTERNAL, "unknown exception");
    return SPROV_ERR_INTERNAL;
  }
}

/// guard() for entry points returning a value or nothing: `fallback` when `fn` throws.
template <class T, class Fn>
T guard_value(T fallback, Fn&& fn) noexcept {
  T out = fallback;
  guard([&] {
    out = fn();
    return 0;
  });
  return out;
}

/// Copies at most out->sz bytes of `full` into `out` (sized output structs).
template <class T>
int fill_out(T* out, const T& full, const char* type_name) {
  if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "%s: NULL output", type_name));
  size_t n = out->sz;
  if (n < sizeof(size_t))
    return fail(make_error(SPROV_ERR_INVALID_ARG, "%s.sz = %zu is too small", type_name, n));
  if (n > sizeof(T)) {
    std::memset(reinterpret_cast<char*>(out) + sizeof(T), 0, n - sizeof(T));
    n = sizeof(T);
  }
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&full) + sizeof(size_t), n - sizeof(size_t));
  return 0;
}

/// Runs one walk of `snap` with memory served by the snapshot and, on misses,
/// by `live` (copied into the snapshot), so that the snapshot alone later
/// reproduces the same walk offline. Used by live-process and core captures.
void prewalk_record(sprov_context* ctx, memory::Snapshot& snap, memory::MemoryReader& live);
/// The calling thread's async registrations (lib/capi/async.cpp, doc/async-stacks.md) into
/// snap.async: every registered coroutine stack and the thread's current async stack root.
void capture_async_registrations(memory::Snapshot& snap);

/// Checks sprov_process_opts.flags (SPROV_ERR_INVALID_ARG naming unknown bits) and sets up `out`
/// so that capture_runtime reads runtime frames only when SPROV_PROCESS_RUNTIME_FRAMES is set.
int prepare_runtime_capture(const struct sprov_process_opts* opts, RuntimeCapture* out);

/// Reads the runtimes' frames of a stopped process or a core through `mem` (once per
/// process: every thread's chain at the first call), found from the modules of `snap`.
/// Problems become warning lines in `out->warnings`.
void capture_runtime(sprov_context* ctx, const memory::Snapshot& snap, memory::MemoryReader& mem,
                     RuntimeCapture* out);

/// Copies what `rt` read into `snap.runtime` (section 5 of a serialized snapshot): the interpreter,
/// its evaluation-loop ranges and the thread state of snap.tid. Nothing when no runtime was read.
void attach_runtime(const RuntimeCapture& rt, memory::Snapshot& snap);
/// The runtime of a process opened from serialized snapshots: each snapshot's section 5 back into
/// the RuntimeCapture that sprov_process_interleave reads (problems become warning lines).
RuntimeCapture runtime_from_snapshots(const std::vector<std::unique_ptr<sprov_snapshot>>& threads);
/// A new stack of `native`'s frames with the runtime frames `py` (innermost first) merged as
/// sprov_process_interleave documents (`mode`: enum sprov_runtime_mode); `eval`: the ranges of the
/// evaluation loop.
std::unique_ptr<sprov_stack> interleave_runtime(const std::vector<runtime::PythonTarget::Range>& eval,
                                                const std::vector<runtime::PythonFrame>& py, const sprov_stack* native,
                                                int mode);
/// How many of `native`'s frames run the evaluation loop (`eval`): the activations runtime frames
/// attach to.
size_t eval_activations(const std::vector<runtime::PythonTarget::Range>& eval, const sprov_stack* native);

using pipeline::ModuleBundle;  ///< the bundle a context's store names for a snapshot module
/// SPROV_ERR_NOT_FOUND (naming the module, its build-id and the store) when there
/// is no store, no build-id or no bundle for it.
Result<ModuleBundle> find_module_bundle(sprov_context* ctx, const memory::SnapshotModule& m);

/// Loads (or finds in the context's cache) the unwind/symbol data of a module.
/// With SPROV_CTX_OFFLINE no file is opened: the module is backed by its bundle
/// (LoadedModule::bundle(), no image). Without it, a file that is missing while a
/// bundle store is configured falls back to the bundle likewise. Callers that need
/// the ELF image check has_elf().
Result<std::shared_ptr<unwind::LoadedModule>> acquire_module(sprov_context* ctx,
                                                             const memory::Snapshot* snap,
                                                             const memory::SnapshotModule& m,
                                                             const std::string& module_root);

/// The module of `stack`'s module `index` for naming its frames: acquire_module without a snapshot,
/// except for a module with no file whose image the walk rebuilt from the snapshot's memory (a
/// module described from memory): the one the walk used (sprov_stack::loaded).
Result<std::shared_ptr<unwind::LoadedModule>> stack_module(sprov_context* ctx, const sprov_stack* stack, int32_t index);

/// The public description of a module (strings owned by `m`).
struct sprov_module_info module_info(const memory::SnapshotModule& m);

/// Checks that `snap` can be unwound and makes `uw`'s module table match its
/// module list (loads modules when the list changed). 0 or the failure's code.
int prepare_snapshot_walk(sprov_unwinder* uw, const sprov_snapshot* snap);

/// The JIT code ranges of process `pid`'s perf map (/tmp/perf-PID.map,
/// doc/runtime-frames.md "JIT code") for a walk, or nullptr (no map, pid <= 0,
/// an offline context). Loads the map on the first walk of a pid (allocates);
/// the next walks of the same pid reuse it. Not async-signal-safe.
/// The JIT code map of a walk of `pid`: a trace's captured entries (captured_jit) if set, else
/// the process's /tmp/perf-PID.map (cached for the last pid; none offline). Null: no map.
const std::shared_ptr<const stackprov::symbolize::PerfMap>& jit_map(sprov_unwinder* uw, int64_t pid);
const std::vector<std::pair<uint64_t, uint64_t>>* jit_ranges(sprov_unwinder* uw, int64_t pid);

/// pipeline::acquire_unwind_module: the modules an unwinder uses (architecture and byte order checked).
inline Result<std::shared_ptr<unwind::LoadedModule>> acquire_unwind_module(sprov_context* ctx,
                                                                           const memory::Snapshot* snap,
                                                                           const memory::SnapshotModule& m,
                                                                           const std::string& module_root, Arch arch,
                                                                           Endian endian) {
  return pipeline::acquire_unwind_module(*ctx, snap, m, module_root, arch, endian);
}

/// The module of a file path for sprov_symbolizer_addr / _addr_ex: the last path's
/// module is kept and re-checked (stat, build-id) at most every 100 ms, so that a stream
/// of addresses of one module costs no system call per address. Errors when the file
/// cannot be opened or is bundle-backed (no image).
Result<std::shared_ptr<unwind::LoadedModule>> symbolizer_module(sprov_symbolizer* sym, const char* module_path);


// The bodies of exported calls, for other shims (lib/capi never calls an exported sprov_*
// function): arguments already checked by the caller, errors set as the exported call sets them.

/// sprov_symbolizer_frame: the symbol tables' name of frame `index` (index in range).
int symbolizer_frame(sprov_symbolizer* sym, const sprov_stack* stack, size_t index, struct sprov_symbol* out);
/// sprov_symbolizer_addr on an online context.
int symbolizer_addr(sprov_symbolizer* sym, const char* module_path, uint64_t address, struct sprov_symbol* out);
/// sprov_symbolizer_frame_args without the guard: the answer in sym->args.
int frame_args(sprov_symbolizer* sym, const sprov_snapshot* snap, const sprov_stack* stack, size_t index, size_t* count);
/// sprov_symbolizer_frame_ex (flags checked): the answer in sym->last, its names in sym->last_names.
int symbolizer_frame_ex(sprov_symbolizer* sym, const sprov_stack* stack, size_t index, uint32_t flags,
                        struct sprov_symbol_info* out);
/// sprov_register_name: NULL when `arch` has no register `reg`.
const char* register_name(int arch, int reg);
/// sprov_stack_coroutine_link of one of the stack's links.
struct sprov_coroutine_link coroutine_link_out(const sprov_stack* stack, const unwind::CoroutineLink& l);
/// sprov_stop_reason_name.
const char* stop_reason_name(int reason) noexcept;
/// A malloc'd copy of `s` for an out parameter (released with sprov_free); 0 or SPROV_ERR_NOMEM.
int give_string(const std::string& s, char** out, size_t* out_len);

/// Thread `index`'s kernel segment (the process captured with SPROV_PROCESS_KERNEL_STACKS): its
/// state, frames and modules, with BTF prototypes when the process has BTF, checked against the
/// captured user pc and sp (the snapshot's registers, else `user`'s frame 0; `user` may be null).
/// sprov_process_kernel_stack merges it; a trace capture stores it (lib/capi/trace.cpp).
KernelSegment process_kernel_segment(const sprov_process* proc, size_t index, const sprov_stack* user);

}  // namespace stackprov::capi
