// SPDX-License-Identifier: Apache-2.0
// Tail-call shapes for `stackprov stack` against gdb's bt (built -O2 -g: gcc turns `return f(x);`
// into `jmp f` and describes it with DW_TAG_call_site + DW_AT_call_tail_call). Each thread blocks
// in pause() below one shape, prints "thread TID ROLE", and the main thread prints "ready":
//   single    caller_single -> hot_b -(jmp)-> leaf_single           gdb: leaf, hot_b (tail), caller
//   chain     caller_chain -> chain_x -(jmp)-> chain_y -(jmp)-> leaf_chain
//   ambiguous caller_amb -> amb_top -(jmp)-> amb_l or amb_r -(jmp)-> leaf_amb: two chains that share
//             no call site, so gdb shows no tail-call frame (call_site_find_chain's intersection)
//   partial   caller_part -> part_top -(jmp)-> part_a or part_b -(jmp)-> part_common -(jmp)->
//             leaf_part: the chains share only their last call site, so gdb shows part_common alone
//   regs      reg_outer -> reg_mid -> reg_leaf: values live across calls in callee-saved registers
//             (rbx, rbp, r12-r15 pushed by the prologues), for `stack --regs` vs `info registers`
//   signal    sig_mid -> pthread_kill(self, SIGUSR1) -> on_usr1 (pause): the frame above the
//             signal frame has every register the kernel saved
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile long sink;
static pthread_barrier_t ready;

static void announce(const char* role) {
  printf("thread %ld %s\n", (long)syscall(SYS_gettid), role);
  fflush(stdout);
  pthread_barrier_wait(&ready);
}

// The leaves: a non-tail call of pause() (the result is used after it), so each leaf keeps its frame.
NOINLINE long leaf_single(long x) {
  long r = pause();
  sink = r + x;
  return sink;
}
NOINLINE long leaf_chain(long x) {
  long r = pause();
  sink = r - x;
  return sink;
}
NOINLINE long leaf_amb(long x) {
  long r = pause();
  sink = r ^ x;
  return sink;
}

// Shape 1: one tail call.
NOINLINE long hot_b(long n) { return leaf_single(n * 7 + 1); }
NOINLINE long caller_single(long n) {
  long r = hot_b(n);
  sink = r;
  return r + 1;
}

// Shape 2: a chain of two tail calls.
NOINLINE long chain_y(long n) { return leaf_chain(n + 5); }
NOINLINE long chain_x(long n) { return chain_y(n * 3 - 2); }
NOINLINE long caller_chain(long n) {
  long r = chain_x(n);
  sink = r;
  return r + 2;
}

// Shape 3: two chains to the same leaf with no call site in common: gdb shows nothing between.
NOINLINE long amb_l(long n) { return leaf_amb(n + 11); }
NOINLINE long amb_r(long n) { return leaf_amb(n * 13); }
NOINLINE long amb_top(long n) {
  if (n & 1) return amb_l(n - 1);
  return amb_r(n + 1);
}
NOINLINE long caller_amb(long n) {
  long r = amb_top(n);
  sink = r;
  return r + 3;
}

// Shape 4: two chains that share their end: gdb shows the common callee side (part_common) only.
NOINLINE long leaf_part(long x) {
  long r = pause();
  sink = r + 3 * x;
  return sink;
}
NOINLINE long part_common(long n) { return leaf_part(n ^ 0x55); }
NOINLINE long part_a(long n) { return part_common(n + 17); }
NOINLINE long part_b(long n) { return part_common(n * 19); }
NOINLINE long part_top(long n) {
  if (n & 2) return part_a(n - 3);
  return part_b(n + 4);
}
NOINLINE long caller_part(long n) {
  long r = part_top(n);
  sink = r;
  return r + 4;
}

// Registers: every value is needed after the call, so it lives in a callee-saved register.
NOINLINE long reg_leaf(long a) {
  long r = pause();
  sink = r + a;
  return sink;
}
NOINLINE long reg_mid(long a, long b, long c) {
  long x = a * 3, y = b * 5, z = c * 7;
  long r = reg_leaf(x + y + z);
  sink = r;
  return r + x * y + z;
}
NOINLINE long reg_outer(long a, long b, long c, long d, long e, long f) {
  long p = a + 0x1111, q = b + 0x2222, s = c + 0x3333, t = d + 0x4444, u = e + 0x5555, v = f + 0x6666;
  long r = reg_mid(p, q, s);
  sink = r;
  return r + p * q + s * t + u * v;
}

static void on_usr1(int sig) {
  long r = pause();
  sink = r + sig;
}
NOINLINE long sig_mid(long a, long b) {
  long x = a * 0x101, y = b * 0x202;
  pthread_kill(pthread_self(), SIGUSR1);
  sink = x + y;
  return x * y;
}

static void* run_single(void* arg) {
  announce("single");
  sink = caller_single((long)arg);
  return NULL;
}
static void* run_chain(void* arg) {
  announce("chain");
  sink = caller_chain((long)arg);
  return NULL;
}
static void* run_amb(void* arg) {
  announce("ambiguous");
  sink = caller_amb((long)arg);
  return NULL;
}
static void* run_part(void* arg) {
  announce("partial");
  sink = caller_part((long)arg);
  return NULL;
}
static void* run_signal(void* arg) {
  announce("signal");
  sink = sig_mid((long)arg, 9);
  return NULL;
}
static void* run_regs(void* arg) {
  announce("regs");
  sink = reg_outer((long)arg, 2, 3, 4, 5, 6);
  return NULL;
}

int main(void) {
  void* (*runs[])(void*) = {run_single, run_chain, run_amb, run_part, run_regs, run_signal};
  const int n = (int)(sizeof runs / sizeof runs[0]);
  pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
  pthread_t t[6];
  signal(SIGUSR1, on_usr1);
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, runs[i], (void*)(long)(i + 1)) != 0) return 1;
  pthread_barrier_wait(&ready);
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}
