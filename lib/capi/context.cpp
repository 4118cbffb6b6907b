// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_context (configuration, module cache) and module loading shared by the other shims.
#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bundle/format.hpp"
#include "capi/internal.hpp"
#include "core/context.hpp"
#include "elf/elf_image.hpp"
#include "symbolize/bundle_store.hpp"

using namespace stackprov;

namespace stackprov::capi {

Result<ModuleBundle> find_module_bundle(sprov_context* ctx, const memory::SnapshotModule& m) {
  return pipeline::find_module_bundle(ctx->ctx.config(), m);
}

Result<std::shared_ptr<unwind::LoadedModule>> acquire_module(sprov_context* ctx, const memory::Snapshot* snap,
                                                             const memory::SnapshotModule& m,
                                                             const std::string& module_root) {
  pipeline::ModuleSources src = ctx->sources();
  return pipeline::acquire_module(src, snap, m, module_root);
}

Result<std::shared_ptr<unwind::LoadedModule>> stack_module(sprov_context* ctx, const sprov_stack* stack, int32_t index) {
  const size_t i = static_cast<size_t>(index);
  static const std::shared_ptr<unwind::LoadedModule> kNone;
  return pipeline::naming_module(*ctx, (*stack->modules)[i],
                                 stack->loaded && i < stack->loaded->size() ? (*stack->loaded)[i] : kNone,
                                 stack->module_root);
}

}  // namespace stackprov::capi

using namespace stackprov::capi;

extern "C" {

SPROV_API int sprov_context_new(const struct sprov_context_opts* opts, sprov_context** out) {
  return guard([&] {
    if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_context_new: out is NULL"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_context_opts), "sprov_context_opts")) return e;
    ContextConfig cfg;
    cfg.log_fn = SPROV_OPTS_GET(opts, sprov_context_opts, log_fn, nullptr);
    cfg.log_user = SPROV_OPTS_GET(opts, sprov_context_opts, log_user, nullptr);
    cfg.log_level = SPROV_OPTS_GET(opts, sprov_context_opts, log_level, SPROV_LOG_WARN);
    uint32_t cap = SPROV_OPTS_GET(opts, sprov_context_opts, module_cache_capacity, 0u);
    cfg.module_cache_capacity = cap ? cap : 256;
    if (const char* d = SPROV_OPTS_GET(opts, sprov_context_opts, debug_dirs, nullptr))
      cfg.debug_dirs = split_path_list(d);
    if (const char* s = SPROV_OPTS_GET(opts, sprov_context_opts, sysroot, nullptr)) {
      cfg.sysroot = s;
      while (cfg.sysroot.size() > 1 && cfg.sysroot.back() == '/') cfg.sysroot.pop_back();
      struct stat st;
      if (stat(cfg.sysroot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(make_error(SPROV_ERR_INVALID_ARG, "sysroot '%s' is not a directory", s));
    }
    if (const char* b = SPROV_OPTS_GET(opts, sprov_context_opts, bundle_store, nullptr)) {
      cfg.has_bundle_store = true;
      cfg.bundle_store = b;
    }
    if (const char* r = SPROV_OPTS_GET(opts, sprov_context_opts, resolvers, nullptr)) {
      static const char* const kKnown[] = {"debuginfod", "bundle", "dwarf", "gopclntab", "symtab", "dynsym", "demangle"};
      cfg.resolvers.clear();
      std::string list = r;
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        std::string name = list.substr(pos, comma - pos);
        pos = comma + 1;
        bool known = false;
        for (const char* k : kKnown) known = known || name == k;
        if (!known)
          return fail(make_error(SPROV_ERR_INVALID_ARG,
                                 "resolver '%s' in '%s' is not one of debuginfod, bundle, dwarf, gopclntab, symtab, dynsym, "
                                 "demangle",
                                 name.c_str(), r));
        for (const std::string& prev : cfg.resolvers)
          if (prev == name)
            return fail(make_error(SPROV_ERR_INVALID_ARG, "resolver '%s' appears twice in '%s'", name.c_str(), r));
        cfg.resolvers.push_back(std::move(name));
      }
    }
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_context_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_CTX_OFFLINE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_context_opts.flags 0x%x has unknown bits", flags));
    cfg.offline = (flags & SPROV_CTX_OFFLINE) != 0;
    *out = new sprov_context(std::move(cfg));
    return 0;
  });
}

SPROV_API void sprov_context_free(sprov_context* ctx) { delete ctx; }

SPROV_API int sprov_context_stats(const sprov_context* ctx, struct sprov_context_stats* out) {
  return guard([&] {
    if (ctx == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_context_stats: ctx is NULL"));
    struct sprov_context_stats s = {};
    s.sz = sizeof(s);
    s.module_cache_hits = ctx->modules.hits();
    s.module_cache_misses = ctx->modules.misses();
    s.module_cache_evictions = ctx->modules.evictions();
    s.modules_loaded = ctx->modules_loaded.load();
    return fill_out(out, s, "sprov_context_stats");
  });
}

}  // extern "C"
