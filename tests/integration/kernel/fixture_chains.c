// SPDX-License-Identifier: Apache-2.0
// Known call chains into nanosleep, for record --with-kernel vs perf (kernel_check.py): two threads
// sleep 1 ms in a loop, one through the raw syscall (glibc's frameless syscall()), one through
// glibc's nanosleep wrapper. Built with frame pointers (perf -g walks them), no inlining, no tail
// calls (the asm after each call), so each chain is exactly the one written here:
//   raw_thread -> raw_outer -> raw_middle -> raw_leaf -> syscall(SYS_nanosleep)
//   libc_thread -> libc_outer -> libc_middle -> libc_leaf -> nanosleep
// Prints "ready RAW_TID LIBC_TID" once both threads run; runs until killed.
// `fixture_chains spin SECONDS`: one thread on the CPU instead, for cpu-clock sampling, alternating
// between user code and the kernel (getrandom through syscall()), both under fixed chains:
//   main -> spin_outer -> spin_user                        (user mode)
//   main -> spin_outer -> spin_sys -> syscall(SYS_getrandom) (mostly kernel mode)
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

static const struct timespec kMs = {0, 1000000};
static volatile pid_t raw_tid, libc_tid;

NOINLINE void raw_leaf(void) {
  syscall(SYS_nanosleep, &kMs, NULL);
  KEEP();
}
NOINLINE void raw_middle(void) {
  raw_leaf();
  KEEP();
}
NOINLINE void raw_outer(void) {
  for (;;) raw_middle();
}
NOINLINE void* raw_thread(void* arg) {
  raw_tid = gettid();
  raw_outer();
  KEEP();
  return arg;
}

NOINLINE void libc_leaf(void) {
  nanosleep(&kMs, NULL);
  KEEP();
}
NOINLINE void libc_middle(void) {
  libc_leaf();
  KEEP();
}
NOINLINE void libc_outer(void) {
  for (;;) libc_middle();
}
NOINLINE void* libc_thread(void* arg) {
  libc_tid = gettid();
  libc_outer();
  KEEP();
  return arg;
}

static volatile unsigned long sink;

NOINLINE void spin_user(void) {
  unsigned long x = sink;
  for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
  KEEP();
}
NOINLINE void spin_sys(void) {
  static char buf[65536];
  syscall(SYS_getrandom, buf, sizeof buf, 0);
  KEEP();
}
NOINLINE void spin_outer(double seconds) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    spin_user();
    spin_sys();
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
  KEEP();
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "spin") == 0) {
    spin_outer(atof(argv[2]));
    return 0;
  }
  pthread_t a, b;
  if (pthread_create(&a, NULL, raw_thread, NULL) != 0 || pthread_create(&b, NULL, libc_thread, NULL) != 0) return 1;
  while (raw_tid == 0 || libc_tid == 0) usleep(1000);
  printf("ready %d %d\n", (int)raw_tid, (int)libc_tid);
  fflush(stdout);
  pthread_join(a, NULL);
  return 0;
}
