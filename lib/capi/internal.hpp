// SPDX-License-Identifier: Apache-2.0
// C ABI shims: the structs behind the opaque handles, options checking, exception barrier.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/context.hpp"
#include "core/error.hpp"
#include "core/module_cache.hpp"
#include "memory/snapshot.hpp"
#include "stackprov/stackprov.h"
#include "symbolize/perf_map.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/resolver_chain.hpp"
#include "symbolize/symbolizer.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/walk.hpp"

struct sprov_context {
  explicit sprov_context(stackprov::ContextConfig cfg)
      : ctx(std::move(cfg)), modules(ctx.config().module_cache_capacity) {}
  stackprov::Context ctx;
  stackprov::ModuleCache<stackprov::unwind::LoadedModule> modules;
  std::atomic<uint64_t> modules_loaded{0};
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
      h = snap.module_list_hash();
      module_hash.store(h, std::memory_order_relaxed);
    }
    return h;
  }
  void invalidate_modules_key() { module_hash.store(0, std::memory_order_relaxed); }
};

struct sprov_process {
  int64_t pid = 0;
  std::vector<std::unique_ptr<sprov_snapshot>> threads;  // live: by tid; core: NT_PRSTATUS order
  std::string warnings;                                   // one finding per line
  bool from_core = false;                                 // sprov_process_open_core (no live /proc/PID)
  std::vector<std::string> thread_names;                  // parallel to threads ("" unknown)
  // sprov_process_get_info; its strings point into the std::string members below.
  struct sprov_process_info info = {};
  std::string program, command_line, signal_name, signal_description, signal_code_name;
};

struct sprov_stack {
  std::vector<stackprov::unwind::Frame> frames;
  stackprov::unwind::StopReason stop = stackprov::unwind::StopReason::kNone;
  /// Shared with the unwinder's module table: the stack outlives the snapshot.
  std::shared_ptr<const std::vector<stackprov::memory::SnapshotModule>> modules;
  std::string module_root;  // Snapshot::module_root at unwind time
  int64_t pid = 0;          // the process whose perf map (/tmp/perf-PID.map) names JIT frames; 0: none
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
  stackprov::unwind::WalkResult scratch;
  stackprov::symbolize::PerfMaps perf_maps;  // JIT code ranges of the snapshots' processes
  uint64_t frames = 0;
  uint64_t walks = 0;
};

struct sprov_symbolizer {
  sprov_context* ctx = nullptr;
  std::unique_ptr<stackprov::symbolize::Symbolizer> sym;
  // The resolver chain of sprov_symbolizer_*_ex (context policy): created on first use.
  std::unique_ptr<stackprov::symbolize::ResolverChain> chain;
  stackprov::symbolize::Resolution last;  // the answer whose strings *_ex returned
  stackprov::symbolize::PerfMaps perf_maps;  // JIT frames: /tmp/perf-PID.map by pid (resolver perfmap)
  uint32_t last_flags = 0;
  std::string last_build_id;
  std::vector<std::string> last_names;  // display names per frame for last_flags
};

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

/// Records `err` as the thread's last error and returns its code.
inline int fail(const Error& err) {
  set_last_error(err);
  return err.code;
}

/// Runs `fn` (returning int) and converts exceptions into error codes.
template <class Fn>
int guard(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(Error{SPROV_ERR_NOMEM, "allocation failed"});
  } catch (const std::exception& e) {
    return fail(Error{SPROV_ERR_INTERNAL, e.what()});
  } catch (...) {
    return fail(Error{SPROV_ERR_INTERNAL, "unknown exception"});
  }
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

/// The bundle a context's store names for a snapshot module (by its build-id).
struct ModuleBundle {
  std::string digest;     ///< "sha256:<hex>"
  std::string path;       ///< the blob's file
  std::string store_dir;
};
/// SPROV_ERR_NOT_FOUND (naming the module, its build-id and the store) when there
/// is no store, no build-id or no bundle for it.
Result<ModuleBundle> find_module_bundle(sprov_context* ctx, const memory::SnapshotModule& m);

/// Loads (or finds in the context's cache) the unwind/symbol data of a module.
/// With SPROV_CTX_OFFLINE no file is opened: the module is backed by its bundle
/// (LoadedModule::bundle(), no image). Without it, a file that is missing while a
/// bundle store is configured falls back to the bundle likewise. Callers that need
/// the ELF image check has_image().
Result<std::shared_ptr<unwind::LoadedModule>> acquire_module(sprov_context* ctx,
                                                             const memory::Snapshot* snap,
                                                             const memory::SnapshotModule& m,
                                                             const std::string& module_root);

}  // namespace stackprov::capi
