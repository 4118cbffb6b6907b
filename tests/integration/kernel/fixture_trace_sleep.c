// SPDX-License-Identifier: Apache-2.0
// Two threads blocked in nanosleep for an hour, for `trace-capture --with-btf` (trace_kernel_check.py):
//   sleeper_thread -> sleep_outer -> sleep_leaf -> nanosleep     (clock_nanosleep, 230)
//   main           -> main_wait                 -> nanosleep
// A sleep that long does not end while the test reads /proc/PID/task/TID/stack and the capture reads
// it again: both see the same kernel stack. Prints "ready SLEEPER_TID" once the thread runs; runs
// until killed. Lets any process of its user ptrace it (PR_SET_PTRACER_ANY: the unprivileged run).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static const struct timespec kHour = {3600, 0};
static volatile pid_t sleeper_tid;

NOINLINE void sleep_leaf(void) {
  nanosleep(&kHour, NULL);
  KEEP();
}
NOINLINE void sleep_outer(void) {
  for (;;) sleep_leaf();
}
NOINLINE void* sleeper_thread(void* arg) {
  sleeper_tid = gettid();
  sleep_outer();
  KEEP();
  return arg;
}

NOINLINE void main_wait(void) {
  for (;;) nanosleep(&kHour, NULL);
}

int main(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, sleeper_thread, NULL) != 0) return 1;
  while (sleeper_tid == 0) usleep(1000);
  printf("ready %d\n", (int)sleeper_tid);
  fflush(stdout);
  main_wait();
  KEEP();
  return 0;
}
