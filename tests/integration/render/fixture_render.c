/* SPDX-License-Identifier: Apache-2.0 */
/* The renderer-identity fixture: threads parked in named chains, one through an inlined function,
 * one copying with libc's memcpy without end (so a stop finds it in memcpy), every worker started
 * by clone3. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Usage: fixture_render
 * Threads (named with pthread_setname_np):
 *   rf-sleeper: sleeper_thread -> sleeper_outer -> sleeper_leaf -> nanosleep
 *   rf-reader:  reader_thread -> reader_loop -> [read_message, inlined] -> read
 *   rf-copier:  copier_thread -> copier_loop -> memcpy (64 MiB blocks, without end)
 *   main:       pthread_join
 * Prints "ready" on stdout once every thread is running its chain. Never exits by itself. */

#define CHAIN __attribute__((noipa))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static int pipe_fd[2];
static volatile int started;

CHAIN static void sleeper_leaf(void) {
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  struct timespec ts = {100000, 0};
  for (;;) nanosleep(&ts, NULL);
  KEEP_FRAME();
}
CHAIN static void sleeper_outer(void) { sleeper_leaf(); KEEP_FRAME(); }
CHAIN static void* sleeper_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "rf-sleeper");
  sleeper_outer();
  KEEP_FRAME();
  return NULL;
}

static inline __attribute__((always_inline)) ssize_t read_message(int fd, char* buf, size_t len) {
  return read(fd, buf, len);
}
CHAIN static long reader_loop(int fd) {
  char buf[64];
  long total = 0;
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    ssize_t n = read_message(fd, buf, sizeof buf);
    if (n > 0) total += n;
    KEEP_FRAME();
  }
  return total;
}
CHAIN static void* reader_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "rf-reader");
  reader_loop(pipe_fd[0]);
  KEEP_FRAME();
  return NULL;
}

enum { kBlock = 64 << 20 };
CHAIN static void copier_loop(char* dst, const char* src) {
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    memcpy(dst, src, kBlock);
    KEEP_FRAME();
  }
}
CHAIN static void* copier_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "rf-copier");
  char* a = malloc(kBlock);
  char* b = malloc(kBlock);
  if (!a || !b) abort();
  memset(a, 1, kBlock);
  memset(b, 2, kBlock);
  copier_loop(b, a);
  KEEP_FRAME();
  return NULL;
}

int main(void) {
  if (pipe(pipe_fd) != 0) return 1;
  pthread_t t[3];
  void* (*fn[3])(void*) = {sleeper_thread, reader_thread, copier_thread};
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, fn[i], NULL) != 0) return 1;
  while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < 3) usleep(1000);
  usleep(20000);
  printf("ready\n");
  fflush(stdout);
  pthread_join(t[0], NULL);
  return 0;
}
