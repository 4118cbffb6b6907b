// SPDX-License-Identifier: Apache-2.0
// Unwinding a snapshot and naming its frames: module tables, resolver chains, frame names.
#include "pipeline/snapshot_walk.hpp"

#include <optional>
#include <unordered_map>

#include "symbolize/demangle.hpp"
#include "unwind/arch_dispatch.hpp"

#include "stackprov/stackprov.h"

namespace stackprov::pipeline {

std::unique_ptr<Session> derived_session(const Session& base, const std::string& bundle_store, bool offline,
                                         uint32_t module_cache_capacity) {
  ContextConfig cfg = base.ctx.config();
  cfg.has_bundle_store = !bundle_store.empty();
  cfg.bundle_store = bundle_store;
  cfg.offline = offline;
  if (module_cache_capacity) cfg.module_cache_capacity = module_cache_capacity;
  return std::make_unique<Session>(std::move(cfg));
}

const char* method_name(int method) noexcept {
  switch (method) {
    case SPROV_METHOD_CONTEXT: return "context";
    case SPROV_METHOD_CFI_EH_FRAME: return "cfi_eh_frame";
    case SPROV_METHOD_CFI_DEBUG_FRAME: return "cfi_debug_frame";
    case SPROV_METHOD_FRAME_POINTER: return "frame_pointer";
    case SPROV_METHOD_SCAN: return "scan";
    case SPROV_METHOD_SIGNAL: return "signal";
    case SPROV_METHOD_CFI_PDATA: return "cfi_pdata";
    case SPROV_METHOD_COMPACT_UNWIND: return "compact_unwind";
    case SPROV_METHOD_TRAMPOLINE: return "trampoline";
    case SPROV_METHOD_PROLOGUE: return "prologue";
    case SPROV_METHOD_BAD_PC_RETURN: return "bad_pc_return";
    case SPROV_METHOD_CFI_BUNDLE: return "cfi_bundle";
    case SPROV_METHOD_CALLCHAIN: return "callchain";
    case SPROV_METHOD_RUNTIME: return "runtime";
    case SPROV_METHOD_UNWIND_TABLE: return "unwind_table";
    case SPROV_METHOD_TAIL_CALL: return "tail_call";
    case SPROV_METHOD_ASYNC_BOUNDARY: return "async_boundary";
    case SPROV_METHOD_KERNEL_STACK: return "kernel_stack";
    default: return "none";
  }
}

const char* resolver_name(int resolver) noexcept {
  switch (resolver) {
    case SPROV_RESOLVER_SYMTAB: return "symtab";
    case SPROV_RESOLVER_DYNSYM: return "dynsym";
    case SPROV_RESOLVER_DWARF: return "dwarf";
    case SPROV_RESOLVER_DEBUGINFOD: return "debuginfod";
    case SPROV_RESOLVER_BUNDLE: return "bundle";
    case SPROV_RESOLVER_GOPCLNTAB: return "gopclntab";
    case SPROV_RESOLVER_PERFMAP: return "perfmap";
    case SPROV_RESOLVER_PDB: return "pdb";
    default: return "none";
  }
}

Result<std::shared_ptr<unwind::LoadedModule>> acquire_unwind_module(Session& s, const memory::Snapshot* snap,
                                                                    const memory::SnapshotModule& m,
                                                                    const std::string& module_root, Arch arch,
                                                                    Endian endian) {
  ModuleSources src = s.sources();
  auto r = acquire_module(src, snap, m, module_root);
  if (!r.ok()) return r;
  // Same architecture and, for mips32 (one e_machine for both), the same byte order.
  // A bundle-backed module has no file to tell: its build-id matched the snapshot's.
  const unwind::LoadedModule& mod = *r.value();
  if (mod.bundle() != nullptr || (mod.arch() == arch && mod.big_endian() == (endian == Endian::kBig))) return r;
  return make_error(SPROV_ERR_ARCH_MISMATCH, "is %s %s-endian, the target is %s %s-endian: not used",
                    arch_name(mod.arch()), mod.big_endian() ? "big" : "little", arch_name(arch),
                    endian == Endian::kBig ? "big" : "little");
}

Status check_unwindable(const memory::Snapshot& s) {
  if (!unwind::unwinds_arch(s.arch))
    return make_error(SPROV_ERR_UNSUPPORTED, "unwinding %s snapshots is not implemented", arch_name(s.arch));
  if (s.arch != Arch::kMips32 && s.endian != Endian::kLittle)
    return make_error(SPROV_ERR_UNSUPPORTED, "%s snapshots are little-endian only", arch_name(s.arch));
  return {};
}

uint64_t modules_key(const memory::Snapshot& s) {
  // The files read too (not serialized, so not in module_list_hash): two lists naming the same
  // paths and build-ids over different files must not share an unwinder's module table.
  return s.module_list_hash() ^ (s.module_files_hash() * 0x9e3779b97f4a7c15ull);
}

void load_module_table(Session& session, const memory::Snapshot& s, unwind::ModuleTable& table,
                       std::vector<std::shared_ptr<unwind::LoadedModule>>& loaded) {
  loaded.assign(s.modules.size(), nullptr);
  for (size_t i = 0; i < s.modules.size(); i++) {
    const memory::SnapshotModule& m = s.modules[i];
    unwind::ModuleSlot slot = unwind::snapshot_slot(s, i);
    std::shared_ptr<unwind::LoadedModule> mod;
    auto r = acquire_unwind_module(session, &s, m, s.module_root, s.arch, s.endian);
    if (r.ok()) {
      mod = r.value();
      slot.module = mod.get();
      loaded[i] = mod;
    } else {
      // A file that is not the module (another build, another architecture) is a finding; a
      // missing one (no bundle either) is common and shows in the frames' stop reasons.
      const int code = r.error().code;
      session.ctx.log(code == SPROV_ERR_ARCH_MISMATCH || code == SPROV_ERR_BUILD_ID_MISMATCH ? SPROV_LOG_WARN
                                                                                           : SPROV_LOG_INFO,
                      "module %s: %s", m.path.c_str(), r.error().message.c_str());
    }
    table.add(slot, std::move(mod));
  }
  table.finish();
}

Result<std::shared_ptr<unwind::LoadedModule>> naming_module(Session& session, const memory::SnapshotModule& m,
                                                            const std::shared_ptr<unwind::LoadedModule>& used,
                                                            const std::string& module_root) {
  if (used && !m.file.known() && m.path != kVdsoName && used->has_elf() && used->object()->file_identity() == nullptr)
    return used;
  ModuleSources src = session.sources();
  return acquire_module(src, nullptr, m, module_root);
}

std::unique_ptr<symbolize::ResolverChain> resolver_chain(const ContextConfig& cfg, bool record_attempts) {
  symbolize::DwarfResolverOptions o;
  o.record_attempts = record_attempts;
  o.demangle = false;  // names are demangled per call (flags, policy)
  o.debug.debug_dirs = cfg.debug_dirs;
  o.debug.sysroot = cfg.sysroot;
  std::optional<std::string> store;
  if (cfg.has_bundle_store) store = cfg.bundle_store;
  return std::make_unique<symbolize::ResolverChain>(symbolize::ResolverPolicy::from_names(cfg.resolvers, cfg.offline),
                                                    std::move(o), std::move(store));
}

const std::string& demangled(const std::string& raw, bool llvm) {
  constexpr size_t kMaxEntries = size_t{1} << 16;
  thread_local std::unordered_map<std::string, std::string> caches[2];
  auto& cache = caches[llvm ? 1 : 0];
  if (auto it = cache.find(raw); it != cache.end()) return it->second;
  if (cache.size() >= kMaxEntries) cache.clear();
  return cache.emplace(raw, llvm ? symbolize::demangle_llvm(raw) : symbolize::demangle(raw)).first->second;
}

bool outside_modules(const StackView& st, const unwind::Frame& f) {
  if (f.module_index < 0) return true;
  return st.modules && static_cast<size_t>(f.module_index) < st.modules->size() &&
         (*st.modules)[f.module_index].path == "//anon";
}

// The step out of the trampoline restored a signal frame: its caller's method is kSignal. Its pc
// is where the handler returned to, the trampoline's first instruction (libc's `__restore_rt`),
// not a call's return address, so it is named by that pc itself, as eu-stack does (libdwfl's
// dwfl_frame_pc: an activation when the frame it unwinds to is a signal frame) and gdb ("<signal
// handler called>"); pc - 1 is the byte before the function, which glibc's FDE covers only for
// the unwinder's sake.
bool sigreturn_trampoline(const StackView& st, size_t index) {
  return index + 1 < st.frames->size() && (*st.frames)[index + 1].method == unwind::Method::kSignal;
}

void resolve_frame(Session& session, symbolize::ResolverChain& chain, symbolize::PerfMaps& maps, const StackView& st,
                   size_t index, symbolize::SymtabPolicy policy, symbolize::Resolution* out, ResolvedAt* used) {
  *out = symbolize::Resolution{};
  out->frames.emplace_back();
  const unwind::Frame& f = (*st.frames)[index];
  const bool prev = f.lookup_prev && !sigreturn_trampoline(st, index);  // look up pc - 1
  const bool offline = session.ctx.config().offline;
  if (outside_modules(st, f)) {
    // JIT code outside every module: the process's perf map (doc/runtime-frames.md "JIT code").
    std::shared_ptr<const symbolize::PerfMap> map = st.jit;
    if (!map && st.pid > 0 && !offline) map = maps.get(st.pid);
    if (const symbolize::PerfMap::Entry* e = map ? map->find(prev ? f.pc - 1 : f.pc) : nullptr) {
      symbolize::ResolvedFrame& r = out->frames.front();
      r.function = r.short_function = r.linkage_name = e->name;
      r.has_start_address = true;
      r.start_address = e->start;
      out->resolver = symbolize::ResolvedBy::kPerfMap;
      out->provenance = "perfmap";
      out->source = map->path();
      return;
    }
  }
  if (f.module_index < 0) return;
  const size_t mi = static_cast<size_t>(f.module_index);
  const memory::SnapshotModule& m = (*st.modules)[mi];
  symbolize::ChainModule cm;
  cm.build_id = m.build_id;  // the identity of what ran
  bool have = !cm.build_id.empty();
  if (!offline) {  // offline: never open the module file
    // A missing file with a store configured gives a bundle-backed module (no image).
    static const std::shared_ptr<unwind::LoadedModule> kNone;
    const auto& used = st.loaded && mi < st.loaded->size() ? (*st.loaded)[mi] : kNone;
    auto mod = naming_module(session, m, used, st.module_root);
    if (mod.ok() && mod.value()->object()) {  // a file of any format (its DWARF, its symbols)
      cm.image = mod.value()->object();
      have = true;
    }
  }
  if (!have) return;
  const uint64_t rel = f.pc - m.load_bias;
  std::optional<Error> bundle_error;
  chain.resolve(cm, prev ? rel - 1 : rel, policy, out, &bundle_error);
  if (used) *used = ResolvedAt{cm, prev ? rel - 1 : rel, true};
  // A stack is named frame by frame: a bundle that cannot be read leaves the frame to the next steps.
  if (bundle_error) session.ctx.log(SPROV_LOG_WARN, "%s", bundle_error->message.c_str());
}

}  // namespace stackprov::pipeline
