// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_process_open_raw -- a sprov_process from raw state documents (doc/raw-state.md), one
// snapshot per document.
#include <sys/stat.h>

#include <set>
#include <string>

#include "capi/internal.hpp"
#include "core/mapped_file.hpp"
#include "memory/raw_state.hpp"

using namespace stackprov;
using namespace stackprov::capi;

extern "C" {

SPROV_API int sprov_process_open_raw(sprov_context* ctx, const char* path, const struct sprov_process_opts* opts,
                                     sprov_process** out) {
  return guard([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_open_raw: NULL %s",
                             ctx == nullptr ? "ctx" : path == nullptr ? "path" : "out"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_process_opts), "sprov_process_opts")) return e;
    if (SPROV_OPTS_GET(opts, sprov_process_opts, exe, nullptr) != nullptr ||
        SPROV_OPTS_GET(opts, sprov_process_opts, symbol_path, nullptr) != nullptr ||
        SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u) != 0 || SPROV_OPTS_GET(opts, sprov_process_opts, tid, int64_t{0}) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_opts: a raw state names its own modules and thread "
                             "(exe, symbol_path, flags and tid must be unset)"));
    auto files = memory::raw_state_files(path);
    if (!files.ok()) return fail(files.error());
    auto proc = std::make_unique<sprov_process>();
    proc->from_core = true;  // no live process behind it
    for (const std::string& f : files.value()) {
      auto mapped = map_regular_file(f);
      if (!mapped.ok()) return fail(mapped.error());
      const MappedRegularFile m = mapped.value();
      const size_t slash = f.rfind('/');
      auto snap = memory::snapshot_from_raw_state({static_cast<const char*>(m.base), m.size},
                                                  slash == std::string::npos ? std::string() : f.substr(0, slash),
                                                  ctx->ctx.config().offline);
      unmap_file(m.base, m.size);
      if (!snap.ok()) return fail(make_error(snap.error().code, "%s: %s", f.c_str(), snap.error().message.c_str()));
      if (snap.value().tid == 0) snap.value().tid = static_cast<int64_t>(proc->threads.size() + 1);
      if (proc->threads.empty()) proc->pid = snap.value().pid;
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(snap).value();
      proc->threads.push_back(std::move(h));
      proc->thread_names.push_back(slash == std::string::npos ? f : f.substr(slash + 1));
    }
    // Modules to be unwound from bundles (offline, or a missing file with a store): one note per
    // module (by identity, across the documents) whose bundle the store does not have, as for a core.
    const ContextConfig& cfg = ctx->ctx.config();
    if (cfg.has_bundle_store || cfg.offline) {
      std::set<std::string> seen;
      for (const auto& t : proc->threads)
        for (const memory::SnapshotModule& m : t->snap.modules) {
          struct stat st;
          if (!cfg.offline && ::stat(m.path.c_str(), &st) == 0) continue;
          if (!seen.insert(m.build_id.hex() + "\n" + m.path).second || seen.size() > 4096) continue;
          auto b = find_module_bundle(ctx, m);
          if (!b.ok())
            proc->warnings += b.error().message + ": its frames are unwound without CFI (frame pointer) or the walk stops there\n";
        }
    }
    if (!proc->warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", proc->warnings.c_str());
    *out = proc.release();
    return 0;
  });
}

}  // extern "C"
