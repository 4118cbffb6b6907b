// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_symbolizer — symbol-table resolution of frames and module addresses.
#include <time.h>

#include <algorithm>

#include "capi/internal.hpp"
#include "core/mapped_file.hpp"
#include "elf/elf_object.hpp"
#include "object/object_image.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

int fill_symbol(sprov_symbolizer* sym, const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                uint64_t report_offset_base, struct sprov_symbol* out) {
  symbolize::SymbolInfo info;
  struct sprov_symbol s = {};
  s.sz = sizeof(s);
  if (sym->sym->lookup(image, addr, &info)) {
    s.name = info.name.data();
    s.linkage_name = info.linkage.data();
    s.sym_addr = info.addr;
    s.sym_size = info.size;
    s.offset = report_offset_base - info.addr;
    s.resolver = static_cast<int32_t>(info.resolver);
    s.source_path = info.source.data();
  }
  return fill_out(out, s, "sprov_symbol");
}

/// A module file of another format than ELF (lib/object): its own symbol table answers, as the
/// symtab step does for ELF (no DWARF, no demangling of its names yet).
int fill_object_symbol(const object::ObjectImage& image, uint64_t addr, uint64_t report_offset_base,
                       struct sprov_symbol* out) {
  struct sprov_symbol s = {};
  s.sz = sizeof(s);
  if (auto hit = image.symbol_at(addr)) {
    s.name = hit->name.data();  // NUL-terminated in the image (ObjectImage::symbol_at)
    s.linkage_name = hit->name.data();
    s.sym_addr = hit->addr;
    s.sym_size = hit->size;
    s.offset = report_offset_base - hit->addr;
    s.resolver = SPROV_RESOLVER_SYMTAB;
    s.source_path = image.path().c_str();
  }
  return fill_out(out, s, "sprov_symbol");
}

/// How long a symbolizer trusts the module it opened for a path before it checks
/// the file again (a replaced file is then reopened).
constexpr uint64_t kModuleRecheckNs = 100'000'000;

uint64_t coarse_now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

namespace stackprov::capi {

Result<std::shared_ptr<unwind::LoadedModule>> symbolizer_module(sprov_symbolizer* sym, const char* module_path) {
  const uint64_t now = coarse_now_ns();
  if (sym->path_module && sym->path_cached == module_path && now - sym->path_checked_ns < kModuleRecheckNs)
    return sym->path_module;
  sym->path_module.reset();
  memory::SnapshotModule m;
  m.path = module_path;
  auto mod = acquire_module(sym->ctx, nullptr, m, std::string());
  if (!mod.ok()) return std::move(mod).error();
  // A file of any format: its DWARF (by the DWARF standard's names) and its own symbol tables.
  if (!mod.value()->object())
    return make_error(SPROV_ERR_NOT_FOUND, "%s: no file (bundle-backed module)", module_path);
  sym->path_cached = module_path;
  sym->path_module = std::move(mod).value();
  sym->path_checked_ns = now;
  return sym->path_module;
}

int symbolizer_frame(sprov_symbolizer* sym, const sprov_stack* stack, size_t index, struct sprov_symbol* out) {
  const unwind::Frame& f = stack->frames[index];
  struct sprov_symbol empty = {};
  empty.sz = sizeof(empty);
  // Offline contexts never open module files: symbol tables do not answer
  // (the bundle step of sprov_symbolizer_frame_ex does).
  if (outside_modules(stack, f)) {
    // JIT code outside every module: the process's perf map (doc/runtime-frames.md "JIT code").
    auto map = stack_perf_map(sym, stack);
    const uint64_t lookup = f.lookup_prev ? f.pc - 1 : f.pc;
    if (const symbolize::PerfMap::Entry* e = map ? map->find(lookup) : nullptr) {
      struct sprov_symbol s = empty;
      s.name = e->name.c_str();
      s.linkage_name = e->name.c_str();
      s.sym_addr = e->start;
      s.sym_size = e->size;
      s.offset = f.pc - e->start;
      s.resolver = SPROV_RESOLVER_PERFMAP;
      s.source_path = map->path().c_str();
      return fill_out(out, s, "sprov_symbol");
    }
  }
  if (f.module_index < 0 || sym->ctx->ctx.config().offline) return fill_out(out, empty, "sprov_symbol");
  const memory::SnapshotModule& m = (*stack->modules)[f.module_index];
  auto mod = stack_module(sym->ctx, stack, f.module_index);
  const uint64_t rel = f.pc - m.load_bias;
  const uint64_t lookup = f.lookup_prev ? rel - 1 : rel;
  if (mod.ok() && !mod.value()->has_elf() && mod.value()->object())
    return fill_object_symbol(*mod.value()->object(), lookup, rel, out);
  if (!mod.ok() || !mod.value()->has_elf()) return fill_out(out, empty, "sprov_symbol");
  symbolize::SymbolInfo probe;
  const std::shared_ptr<const object::ObjectImage> image = mod.value()->object();
  // A return address at the very start of a function (a signal trampoline
  // such as __restore_rt, whose FDE begins one byte early) has no symbol at
  // pc - 1; name it by its own pc then.
  if (f.lookup_prev && !sym->sym->lookup(image, lookup, &probe)) return fill_symbol(sym, image, rel, rel, out);
  return fill_symbol(sym, image, lookup, rel, out);
}

int symbolizer_addr(sprov_symbolizer* sym, const char* module_path, uint64_t address, struct sprov_symbol* out) {
  auto mod = symbolizer_module(sym, module_path);
  if (!mod.ok()) return fail(mod.error());
  const std::shared_ptr<const object::ObjectImage> image = mod.value()->object();
  const int rc = mod.value()->has_elf() ? fill_symbol(sym, image, address, address, out)
                                        : fill_object_symbol(*image, address, address, out);
  if (image && image->file_changed())  // this module's file only
    return fail(make_error(SPROV_ERR_IO,
                           "module '%s' was truncated while mapped: its bytes past the new end read as zeros, so "
                           "no answer is given from them",
                           module_path));
  return rc;
}

}  // namespace stackprov::capi

extern "C" {

SPROV_API int sprov_symbolizer_new(sprov_context* ctx, const struct sprov_symbolizer_opts* opts,
                                   sprov_symbolizer** out) {
  return guard([&] {
    if (ctx == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_new: NULL %s", ctx ? "out" : "ctx"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_symbolizer_opts), "sprov_symbolizer_opts")) return e;
    uint32_t flags = SPROV_OPTS_GET(opts, sprov_symbolizer_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_SYM_NO_DEMANGLE | SPROV_SYM_EXPLAIN))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "unknown symbolizer flags 0x%x", flags));
    if (SPROV_OPTS_GET(opts, sprov_symbolizer_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_opts.reserved must be 0"));
    object::DebugFileOptions dopts;
    dopts.debug_dirs = ctx->ctx.config().debug_dirs;
    dopts.sysroot = ctx->ctx.config().sysroot;
    auto* s = new sprov_symbolizer();
    s->ctx = ctx;
    s->explain = (flags & SPROV_SYM_EXPLAIN) != 0;
    const auto& pol = ctx->ctx.config().resolvers;
    const bool demangle = std::find(pol.begin(), pol.end(), "demangle") != pol.end();  // resolver policy
    s->sym = std::make_unique<symbolize::Symbolizer>(demangle && !(flags & SPROV_SYM_NO_DEMANGLE), std::move(dopts));
    *out = s;
    return 0;
  });
}

SPROV_API void sprov_symbolizer_free(sprov_symbolizer* sym) { delete sym; }

SPROV_API int sprov_symbolizer_frame(sprov_symbolizer* sym, const sprov_stack* stack, size_t index,
                                     struct sprov_symbol* out) {
  return guard([&] {
    if (sym == nullptr || stack == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_frame: NULL argument"));
    if (index >= stack->frames.size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "frame index %zu out of range (%zu frames)", index,
                             stack->frames.size()));
    return symbolizer_frame(sym, stack, index, out);
  });
}

SPROV_API int sprov_symbolizer_addr(sprov_symbolizer* sym, const char* module_path, uint64_t address,
                                    struct sprov_symbol* out) {
  return guard([&] {
    if (sym == nullptr || module_path == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_symbolizer_addr: NULL argument"));
    if (sym->ctx->ctx.config().offline)
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_symbolizer_addr: the context is offline and would not open module '%s'",
                             module_path));
    return symbolizer_addr(sym, module_path, address, out);
  });
}

}  // extern "C"
