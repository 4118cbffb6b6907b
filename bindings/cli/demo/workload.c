/* SPDX-License-Identifier: Apache-2.0 */
/* The demo workload of `stackprov demo`: 4 threads parked in distinct named call chains (one with an inlined function). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Usage: stackprov-demo-workload [MS]
 *
 * Starts three worker threads and parks every thread in its own call chain:
 *   wl-main:     main -> supervisor_run -> supervisor_wait -> supervisor_nap -> nanosleep
 *   wl-sleeper:  sleeper_thread -> sleeper_outer -> sleeper_middle -> sleeper_leaf -> nanosleep
 *   wl-condwait: condwait_thread -> queue_consume -> queue_wait_item -> pthread_cond_wait
 *   wl-reader:   reader_thread -> pipe_reader_loop -> [read_one_message, inlined] -> read
 * prints "ready" on stderr once all of them are parked, and exits with status 0 by itself
 * MS milliseconds (default 3000, at most 86400000) after it started. A bad MS: status 2.
 *
 * Built with -g -O2. The chain functions are noipa (never inlined, cloned or merged, so
 * their names stay as written) and every call is followed by an empty asm statement, so no
 * call becomes a tail call and every frame stays on the stack. read_one_message is
 * always_inline: its call site in pipe_reader_loop is an inline frame in the DWARF. */

#define CHAIN __attribute__((noipa))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static atomic_int stop_flag;
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER; /* a worker parked (main waits on it) */
static int parked;
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cv = PTHREAD_COND_INITIALIZER;
static int queue_items;
static int reader_pipe[2] = {-1, -1};

/* Counts a worker as parked; called right before its blocking call. */
static void announce_parked(void) {
  pthread_mutex_lock(&park_mu);
  parked++;
  pthread_cond_signal(&park_cv);
  pthread_mutex_unlock(&park_mu);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- wl-sleeper: a nanosleep loop four frames deep */

CHAIN static void sleeper_leaf(int rounds_per_check) {
  announce_parked();
  while (!atomic_load(&stop_flag)) {
    for (int i = 0; i < rounds_per_check && !atomic_load(&stop_flag); i++) sleep_ms(100);
  }
  KEEP_FRAME();
}

CHAIN static void sleeper_middle(int rounds) {
  sleeper_leaf(rounds);
  KEEP_FRAME();
}

CHAIN static void sleeper_outer(void) {
  sleeper_middle(2);
  KEEP_FRAME();
}

CHAIN static void* sleeper_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "wl-sleeper");
  sleeper_outer();
  KEEP_FRAME();
  return NULL;
}

/* ---- wl-condwait: pthread_cond_wait three frames deep */

CHAIN static int queue_wait_item(void) {
  pthread_mutex_lock(&queue_mu);
  announce_parked(); /* the wait below releases queue_mu atomically */
  while (queue_items == 0 && !atomic_load(&stop_flag)) pthread_cond_wait(&queue_cv, &queue_mu);
  int got = queue_items;
  queue_items = 0;
  pthread_mutex_unlock(&queue_mu);
  KEEP_FRAME();
  return got;
}

CHAIN static int queue_consume(void) {
  int total = 0;
  while (!atomic_load(&stop_flag)) total += queue_wait_item();
  KEEP_FRAME();
  return total;
}

CHAIN static void* condwait_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "wl-condwait");
  int total = queue_consume();
  KEEP_FRAME();
  return (void*)(long)total;
}

/* ---- wl-reader: read() on a pipe, through an always_inline function */

static inline __attribute__((always_inline)) ssize_t read_one_message(int fd, char* buf, size_t len) {
  ssize_t n;
  do {
    n = read(fd, buf, len);
  } while (n < 0 && errno == EINTR);
  return n;
}

CHAIN static long pipe_reader_loop(int fd) {
  char buf[64];
  long bytes = 0;
  announce_parked();
  for (;;) {
    ssize_t n = read_one_message(fd, buf, sizeof buf);
    if (n <= 0) break; /* main closes the write end at the end */
    bytes += n;
  }
  KEEP_FRAME();
  return bytes;
}

CHAIN static void* reader_thread(void* arg) {
  pthread_setname_np(pthread_self(), "wl-reader");
  long bytes = pipe_reader_loop(*(const int*)arg);
  KEEP_FRAME();
  return (void*)bytes;
}

/* ---- main: waits for the workers, then naps until the deadline */

static long ms_since(const struct timespec* t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t0->tv_sec) * 1000L + (now.tv_nsec - t0->tv_nsec) / 1000000L;
}

CHAIN static void supervisor_nap(long ms) {
  sleep_ms(ms);
  KEEP_FRAME();
}

CHAIN static void supervisor_wait(const struct timespec* t0, long run_ms) {
  long left;
  while ((left = run_ms - ms_since(t0)) > 0) supervisor_nap(left < 200 ? left : 200);
  KEEP_FRAME();
}

CHAIN static void supervisor_run(const struct timespec* t0, long run_ms) {
  pthread_mutex_lock(&park_mu);
  while (parked < 3) pthread_cond_wait(&park_cv, &park_mu);
  pthread_mutex_unlock(&park_mu);
  sleep_ms(20); /* let the last worker enter its blocking call */
  fputs("ready\n", stderr);
  fflush(stderr);
  supervisor_wait(t0, run_ms);
  KEEP_FRAME();
}

int main(int argc, char** argv) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long run_ms = 3000;
  if (argc > 2) {
    fprintf(stderr, "usage: %s [MS]\n", argv[0]);
    return 2;
  }
  if (argc == 2) {
    char* end = NULL;
    errno = 0;
    long v = strtol(argv[1], &end, 10);
    if (errno != 0 || end == argv[1] || *end != '\0' || v < 0 || v > 86400000L) {
      fprintf(stderr, "%s: invalid run time '%s' (expected milliseconds, 0 to 86400000)\n", argv[0], argv[1]);
      return 2;
    }
    run_ms = v;
  }
  if (pipe(reader_pipe) != 0) {
    fprintf(stderr, "%s: pipe: %s\n", argv[0], strerror(errno));
    return 1;
  }
  pthread_setname_np(pthread_self(), "wl-main");
  pthread_t th[3];
  void* (*const fns[3])(void*) = {sleeper_thread, condwait_thread, reader_thread};
  for (int i = 0; i < 3; i++) {
    int rc = pthread_create(&th[i], NULL, fns[i], &reader_pipe[0]);
    if (rc != 0) {
      fprintf(stderr, "%s: pthread_create: %s\n", argv[0], strerror(rc));
      return 1;
    }
  }
  supervisor_run(&t0, run_ms);
  atomic_store(&stop_flag, 1);
  pthread_mutex_lock(&queue_mu);
  pthread_cond_broadcast(&queue_cv);
  pthread_mutex_unlock(&queue_mu);
  close(reader_pipe[1]);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  close(reader_pipe[0]);
  return 0;
}
