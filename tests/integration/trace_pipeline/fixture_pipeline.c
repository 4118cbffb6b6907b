// SPDX-License-Identifier: Apache-2.0
// The trace pipeline's fixture: 4 threads parked in distinct named call chains (one through an always_inline function) for N ms.
//
// Usage: fixture_pipeline MS TIDFILE [LIB]
// Starts three threads (alpha, beta, gamma), and when all four threads are about to park writes
// TIDFILE (atomically: TIDFILE.tmp then rename) with "pid PID" and one "tid TID NAME" line per
// thread, then every thread sleeps in clock_nanosleep until MS milliseconds after the start, and
// the process exits 0. Built by pipeline_test.py with gcc -g -O2 (and -s for the stripped case);
// every named function is external, noinline and noclone, and every call is kept out of tail
// position, so each one is a frame of its own with its own name in .symtab.
// With LIB (fixture_nobid.c built as a shared library), LIB is dlopened first and its
// nobid_start() parks one more thread in it (not listed in TIDFILE).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP(x) __asm__ volatile("" : "+r"(x))  // the call before it is not a tail call

static struct timespec deadline;
static pthread_barrier_t parked;
static pid_t tids[4];
static const char* const names[4] = {"main", "alpha", "beta", "gamma"};

NOINLINE int park(int v) {
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
  }
  KEEP(v);
  return v;
}

// Every thread: record its tid, wait until all four did (main writes the file), then park.
NOINLINE int arrive(int slot) {
  tids[slot] = gettid();
  pthread_barrier_wait(&parked);
  int r = park(slot);
  KEEP(r);
  return r;
}

NOINLINE int alpha_three(int v) {
  int r = arrive(v);
  KEEP(r);
  return r + 3;
}

NOINLINE int alpha_two(int v) {
  int r = alpha_three(v);
  KEEP(r);
  return r + 2;
}

NOINLINE int alpha_one(int v) {
  int r = alpha_two(v);
  KEEP(r);
  return r + 1;
}

void* alpha_entry(void* arg) {
  pthread_setname_np(pthread_self(), "alpha");
  int r = alpha_one((int)(long)arg);
  KEEP(r);
  return (void*)(long)r;
}

// Inlined into beta_outer: the return address in beta_outer is inside beta_inline's code.
static inline __attribute__((always_inline)) int beta_inline(int v) {
  int r = arrive(v);
  KEEP(r);
  return r * 2;
}

NOINLINE int beta_outer(int v) {
  int r = beta_inline(v);
  KEEP(r);
  return r + 7;
}

void* beta_entry(void* arg) {
  pthread_setname_np(pthread_self(), "beta");
  int r = beta_outer((int)(long)arg);
  KEEP(r);
  return (void*)(long)r;
}

NOINLINE int gamma_recurse(int depth, int v) {
  int r = depth == 0 ? arrive(v) : gamma_recurse(depth - 1, v);
  KEEP(r);
  return r + depth;
}

void* gamma_entry(void* arg) {
  pthread_setname_np(pthread_self(), "gamma");
  int r = gamma_recurse(5, (int)(long)arg);
  KEEP(r);
  return (void*)(long)r;
}

NOINLINE int main_wait(const char* tidfile) {
  tids[0] = gettid();
  pthread_barrier_wait(&parked);
  // Every thread passed the barrier: all tids are set.
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", tidfile);
  FILE* f = fopen(tmp, "w");
  if (!f) {
    perror(tmp);
    exit(1);
  }
  fprintf(f, "pid %d\n", (int)getpid());
  for (int i = 0; i < 4; i++) fprintf(f, "tid %d %s\n", (int)tids[i], names[i]);
  if (fclose(f) != 0 || rename(tmp, tidfile) != 0) {
    perror(tidfile);
    exit(1);
  }
  int r = park(0);
  KEEP(r);
  return r;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s MS TIDFILE [LIB]\n", argv[0]);
    return 2;
  }
  if (argc == 4) {
    void* lib = dlopen(argv[3], RTLD_NOW);
    int (*start)(void) = lib ? (int (*)(void))dlsym(lib, "nobid_start") : NULL;
    if (!start || start() != 0) {
      fprintf(stderr, "%s: %s\n", argv[3], lib ? "nobid_start failed" : dlerror());
      return 1;
    }
  }
  long ms = strtol(argv[1], NULL, 10);
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += ms / 1000;
  deadline.tv_nsec += (ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_barrier_init(&parked, NULL, 4);
  void* (*entries[3])(void*) = {alpha_entry, beta_entry, gamma_entry};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    int e = pthread_create(&th[i], NULL, entries[i], (void*)(long)(i + 1));
    if (e != 0) {
      fprintf(stderr, "pthread_create: %s\n", strerror(e));
      return 1;
    }
  }
  int r = main_wait(argv[2]);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  KEEP(r);
  return r;
}
