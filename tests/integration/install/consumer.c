/* SPDX-License-Identifier: Apache-2.0 */
/* An installed-library consumer in ISO C11: prints sprov_version(), then captures and unwinds its own
 * stack (main -> consumer_mid -> consumer_leaf) and prints one symbol name per line. */
#include <stackprov/stackprov.h>
#include <stdio.h>

static int report(const char* what) {
  fprintf(stderr, "consumer: %s: %s\n", what, sprov_last_error_message());
  return 1;
}

/* noinline through volatile function pointers: ISO C has no attribute for it. */
static int consumer_leaf(sprov_context* ctx);
static int consumer_mid(sprov_context* ctx);
static int (*volatile leaf_fn)(sprov_context*) = consumer_leaf;
static int (*volatile mid_fn)(sprov_context*) = consumer_mid;

static int consumer_leaf(sprov_context* ctx) {
  sprov_snapshot* snap = NULL;
  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* stack = NULL;
  size_t i;
  int rc = 0;
  SPROV_OPTS(sprov_unwinder_opts, uopts, .max_frames = 64);
  if (sprov_snapshot_capture_self(ctx, NULL, &snap) != 0) return report("sprov_snapshot_capture_self");
  if (sprov_unwinder_new(ctx, &uopts, &uw) != 0 || sprov_symbolizer_new(ctx, NULL, &sym) != 0 ||
      sprov_unwinder_unwind(uw, snap, &stack) != 0) {
    rc = report("unwind");
  } else {
    for (i = 0; i < sprov_stack_frame_count(stack); i++) {
      SPROV_OPTS(sprov_symbol, s);
      if (sprov_symbolizer_frame(sym, stack, i, &s) != 0) {
        rc = report("sprov_symbolizer_frame");
        break;
      }
      printf("frame %s\n", s.name ? s.name : "??");
    }
  }
  sprov_stack_free(stack);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(snap);
  return rc;
}

static int consumer_mid(sprov_context* ctx) { return leaf_fn(ctx) + 0; }

int main(void) {
  sprov_context* ctx = NULL;
  int rc;
  SPROV_OPTS(sprov_context_opts, copts, .log_level = SPROV_LOG_ERROR);
  printf("version %s\n", sprov_version());
  if (sprov_context_new(&copts, &ctx) != 0) return report("sprov_context_new");
  rc = mid_fn(ctx);
  sprov_context_free(ctx);
  return rc;
}
