// SPDX-License-Identifier: Apache-2.0
// Fuzz target: eBPF sampler events (struct sprov_kernel_event, include/stackprov/kernel.h) through
// sprov_kernel_event_stitch: any bytes give a stitched stack or a named error. The address space is
// this process's with no modules (SPROV_AS_EMPTY): the user walk reads only the event's stack bytes.
// Seeds (corpus/kernel_event/): events of the off-CPU sampler (stitch_client.c with
// STACKPROV_DUMP_EVENT), one cut short and one with a kernel_count past its bound.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "stackprov/kernel.h"

namespace {
struct Env {
  sprov_context* ctx = nullptr;
  sprov_unwinder* uw = nullptr;
  sprov_address_space* as = nullptr;
  Env() {
    SPROV_OPTS(sprov_context_opts, copts);
    SPROV_OPTS(sprov_unwinder_opts, uopts);
    SPROV_OPTS(sprov_address_space_opts, aopts, .flags = SPROV_AS_EMPTY);
    if (sprov_context_new(&copts, &ctx) != 0 || sprov_unwinder_new(ctx, &uopts, &uw) != 0 ||
        sprov_address_space_new(ctx, &aopts, &as) != 0)
      __builtin_trap();
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Env env;
  static sprov_stitched_frame frames[300];
  for (size_t capacity : {size_t{300}, size_t{3}}) {
    SPROV_OPTS(sprov_stitch_result, r);
    const int rc = sprov_kernel_event_stitch(env.uw, env.as, nullptr, data, size, frames, capacity, &r);
    if (rc != 0) {
      const char* m = sprov_last_error_message();
      if (m == nullptr || *m == '\0') __builtin_trap();  // every error names what is wrong
      continue;
    }
    if (r.count > capacity || r.kernel_count > r.count || r.kernel_count > SPROV_KERNEL_MAX_FRAMES) __builtin_trap();
    for (uint32_t i = 0; i < r.count; i++) {
      const bool kernel = i < r.kernel_count;
      if (frames[i].domain != (kernel ? SPROV_DOMAIN_KERNEL : SPROV_DOMAIN_USER)) __builtin_trap();
      const bool boundary = (frames[i].flags & SPROV_FRAME_KERNEL_USER_BOUNDARY) != 0;
      if (boundary != (!kernel && i == r.kernel_count && r.kernel_count > 0)) __builtin_trap();
    }
  }
  return 0;
}
