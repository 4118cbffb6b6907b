/* SPDX-License-Identifier: Apache-2.0 */
/* A walk inside a ucontext coroutine (issue 35, "Coroutine and async boundaries"): main switches
 * with swapcontext into a coroutine made by makecontext on a heap stack; three functions deep it
 * captures its own snapshot and unwinds it. The oracle is glibc's backtrace() (libgcc's unwinder)
 * taken in the same function: our caller frames must be its return addresses, one for one, ending at the coroutine's entry trampoline (glibc's __start_context); our walk must stop
 * there with the reason coroutine_entry, not run on into makecontext's argument area. Exit 0 when
 * all holds; every difference is printed. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "stackprov/stackprov.h"

#define FIXTURE_FN __attribute__((noinline, noipa, used))
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static ucontext_t main_ctx, coro_ctx;
static int failures;
static void* bt[64];
static int bt_n;
static sprov_snapshot* snap;
static sprov_context* ctx;

#define CHECK(c, ...)                 \
  do {                                \
    if (!(c)) {                       \
      printf("FAIL: " __VA_ARGS__);   \
      printf("\n");                   \
      failures++;                     \
    }                                 \
  } while (0)

FIXTURE_FN static void capture_here(void) {
  bt_n = backtrace(bt, 64);
  if (sprov_snapshot_capture_self(ctx, NULL, &snap) != 0) {
    printf("FAIL: capture: %s\n", sprov_last_error_message());
    exit(1);
  }
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_leaf(int n) {
  if (n > 0) capture_here();
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_mid(int n) {
  coro_leaf(n + 1);
  NO_TAIL_CALL();
}

FIXTURE_FN static void coro_entry(void) {
  coro_mid(1);
  NO_TAIL_CALL();
}

int main(void) {
  if (sprov_context_new(NULL, &ctx) != 0) {
    printf("FAIL: context: %s\n", sprov_last_error_message());
    return 1;
  }
  static char stack[256 * 1024];
  getcontext(&coro_ctx);
  coro_ctx.uc_stack.ss_sp = stack;
  coro_ctx.uc_stack.ss_size = sizeof stack;
  coro_ctx.uc_link = &main_ctx;
  makecontext(&coro_ctx, coro_entry, 0);
  swapcontext(&main_ctx, &coro_ctx);

  sprov_unwinder* uw = NULL;
  sprov_symbolizer* sym = NULL;
  sprov_stack* st = NULL;
  if (sprov_unwinder_new(ctx, NULL, &uw) != 0 || sprov_symbolizer_new(ctx, NULL, &sym) != 0 ||
      sprov_unwinder_unwind(uw, snap, &st) != 0) {
    printf("FAIL: unwind: %s\n", sprov_last_error_message());
    return 1;
  }
  const size_t n = sprov_stack_frame_count(st);
  const int stop = sprov_stack_stop_reason(st);
  for (size_t i = 0; i < n; i++) {
    struct sprov_frame f;
    memset(&f, 0, sizeof f);
    f.sz = sizeof f;
    sprov_stack_frame(st, i, &f);
    struct sprov_symbol s;
    memset(&s, 0, sizeof s);
    s.sz = sizeof s;
    const char* name = sprov_symbolizer_frame(sym, st, i, &s) == 0 && s.name ? s.name : "??";
    printf("ours %zu pc 0x%llx %s %s\n", i, (unsigned long long)f.pc, sprov_method_name(f.method), name);
  }
  printf("ours stop %s\n", sprov_stop_reason_name(stop));
  for (int i = 0; i < bt_n; i++) printf("backtrace %d 0x%llx\n", i, (unsigned long long)(uintptr_t)bt[i]);
  /* Frame 0 is capture_here in both (at the sprov_snapshot_capture_self and the backtrace() call
   * sites); every caller frame must be backtrace()'s, one for one. */
  CHECK(n == (size_t)bt_n, "%zu frames, backtrace() has %d", n, bt_n);
  for (int i = 1; i < bt_n && (size_t)i < n; i++) {
    struct sprov_frame f;
    memset(&f, 0, sizeof f);
    f.sz = sizeof f;
    sprov_stack_frame(st, (size_t)i, &f);
    CHECK(f.pc == (uint64_t)(uintptr_t)bt[i], "frame %d: pc 0x%llx, backtrace 0x%llx", i, (unsigned long long)f.pc,
          (unsigned long long)(uintptr_t)bt[i]);
  }
  CHECK(stop == SPROV_STOP_COROUTINE_ENTRY, "stop reason %s, want coroutine_entry", sprov_stop_reason_name(stop));
  /* The last frame is the trampoline: its symbol (from libc's symbol tables) is __start_context. */
  if (n > 0) {
    struct sprov_symbol s;
    memset(&s, 0, sizeof s);
    s.sz = sizeof s;
    const char* name = sprov_symbolizer_frame(sym, st, n - 1, &s) == 0 && s.name ? s.name : "??";
    CHECK(strcmp(name, "__start_context") == 0, "last frame %s, want __start_context", name);
  }
  sprov_stack_free(st);
  sprov_symbolizer_free(sym);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(snap);
  sprov_context_free(ctx);
  printf("%s\n", failures ? "FAILED" : "PASS: the coroutine's walk equals backtrace() and ends at its entry (coroutine_entry)");
  return failures ? 1 : 0;
}
