/* SPDX-License-Identifier: Apache-2.0 */
/* In-process integration harness: probe, unwind, symbolize, compare with backtrace()/rbp chain/ucontext. */
#define _GNU_SOURCE
#include "harness.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct probe g_probe;
struct expectation g_expect;

static sprov_context* g_ctx;
static const char* g_variant = "?";
static const char* g_mode = "?";

#ifndef FIXTURE_OWN_METHOD
#define FIXTURE_OWN_METHOD SPROV_METHOD_CFI_EH_FRAME
#endif

int harness_own_method(void) { return FIXTURE_OWN_METHOD; }

const char* harness_init(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s VARIANT MODE\n", argv[0]);
    exit(2);
  }
  g_variant = argv[1];
  g_mode = argv[2];
  if (sprov_context_new(NULL, &g_ctx) != 0) {
    fprintf(stderr, "sprov_context_new: %s\n", sprov_last_error_message());
    exit(2);
  }
  /* The first backtrace() loads libgcc_s; do it here, not in the probe. */
  void* warm[4];
  (void)backtrace(warm, 4);
  return g_mode;
}

/* Under ASan/TSan (make test-sanitize) backtrace() is intercepted: its first entries are in the
 * sanitizer runtime, not in probe_capture. Drop them so that entry i is frame i again. gcc links
 * the runtime as a shared library (libasan.so, ...); clang links it into the executable itself,
 * where dladdr names the fixture: there the interceptor is recognised by its exported symbol. */
static void drop_sanitizer_frames(void) {
  void* const interceptor = dlsym(RTLD_DEFAULT, "__interceptor_backtrace"); /* NULL: no sanitizer */
  int skip = 0;
  while (skip < g_probe.bt_n) {
    Dl_info info;
    if (dladdr(g_probe.bt[skip], &info) == 0) break;
    const int in_runtime_library =
        info.dli_fname != NULL &&
        (strstr(info.dli_fname, "/libasan.") != NULL || strstr(info.dli_fname, "/libtsan.") != NULL ||
         strstr(info.dli_fname, "/libubsan.") != NULL);
    const int in_interceptor = interceptor != NULL && info.dli_saddr == interceptor;
    if (!in_runtime_library && !in_interceptor) break;
    skip++;
  }
  if (skip == 0) return;
  memmove(g_probe.bt, g_probe.bt + skip, (size_t)(g_probe.bt_n - skip) * sizeof(g_probe.bt[0]));
  g_probe.bt_n -= skip;
}

FIXTURE_FN void probe_capture(void) {
  g_probe.err = sprov_snapshot_capture_self(g_ctx, NULL, &g_probe.snap);
  NO_TAIL_CALL();
  g_probe.bt_n = backtrace(g_probe.bt, kProbeMaxFrames);
  NO_TAIL_CALL();
  drop_sanitizer_frames();
  /* rbp chain: [fp] = caller's rbp, [fp+8] = return address into the caller. */
  g_probe.fp_n = 0;
  if (g_expect.fp_oracle_frames > 0) {
    const uint64_t* fp = (const uint64_t*)__builtin_frame_address(0);
    while (fp != NULL && g_probe.fp_n < g_expect.fp_oracle_frames && g_probe.fp_n < kProbeMaxFrames) {
      g_probe.fp_ra[g_probe.fp_n++] = fp[1];
      fp = (const uint64_t*)fp[0];
    }
  }
  g_probe.captured = 1;
  NO_TAIL_CALL();
}

/* ----------------------------------------------------------------- checks */

static int g_failures_here;

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      printf("FAIL [%s/%s] ", g_variant, g_mode);                       \
      printf(__VA_ARGS__);                                              \
      printf("\n");                                                     \
      g_failures_here++;                                                \
    }                                                                   \
  } while (0)

struct walked {
  size_t n;
  int stop;
  struct sprov_frame fr[kProbeMaxFrames];
  char* name[kProbeMaxFrames];
};

static int unwind_into(const sprov_snapshot* snap, struct walked* w) {
  SPROV_OPTS(sprov_unwinder_opts, o, .max_frames = kProbeMaxFrames, .flags = g_expect.unwind_flags);
  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* st = NULL;
  memset(w, 0, sizeof(*w));
  if (sprov_unwinder_new(g_ctx, &o, &uw) != 0 || sprov_symbolizer_new(g_ctx, NULL, &sym) != 0 ||
      sprov_unwinder_unwind(uw, snap, &st) != 0) {
    printf("FAIL [%s/%s] unwind setup: %s\n", g_variant, g_mode, sprov_last_error_message());
    sprov_symbolizer_free(sym);
    sprov_unwinder_free(uw);
    return -1;
  }
  w->n = sprov_stack_frame_count(st);
  if (w->n > kProbeMaxFrames) w->n = kProbeMaxFrames;
  w->stop = sprov_stack_stop_reason(st);
  for (size_t i = 0; i < w->n; i++) {
    w->fr[i].sz = sizeof(w->fr[i]);
    sprov_stack_frame(st, i, &w->fr[i]);
    w->fr[i].module_path = NULL; /* owned by the stack, freed below */
    w->fr[i].build_id = NULL;
    struct sprov_symbol s;
    memset(&s, 0, sizeof(s));
    s.sz = sizeof(s);
    sprov_symbolizer_frame(sym, st, i, &s);
    w->name[i] = s.name ? strdup(s.name) : NULL;
  }
  sprov_stack_free(st);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  return 0;
}

static void free_walked(struct walked* w) {
  for (size_t i = 0; i < w->n; i++) free(w->name[i]);
}

/* "level_a" matches "level_a", "level_a.cold", "level_a()", "f() [clone .cold]". */
static int name_matches(const char* got, const char* want) {
  if (got == NULL) return 0;
  const size_t n = strlen(want);
  if (strncmp(got, want, n) != 0) return 0;
  const char c = got[n];
  return c == '\0' || c == '.' || c == '(' || strncmp(got + n, " [clone", 7) == 0;
}

/* Matches the chain pattern against frames [fi, n); elem_of[i] receives the
 * pattern index that frame i matched, or -1 for a "..." frame. */
static int match_chain(const struct walked* w, size_t pi, size_t fi, int* elem_of) {
  if (pi == g_expect.chain_len) return fi == w->n;
  const char* want = g_expect.chain[pi].name;
  if (strcmp(want, "...") == 0) {
    for (size_t k = fi; k <= w->n; k++) {
      for (size_t j = fi; j < k; j++) elem_of[j] = -1;
      if (match_chain(w, pi + 1, k, elem_of)) return 1;
    }
    return 0;
  }
  if (fi >= w->n || !name_matches(w->name[fi], want)) return 0;
  elem_of[fi] = (int)pi;
  return match_chain(w, pi + 1, fi + 1, elem_of);
}

static void print_walk(const char* tag, const struct walked* w) {
  for (size_t i = 0; i < w->n; i++)
    printf("%s %3zu 0x%016" PRIx64 " sp=0x%016" PRIx64 " %-16s %s\n", tag, i, w->fr[i].pc,
           w->fr[i].sp, sprov_method_name(w->fr[i].method), w->name[i] ? w->name[i] : "??");
  printf("%s stop %s\n", tag, sprov_stop_reason_name(w->stop));
}

static void compare_walks(const char* what, const struct walked* a, const struct walked* b,
                          int compare_frame0_method) {
  CHECK(a->n == b->n, "%s: %zu frames, original had %zu", what, b->n, a->n);
  CHECK(a->stop == b->stop, "%s: stop %s, original %s", what, sprov_stop_reason_name(b->stop),
        sprov_stop_reason_name(a->stop));
  const size_t n = a->n < b->n ? a->n : b->n;
  for (size_t i = 0; i < n; i++) {
    const struct sprov_frame* x = &a->fr[i];
    const struct sprov_frame* y = &b->fr[i];
    CHECK(x->pc == y->pc && x->sp == y->sp && x->module_offset == y->module_offset,
          "%s frame %zu: pc/sp/offset 0x%" PRIx64 "/0x%" PRIx64 "/0x%" PRIx64
          ", original 0x%" PRIx64 "/0x%" PRIx64 "/0x%" PRIx64,
          what, i, y->pc, y->sp, y->module_offset, x->pc, x->sp, x->module_offset);
    if (i > 0 || compare_frame0_method)
      CHECK(x->method == y->method, "%s frame %zu: method %s, original %s", what, i,
            sprov_method_name(y->method), sprov_method_name(x->method));
    const int same_name = (a->name[i] == NULL && b->name[i] == NULL) ||
                          (a->name[i] && b->name[i] && strcmp(a->name[i], b->name[i]) == 0);
    CHECK(same_name, "%s frame %zu: name %s, original %s", what, i, b->name[i] ? b->name[i] : "??",
          a->name[i] ? a->name[i] : "??");
  }
}

/* Copies one contiguous region of the snapshot's memory, starting at addr,
 * page by page until a read fails; returns its end. */
static uint64_t copy_region(const sprov_snapshot* from, sprov_snapshot* to, uint64_t addr) {
  static unsigned char buf[1 << 16];
  uint64_t end = addr;
  for (;;) {
    uint64_t next = (end | 4095) + 1;
    if (sprov_snapshot_read_memory(from, end, buf, next - end) != 0) break;
    if (sprov_snapshot_add_memory(to, end, buf, next - end) != 0) {
      printf("FAIL [%s/%s] add_memory 0x%" PRIx64 ": %s\n", g_variant, g_mode, end,
             sprov_last_error_message());
      g_failures_here++;
      break;
    }
    end = next;
  }
  return end;
}

static char* read_file_text(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0;
  char* s = malloc(cap);
  size_t got;
  while ((got = fread(s + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len < 4096) s = realloc(s, cap *= 2);
  }
  s[len] = '\0';
  fclose(f);
  return s;
}

/* The offline builder path: a snapshot assembled with sprov_snapshot_new /
 * set_reg / add_memory / add_maps from the captured registers and stack and
 * this process's maps. Frame 0's pc is then treated as an exact pc. */
static sprov_snapshot* rebuild_by_hand(const sprov_snapshot* cap) {
  sprov_snapshot* s = NULL;
  if (sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &s) != 0) return NULL;
  for (uint32_t r = 0; r < 17; r++) {
    uint64_t v;
    if (sprov_snapshot_reg(cap, r, &v) == 0) sprov_snapshot_set_reg(s, r, v);
  }
  uint64_t sp = 0;
  sprov_snapshot_reg(cap, 7, &sp);
  const uint64_t end = copy_region(cap, s, sp);
  if (g_expect.signal_sp != 0 && (g_expect.signal_sp < sp || g_expect.signal_sp >= end))
    copy_region(cap, s, g_expect.signal_sp); /* sigaltstack: the interrupted thread stack */
  char* maps = read_file_text("/proc/self/maps");
  if (maps != NULL) {
    for (const char* line = maps; *line != '\0';) {
      const char* eol = strchr(line, '\n');
      if (eol == NULL) eol = line + strlen(line);
      unsigned long lo, hi;
      if (eol - line > 6 && memcmp(eol - 6, "[vdso]", 6) == 0 && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
        sprov_snapshot_add_memory(s, lo, (const void*)lo, hi - lo);
      line = *eol ? eol + 1 : eol;
    }
    if (sprov_snapshot_add_maps(g_ctx, s, maps) != 0) {
      printf("FAIL [%s/%s] add_maps: %s\n", g_variant, g_mode, sprov_last_error_message());
      g_failures_here++;
    }
    free(maps);
  }
  return s;
}

int harness_check(void) {
  g_failures_here = 0;
  CHECK(g_probe.captured, "the probe never ran");
  CHECK(g_probe.err == 0 && g_probe.snap != NULL, "capture failed: %d %s", g_probe.err,
        sprov_last_error_message());
  if (!g_probe.captured || g_probe.snap == NULL) return g_failures_here;

  static struct walked w, w2, w3;
  if (unwind_into(g_probe.snap, &w) != 0) return g_failures_here + 1;
  print_walk("SPROV", &w);
  for (int i = 0; i < g_probe.bt_n; i++) printf("BT %3d 0x%016" PRIx64 "\n", i, (uint64_t)(uintptr_t)g_probe.bt[i]);
  for (int i = 0; i < g_probe.fp_n; i++) printf("FP %3d 0x%016" PRIx64 "\n", i + 1, g_probe.fp_ra[i]);

  /* 1. The walk ends at the outermost frame. */
  CHECK(w.stop == SPROV_STOP_END_OF_STACK, "stop reason %s, expected end_of_stack",
        sprov_stop_reason_name(w.stop));
  CHECK(w.n >= 2, "only %zu frames", w.n);
  if (w.n > 0) {
    CHECK(w.fr[0].method == SPROV_METHOD_CONTEXT, "frame 0 method %s, expected context",
          sprov_method_name(w.fr[0].method));
  }

  /* 2. backtrace(): entry i is frame i for i >= 1 (same call site for entry 0's caller). */
  const size_t nbt = (size_t)g_probe.bt_n;
  for (size_t i = 1; i < nbt && i < w.n; i++)
    CHECK(w.fr[i].pc == (uint64_t)(uintptr_t)g_probe.bt[i],
          "frame %zu: pc 0x%" PRIx64 " (%s, %s), backtrace() has 0x%" PRIx64, i, w.fr[i].pc,
          w.name[i] ? w.name[i] : "??", sprov_method_name(w.fr[i].method),
          (uint64_t)(uintptr_t)g_probe.bt[i]);
  if (g_expect.bt_complete)
    CHECK(w.n == nbt, "%zu frames, backtrace() has %zu", w.n, nbt);
  else
    CHECK(nbt <= w.n, "%zu frames, fewer than backtrace()'s %zu", w.n, nbt);

  /* 3. The rbp chain walked at the probe: link k is the pc of frame k+1. */
  CHECK(g_probe.fp_n == g_expect.fp_oracle_frames, "rbp chain walk gave %d links, wanted %d",
        g_probe.fp_n, g_expect.fp_oracle_frames);
  for (int k = 0; k < g_probe.fp_n; k++) {
    const size_t i = (size_t)k + 1;
    CHECK(i < w.n && w.fr[i].pc == g_probe.fp_ra[k],
          "frame %zu: pc 0x%" PRIx64 ", rbp chain has 0x%" PRIx64, i, i < w.n ? w.fr[i].pc : 0,
          g_probe.fp_ra[k]);
  }

  /* 4. The known call chain, in order; per-frame methods. */
  static int elem_of[kProbeMaxFrames];
  const int matched = match_chain(&w, 0, 0, elem_of);
  CHECK(matched, "function names do not follow the expected chain (first expected: %s)",
        g_expect.chain_len ? g_expect.chain[0].name : "-");
  size_t signal_frames = 0;
  for (size_t i = 1; i < w.n; i++) {
    int want = SPROV_METHOD_CFI_EH_FRAME; /* libc and ld.so frames */
    if (g_expect.signal_pc != 0 && w.fr[i].pc == g_expect.signal_pc) {
      want = SPROV_METHOD_SIGNAL;
      signal_frames++;
      CHECK(w.fr[i].sp == g_expect.signal_sp, "frame %zu (interrupted): sp 0x%" PRIx64
            ", ucontext has 0x%" PRIx64, i, w.fr[i].sp, g_expect.signal_sp);
      CHECK(w.fr[i - 1].pc == g_expect.restorer, "frame %zu: pc 0x%" PRIx64
            ", expected the handler's return address 0x%" PRIx64, i - 1, w.fr[i - 1].pc,
            g_expect.restorer);
    } else if (matched && elem_of[i - 1] >= 0) {
      const int after = g_expect.chain[elem_of[i - 1]].method_after;
      want = after ? after : harness_own_method();
    } else if (!matched) {
      continue;
    }
    CHECK(w.fr[i].method == want, "frame %zu (%s): method %s, expected %s", i,
          w.name[i] ? w.name[i] : "??", sprov_method_name(w.fr[i].method), sprov_method_name(want));
  }
  if (g_expect.signal_pc != 0)
    CHECK(signal_frames == 1, "%zu frames at the interrupted pc 0x%" PRIx64 ", expected 1",
          signal_frames, g_expect.signal_pc);
  if (g_expect.extra_ra != 0)
    CHECK(g_expect.extra_ra_index < w.n && w.fr[g_expect.extra_ra_index].pc == g_expect.extra_ra,
          "frame %zu: pc 0x%" PRIx64 ", the trampoline recorded its return address 0x%" PRIx64,
          g_expect.extra_ra_index, g_expect.extra_ra_index < w.n ? w.fr[g_expect.extra_ra_index].pc : 0,
          g_expect.extra_ra);

  /* 5. Offline round trip: serialize, deserialize, unwind again -> identical. */
  void* bytes = NULL;
  size_t len = 0;
  sprov_snapshot* back = NULL;
  if (sprov_snapshot_serialize(g_probe.snap, &bytes, &len) != 0 ||
      sprov_snapshot_deserialize(bytes, len, &back) != 0) {
    CHECK(0, "serialize/deserialize: %s", sprov_last_error_message());
  } else if (unwind_into(back, &w2) == 0) {
    compare_walks("deserialized", &w, &w2, 1);
    free_walked(&w2);
  }
  sprov_free(bytes);
  sprov_snapshot_free(back);

  /* 6. Offline builder path: same registers, stack and maps, assembled by hand. */
  sprov_snapshot* hand = rebuild_by_hand(g_probe.snap);
  CHECK(hand != NULL, "sprov_snapshot_new: %s", sprov_last_error_message());
  if (hand != NULL && unwind_into(hand, &w3) == 0) {
    compare_walks("hand-built", &w, &w3, 1);
    free_walked(&w3);
  }
  sprov_snapshot_free(hand);

  free_walked(&w);
  sprov_snapshot_free(g_probe.snap);
  g_probe.snap = NULL;
  return g_failures_here;
}

int harness_finish(int failures) {
  printf("RESULT [%s/%s] %s (%d failed checks)\n", g_variant, g_mode, failures ? "FAIL" : "PASS",
         failures);
  sprov_context_free(g_ctx);
  return failures ? 1 : 0;
}
