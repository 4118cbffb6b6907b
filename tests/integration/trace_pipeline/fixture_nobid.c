// SPDX-License-Identifier: Apache-2.0
// A shared library without a GNU build-id (-Wl,--build-id=none), stripped, with frame pointers: one thread parked in it.
//
// fixture_pipeline MS TIDFILE LIB dlopens LIB and calls nobid_start() before its own threads park:
// a thread "nobid" is created and parks in clock_nanosleep called from a hidden function of this
// library. No bundle can hold a module without a build-id, so a trace of that process fails the
// gate's platform-id check; the library is built with frame pointers so that a replay from
// bundles alone can still step through its frame (the frame-pointer rung), and stripped with
// hidden symbols so that the frame is unnamed with the file and without it alike.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

static sem_t started;

__attribute__((noinline)) static void* nobid_park(void* arg) {
  struct timespec t = {3600, 0};
  pthread_setname_np(pthread_self(), "nobid");
  sem_post(&started);
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR) {
  }
  __asm__ volatile("" ::: "memory");
  return arg;
}

__attribute__((visibility("default"))) int nobid_start(void) {
  pthread_t th;
  sem_init(&started, 0, 0);
  if (pthread_create(&th, NULL, nobid_park, NULL) != 0) return -1;
  while (sem_wait(&started) != 0) {
  }
  return 0;
}
