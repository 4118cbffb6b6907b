/* SPDX-License-Identifier: Apache-2.0 */
/* Cross in-process fixture: nested calls (and a signal handler) capture themselves with
 * sprov_snapshot_capture_self and unwind in-process; built for arm64/mips32 and run under
 * qemu-user. Checked against glibc backtrace() (same return addresses) and the known chain.
 * Usage: fixture chain|signal. Prints the frames; exit 0 = pass, 1 = mismatch, 2 = setup. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackprov/stackprov.h"

#define FN __attribute__((noinline, noipa, used))
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

enum { kMax = 128 };
static sprov_context* g_ctx;
static sprov_snapshot* g_snap;
static int g_err = -1;
static void* g_bt[kMax];
static int g_bt_n;
static const char* g_mode = "chain";

FN void probe(void) {
  g_err = sprov_snapshot_capture_self(g_ctx, NULL, &g_snap);
  NO_TAIL_CALL();
  g_bt_n = backtrace(g_bt, kMax);
  NO_TAIL_CALL();
}
FN void on_usr1(int sig) {
  (void)sig;
  probe();
  NO_TAIL_CALL();
}
FN void c_fn(void) {
  if (strcmp(g_mode, "signal") == 0)
    raise(SIGUSR1);
  else
    probe();
  NO_TAIL_CALL();
}
FN void b_fn(void) {
  c_fn();
  NO_TAIL_CALL();
}
FN void a_fn(void) {
  b_fn();
  NO_TAIL_CALL();
}

static int is(const char* got, const char* want) {
  size_t n = strlen(want);
  return got != NULL && strncmp(got, want, n) == 0 && (got[n] == '\0' || got[n] == '.' || got[n] == '(');
}

int main(int argc, char** argv) {
  if (argc > 1) g_mode = argv[1];
  if (sprov_context_new(NULL, &g_ctx) != 0) {
    fprintf(stderr, "sprov_context_new: %s\n", sprov_last_error_message());
    return 2;
  }
  void* warm[4];
  (void)backtrace(warm, 4); /* loads libgcc_s outside the probe */
  signal(SIGUSR1, on_usr1);
  a_fn();
  if (g_err != 0 || g_snap == NULL) {
    printf("FAIL capture: %s\n", sprov_last_error_message());
    return 1;
  }
  SPROV_OPTS(sprov_unwinder_opts, o, .max_frames = kMax);
  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* st = NULL;
  if (sprov_unwinder_new(g_ctx, &o, &uw) != 0 || sprov_symbolizer_new(g_ctx, NULL, &sym) != 0 ||
      sprov_unwinder_unwind(uw, g_snap, &st) != 0) {
    printf("FAIL unwind: %s\n", sprov_last_error_message());
    return 1;
  }
  size_t n = sprov_stack_frame_count(st);
  uint64_t pc[kMax];
  char* name[kMax];
  printf("mode %s: %zu frames (stop %s), backtrace() %d frames\n", g_mode, n,
         sprov_stop_reason_name(sprov_stack_stop_reason(st)), g_bt_n);
  for (size_t i = 0; i < n && i < kMax; i++) {
    struct sprov_frame f;
    memset(&f, 0, sizeof(f));
    f.sz = sizeof(f);
    sprov_stack_frame(st, i, &f);
    struct sprov_symbol s;
    memset(&s, 0, sizeof(s));
    s.sz = sizeof(s);
    sprov_symbolizer_frame(sym, st, i, &s);
    pc[i] = f.pc;
    name[i] = s.name ? strdup(s.name) : NULL;
    printf("  #%-2zu pc 0x%llx sp 0x%llx %-10s %s | bt 0x%llx\n", i, (unsigned long long)f.pc,
           (unsigned long long)f.sp, sprov_method_name(f.method), name[i] ? name[i] : "?",
           (int)i < g_bt_n ? (unsigned long long)(uintptr_t)g_bt[i] : 0ull);
  }
  if (n > kMax) n = kMax;
  int fail = 0;
  /* The known chain: probe [on_usr1, signal frame, raise internals] c_fn b_fn a_fn main. */
  size_t i = 0;
  if (n == 0 || !is(name[0], "probe")) { printf("FAIL frame 0 is not probe\n"); fail = 1; }
  i = 1;
  if (strcmp(g_mode, "signal") == 0) {
    if (n < 2 || !is(name[1], "on_usr1")) { printf("FAIL frame 1 is not on_usr1\n"); fail = 1; }
    while (i < n && !is(name[i], "c_fn")) i++;
    if (i > 8) { printf("FAIL more than 6 frames between on_usr1 and c_fn\n"); fail = 1; }
  }
  const char* rest[] = {"c_fn", "b_fn", "a_fn", "main"};
  size_t main_at = 0;
  for (size_t k = 0; k < 4; k++, i++) {
    if (i >= n || !is(name[i], rest[k])) {
      printf("FAIL frame %zu: want %s, got %s\n", i, rest[k], i < n && name[i] ? name[i] : "(none)");
      fail = 1;
      break;
    }
    main_at = i;
  }
  /* backtrace(): frame 0 is inside probe (after the capture call), then the same return
   * addresses as ours up to and including main. */
  if (!fail) {
    if (g_bt_n <= (int)main_at) { printf("FAIL backtrace() has %d frames, main is #%zu\n", g_bt_n, main_at); fail = 1; }
    for (size_t k = 1; k <= main_at && k < (size_t)g_bt_n; k++)
      if ((uint64_t)(uintptr_t)g_bt[k] != pc[k]) {
        printf("FAIL frame %zu: pc 0x%llx, backtrace() 0x%llx\n", k, (unsigned long long)pc[k],
               (unsigned long long)(uintptr_t)g_bt[k]);
        fail = 1;
      }
  }
  printf("%s\n", fail ? "FAILED" : "PASS");
  for (size_t k = 0; k < n; k++) free(name[k]);
  sprov_stack_free(st);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(g_snap);
  sprov_context_free(g_ctx);
  return fail;
}
