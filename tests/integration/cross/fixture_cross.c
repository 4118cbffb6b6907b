// SPDX-License-Identifier: Apache-2.0
// Cross fixture: a known call chain that aborts, faults into a handler, or calls through a NULL
// function pointer (qemu-user then writes a target core file); "coroutine": the chain runs in a
// ucontext coroutine (makecontext, uc_link = &g_resumer) and aborts there.
#include <signal.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static const char* g_mode = "abort";
volatile int g_sink;
volatile int* volatile g_null;
typedef void (*fn_t)(void);
volatile fn_t g_null_fn;

/// The handler for the "signal" mode: the chain is c_fn interrupted by SIGSEGV.
NOINLINE void on_segv(int sig) {
  g_sink += sig;
  abort();
}

NOINLINE void c_fn(int depth) {
  g_sink += depth;
  if (strcmp(g_mode, "signal") == 0) {
    g_sink += *g_null;  // SIGSEGV at an exact pc inside c_fn
  }
  if (strcmp(g_mode, "null") == 0) {
    g_null_fn();  // SIGSEGV at pc 0: the caller is only in lr / ra
    g_sink++;
  }
  abort();
}

NOINLINE void b_fn(int depth) {
  c_fn(depth + 1);
  g_sink++;
}

NOINLINE void a_fn(int depth) {
  b_fn(depth + 1);
  g_sink++;
}

ucontext_t g_resumer, g_coro;
static char g_coro_stack[64 * 1024];

NOINLINE void coro_entry(void) {
  a_fn(0);
  g_sink++;
}

/// Out of main, so that main's prologue stays what the mips "nocfi" builds' prologue analysis reads.
NOINLINE void run_coroutine(void) {
  getcontext(&g_coro);
  g_coro.uc_stack.ss_sp = g_coro_stack;
  g_coro.uc_stack.ss_size = sizeof g_coro_stack;
  g_coro.uc_link = &g_resumer;
  makecontext(&g_coro, coro_entry, 0);
  swapcontext(&g_resumer, &g_coro);
}

int main(int argc, char** argv) {
  if (argc > 1) g_mode = argv[1];
  if (strcmp(g_mode, "coroutine") == 0) run_coroutine();
  if (strcmp(g_mode, "signal") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
  }
  a_fn(0);
  g_sink++;
  return 0;
}
