// SPDX-License-Identifier: Apache-2.0
// bench/memleak workload: a malloc-heavy loop, timed from inside (the tracer's start-up is not in it).
//   workload [--wait] ITERATIONS WORK
// Each iteration allocates a block of 16..4111 bytes (malloc, calloc or realloc), writes it, frees
// the block allocated 1024 iterations earlier, and does WORK rounds of arithmetic (the program's own
// work between allocations). Prints "elapsed_ns N" (wall) and "cpu_ns N" (the process's user + system
// CPU time over the loop: uprobe traps and BPF programs run in it, a tracer's other threads and
// processes do not) on stdout. --wait: print "ready PID" and read a
// line from stdin first (a tracer attaches with -p meanwhile).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 1024

static uint64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void* alloc_one(uint32_t r) {
  size_t n = 16 + (r & 4095);
  void* p;
  switch ((r >> 12) & 3) {
    case 0: p = calloc(1, n); break;
    case 1: p = realloc(NULL, n); break;
    default: p = malloc(n); break;
  }
  memset(p, (int)r, n);
  return p;
}

int main(int argc, char** argv) {
  int a = 1;
  if (a < argc && strcmp(argv[a], "--wait") == 0) {
    a++;
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin)) return 3;
  }
  if (argc - a != 2) {
    fprintf(stderr, "usage: workload [--wait] ITERATIONS WORK\n");
    return 2;
  }
  long iters = atol(argv[a]), work = atol(argv[a + 1]);
  void* ring[RING] = {0};
  uint32_t r = 12345;
  volatile uint64_t acc = 0;
  uint64_t c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
  for (long i = 0; i < iters; i++) {
    r = r * 1103515245u + 12345u;
    free(ring[i % RING]);
    ring[i % RING] = alloc_one(r >> 8);
    uint64_t x = r;
    for (long k = 0; k < work; k++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    acc += x;
  }
  uint64_t t1 = clock_ns(CLOCK_MONOTONIC), c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < RING; i++) free(ring[i]);
  printf("elapsed_ns %llu\ncpu_ns %llu\n", (unsigned long long)(t1 - t0), (unsigned long long)(c1 - c0));
  return 0;
}
