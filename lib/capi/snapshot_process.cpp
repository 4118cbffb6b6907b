// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_process_open_snapshot -- a sprov_process from serialized snapshot files, one thread
// each, with the runtime frames their capture read (snapshot section 5, doc/runtime-frames.md).
#include <algorithm>
#include <string>

#include "capi/internal.hpp"
#include "core/mapped_file.hpp"
#include "memory/raw_state.hpp"

using namespace stackprov;
using namespace stackprov::capi;

extern "C" {

SPROV_API int sprov_process_open_snapshot(sprov_context* ctx, const char* path, const struct sprov_process_opts* opts,
                                          sprov_process** out) {
  return guard([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_open_snapshot: NULL %s",
                             ctx == nullptr ? "ctx" : path == nullptr ? "path" : "out"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_process_opts), "sprov_process_opts")) return e;
    if (SPROV_OPTS_GET(opts, sprov_process_opts, exe, nullptr) != nullptr ||
        SPROV_OPTS_GET(opts, sprov_process_opts, symbol_path, nullptr) != nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_opts: a snapshot names its own modules "
                             "(exe and symbol_path must be unset)"));
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_process_opts, flags, 0u);
    if ((flags & ~uint32_t{SPROV_PROCESS_RUNTIME_FRAMES}) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_process_opts.flags 0x%x: a snapshot holds no kernel "
                             "stack (only SPROV_PROCESS_RUNTIME_FRAMES applies)", flags));
    const int64_t tid = SPROV_OPTS_GET(opts, sprov_process_opts, tid, int64_t{0});
    auto files = memory::state_files(path, ".snap", "snapshot");
    if (!files.ok()) return fail(files.error());
    auto proc = std::make_unique<sprov_process>();
    proc->from_core = true;  // no live process behind it
    std::vector<std::pair<std::unique_ptr<sprov_snapshot>, std::string>> threads;
    for (const std::string& f : files.value()) {
      auto mapped = map_regular_file(f);
      if (!mapped.ok()) return fail(mapped.error());
      const MappedRegularFile m = mapped.value();
      auto snap = memory::deserialize(static_cast<const uint8_t*>(m.base), m.size);
      unmap_file(m.base, m.size);
      if (!snap.ok()) return fail(make_error(snap.error().code, "%s: %s", f.c_str(), snap.error().message.c_str()));
      if (tid != 0 && snap.value().tid != tid) continue;
      auto h = std::make_unique<sprov_snapshot>();
      h->snap = std::move(snap).value();
      if (!(flags & SPROV_PROCESS_RUNTIME_FRAMES)) h->snap.runtime = {};  // as a capture without the flag
      const size_t slash = f.rfind('/');
      threads.emplace_back(std::move(h), slash == std::string::npos ? f : f.substr(slash + 1));
    }
    if (threads.empty())
      return fail(make_error(SPROV_ERR_NOT_FOUND, "snapshot %s: no thread %lld", path, static_cast<long long>(tid)));
    std::stable_sort(threads.begin(), threads.end(),
                     [](const auto& a, const auto& b) { return a.first->snap.tid < b.first->snap.tid; });
    proc->pid = threads.front().first->snap.pid;
    for (auto& [h, name] : threads) {
      proc->threads.push_back(std::move(h));
      proc->thread_names.push_back(std::move(name));
    }
    proc->runtime = runtime_from_snapshots(proc->threads);
    proc->warnings = proc->runtime.warnings;
    if (!proc->warnings.empty()) ctx->ctx.log(SPROV_LOG_WARN, "%s", proc->warnings.c_str());
    *out = proc.release();
    return 0;
  });
}

}  // extern "C"
