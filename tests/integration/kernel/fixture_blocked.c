// SPDX-License-Identifier: Apache-2.0
// Threads blocked in known system calls, for `stack --pid --kernel` vs perf (stack_kernel_check.py).
// Each blocks ~300 ms at a time in a loop under a fixed chain of its own functions (no inlining, no
// tail calls: the asm after each call), so that perf records each blocking switch-out while the
// test runs, and a /proc read finds the thread blocked:
//   sleeper_thread -> sleep_outer -> sleep_leaf -> nanosleep            (clock_nanosleep, 230)
//   reader_thread  -> read_outer  -> read_leaf  -> read(pipe)           (read, 0; main writes a byte
//                                                                        every 300 ms)
//   futex_thread   -> futex_outer -> futex_leaf -> syscall(SYS_futex)   (FUTEX_WAIT 300 ms, 202)
// main: nanosleep 300 ms, then a byte into the pipe, in a loop. Prints "ready SLEEPER READER FUTEX"
// once every thread runs; runs until killed. Lets any process of its user ptrace it
// (PR_SET_PTRACER_ANY), for the test's unprivileged run.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static const struct timespec kBlock = {0, 300000000};
static volatile pid_t tids[3];
static int pipe_fd[2];
static volatile int futex_word;

NOINLINE void sleep_leaf(void) {
  nanosleep(&kBlock, NULL);
  KEEP();
}
NOINLINE void sleep_outer(void) {
  for (;;) sleep_leaf();
}
NOINLINE void* sleeper_thread(void* arg) {
  tids[0] = gettid();
  sleep_outer();
  KEEP();
  return arg;
}

NOINLINE void read_leaf(void) {
  char c;
  if (read(pipe_fd[0], &c, 1) < 0) abort();
  KEEP();
}
NOINLINE void read_outer(void) {
  for (;;) read_leaf();
}
NOINLINE void* reader_thread(void* arg) {
  tids[1] = gettid();
  read_outer();
  KEEP();
  return arg;
}

NOINLINE void futex_leaf(void) {
  syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &kBlock, NULL, 0);
  KEEP();
}
NOINLINE void futex_outer(void) {
  for (;;) futex_leaf();
}
NOINLINE void* futex_thread(void* arg) {
  tids[2] = gettid();
  futex_outer();
  KEEP();
  return arg;
}

int main(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  if (pipe(pipe_fd) != 0) return 1;
  void* (*fn[3])(void*) = {sleeper_thread, reader_thread, futex_thread};
  for (int i = 0; i < 3; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn[i], NULL) != 0) return 1;
  }
  while (!tids[0] || !tids[1] || !tids[2]) usleep(1000);
  printf("ready %d %d %d\n", tids[0], tids[1], tids[2]);
  fflush(stdout);
  for (;;) {
    nanosleep(&kBlock, NULL);
    if (write(pipe_fd[1], "x", 1) != 1) return 1;
  }
}
