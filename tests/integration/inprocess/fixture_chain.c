/* SPDX-License-Identifier: Apache-2.0 */
/* Fixture: known C call chains (plain, deep recursion, signal handler, sigaltstack, thread) that capture themselves. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "harness.h"

#ifndef FIXTURE_FP
#define FIXTURE_FP 0 /* 1 when every fixture function keeps an rbp frame */
#endif

enum { kRecursionDepth = 200 };

static struct chain_elem g_chain[kRecursionDepth + 32];
static size_t g_chain_len;

static void expect(const char* name) { g_chain[g_chain_len++] = (struct chain_elem){name, 0}; }

static void expect_done(int fp_links) {
  g_expect.chain = g_chain;
  g_expect.chain_len = g_chain_len;
  /* backtrace() (libgcc) only reads .eh_frame: complete unless the fixture has .debug_frame only. */
  g_expect.bt_complete = harness_own_method() == SPROV_METHOD_CFI_EH_FRAME;
  g_expect.fp_oracle_frames = FIXTURE_FP ? fp_links : 0;
}

/* ---- main -> level_a -> level_b -> level_c -> probe */

FIXTURE_FN void level_c(void) {
  probe_capture();
  NO_TAIL_CALL();
}
FIXTURE_FN void level_b(void) {
  level_c();
  NO_TAIL_CALL();
}
FIXTURE_FN void level_a(void) {
  level_b();
  NO_TAIL_CALL();
}

/* ---- main -> recurse x (depth+1) -> probe */

FIXTURE_FN void recurse(int n) {
  if (n > 0) recurse(n - 1);
  else probe_capture();
  NO_TAIL_CALL();
}

/* ---- main|thread -> sig_level_a -> sig_level_b -> raise/pthread_kill -> [signal] -> on_signal -> probe */

FIXTURE_FN void on_signal(int sig, siginfo_t* si, void* ucv) {
  const ucontext_t* uc = (const ucontext_t*)ucv;
  g_expect.signal_pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  g_expect.signal_sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
  g_expect.restorer = (uint64_t)(uintptr_t)__builtin_return_address(0);
  probe_capture();
  NO_TAIL_CALL();
}

FIXTURE_FN void sig_level_b(int use_pthread_kill) {
  if (use_pthread_kill) pthread_kill(pthread_self(), SIGUSR1);
  else raise(SIGUSR1);
  NO_TAIL_CALL();
}
FIXTURE_FN void sig_level_a(int use_pthread_kill) {
  sig_level_b(use_pthread_kill);
  NO_TAIL_CALL();
}

static void install_handler(int on_altstack) {
  if (on_altstack) {
    const size_t size = 256 * 1024;
    void* mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      perror("mmap");
      exit(2);
    }
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
      perror("sigaltstack");
      exit(2);
    }
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | (on_altstack ? SA_ONSTACK : 0);
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) {
    perror("sigaction");
    exit(2);
  }
}

static void expect_signal_chain(const char* outer) {
  expect("probe_capture");
  expect("on_signal");
  expect("..."); /* __restore_rt, pthread_kill internals, raise */
  expect("sig_level_b");
  expect("sig_level_a");
  expect(outer);
  expect("..."); /* __libc_start_call_main ... _start, or start_thread, clone3 */
  expect_done(2); /* the rbp chain reaches on_signal's return address (the restorer) */
}

FIXTURE_FN void* thread_main(void* arg) {
  sig_level_a(1);
  NO_TAIL_CALL();
  return arg;
}

int main(int argc, char** argv) {
  const char* mode = harness_init(argc, argv);
  if (strcmp(mode, "chain") == 0) {
    expect("probe_capture");
    expect("level_c");
    expect("level_b");
    expect("level_a");
    expect("main");
    expect("...");
    expect_done(5); /* up to main's return address */
    level_a();
  } else if (strcmp(mode, "recursion") == 0) {
    expect("probe_capture");
    for (int i = 0; i <= kRecursionDepth; i++) expect("recurse");
    expect("main");
    expect("...");
    expect_done(kRecursionDepth + 3);
    recurse(kRecursionDepth);
  } else if (strcmp(mode, "signal") == 0 || strcmp(mode, "altstack") == 0) {
    install_handler(strcmp(mode, "altstack") == 0);
    expect_signal_chain("main");
    sig_level_a(0);
  } else if (strcmp(mode, "thread") == 0) {
    install_handler(0);
    expect_signal_chain("thread_main");
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 2;
    pthread_join(t, NULL);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return harness_finish(harness_check());
}
