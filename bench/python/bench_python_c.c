/* SPDX-License-Identifier: Apache-2.0 */
/* The C side of bench/python: ns per call of sprov_symbolizer_addr_ex (one address, inline chain
 * read) and sprov_bundle_lookup on a bundle file, after a warm-up; one JSON line.
 * usage: bench_python_c MODULE ADDR BUNDLE MODULE_INDEX N */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "stackprov/stackprov.h"
#include "stackprov/symbol_bundle.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: bench_python_c MODULE ADDR BUNDLE MODULE_INDEX N\n");
    return 2;
  }
  const char* path = argv[1];
  const uint64_t addr = strtoull(argv[2], NULL, 0);
  const size_t module = strtoull(argv[4], NULL, 0);
  const long n = atol(argv[5]);
  sprov_context* ctx = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_bundle* b = NULL;
  if (sprov_context_new(NULL, &ctx) || sprov_symbolizer_new(ctx, NULL, &sym) || sprov_bundle_open_file(argv[3], &b)) {
    fprintf(stderr, "bench_python_c: %s\n", sprov_last_error_message());
    return 1;
  }
  double t[2];
  for (int round = 0; round < 2; round++) { /* round 0 warms the caches */
    double t0 = now();
    for (long i = 0; i < n; i++) {
      struct sprov_symbol_info info = {0};
      info.sz = sizeof info;
      if (sprov_symbolizer_addr_ex(sym, path, addr, 0, &info)) return 1;
      for (uint32_t k = 0; k < info.frame_count; k++) {
        struct sprov_symbol_frame f = {0};
        f.sz = sizeof f;
        if (sprov_symbolizer_inline_frame(sym, k, &f)) return 1;
      }
    }
    t[0] = (now() - t0) / n;
    t0 = now();
    for (long i = 0; i < n; i++) {
      struct sprov_bundle_chain* c = NULL;
      if (sprov_bundle_lookup(b, module, addr, &c)) return 1;
      sprov_free(c);
    }
    t[1] = (now() - t0) / n;
  }
  printf("{\"symbolize_ns\":%.1f,\"bundle_lookup_ns\":%.1f}\n", t[0], t[1]);
  sprov_bundle_free(b);
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  return 0;
}
