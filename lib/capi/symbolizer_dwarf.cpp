// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_symbolizer_*_ex — DWARF lines, inline chains and provenance (incl. debuginfod URL) for frames and module addresses.
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "capi/internal.hpp"
#include "core/mapped_file.hpp"
#include "pipeline/snapshot_walk.hpp"
#include "dwarf/tail_calls.hpp"
#include "symbolize/demangle.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

constexpr uint32_t kKnownFlags = SPROV_SYMBOLIZE_SHORT_NAMES | SPROV_SYMBOLIZE_NO_DEMANGLE |
                                  SPROV_SYMBOLIZE_LLVM_COMPAT | SPROV_SYMBOLIZE_NO_INLINES;

symbolize::SymtabPolicy policy(uint32_t flags) {
  return (flags & SPROV_SYMBOLIZE_LLVM_COMPAT) ? symbolize::SymtabPolicy::kModuleOnly
                                               : symbolize::SymtabPolicy::kWithDebugFile;
}

/// gdb's tail-call search over the modules of one stack (sprov_symbolizer_tail_calls), at runtime
/// addresses: each question goes to the module holding the address (the modules that have a
/// frame in the stack: gdb's minimal symbols are every objfile's, ours the stack's modules').
class TailCallModules {
 public:
  TailCallModules(sprov_context* ctx, const sprov_stack* stack, symbolize::DwarfResolver* dwarf)
      : ctx_(ctx), stack_(stack), dwarf_(dwarf) {
    if (!stack->modules) return;
    std::vector<bool> used(stack->modules->size());
    for (const unwind::Frame& f : stack->frames)
      if (f.module_index >= 0 && static_cast<size_t>(f.module_index) < used.size()) used[f.module_index] = true;
    for (size_t i = 0; i < used.size(); i++)
      if (used[i]) mods_.push_back({static_cast<int32_t>(i), nullptr, false});
  }

  int32_t module_at(uint64_t addr) const {
    for (const Mod& m : mods_) {
      const memory::SnapshotModule& sm = (*stack_->modules)[m.index];
      if (addr >= sm.start && addr < sm.end) return m.index;
    }
    return -1;
  }

  dwarf::TailCallQueries queries() {
    dwarf::TailCallQueries q;
    q.function_entry = [this](uint64_t pc, uint64_t* entry) {
      Mod* m = mod_at(pc);
      if (m == nullptr || !dwarf_->function_entry(m->image, pc - bias(*m), entry)) return false;
      *entry += bias(*m);
      return true;
    };
    q.call_site_at = [this](uint64_t ret, dwarf::CallSiteInfo* out) {
      Mod* m = ret == 0 ? nullptr : mod_at(ret - 1);
      if (m == nullptr || !dwarf_->call_site_at(m->image, ret - bias(*m), out)) return false;
      absolute(*m, out);
      return true;
    };
    q.tail_calls_of = [this](uint64_t entry, std::vector<dwarf::CallSiteInfo>* out) {
      Mod* m = mod_at(entry);
      if (m == nullptr || !dwarf_->tail_calls_of(m->image, entry - bias(*m), out)) return false;
      for (dwarf::CallSiteInfo& s : *out) absolute(*m, &s);
      return true;
    };
    q.target_address = [](const dwarf::CallSiteInfo& s, uint64_t* out) {
      if (s.target != dwarf::CallSiteInfo::Target::kAddress) return false;
      *out = s.target_addr;
      return true;
    };
    return q;
  }

 private:
  struct Mod {
    int32_t index;
    std::shared_ptr<const object::ObjectImage> image;  ///< null until first asked; null without a file
    bool tried;
  };
  uint64_t bias(const Mod& m) const { return (*stack_->modules)[m.index].load_bias; }

  Mod* load(Mod& m) {
    if (!m.tried) {
      m.tried = true;
      auto lm = stack_module(ctx_, stack_, m.index);
      if (lm.ok() && lm.value()->object()) m.image = lm.value()->object();
    }
    return m.image ? &m : nullptr;
  }

  Mod* mod_at(uint64_t addr) {
    for (Mod& m : mods_) {
      const memory::SnapshotModule& sm = (*stack_->modules)[m.index];
      if (addr >= sm.start && addr < sm.end) return load(m);
    }
    return nullptr;
  }

  /// A call site of module `m` at runtime addresses, its target resolved now: a definition's entry,
  /// or a declaration's name through the symbol tables (a global symbol in any of the stack's
  /// modules, in their order, before a local one, as gdb's lookup_minimal_symbol).
  void absolute(const Mod& m, dwarf::CallSiteInfo* s) {
    s->return_pc += bias(m);
    if (s->target == dwarf::CallSiteInfo::Target::kAddress) {
      s->target_addr += bias(m);
      return;
    }
    if (s->target != dwarf::CallSiteInfo::Target::kName) return;
    s->target = dwarf::CallSiteInfo::Target::kUnknown;
    bool have_local = false;
    uint64_t local = 0;
    for (Mod& o : mods_) {
      if (load(o) == nullptr) continue;
      uint64_t a = 0;
      bool global = false;
      if (!dwarf_->symbol_address(o.image, s->target_name, &a, &global)) continue;
      if (global) {
        s->target = dwarf::CallSiteInfo::Target::kAddress;
        s->target_addr = a + bias(o);
        return;
      }
      if (!have_local) local = a + bias(o), have_local = true;
    }
    if (have_local) {
      s->target = dwarf::CallSiteInfo::Target::kAddress;
      s->target_addr = local;
    }
  }

  sprov_context* ctx_;
  const sprov_stack* stack_;
  symbolize::DwarfResolver* dwarf_;
  std::vector<Mod> mods_;
};

symbolize::ResolverChain& chain(sprov_symbolizer* sym) {
  if (!sym->chain) sym->chain = pipeline::resolver_chain(sym->ctx->ctx.config(), sym->explain);
  return *sym->chain;
}

/// The location fields shared by sprov_symbol_info (frame 0) and sprov_symbol_frame.
template <class Out>
void copy_location(const symbolize::ResolvedFrame& f, Out* s) {
  s->linkage_name = f.linkage_name.c_str();
  s->file = f.file.c_str();
  s->line = f.line;
  s->column = f.column;
  s->discriminator = f.discriminator;
  s->start_line = f.start_line;
  s->start_file = f.start_file.c_str();
  s->start_address = f.start_address;
  s->has_start_address = f.has_start_address ? 1 : 0;
}

/// llvm's symbolizeCode (SPROV_SYMBOLIZE_NO_INLINES): the innermost frame, renamed
/// by the symbol that named the physical function (not with short names).
void collapse_inline_chain(symbolize::Resolution* r, uint32_t flags) {
  if (r->frames.size() < 2) return;
  // A PDB's line table holds the physical function's lines (inline sites have their own): llvm's
  // symbolizeCode answers with the physical frame alone (PDBContext::getLineInfoForAddress).
  if (r->resolver == symbolize::ResolvedBy::kPdb || r->pdb_lines) {
    symbolize::ResolvedFrame outer = std::move(r->frames.back());
    r->frames.assign(1, std::move(outer));
    return;
  }
  symbolize::ResolvedFrame one = std::move(r->frames.front());
  const symbolize::ResolvedFrame& outer = r->frames.back();
  if (r->symbol_named && !(flags & SPROV_SYMBOLIZE_SHORT_NAMES)) {
    one.function = outer.function;
    one.linkage_name = outer.linkage_name;
    one.has_start_address = outer.has_start_address;
    one.start_address = outer.start_address;
  }
  r->frames.assign(1, std::move(one));
}

/// llvm's --functions=short (and =none) never read the symbol table
/// (shouldOverrideWithSymbolTable): the physical frame as DWARF alone describes it.
void undo_symbol_override(symbolize::Resolution* r) {
  if (!r->symbol_named || r->resolver == symbolize::ResolvedBy::kBundle) return;
  symbolize::ResolvedFrame& outer = r->frames.back();
  const auto& b = r->before_symbol;
  outer.has_start_address = b.has_start_address;
  outer.start_address = b.start_address;
  if (b.file_from_symbol) outer.file.clear();
  if (!b.dwarf) {
    outer = symbolize::ResolvedFrame{};
    r->resolver = symbolize::ResolvedBy::kNone;
    r->provenance = "none";
    r->source.clear();
    r->source_build_id = ModuleId{};
  }
  r->symbol_named = false;
}

int fill_info(sprov_symbolizer* sym, uint32_t flags, struct sprov_symbol_info* out) {
  if ((flags & SPROV_SYMBOLIZE_SHORT_NAMES) && (flags & SPROV_SYMBOLIZE_LLVM_COMPAT)) undo_symbol_override(&sym->last);
  if (flags & SPROV_SYMBOLIZE_NO_INLINES) collapse_inline_chain(&sym->last, flags);
  const symbolize::Resolution& r = sym->last;
  if (!chain(sym).policy().demangle) flags |= SPROV_SYMBOLIZE_NO_DEMANGLE;  // "demangle" not in the policy
  sym->last_flags = flags;
  if (sym->last_build_id.empty() || !(sym->last_build_id_raw == r.source_build_id)) {
    sym->last_build_id = r.source_build_id.hex();
    sym->last_build_id_raw = r.source_build_id;
  }
  sym->last_names.resize(r.frames.size());  // assign() below reuses the strings' buffers
  for (size_t i = 0; i < r.frames.size(); i++) {
    const symbolize::ResolvedFrame& f = r.frames[i];
    const std::string& raw = (flags & SPROV_SYMBOLIZE_SHORT_NAMES) ? f.short_function : f.function;
    const bool llvm = flags & SPROV_SYMBOLIZE_LLVM_COMPAT;
    const bool as_is = (flags & SPROV_SYMBOLIZE_NO_DEMANGLE) || !symbolize::maybe_mangled(raw);
    sym->last_names[i].assign(as_is ? raw : pipeline::demangled(raw, llvm));
  }
  struct sprov_symbol_info s = {};
  s.sz = sizeof(s);
  const symbolize::ResolvedFrame& f = r.frames.front();
  s.name = sym->last_names.front().c_str();
  copy_location(f, &s);
  s.frame_count = static_cast<uint32_t>(r.frames.size());
  s.resolver = static_cast<int32_t>(r.resolver);
  // "bundle", "dwarf", "debuginfod+dwarf", "symtab", "minidebuginfo+symtab", "dynsym", "none".
  s.resolver_name = r.provenance.empty() ? pipeline::resolver_name(s.resolver) : r.provenance.c_str();
  s.source_path = r.source.c_str();
  s.source_build_id = sym->last_build_id.c_str();
  s.bundle_digest = r.bundle_digest.c_str();
  return fill_out(out, s, "sprov_symbol_info");
}

/// SPROV_SYM_EXPLAIN: what the steps tried for the module, then for `addr` (after fill_info, so that
/// the answer explained is the one returned). Without the flag nothing is computed.
void explain(sprov_symbolizer* sym, const symbolize::ChainModule* m, uint64_t addr) {
  sym->attempts.clear();
  if (!sym->explain) return;
  if (m == nullptr) {  // not a module's address (a JIT frame, or no module)
    symbolize::ChainModule none;
    chain(sym).explain_address(none, addr, sym->last, &sym->attempts);
    return;
  }
  chain(sym).explain_module(*m, &sym->attempts);
  chain(sym).explain_address(*m, addr, sym->last, &sym->attempts);
}

/// Fails when the module file this call read shrank under its mapping (another user truncated it:
/// core/mapped_file.hpp), instead of answering from the zeros that replaced its bytes. Per image,
/// not the process-wide fault count: another thread's truncated file is not this call's.
int changed_file(const object::ObjectImage* image, const char* module_path) {
  if (image == nullptr || !image->file_changed()) return 0;
  return fail(make_error(SPROV_ERR_IO,
                         "module '%s' (or a file read for it) was truncated while mapped: its bytes past the new end "
                         "read as zeros, so no answer is given from them",
                         module_path));
}

int check(sprov_symbolizer* sym, uint32_t flags, const char* fn) {
  if (sym == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "%s: NULL symbolizer", fn));
  sym->attempts.clear();  // an error leaves no attempts of an earlier call behind
  if (flags & ~kKnownFlags) return fail(make_error(SPROV_ERR_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags));
  return 0;
}

}  // namespace

namespace stackprov::capi {

int symbolizer_frame_ex(sprov_symbolizer* sym, const sprov_stack* stack, size_t index, uint32_t flags,
                        struct sprov_symbol_info* out) {
  pipeline::StackView view;
  view.frames = &stack->frames;
  view.modules = stack->modules.get();
  view.loaded = stack->loaded.get();
  view.module_root = stack->module_root;
  view.pid = stack->pid;
  view.jit = stack->jit;
  pipeline::ResolvedAt at;
  pipeline::resolve_frame(*sym->ctx, chain(sym), sym->perf_maps, view, index, policy(flags), &sym->last,
                          sym->explain ? &at : nullptr);
  const int rc = fill_info(sym, flags, out);
  explain(sym, at.asked ? &at.module : nullptr, at.addr);
  return rc;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_symbolizer_addr_ex(sprov_symbolizer* sym, const char* module_path, uint64_t address,
                                       uint32_t flags, struct sprov_symbol_info* out) {
  return guard([&] {
    if (int e = check(sym, flags, "sprov_symbolizer_addr_ex")) return e;
    if (module_path == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_addr_ex: NULL module_path"));
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbol_info: NULL output"));
    if (sym->ctx->ctx.config().offline)
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_symbolizer_addr_ex: the context is offline and would not open module '%s' "
                             "(name it by build-id: sprov_symbolizer_addr_build_id)",
                             module_path));
    auto mod = symbolizer_module(sym, module_path);
    if (!mod.ok()) return fail(mod.error());
    symbolize::ChainModule cm;
    cm.image = mod.value()->object();
    std::optional<Error> bundle_error;
    chain(sym).resolve(cm, address, policy(flags), &sym->last, &bundle_error);
    if (int e = changed_file(cm.image.get(), module_path)) return e;
    if (bundle_error) return fail(*bundle_error);
    const int rc = fill_info(sym, flags, out);
    explain(sym, &cm, address);
    return rc;
  });
}

SPROV_API int sprov_symbolizer_frame_ex(sprov_symbolizer* sym, const sprov_stack* stack, size_t index,
                                        uint32_t flags, struct sprov_symbol_info* out) {
  return guard([&] {
    if (int e = check(sym, flags, "sprov_symbolizer_frame_ex")) return e;
    if (stack == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_frame_ex: NULL stack"));
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbol_info: NULL output"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    return symbolizer_frame_ex(sym, stack, index, flags, out);
  });
}

SPROV_API int sprov_symbolizer_tail_calls(sprov_symbolizer* sym, const sprov_stack* stack, sprov_stack** out) {
  return guard([&] {
    if (sym == nullptr || stack == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_tail_calls: NULL %s",
                             sym == nullptr ? "sym" : stack == nullptr ? "stack" : "out"));
    *out = nullptr;
    if (!stack->runtime.empty())
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_symbolizer_tail_calls: the stack is interleaved with runtime frames already"));
    auto st = std::make_unique<sprov_stack>(*stack);
    st->frames.clear();
    st->regs.clear();
    symbolize::DwarfResolver* dwarf = sym->ctx->ctx.config().offline ? nullptr : chain(sym).dwarf();
    TailCallModules mods(sym->ctx, stack, dwarf);
    const dwarf::TailCallQueries q = mods.queries();
    const size_t n = stack->frames.size();
    // A walk holds at most 65536 frames; the inferred ones are bounded the same way.
    constexpr size_t kMaxInferred = 65536;
    size_t inferred = 0;
    for (size_t i = 0; i < n; i++) {
      const unwind::Frame& f = stack->frames[i];
      st->frames.push_back(f);
      if (!stack->regs.empty()) st->regs.push_back(stack->regs[i]);
      if (dwarf == nullptr || i + 1 >= n || inferred >= kMaxInferred) continue;
      const unwind::Frame& c = stack->frames[i + 1];
      // gdb's tail-call sniffer belongs to its DWARF CFI unwinder: the caller was found by a table
      // from the callee, at a return address.
      const bool cfi = c.method == unwind::Method::kCfiEhFrame || c.method == unwind::Method::kCfiDebugFrame ||
                       c.method == unwind::Method::kCfiBundle;
      if (!cfi || !c.lookup_prev || f.module_index < 0 || c.module_index < 0 || f.domain != unwind::Domain::kUser)
        continue;
      for (uint64_t site : dwarf::tail_call_frames(q, c.pc, f.pc - (f.lookup_prev ? 1 : 0))) {
        if (inferred++ >= kMaxInferred) break;
        unwind::Frame t;
        t.pc = site;
        t.sp = f.cfa != 0 ? f.cfa : c.sp;  // the callee's CFA: the tail caller had released its frame
        t.module_index = mods.module_at(site - 1);
        t.method = unwind::Method::kTailCall;
        t.lookup_prev = true;
        t.flags = unwind::Frame::kFlagInferred;
        st->frames.push_back(t);
        if (!stack->regs.empty()) st->regs.emplace_back();  // nothing known
      }
    }
    *out = st.release();
    return 0;
  });
}

namespace {

/// sprov_symbolizer_addr_id and sprov_symbolizer_addr_build_id (`fn` names the caller); runs inside their guard().
int addr_by_id(sprov_symbolizer* sym, int id_kind, const char* id_hex, uint64_t address, uint32_t flags,
               struct sprov_symbol_info* out, const char* fn) {
  if (int e = check(sym, flags, fn)) return e;
  if (id_hex == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "%s: NULL id", fn));
  if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbol_info: NULL output"));
  if (id_kind < static_cast<int>(IdKind::kElfBuildId) || id_kind > static_cast<int>(IdKind::kPeCodeId))
    return fail(make_error(SPROV_ERR_INVALID_ARG, "identity kind %d is not one of SPROV_BUNDLE_ID_* (1..4)", id_kind));
  const IdKind kind = static_cast<IdKind>(id_kind);
  const char* what = kind == IdKind::kElfBuildId ? "build-id" : id_kind_name(kind);  // ELF: the messages as before
  const ModuleId id = ModuleId::from_hex(id_hex, kind);
  if (id.empty())
    return fail(make_error(SPROV_ERR_INVALID_ARG, "%s '%s' is not 1 to %zu bytes of hex", what, id_hex,
                           ModuleId::kMax));
  symbolize::ResolverChain& c = chain(sym);
  // Without a module file only the bundle step can answer.
  if (!c.policy().has(symbolize::ResolverPolicy::Step::kBundle))
    return fail(make_error(SPROV_ERR_INVALID_ARG, "%s %s: no module file, and the resolver policy has no 'bundle' step",
                           what, id.hex().c_str()));
  if (!c.bundles().enabled())
    return fail(make_error(SPROV_ERR_INVALID_ARG, "%s %s: no bundle store configured (sprov_context_opts.bundle_store)",
                           what, id.hex().c_str()));
  bool found = false;
  auto r = c.bundles().resolve(kind, std::span<const uint8_t>(id.bytes, id.len), address, &sym->last, &found);
  if (!r) return fail(r.error());
  if (!found)
    return fail(make_error(SPROV_ERR_NOT_FOUND, "no bundle for %s %s in store %s", what,
                           kind == IdKind::kElfBuildId
                               ? id.hex().c_str()
                               : symbolize::module_id_string(kind, std::span<const uint8_t>(id.bytes, id.len)).c_str(),
                           c.bundles().store_dir().c_str()));
  if (!r.value()) {
    sym->last = symbolize::Resolution{};
    sym->last.frames.emplace_back();
    sym->last.provenance = "none";
  }
  const int rc = fill_info(sym, flags, out);
  symbolize::ChainModule cm;
  cm.build_id = id;
  explain(sym, &cm, address);
  return rc;
}

}  // namespace

SPROV_API int sprov_symbolizer_addr_id(sprov_symbolizer* sym, int id_kind, const char* id_hex, uint64_t address,
                                       uint32_t flags, struct sprov_symbol_info* out) {
  return guard([&] { return addr_by_id(sym, id_kind, id_hex, address, flags, out, "sprov_symbolizer_addr_id"); });
}

SPROV_API int sprov_symbolizer_addr_build_id(sprov_symbolizer* sym, const char* build_id, uint64_t address,
                                             uint32_t flags, struct sprov_symbol_info* out) {
  return guard([&] {
    return addr_by_id(sym, static_cast<int>(IdKind::kElfBuildId), build_id, address, flags, out,
                      "sprov_symbolizer_addr_build_id");
  });
}

SPROV_API int sprov_symbolizer_use_bundle(sprov_symbolizer* sym, const char* bundle) {
  return guard([&] {
    if (sym == nullptr || bundle == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_use_bundle: NULL argument"));
    symbolize::ResolverChain& c = chain(sym);
    if (!c.policy().has(symbolize::ResolverPolicy::Step::kBundle))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle '%s' given, but the resolver policy has no 'bundle' step",
                             bundle));
    Status st = c.bundles().use_bundle(bundle);
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API size_t sprov_symbolizer_attempt_count(const sprov_symbolizer* sym) {
  return sym == nullptr ? 0 : sym->attempts.size();
}

SPROV_API int sprov_symbolizer_attempt(const sprov_symbolizer* sym, size_t index, struct sprov_resolve_attempt* out) {
  return guard([&] {
    if (sym == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_attempt: NULL symbolizer"));
    if (index >= sym->attempts.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "attempt index %zu out of range (%zu attempts%s)", index,
                             sym->attempts.size(), sym->explain ? "" : "; the symbolizer has no SPROV_SYM_EXPLAIN"));
    const symbolize::ResolveAttempt& a = sym->attempts[index];
    struct sprov_resolve_attempt s = {};
    s.sz = sizeof(s);
    s.resolver = a.resolver.c_str();
    s.looked_at = a.looked_at.c_str();
    s.outcome = static_cast<int32_t>(a.outcome);
    s.per_address = a.per_address ? 1 : 0;
    s.outcome_name = symbolize::attempt_outcome_name(a.outcome);
    s.reason = a.reason.c_str();
    return fill_out(out, s, "sprov_resolve_attempt");
  });
}

SPROV_API int sprov_symbolizer_inline_frame(sprov_symbolizer* sym, size_t index, struct sprov_symbol_frame* out) {
  return guard([&] {
    if (sym == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_inline_frame: NULL symbolizer"));
    if (index >= sym->last.frames.size() || index >= sym->last_names.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "inline frame index %zu out of range (%zu frames)", index,
                             sym->last.frames.size()));
    const symbolize::ResolvedFrame& f = sym->last.frames[index];
    struct sprov_symbol_frame s = {};
    s.sz = sizeof(s);
    s.name = sym->last_names[index].c_str();
    copy_location(f, &s);
    return fill_out(out, s, "sprov_symbol_frame");
  });
}

}  // extern "C"
