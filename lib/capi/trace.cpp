// SPDX-License-Identifier: Apache-2.0
// C ABI: trace stores, capture of a process into a trace (frames with provenance, captured data, bundles), offline resolve, queries.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "capi/trace_internal.hpp"
#include "evidence/json.hpp"
#include "pipeline/frame_render.hpp"
#include "stackprov/kernel.h"
#include "trace/events.hpp"

using namespace stackprov;
using namespace stackprov::capi;

namespace {

std::string mask_password(const std::string& url) {
  // postgresql://user:secret@host/... -> postgresql://user:***@host/...
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t at = url.find('@', scheme + 3);
  if (at == std::string::npos) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace

extern "C" {

SPROV_API int sprov_trace_store_default_url(char** out, size_t* out_len) {
  return guard([&] {
    if (!out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_default_url: NULL out"));
    auto u = trace::default_store_url();
    if (!u) return fail(u.error());
    return give_string(u.value(), out, out_len);
  });
}

SPROV_API int sprov_trace_store_open(const char* url, sprov_trace_store** out) {
  return guard([&] {
    if (!out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_open: NULL out"));
    *out = nullptr;
    std::string u = url ? url : "";
    if (u.empty()) {
      auto d = trace::default_store_url();
      if (!d) return fail(d.error());
      u = d.value();
    }
    auto s = trace::open_store(u);
    if (!s) return fail(s.error());
    auto h = std::make_unique<sprov_trace_store>();
    h->store = std::move(s.value());
    h->url = mask_password(u);
    *out = h.release();
    return 0;
  });
}

SPROV_API void sprov_trace_store_free(sprov_trace_store* store) { delete store; }

SPROV_API const char* sprov_trace_store_url(const sprov_trace_store* store) { return store ? store->url.c_str() : ""; }

SPROV_API int sprov_trace_capture(sprov_context* ctx, const sprov_process* proc, sprov_trace_store* store,
                                  const struct sprov_trace_capture_opts* opts, char* id, size_t id_size) {
  return guard([&] {
    if (!ctx) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL ctx"));
    if (!proc) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL proc"));
    if (!store) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: NULL store"));
    if (!id || id_size < SPROV_TRACE_ID_STRLEN)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture: id buffer of %zu bytes, needs %d", id ? id_size : 0,
                             SPROV_TRACE_ID_STRLEN));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_capture_opts), "sprov_trace_capture_opts")) return rc;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_TRACE_BUNDLE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture_opts.flags 0x%x: only SPROV_TRACE_BUNDLE is known",
                             flags));
    uint32_t max_frames = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, max_frames, 0u);
    if (max_frames == 0) max_frames = 256;
    if (max_frames > 65536)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_capture_opts.max_frames %u exceeds 65536", max_frames));
    const char* sign_key = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, sign_key, nullptr);
    const char* log_dir = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, log_dir, nullptr);
    const char* log_key = SPROV_OPTS_GET(opts, sprov_trace_capture_opts, log_key, nullptr);
    if (sign_key && *sign_key && !(flags & SPROV_TRACE_BUNDLE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sign_key '%s' given without SPROV_TRACE_BUNDLE: only bundles are signed",
                             sign_key));
    if (sign_key && *sign_key && (!log_dir || !*log_dir))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sign_key '%s' needs a transparency log (log_dir)", sign_key));
    pipeline::CaptureOptions co;
    co.max_frames = max_frames;
    co.bundle = flags & SPROV_TRACE_BUNDLE;
    co.sign_key = sign_key ? sign_key : "";
    co.log_dir = log_dir ? log_dir : "";
    co.log_key = log_key ? log_key : "";
    // Keys that cannot sign: fail before anything is stored.
    if (Status st = pipeline::check_capture_signing(co); !st) return fail(st.error());
    pipeline::CapturedProcess cp;
    cp.pid = proc->pid;
    cp.from_core = proc->from_core;
    for (const auto& t : proc->threads) cp.threads.push_back(&t->snap);
    cp.thread_names = proc->thread_names;
    // Kernel stacks (SPROV_PROCESS_KERNEL_STACKS, read before the capture attached): each thread's
    // segment as sprov_process_kernel_stack merges it, converted; a thread without one is a note.
    cp.kernel = proc->kernel_read;
    cp.kernel_btf = proc->btf != nullptr;
    for (size_t i = 0; cp.kernel && i < proc->threads.size(); ++i) {
      const KernelSegment seg = process_kernel_segment(proc, i, nullptr);
      const long long tid = static_cast<long long>(proc->threads[i]->snap.tid);
      if (seg.state != SPROV_KSTACK_READ || seg.frames.empty()) {
        const char* state = seg.state == SPROV_KSTACK_RUNNING ? "running"
                            : seg.state == SPROV_KSTACK_STALE ? "stale"
                            : seg.state == SPROV_KSTACK_READ  ? "read"
                                                              : "unreadable";
        char b[96];
        snprintf(b, sizeof b, "thread %lld: no kernel segment: %s: ", tid, state);
        cp.kernel_notes.push_back(b + (seg.frames.empty() && seg.reason.empty() ? "its kernel stack is empty" : seg.reason));
        continue;
      }
      trace::CapturedKernelSegment out;
      out.tid = static_cast<uint64_t>(tid);
      out.syscall = seg.syscall;
      out.user_sp = seg.user_sp;
      out.user_pc = seg.user_pc;
      for (size_t f = 0; f < seg.frames.size(); ++f) {
        trace::CapturedKernelFrame kf;
        kf.symbol = seg.frames[f].symbol;
        kf.offset = seg.frames[f].offset;
        kf.size = seg.frames[f].size;
        kf.module = seg.frames[f].module;
        if (f < seg.protos.size() && seg.protos[f].func_id != 0) {
          kf.btf_func_id = seg.protos[f].func_id;
          kf.approximate = seg.protos[f].approximate;
          kf.prototype = seg.protos[f].text.substr(0, trace::kMaxKernelPrototype);
        }
        out.frames.push_back(std::move(kf));
      }
      cp.kernel_segments.push_back(std::move(out));
    }
    auto tid = pipeline::capture_trace(*ctx, *store->store, cp, co);
    if (!tid) return fail(tid.error());
    snprintf(id, id_size, "%s", tid.value().c_str());
    return 0;
  });
}

SPROV_API int sprov_trace_resolve(sprov_context* ctx, sprov_trace_store* store, const char* trace_id,
                                  const struct sprov_trace_resolve_opts* opts, char** report, size_t* report_len) {
  return guard([&] {
    if (!ctx) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL ctx"));
    if (!store) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL store"));
    if (!trace_id) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve: NULL trace_id"));
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_resolve_opts), "sprov_trace_resolve_opts")) return rc;
    const uint32_t flags = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, flags, 0u);
    if (flags & ~static_cast<uint32_t>(SPROV_TRACE_OFFLINE))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve_opts.flags 0x%x: only SPROV_TRACE_OFFLINE is known",
                             flags));
    if (uint32_t r = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, reserved, 0u); r != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_resolve_opts.reserved = %u: must be 0", r));
    const char* const* given = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, bundles, nullptr);
    const size_t given_n = SPROV_OPTS_GET(opts, sprov_trace_resolve_opts, bundle_count, size_t{0});
    if (given_n && !given) return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle_count %zu with NULL bundles", given_n));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    std::vector<std::string> bundles;
    for (size_t i = 0; i < given_n; ++i) {
      if (!given[i]) return fail(make_error(SPROV_ERR_INVALID_ARG, "bundles[%zu] is NULL", i));
      bundles.emplace_back(given[i]);
    }
    auto r = pipeline::resolve_trace(*ctx, *store->store, trace_id, bundles, flags & SPROV_TRACE_OFFLINE);
    if (!r) return fail(r.error());
    return report ? give_string(r.value(), report, report_len) : 0;
  });
}

SPROV_API int sprov_trace_get_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !trace_id || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_get_json: NULL argument"));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    auto t = store->store->get_trace(trace_id);
    if (!t) return fail(t.error());
    // The kernel segments (trace-capture --with-btf) are in the captured data. Data that does not
    // decode leaves them out here: trace-verify and replay are what report it.
    trace::CapturedKernel kernel;
    if (!pipeline::captured_threads(t.value(), nullptr, &kernel)) kernel = {};
    return give_string(trace::trace_capture_event(t.value(), kernel), out, out_len);
  });
}

SPROV_API int sprov_trace_render(const char* event, size_t len, uint32_t flags, char** out, size_t* out_len) {
  return guard([&] {
    if (!event || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_render: NULL argument"));
    *out = nullptr;
    if (flags & ~static_cast<uint32_t>(SPROV_RENDER_LINES | SPROV_RENDER_NO_INFERRED))
      return fail(make_error(SPROV_ERR_INVALID_ARG,
                             "sprov_trace_render: flags 0x%x (SPROV_RENDER_LINES and SPROV_RENDER_NO_INFERRED only)",
                             flags));
    auto ev = trace::parse_event(std::string_view(event, len));
    if (!ev) return fail(ev.error());
    const auto* cap = std::get_if<trace::CaptureEvent>(&ev.value());
    if (cap == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_render: not a trace.capture event"));
    std::string text;
    for (const pipeline::RenderThread& t :
         pipeline::trace_render_threads(cap->trace, !(flags & SPROV_RENDER_NO_INFERRED), &cap->kernel)) {
      pipeline::render_thread(t, flags & SPROV_RENDER_LINES, &text);
      if (t.frames.empty()) text += "    (no frames)\n";
    }
    return give_string(text, out, out_len);
  });
}

SPROV_API int sprov_trace_list_json(sprov_trace_store* store, size_t limit, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !out) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_list_json: NULL argument"));
    auto l = store->store->list_traces(limit ? limit : SIZE_MAX);
    if (!l) return fail(l.error());
    evidence::Json a = evidence::Json::array();
    for (const auto& s : l.value())
      a.push_back({{"trace_id", s.id},
                   {"platform", s.platform},
                   {"arch", s.arch},
                   {"captured_at", s.captured_at},
                   {"build_id", s.build_id},
                   {"frames", s.frame_count}});
    return give_string(a.dump(-1, ' ', false, evidence::Json::error_handler_t::replace), out, out_len);
  });
}

SPROV_API int sprov_trace_replays_json(sprov_trace_store* store, const char* trace_id, char** out, size_t* out_len) {
  return guard([&] {
    if (!store || !trace_id || !out)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_replays_json: NULL argument"));
    if (!trace::is_uuid(trace_id))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "trace id '%s' is not a UUID", trace_id));
    auto l = store->store->list_replays(trace_id);
    if (!l) return fail(l.error());
    std::string s;
    for (const auto& r : l.value()) s += trace::replay_result_event(r) + "\n";
    return give_string(s, out, out_len);
  });
}

SPROV_API int sprov_trace_store_export_bundle(sprov_trace_store* store, const char* digest, sprov_bundle_store* bundles) {
  return guard([&] {
    if (!store || !digest || !bundles)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_store_export_bundle: NULL argument"));
    const std::string hex = pipeline::bare_sha256(digest);
    if (hex.size() != 64 || !trace::is_lower_hex(hex, 64))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "bundle digest '%s' is not sha256:<64 lower-case hex>", digest));
    Status st = pipeline::export_bundle(*store->store, hex, bundles->store);
    return st ? 0 : fail(st.error());
  });
}

}  // extern "C"
