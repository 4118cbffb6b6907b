// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_symbolizer_*_ex — DWARF lines, inline chains and provenance (incl. debuginfod URL) for frames and module addresses.
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "capi/internal.hpp"
#include "core/mapped_file.hpp"
#include "pipeline/snapshot_walk.hpp"
#include "pipeline/tail_call_frames.hpp"
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
    if (stack->kernel.state != SPROV_KSTACK_NONE)
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_symbolizer_tail_calls: the stack has its kernel segment already"));
    auto st = std::make_unique<sprov_stack>(*stack);
    symbolize::DwarfResolver* dwarf = sym->ctx->ctx.config().offline ? nullptr : chain(sym).dwarf();
    symbolize::BundleResolver& bundles = chain(sym).bundles();
    if ((dwarf != nullptr || bundles.enabled()) && stack->modules) {
      // A module's DWARF when its file is there, else its bundle's call-site section.
      pipeline::BundleCallSitesCache from_bundles;
      const pipeline::CallSitesOf sites_of = [&](int32_t index) -> std::shared_ptr<pipeline::ModuleCallSites> {
        if (dwarf != nullptr) {
          auto lm = stack_module(sym->ctx, stack, index);
          if (lm.ok() && lm.value()->object()) return pipeline::dwarf_call_sites(*dwarf, lm.value()->object());
        }
        return from_bundles.get(bundles, (*stack->modules)[static_cast<size_t>(index)]);
      };
      std::vector<int64_t> origin;
      st->frames = pipeline::with_tail_call_frames(stack->frames, *stack->modules, sites_of, &origin);
      st->regs.clear();
      if (!stack->regs.empty())
        for (int64_t o : origin) st->regs.push_back(o >= 0 ? stack->regs[static_cast<size_t>(o)] : unwind::FrameRegs{});
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
  auto r = c.bundles().resolve(kind, std::span<const uint8_t>(id.bytes, id.len), address, &sym->last, &found,
                               policy(flags) == symbolize::SymtabPolicy::kWithDebugFile);
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
