// SPDX-License-Identifier: Apache-2.0
// C ABI: the trace functions of a build without lib/trace (STACKPROV_TRACE=OFF, e.g. cross builds): each fails with SPROV_ERR_UNSUPPORTED.
#include "capi/internal.hpp"
#include "stackprov/trace.h"

using namespace stackprov;
using namespace stackprov::capi;

namespace {
int unsupported(const char* fn) noexcept {
  return guard([&] {
    return fail(make_error(SPROV_ERR_UNSUPPORTED, "%s: this stackprov was built without trace stores (STACKPROV_TRACE=OFF)", fn));
  });
}
}  // namespace

extern "C" {
SPROV_API int sprov_trace_store_default_url(char**, size_t*) { return unsupported(__func__); }
SPROV_API int sprov_trace_store_open(const char*, sprov_trace_store** out) {
  if (out) *out = nullptr;
  return unsupported(__func__);
}
SPROV_API void sprov_trace_store_free(sprov_trace_store*) {}
SPROV_API const char* sprov_trace_store_url(const sprov_trace_store*) { return ""; }
SPROV_API int sprov_trace_capture(sprov_context*, const sprov_process*, sprov_trace_store*,
                                  const struct sprov_trace_capture_opts*, char*, size_t) {
  return unsupported(__func__);
}
SPROV_API int sprov_trace_resolve(sprov_context*, sprov_trace_store*, const char*, const struct sprov_trace_resolve_opts*,
                                  char**, size_t*) {
  return unsupported(__func__);
}
SPROV_API int sprov_trace_replay(sprov_context*, sprov_trace_store*, const char*, const struct sprov_trace_replay_opts*,
                                 sprov_replay_report** out) {
  if (out) *out = nullptr;
  return unsupported(__func__);
}
SPROV_API void sprov_replay_report_free(sprov_replay_report*) {}
SPROV_API int sprov_replay_report_exit_code(const sprov_replay_report*) { return SPROV_ERR_UNSUPPORTED; }
SPROV_API double sprov_replay_report_coverage_pct(const sprov_replay_report*) { return 0; }
SPROV_API double sprov_replay_report_success_ratio(const sprov_replay_report*) { return 0; }
SPROV_API int sprov_replay_report_format(const sprov_replay_report*, int, char**, size_t*) { return unsupported(__func__); }
SPROV_API int sprov_trace_get_json(sprov_trace_store*, const char*, char**, size_t*) { return unsupported(__func__); }
SPROV_API int sprov_trace_list_json(sprov_trace_store*, size_t, char**, size_t*) { return unsupported(__func__); }
SPROV_API int sprov_trace_render(const char*, size_t, uint32_t, char** out, size_t*) {
  if (out) *out = nullptr;
  return unsupported(__func__);
}
SPROV_API int sprov_trace_replays_json(sprov_trace_store*, const char*, char**, size_t*) { return unsupported(__func__); }
SPROV_API int sprov_trace_store_export_bundle(sprov_trace_store*, const char*, sprov_bundle_store*) {
  return unsupported(__func__);
}
}  // extern "C"
