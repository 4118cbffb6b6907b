// SPDX-License-Identifier: Apache-2.0
// sprov_unwinder_unwind_signal through JIT code (x86_64): two functions generated into an anonymous
// executable mapping (frame-pointer prologue, no CFI, no module) call native code that raises
// SIGPROF; the handler unwinds its own interrupted context. The answer is known from the program's
// structure: the walk must cross jitInner and jitOuter (their return addresses lie in the code this
// program wrote) and go on to main and _start (stop end_of_stack). Without the perf map naming them
// the walk cannot cross the JIT code: it stops there (the control, which shows the map is what
// makes the difference). The map is read by sprov_unwinder_set_stack, never in the handler.
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stackprov/fast.h"
#include "stackprov/stackprov.h"
#include "lib/jit_emit.h"

static sprov_unwinder* g_uw;
static sprov_address_space* g_as;
static struct sprov_raw_frame g_frames[64];
static struct sprov_unwind_buf g_buf;
static volatile int g_rc = -1;
static int failures;

#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "FAIL: " __VA_ARGS__);  \
      fprintf(stderr, "\n");                  \
      failures++;                             \
    }                                         \
  } while (0)

static void on_prof(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)si;
  memset(&g_buf, 0, sizeof(g_buf));
  g_buf.sz = sizeof(g_buf);
  g_buf.frames = g_frames;
  g_buf.capacity = 64;
  g_buf.frame_sz = sizeof(struct sprov_raw_frame);
  g_rc = sprov_unwinder_unwind_signal(g_uw, g_as, uc, &g_buf);
}

__attribute__((noinline)) void native_callback(void) {
  raise(SIGPROF);
  __asm__ volatile("" ::: "memory");
}

static uint8_t *inner, *outer;
static size_t inner_len, outer_len;

static int in(uint64_t pc, const uint8_t* start, size_t len) {
  return pc >= (uint64_t)(uintptr_t)start && pc < (uint64_t)(uintptr_t)start + len;
}

// One sample through the JIT code; returns the index of the jitOuter frame, or -1.
static int sample(const char* what, int* reached_end) {
  g_rc = -1;
  ((void (*)(void))outer)();
  CHECK(g_rc == 0, "%s: unwind_signal returned %d", what, g_rc);
  int i_inner = -1, i_outer = -1;
  for (uint32_t i = 0; i < g_buf.count; i++) {
    uint64_t pc = g_frames[i].pc;
    if (in(pc, inner, inner_len) && i_inner < 0) i_inner = (int)i;
    if (in(pc, outer, outer_len) && i_outer < 0) i_outer = (int)i;
  }
  *reached_end = g_buf.stop_reason == SPROV_STOP_END_OF_STACK;
  printf("%s: %u frames, stop %s, jitInner at %d, jitOuter at %d\n", what, g_buf.count,
         sprov_stop_reason_name(g_buf.stop_reason), i_inner, i_outer);
  CHECK(i_inner >= 1, "%s: the return address into jitInner is a frame", what);
  return i_outer;
}

int main(void) {
  uint8_t* code = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 2;
  inner = code + 0x100;
  outer = code + 0x400;
  inner_len = jit_emit_fp_caller(inner, (void*)native_callback);
  outer_len = jit_emit_fp_caller(outer, inner);
  if (mprotect(code, 8192, PROT_READ | PROT_EXEC) != 0) return 2;
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
  unlink(path);

  sprov_context* ctx = NULL;
  SPROV_OPTS(sprov_context_opts, co, .log_level = SPROV_LOG_ERROR);
  SPROV_OPTS(sprov_address_space_opts, ao);
  SPROV_OPTS(sprov_unwinder_opts, uo, .max_frames = 64);
  if (sprov_context_new(&co, &ctx) || sprov_address_space_new(ctx, &ao, &g_as) || sprov_unwinder_new(ctx, &uo, &g_uw)) {
    fprintf(stderr, "FAIL: setup: %s\n", sprov_last_error_message());
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGPROF, &sa, NULL);

  // No perf map yet: the walk stops at the JIT code.
  CHECK(sprov_unwinder_set_stack(g_uw, 0, 0) == 0, "set_stack: %s", sprov_last_error_message());
  int end = 0;
  int i_outer = sample("without a perf map", &end);
  CHECK(i_outer < 0 && !end, "without a perf map the walk does not cross the JIT code");

  // The map as a JIT writes it (node --perf-basic-prof's format), then set_stack again.
  FILE* f = fopen(path, "w");
  if (!f) return 2;
  fprintf(f, "%lx %zx LazyCompile:*jitInner /srv/app.js:7\n", (unsigned long)(uintptr_t)inner, inner_len);
  fprintf(f, "%lx %zx LazyCompile:~jitOuter /srv/app.js:3\n", (unsigned long)(uintptr_t)outer, outer_len);
  fclose(f);
  CHECK(sprov_unwinder_set_stack(g_uw, 0, 0) == 0, "set_stack: %s", sprov_last_error_message());
  i_outer = sample("with the perf map", &end);
  unlink(path);
  CHECK(i_outer >= 2, "with the perf map the walk crosses jitInner into jitOuter");
  CHECK(end, "with the perf map the walk goes on to the end of the stack");
  if (i_outer >= 0) {
    CHECK(g_frames[i_outer - 1].flags & SPROV_FRAME_JIT, "the jitInner frame is tagged JIT");
    CHECK(g_frames[i_outer].flags & SPROV_FRAME_JIT, "the jitOuter frame is tagged JIT");
    CHECK((uint32_t)i_outer + 2 < g_buf.count, "frames follow jitOuter (main, libc start-up, _start)");
  }
  sprov_unwinder_free(g_uw);
  sprov_address_space_free(g_as);
  sprov_context_free(ctx);
  if (failures) return 1;
  printf("fast_sigjit: all checks passed\n");
  return 0;
}
