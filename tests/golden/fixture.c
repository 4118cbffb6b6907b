// SPDX-License-Identifier: Apache-2.0
// The golden fixture: a static program whose stacks cover what the refactor of issue 32 must keep
// byte-identical: inline chains, a signal frame (__restore_rt), a second thread, libc frames named
// from the symbol table only. make_inputs.sh builds it once; the binary, a core and a recording
// are committed, so no address depends on ASLR or on the compiler installed later.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int g_sink;
static volatile sig_atomic_t g_in_handler;

static inline __attribute__((always_inline)) int leaf_inline(int x) {
  g_sink += x;
  return g_sink;
}

static inline __attribute__((always_inline)) int middle_inline(int x) {
  return leaf_inline(x * 3) + 1;
}

__attribute__((noinline)) static void wait_forever(void) {
  for (;;) pause();
}

__attribute__((noinline)) static void on_usr1(int sig) {
  (void)sig;
  g_in_handler = 1;
  wait_forever();  // the main thread stays inside the handler: the stack crosses __restore_rt
}

__attribute__((noinline)) static int compute(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) acc += middle_inline(i);
  return acc;
}

__attribute__((noinline)) static void* worker(void* arg) {
  (void)arg;
  for (;;) {
    compute(1000);
  }
  return NULL;
}

__attribute__((noinline)) static void spin(long rounds) {
  for (long r = 0; r < rounds; r++) compute(100000);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "spin") == 0) {  // the recording: CPU time in compute
    spin(argc > 2 ? atol(argv[2]) : 2000);
    return 0;
  }
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  signal(SIGUSR1, on_usr1);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  raise(SIGUSR1);
  return 0;
}
