// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_stack_render — an unwound stack described for the one renderer (pipeline/frame_render).
#include <cinttypes>
#include <cstdio>

#include "capi/internal.hpp"
#include "evidence/encoding.hpp"
#include "pipeline/bundle_build.hpp"
#include "pipeline/frame_render.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

constexpr uint32_t kRenderFlags = SPROV_RENDER_JSON | SPROV_RENDER_LINES | SPROV_RENDER_REGS | SPROV_RENDER_ARGS;

std::string str(const char* s) { return s ? s : ""; }

/// The resolver chain's answer for frame `i` (source lines and inline chain by the one rule,
/// sprov_resolver_gives_lines) into `r`.
void chain_answer(sprov_symbolizer* sym, const sprov_stack* stack, size_t i, pipeline::RenderFrame* r,
                  bool* answered, int32_t* resolver) {
  struct sprov_symbol_info info = {};
  info.sz = sizeof(info);
  if (symbolizer_frame_ex(sym, stack, i, 0, &info) != 0 || info.frame_count == 0) return;
  *answered = true;
  *resolver = info.resolver;
  r->source = str(info.source_path);
  r->bundle = str(info.bundle_digest);
  const symbolize::Resolution& res = sym->last;
  const symbolize::ResolvedFrame& phys = res.frames.back();
  r->resolved_function = sym->last_names.back();
  if ((info.resolver == SPROV_RESOLVER_BUNDLE || info.resolver == SPROV_RESOLVER_PDB) &&
      !r->resolved_function.empty()) {
    // Offline, named by its bundle (by its symbol-name records with their start, format 5, else
    // without one); or a PE whose only names are in its PDB (lld-link writes no COFF symbols): no
    // symbol start (llvm's PDB answers carry none).
    r->chain_function = r->resolved_function;
    if (info.resolver == SPROV_RESOLVER_BUNDLE && phys.has_start_address && r->module_offset >= phys.start_address) {
      r->chain_has_offset = true;
      r->chain_offset = r->module_offset - phys.start_address;
    }
  } else if (info.resolver != SPROV_RESOLVER_NONE && !r->resolved_function.empty() && phys.has_start_address &&
             r->module_offset >= phys.start_address) {
    r->chain_function = r->resolved_function;  // a stripped Go binary's gopclntab
    r->chain_has_offset = true;
    r->chain_offset = r->module_offset - phys.start_address;
  }
  if (!pipeline::resolver_gives_lines(info.resolver)) return;
  r->have_location = !phys.file.empty();
  r->file = phys.file;
  r->line = phys.line;
  r->column = phys.column;
  for (size_t k = 0; k + 1 < res.frames.size(); k++)
    r->inlined.push_back({sym->last_names[k], res.frames[k].linkage_name, res.frames[k].file, res.frames[k].line,
                          res.frames[k].column});
}

/// Frame `i`'s registers, every one of the architecture in DWARF order, "" when unknown.
void registers(const sprov_stack* stack, size_t i, pipeline::RenderFrame* r) {
  r->has_regs = true;
  const bool kept = stack->regs.size() == stack->frames.size();
  for (int reg = 0; reg < 64; reg++) {
    const char* name = register_name(static_cast<int>(stack->arch), reg);
    if (name == nullptr) break;
    char v[24] = "";
    if (kept && reg < static_cast<int>(unwind::FrameRegs::kMax) && ((stack->regs[i].known >> reg) & 1))
      snprintf(v, sizeof v, "0x%" PRIx64, stack->regs[i].v[reg]);
    r->registers.emplace_back(name, v);
  }
}

/// The uc_link annotation of frame `i` (a coroutine's entry), its saved pc named.
void coroutine_link(sprov_symbolizer* sym, const sprov_stack* stack, size_t i, pipeline::RenderFrame* r) {
  for (const unwind::CoroutineLink& cl : stack->links) {
    if (cl.frame != i) continue;
    const struct sprov_coroutine_link l = coroutine_link_out(stack, cl);
    r->has_link = true;
    r->link.context = l.context;
    r->link.has_regs = l.has_regs != 0;
    r->link.pc = l.pc;
    r->link.sp = l.sp;
    r->link.module = str(l.module_path);
    r->link.module_offset = l.module_offset;
    if (sym && l.has_regs && l.module_path && l.module_offset > 0 && !sym->ctx->ctx.config().offline) {
      struct sprov_symbol s = {};
      s.sz = sizeof(s);
      // The saved pc is swapcontext's return address: named at pc - 1, offset from the pc.
      if (symbolizer_addr(sym, l.module_path, l.module_offset - 1, &s) == 0 && s.resolver != SPROV_RESOLVER_NONE &&
          s.name) {
        r->link.function = s.name;
        r->link.function_offset = s.offset + 1;
      }
    }
    return;
  }
}

pipeline::RenderThread describe(sprov_symbolizer* sym, const sprov_stack* stack, uint32_t flags,
                                const sprov_snapshot* snap) {
  pipeline::RenderThread t;
  const size_t n = stack->frames.size();
  t.frames.reserve(n);
  for (size_t i = 0; i < n; i++) {
    const unwind::Frame& f = stack->frames[i];
    pipeline::RenderFrame r;
    r.index = i;
    r.pc = f.pc;
    r.sp = f.sp;
    r.cfa = f.cfa;
    r.method = pipeline::method_name(static_cast<int>(f.method));
    if (i < stack->kernel.frames.size()) {  // the kernel segment: named by /proc, never symbolized
      const memory::KernelFrame& k = stack->kernel.frames[i];
      r.is_kernel = true;
      r.function = k.symbol;
      r.function_offset = k.offset;
      r.function_size = k.size;
      r.module = stack->kernel.modules[i];
      if (stack->kernel.with_btf) {
        const perf::BtfPrototype& p = stack->kernel.protos[i];
        r.btf = p.func_id != 0 ? 1 : 2;
        r.btf_text = p.text;
        r.btf_approximate = p.approximate;
        r.btf_func_id = p.func_id;
        r.btf_ret_type_id = p.ret_type_id;
        r.btf_params = p.params;
      }
      t.frames.push_back(std::move(r));
      continue;
    }
    r.kernel_user_boundary = !stack->kernel.frames.empty() && i == stack->kernel.frames.size();
    if (i < stack->runtime_of.size() && stack->runtime_of[i] >= 0 && f.method == unwind::Method::kRuntime) {
      const size_t k = static_cast<size_t>(stack->runtime_of[i]);
      const runtime::PythonFrame& p = stack->runtime[k];
      r.is_runtime = true;
      r.runtime = {"python", p.function, p.qualname, p.file, p.line, p.is_entry, stack->runtime_native[k],
                   p.frame_addr, p.code_addr};
      t.frames.push_back(std::move(r));
      continue;
    }
    if (f.module_index >= 0 && stack->modules && static_cast<size_t>(f.module_index) < stack->modules->size()) {
      const memory::SnapshotModule& m = (*stack->modules)[f.module_index];
      r.module = m.path;
      r.module_offset = f.pc - m.load_bias;
      if (m.build_id.len && m.build_id.kind == IdKind::kElfBuildId)
        r.build_id = evidence::hex_encode(m.build_id.bytes, m.build_id.len);
      r.module_key = pipeline::module_key(m.build_id);
      if (!r.module_key.empty()) r.id_kind = id_kind_name(m.build_id.kind);
    }
    r.cfi_not_in_bundle = f.flags & SPROV_FRAME_CFI_NOT_IN_BUNDLE;
    r.jit = f.flags & SPROV_FRAME_JIT;
    r.inferred = f.flags & SPROV_FRAME_INFERRED;
    r.awaiter = f.flags & SPROV_FRAME_ASYNC_AWAITER;
    r.async_domain = static_cast<int>(f.domain) == SPROV_DOMAIN_ASYNC;
    r.signal_handler_called = i + 1 < n && stack->frames[i + 1].method == unwind::Method::kSignal;
    int32_t sym_resolver = SPROV_RESOLVER_NONE, chain_resolver = SPROV_RESOLVER_NONE;
    if (sym) {
      struct sprov_symbol s = {};
      s.sz = sizeof(s);
      if (symbolizer_frame(sym, stack, i, &s) == 0) {
        sym_resolver = s.resolver;
        r.linkage_name = str(s.linkage_name);
        r.function_offset = s.offset;
        r.source = str(s.source_path);
        if (s.resolver != SPROV_RESOLVER_NONE) r.function = str(s.name);
      }
    }
    bool answered = false;
    if (sym && (flags & SPROV_RENDER_LINES)) {
      const std::string symtab_source = r.source;
      r.source.clear();
      chain_answer(sym, stack, i, &r, &answered, &chain_resolver);
      if (!answered) r.source = symtab_source;
    }
    // The resolver chain's answer when lines are asked for, else the symbol tables'.
    r.resolver = pipeline::resolver_name(answered ? chain_resolver : sym_resolver);
    if (flags & SPROV_RENDER_REGS) registers(stack, i, &r);
    if (flags & SPROV_RENDER_ARGS) {
      r.has_args = true;
      size_t count = 0;
      if (sym && frame_args(sym, snap, stack, i, &count) == 0)
        for (const sprov_symbolizer::Arg& a : sym->args) r.args.push_back({a.name, a.type, a.value, a.reason, a.status});
    }
    coroutine_link(sym, stack, i, &r);
    t.frames.push_back(std::move(r));
  }
  t.stop_reason = stop_reason_name(static_cast<int>(stack->stop));
  if (stack->kernel.state != SPROV_KSTACK_NONE) {
    static const char* const kState[] = {"none", "read", "unreadable", "running", "stale"};
    const int32_t s = stack->kernel.state;
    t.has_kernel = true;
    t.kernel = {kState[s >= 0 && s <= 4 ? s : 0], stack->kernel.syscall, stack->kernel.user_sp,
                stack->kernel.user_pc, stack->kernel.reason};
  }
  return t;
}

}  // namespace

extern "C" {

SPROV_API int sprov_stack_render(sprov_symbolizer* sym, const sprov_stack* stack, const struct sprov_render_opts* opts,
                                 char** out, size_t* out_len) {
  return guard([&] {
    if (stack == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_stack_render: NULL %s", stack ? "out" : "stack"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_render_opts), "sprov_render_opts")) return e;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_render_opts, flags, 0u);
    if (flags & ~kRenderFlags) return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown render flags 0x%x", flags));
    if (SPROV_OPTS_GET(opts, sprov_render_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_render_opts.reserved must be 0"));
    pipeline::RenderThread t =
        describe(sym, stack, flags,
                 SPROV_OPTS_GET(opts, sprov_render_opts, snapshot, static_cast<const sprov_snapshot*>(nullptr)));
    t.tid = SPROV_OPTS_GET(opts, sprov_render_opts, tid, int64_t{0});
    t.name = str(SPROV_OPTS_GET(opts, sprov_render_opts, name, static_cast<const char*>(nullptr)));
    t.runtime_name = str(SPROV_OPTS_GET(opts, sprov_render_opts, runtime_name, static_cast<const char*>(nullptr)));
    std::string text;
    pipeline::render_thread(t, flags & (SPROV_RENDER_JSON | SPROV_RENDER_LINES), &text);
    return give_string(text, out, out_len);
  });
}

}  // extern "C"
