// SPDX-License-Identifier: Apache-2.0
// Functions with arguments of every printed type, for `stackprov stack --args` against gdb's `info args`
// (built -O0 -g: every argument in the frame's stack slots; -O2 -g: registers, location lists,
// entry values). Each thread prints "thread TID ROLE", the main thread "ready":
//   spin   spin_leaf busy-waits: frame 0 is fixture code (the captured registers, all known)
//   park   park_outer -> park_mid -> park_leaf -> pause(): caller frames with arguments (their
//          stack slots at -O0, callee-saved registers or nothing at -O2)
//   chars  char_args -> pause(): chars that need escapes, negative and unsigned extremes
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

enum color { RED = 1, GREEN = 2, BLUE = 40 };
struct pt {
  int x, y;
};
typedef unsigned long long u64_t;

volatile long sink;
volatile int stop_spinning;
volatile int spinning;  // set inside spin_leaf: main says "ready" only then
static pthread_barrier_t ready;

static void announce(const char* role) {
  printf("thread %ld %s\n", (long)syscall(SYS_gettid), role);
  fflush(stdout);
  pthread_barrier_wait(&ready);
}

// The call (never made) keeps the -O0 argument slots above rsp: a leaf function's are in the x86-64
// red zone (below rsp), which a capture does not copy (doc/args.md).
NOINLINE long spin_leaf(int a, unsigned char c, long b, enum color col, const char* s, bool flag, short sh) {
  spinning = 1;
  while (!stop_spinning) {
  }
  if (stop_spinning == 2) puts(s);
  return a + c + b + col + (long)(uintptr_t)s + flag + sh;
}

// `unused` is never read: -O2 gives it no location (gdb: <optimized out>).
NOINLINE long park_leaf(int k, u64_t big, int unused) {
  long r = pause();
  sink = r + k + (long)big;
  return sink;
}

NOINLINE long park_mid(long x, int y, char ch, double d, float fl, enum color c, struct pt by_value, struct pt* p) {
  long r = park_leaf(y * 3, 0xfedcba9876543210ull, 99);
  sink = r + x + ch + (long)d + (long)fl + c + by_value.x + p->y;
  return sink + x + y;
}

NOINLINE long park_outer(unsigned int u, long neg, signed char sc, unsigned short us, bool yes, void* vp) {
  struct pt q = {7, -8};
  long r = park_mid(neg * 2, (int)u + 1, 'Z', 2.5, 0.1f, BLUE, q, &q);
  sink = r + u + neg + sc + us + yes + (long)(uintptr_t)vp;
  return sink - neg;
}

NOINLINE long char_args(char nl, char quote, char bs, unsigned char high, signed char neg, char nul, int8_t min8,
                        int64_t min64, uint64_t max64, int16_t s16, uint32_t u32) {
  long r = pause();
  sink = r + nl + quote + bs + high + neg + nul + min8 + (long)min64 + (long)max64 + s16 + u32;
  return sink;
}

static void* run_spin(void* arg) {
  announce("spin");
  sink = spin_leaf(-42, 200, (long)arg * 1000003, GREEN, "text", true, -7);
  return NULL;
}
static void* run_park(void* arg) {
  announce("park");
  sink = park_outer(4000000000u, -123456789012L, -5, 65535, true, arg);
  return NULL;
}
static void* run_chars(void* arg) {
  (void)arg;
  announce("chars");
  sink = char_args('\n', '\'', '\\', 0xe9, -1, 0, INT8_MIN, INT64_MIN, UINT64_MAX, -32768, 0xdeadbeefu);
  return NULL;
}

int main(void) {
  void* (*runs[])(void*) = {run_spin, run_park, run_chars};
  const int n = (int)(sizeof runs / sizeof runs[0]);
  pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
  pthread_t t[3];
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, runs[i], (void*)(long)(i + 1)) != 0) return 1;
  pthread_barrier_wait(&ready);
  while (!spinning) sched_yield();
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}
