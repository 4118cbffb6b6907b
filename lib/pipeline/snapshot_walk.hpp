// SPDX-License-Identifier: Apache-2.0
// Unwinding a snapshot and naming its frames with a context's policy, as the C ABI's unwinder and
// symbolizer do: the pieces both share, and a whole walk for pipelines (traces).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/error.hpp"
#include "core/module_cache.hpp"
#include "memory/snapshot.hpp"
#include "pipeline/module_source.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "symbolize/perf_map.hpp"
#include "symbolize/resolver_chain.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/walk.hpp"

#include "stackprov/stackprov.h"

namespace stackprov::pipeline {

/// What a pipeline runs in: a context's configuration, its module cache and the count of modules
/// loaded (the C ABI's sprov_context is one). The cache is thread-safe; the rest is read-only.
struct Session {
  explicit Session(ContextConfig cfg) : ctx(std::move(cfg)), modules(ctx.config().module_cache_capacity) {}
  Context ctx;
  ModuleCache<unwind::LoadedModule> modules;
  std::atomic<uint64_t> modules_loaded{0};
  ModuleSources sources() { return {ctx, ctx.config(), modules, modules_loaded}; }
};

/// A session like `base` whose bundle store is `bundle_store` (empty: none), offline or not, with
/// its own module cache of `module_cache_capacity` entries (0: base's).
std::unique_ptr<Session> derived_session(const Session& base, const std::string& bundle_store, bool offline,
                                         uint32_t module_cache_capacity);

/// The name of a frame's unwind method (enum sprov_method) and of a resolver (enum sprov_resolver):
/// "none" for values without one.
const char* method_name(int method) noexcept;
const char* resolver_name(int resolver) noexcept;

/// Whether frames named by `resolver` (enum sprov_resolver) carry file:line and inline chains:
/// the one rule behind sprov_resolver_gives_lines, the CLI, Python and traces.
constexpr bool resolver_gives_lines(int resolver) noexcept {
  return resolver == SPROV_RESOLVER_DWARF || resolver == SPROV_RESOLVER_DEBUGINFOD ||
         resolver == SPROV_RESOLVER_BUNDLE || resolver == SPROV_RESOLVER_GOPCLNTAB ||
         resolver == SPROV_RESOLVER_PDB;
}

/// acquire_module, refused (SPROV_ERR_ARCH_MISMATCH, "is arm64 little-endian, the target is …")
/// when the module's architecture or byte order is not the target's: the modules an unwinder uses.
Result<std::shared_ptr<unwind::LoadedModule>> acquire_unwind_module(Session& s, const memory::Snapshot* snap,
                                                                    const memory::SnapshotModule& m,
                                                                    const std::string& module_root, Arch arch,
                                                                    Endian endian);

/// SPROV_ERR_UNSUPPORTED when snapshots of `s`'s architecture or byte order cannot be unwound.
Status check_unwindable(const memory::Snapshot& s);

/// The key of a snapshot's module list for reusing a module table: its modules and the files read.
uint64_t modules_key(const memory::Snapshot& s);

/// A module table of `s`'s modules (each through acquire_unwind_module; a module that cannot be
/// used is logged and left without data) and, parallel to `s.modules`, the modules used.
void load_module_table(Session& session, const memory::Snapshot& s, unwind::ModuleTable& table,
                       std::vector<std::shared_ptr<unwind::LoadedModule>>& loaded);

/// The module of a stack's module `m` for naming its frames: acquire_module without a snapshot,
/// except for a module with no file whose image the walk rebuilt from the snapshot's memory (a
/// module described from memory): `used`, the one the walk used (may be null).
Result<std::shared_ptr<unwind::LoadedModule>> naming_module(Session& session, const memory::SnapshotModule& m,
                                                            const std::shared_ptr<unwind::LoadedModule>& used,
                                                            const std::string& module_root);

/// The resolver chain of a context's policy (resolvers, debug directories, sysroot, bundle store).
/// Names are not demangled by the chain: display_name does it per call. `record_attempts`: the
/// DWARF step keeps what it looked at per module (ResolverChain::explain_module).
std::unique_ptr<symbolize::ResolverChain> resolver_chain(const ContextConfig& cfg, bool record_attempts = false);

/// `raw` demangled (llvm-symbolizer-14's spelling with `llvm`, else libiberty's); a bounded
/// per-thread cache keeps the demangler off the warm path.
const std::string& demangled(const std::string& raw, bool llvm);

/// One unwound stack as its frames are named: the frames, the module list and the modules the walk
/// used (parallel), the module root, the process and the perf map the walk used for JIT code.
struct StackView {
  const std::vector<unwind::Frame>* frames = nullptr;
  const std::vector<memory::SnapshotModule>* modules = nullptr;
  const std::vector<std::shared_ptr<unwind::LoadedModule>>* loaded = nullptr;  ///< may be null
  std::string module_root;
  int64_t pid = 0;
  std::shared_ptr<const symbolize::PerfMap> jit;
};

/// Frame `f` of a stack runs code outside every file-backed module (JIT code, named by a perf map):
/// no module, or perf's "//anon" mapping of a recorded profile.
bool outside_modules(const StackView& st, const unwind::Frame& f);

/// Frame `index` of `st` is a sigreturn trampoline (libc's `__restore_rt`): the step out of it
/// restored a signal frame. resolve_frame names it by its pc, not pc - 1, as eu-stack and gdb do.
bool sigreturn_trampoline(const StackView& st, size_t index);

/// Names frame `index` of `st` with `chain` and `policy` into `out` (always one frame at least):
/// JIT code by the perf map (the walk's, else `maps`' map of the process when online), other frames
/// by the chain over the module's identity and, online, its file; a caller frame at pc - 1, a
/// sigreturn trampoline at its pc. A bundle that cannot be read is
/// logged and leaves the frame to the next steps. `used`, when given, receives the module the chain
/// was asked about and the module-relative address looked up (empty for JIT code and frames
/// outside modules), for ResolverChain::explain_*.
struct ResolvedAt {
  symbolize::ChainModule module;
  uint64_t addr = 0;
  bool asked = false;  ///< the chain was asked (false: perf map, or no module)
};
void resolve_frame(Session& session, symbolize::ResolverChain& chain, symbolize::PerfMaps& maps, const StackView& st,
                   size_t index, symbolize::SymtabPolicy policy, symbolize::Resolution* out,
                   ResolvedAt* used = nullptr);

}  // namespace stackprov::pipeline
