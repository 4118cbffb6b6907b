// SPDX-License-Identifier: Apache-2.0
// perf fixture: CPU-bound call chains (main -> a_fn -> b_fn -> c_fn/d_fn) in two threads, for sampling.
// usage: fixture_spin [SECONDS]: each thread spins for SECONDS (default 1) of its own CPU time.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long c_fn(unsigned long x) {
  for (int i = 0; i < 2000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}
__attribute__((noinline)) unsigned long d_fn(unsigned long x) {
  for (int i = 0; i < 3000; i++) x ^= (x << 7) ^ (x >> 9) ^ (unsigned long)i;
  return x;
}
__attribute__((noinline)) unsigned long b_fn(unsigned long x, int depth) {
  if (depth > 0) x = b_fn(x + 1, depth - 1);
  x = (x & 1) ? c_fn(x) : d_fn(x);
  asm volatile("" ::: "memory");
  return x + 1;
}
__attribute__((noinline)) unsigned long a_fn(unsigned long x) {
  unsigned long r = b_fn(x, (int)(x % 4));
  asm volatile("" ::: "memory");
  return r;
}

// The thread's own CPU time, not the wall clock: each thread spins for SECONDS of CPU, so a sampled
// run holds the same ~SECONDS x 2 x frequency samples on a loaded machine as on an idle one. With
// wall-clock seconds a loaded CI machine gave the run ~20 % of a core: ~60-90 samples at 499 Hz, of
// which the fixed few of the program's start (exec, ld.so) were over the 5 % that the tests' chain
// checks allow (test_record_with_kernel failed 6 of 28 runs at load 8 on 2 cores).
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double g_seconds = 1.0;

static void* spin(void* arg) {
  unsigned long x = (unsigned long)arg;
  double end = now() + g_seconds;
  while (now() < end) {
    for (int i = 0; i < 100; i++) x = a_fn(x);
    sink = x;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_seconds = atof(argv[1]);
  pthread_t t;
  pthread_create(&t, NULL, spin, (void*)12345);
  spin((void*)777);
  pthread_join(t, NULL);
  printf("%lu\n", (unsigned long)sink);
  return 0;
}
