// SPDX-License-Identifier: Apache-2.0
// C ABI: sprov_profile (perf.data / capture file samples as snapshots) and sprov_record.
#include <cerrno>

#include "capi/internal.hpp"
#include "perf/profile.hpp"
#include "perf/recorder.hpp"

using namespace stackprov;
using namespace stackprov::capi;

struct sprov_profile {
  sprov_context* ctx = nullptr;
  std::unique_ptr<perf::Profile> prof;
  sprov_snapshot snap;  // reused between samples
  uint32_t current_list = UINT32_MAX;
  perf::SampleView view;
};

extern "C" {

SPROV_API int sprov_profile_open(sprov_context* ctx, const char* path, const struct sprov_profile_open_opts* opts,
                                 sprov_profile** out) {
  return guard([&] {
    if (ctx == nullptr || path == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open: NULL argument"));
    *out = nullptr;
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_profile_open_opts), "sprov_profile_open_opts")) return e;
    if (uint32_t f = SPROV_OPTS_GET(opts, sprov_profile_open_opts, flags, 0u); f != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open_opts.flags 0x%x: no flags are defined", f));
    if (SPROV_OPTS_GET(opts, sprov_profile_open_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_open_opts.reserved must be 0"));
    auto p = perf::Profile::open(path, ctx->ctx.config().sysroot);
    if (!p.ok()) return fail(p.error());
    auto* h = new sprov_profile();
    h->ctx = ctx;
    h->prof = std::move(p).value();
    h->snap.snap.module_root = ctx->ctx.config().sysroot;
    *out = h;
    return 0;
  });
}

SPROV_API void sprov_profile_free(sprov_profile* prof) { delete prof; }

SPROV_API int sprov_profile_info(const sprov_profile* prof, struct sprov_profile_info* out) {
  if (prof == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_info: prof is NULL"));
  const perf::Profile& p = *prof->prof;
  struct sprov_profile_info i = {};
  i.sz = sizeof(i);
  i.format = static_cast<int32_t>(p.format());
  i.sample_stack_user = p.sample_stack_user();
  i.samples = p.samples().size();
  i.lost = p.lost();
  i.records = p.records();
  i.module_lists = p.lists().size();
  i.sample_regs_user = p.sample_regs_user();
  i.cmdline = p.cmdline().c_str();
  i.warnings = p.warnings().c_str();
  return fill_out(out, i, "sprov_profile_info");
}

SPROV_API int sprov_profile_sample(sprov_profile* prof, size_t index, struct sprov_profile_sample* out) {
  return guard([&] {
    if (prof == nullptr || out == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_profile_sample: NULL argument"));
    const perf::Profile& p = *prof->prof;
    if (index >= p.samples().size())
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sample index %zu out of range (%zu samples)", index,
                             p.samples().size()));
    bool changed = false;
    if (Status st = p.fill_snapshot(index, prof->snap.snap, &prof->current_list, &changed, &prof->view); !st.ok()) {
      prof->current_list = UINT32_MAX;  // the snapshot may be half-filled
      return fail(st.error());
    }
    if (changed) prof->snap.invalidate_modules_key();
    const perf::SampleRef& ref = p.samples()[index];
    const perf::SampleView& v = prof->view;
    struct sprov_profile_sample s = {};
    s.sz = sizeof(s);
    s.time = v.time;
    s.pid = ref.pid;
    s.tid = ref.tid;
    s.comm = ref.comm < p.comms().size() ? p.comms()[ref.comm].c_str() : "";
    s.ip = v.ip;
    s.sp = v.sp;
    s.stack_size = v.stack_len;
    s.stack_requested = v.stack_requested;
    s.snapshot = v.user_regs ? &prof->snap : nullptr;
    s.kernel_ips = v.kernel_ips.empty() ? nullptr : v.kernel_ips.data();
    s.kernel_ip_count = static_cast<uint32_t>(v.kernel_ips.size());
    s.flags = (v.user_regs ? 0u : static_cast<uint32_t>(SPROV_PROFILE_SAMPLE_NO_USER_REGS)) |
              (changed ? static_cast<uint32_t>(SPROV_PROFILE_SAMPLE_NEW_MODULES) : 0u);
    s.module_list = ref.list;
    return fill_out(out, s, "sprov_profile_sample");
  });
}

SPROV_API int sprov_record(sprov_context* ctx, const struct sprov_record_opts* opts, struct sprov_record_result* out) {
  return guard([&] {
    if (ctx == nullptr || opts == nullptr)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: NULL %s", ctx ? "opts" : "ctx"));
    if (int e = check_opts(opts, SPROV_OPTS_KNOWN(sprov_record_opts), "sprov_record_opts")) return e;
    perf::RecordOptions o;
    o.pid = SPROV_OPTS_GET(opts, sprov_record_opts, pid, int64_t{0});
    const char* const* argv = SPROV_OPTS_GET(opts, sprov_record_opts, argv, nullptr);
    const char* output = SPROV_OPTS_GET(opts, sprov_record_opts, output, nullptr);
    o.frequency = SPROV_OPTS_GET(opts, sprov_record_opts, frequency, 0u);
    o.stack_size = SPROV_OPTS_GET(opts, sprov_record_opts, stack_size, 0u);
    o.duration_ms = SPROV_OPTS_GET(opts, sprov_record_opts, duration_ms, 0u);
    if (uint32_t f = SPROV_OPTS_GET(opts, sprov_record_opts, flags, 0u); f != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record_opts.flags 0x%x: no flags are defined", f));
    if ((o.pid != 0) == (argv != nullptr && argv[0] != nullptr))
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: give exactly one of pid (%lld) and argv",
                             static_cast<long long>(o.pid)));
    if (o.pid < 0) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: pid %lld", static_cast<long long>(o.pid)));
    if (output == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: output is NULL"));
    if (o.frequency == 0) o.frequency = 999;
    if (o.frequency > 100000)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: frequency %u exceeds 100000", o.frequency));
    if (o.stack_size == 0) o.stack_size = 8192;
    if (o.stack_size % 8 != 0 || o.stack_size > 65528)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_record: stack_size %u is not a multiple of 8 in [8, 65528]",
                             o.stack_size));
    for (size_t i = 0; argv != nullptr && argv[i] != nullptr; i++) o.argv.emplace_back(argv[i]);
    o.output = output;
    o.root = ctx->ctx.config().sysroot;
    perf::RecordStats stats;
    if (Status st = perf::record(o, &stats); !st.ok()) return fail(st.error());
    if (out != nullptr) {
      struct sprov_record_result r = {};
      r.sz = sizeof(r);
      r.samples = stats.samples;
      r.lost = stats.lost;
      r.threads = stats.threads;
      r.exit_status = stats.exit_status;
      return fill_out(out, r, "sprov_record_result");
    }
    return 0;
  });
}

}  // extern "C"
