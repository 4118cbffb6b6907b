/* SPDX-License-Identifier: Apache-2.0 */
/* bench/unwind fixture: captures itself at the leaves of varied call chains (-O2, no frame pointers, PIE). */
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_file.h"
#include "stackprov/stackprov.h"

/* Usage: bench_unwind_fixture_native COUNT OUT_FILE
 * Writes COUNT snapshots, cycling through the call-chain shapes below with
 * depths that vary from one snapshot to the next. */

static sprov_context* g_ctx;
static FILE* g_out;
static const char* g_category;
static long g_written;
static long g_failed;
static volatile unsigned g_sink;

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

NOINLINE static void capture_leaf(void) {
  sprov_snapshot* snap = NULL;
  if (sprov_snapshot_capture_self(g_ctx, NULL, &snap) != 0) {
    g_failed++;
    return;
  }
  BARRIER();
  if (spb_snap_write(g_out, kSnapSourceNative, g_category, snap) == 0) g_written++;
  else g_failed++;
  sprov_snapshot_free(snap);
}

/* ---- plain recursion with frames of different sizes */
NOINLINE static unsigned rec_small(int n) {
  if (n <= 0) {
    capture_leaf();
    return 1;
  }
  unsigned r = rec_small(n - 1);
  BARRIER();
  return r + (unsigned)n;
}

NOINLINE static unsigned rec_big(int n, unsigned seed) {
  volatile unsigned buf[37];
  for (int i = 0; i < 37; i++) buf[i] = seed + (unsigned)i;
  if (n <= 0) {
    capture_leaf();
    return buf[3];
  }
  unsigned r = rec_big(n - 1, seed * 3u + 1u);
  return r ^ buf[n % 37];
}

/* ---- dynamic stack allocation: the CFA comes from a register (rbp-based CFI) */
NOINLINE static unsigned rec_alloca(int n, size_t sz) {
  volatile char* p = __builtin_alloca(sz);
  p[0] = (char)n;
  p[sz - 1] = (char)sz;
  if (n <= 0) {
    capture_leaf();
    return p[0];
  }
  unsigned r = rec_alloca(n - 1, (sz * 5u) % 512u + 16u);
  return r + (unsigned)p[sz - 1];
}

/* ---- mutual recursion through a function pointer table */
NOINLINE static unsigned mut_a(int n);
NOINLINE static unsigned mut_b(int n);
NOINLINE static unsigned mut_c(int n);
static unsigned (*const g_mut[3])(int) = {mut_a, mut_b, mut_c};

NOINLINE static unsigned mut_a(int n) {
  if (n <= 0) {
    capture_leaf();
    return 7;
  }
  unsigned r = g_mut[(unsigned)n % 3u](n - 1);
  BARRIER();
  return r * 3u;
}
NOINLINE static unsigned mut_b(int n) {
  volatile long pad[5] = {n, n, n, n, n};
  if (n <= 0) {
    capture_leaf();
    return 11;
  }
  unsigned r = g_mut[((unsigned)n + 1u) % 3u](n - 1);
  return r + (unsigned)pad[2];
}
NOINLINE static unsigned mut_c(int n) {
  if (n <= 0) {
    capture_leaf();
    return 13;
  }
  unsigned r = g_mut[((unsigned)n * 7u) % 3u](n - 1) ^ 5u;
  BARRIER();
  return r;
}

/* ---- through libc: qsort's comparator captures (libc frames in the middle) */
static int g_qsort_depth;
static int g_qsort_armed;

NOINLINE static unsigned rec_small(int n);
static int cmp_capture(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  if (g_qsort_armed) {
    g_qsort_armed = 0;
    g_sink += rec_small(g_qsort_depth);
  }
  return (x > y) - (x < y);
}

NOINLINE static unsigned via_qsort(int depth) {
  int v[24];
  for (int i = 0; i < 24; i++) v[i] = (i * 7919) % 24;
  g_qsort_depth = depth;
  g_qsort_armed = 1;
  qsort(v, 24, sizeof v[0], cmp_capture);
  BARRIER();
  return (unsigned)v[3];
}

/* ---- through libc recursion: twalk visits a tree recursively (deep libc frames) */
static int g_twalk_target;
static int g_twalk_seen;
static int g_twalk_rec;

static int cmp_int_ptr(const void* a, const void* b) {
  intptr_t x = (intptr_t)a, y = (intptr_t)b;
  return (x > y) - (x < y);
}

static void twalk_visit(const void* node, VISIT which, int level) {
  if (which == leaf || which == postorder) {
    if (g_twalk_seen++ == g_twalk_target) g_sink += mut_a(g_twalk_rec);
  }
}

NOINLINE static unsigned via_twalk(int nodes, int target, int rec) {
  void* root = NULL;
  for (intptr_t i = 1; i <= nodes; i++) tsearch((void*)((i * 37) % (nodes + 1) + 1), &root, cmp_int_ptr);
  g_twalk_target = target % nodes;
  g_twalk_seen = 0;
  g_twalk_rec = rec;
  twalk(root, twalk_visit);
  while (root != NULL) {
    void* key = *(void**)root;
    tdelete(key, &root, cmp_int_ptr);
  }
  return 0;
}

/* ---- from a signal handler: the chain crosses the kernel's signal frame (__restore_rt) */
static int g_sig_rec;
static void on_signal(int sig) { g_sink += rec_big(g_sig_rec, (unsigned)sig); }

NOINLINE static unsigned via_signal(int before, int after) {
  if (before > 0) return via_signal(before - 1, after) + 1u;
  g_sig_rec = after;
  raise(SIGUSR1);
  BARRIER();
  return 0;
}

/* ---- a wide fan of distinct shapes, picked by the snapshot index */
static void produce_one(long i) {
  int depth = (int)(i % 29);
  switch (i % 8) {
    case 0:
      g_category = "native/rec_small";
      g_sink += rec_small(depth + 1);
      break;
    case 1:
      g_category = "native/rec_big";
      g_sink += rec_big(depth % 17, (unsigned)i);
      break;
    case 2:
      g_category = "native/rec_alloca";
      g_sink += rec_alloca(depth % 13, 32u + (size_t)(i % 200));
      break;
    case 3:
    case 4:
      g_category = "native/mutual";
      g_sink += g_mut[i % 3](depth + 2);
      break;
    case 5:
      g_category = "native/qsort";
      g_sink += via_qsort(depth % 11);
      break;
    case 6:
      g_category = "native/twalk";
      g_sink += via_twalk(9 + (int)(i % 23), (int)(i / 8), depth % 7);
      break;
    default:
      if (i % 32 == 7) {
        g_category = "native/signal";
        g_sink += via_signal(depth % 5, depth % 9);
      } else {
        g_category = "native/rec_small";
        g_sink += rec_small(40 + depth);
      }
      break;
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s COUNT OUT_FILE\n", argv[0]);
    return 2;
  }
  long count = strtol(argv[1], NULL, 10);
  g_out = spb_snap_open(argv[2]);
  if (g_out == NULL) {
    perror(argv[2]);
    return 1;
  }
  if (sprov_context_new(NULL, &g_ctx) != 0) {
    fprintf(stderr, "sprov_context_new: %s\n", sprov_last_error_message());
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  for (long i = 0; g_written < count; i++) {
    produce_one(i);
    if (g_failed > 16) {
      fprintf(stderr, "capture failed: %s\n", sprov_last_error_message());
      return 1;
    }
  }
  fclose(g_out);
  sprov_context_free(g_ctx);
  fprintf(stderr, "fixture_native: wrote %ld snapshots to %s\n", g_written, argv[2]);
  return 0;
}
