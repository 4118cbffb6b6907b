// SPDX-License-Identifier: Apache-2.0
// Offline-unwinding fixture: three threads parked in libc, called through a shared library, built -O2 without frame pointers.
//
// Threads (innermost first, as the unwinder must find them):
//   read:  read (libc) <- fx_lib_block_read (.so) <- cb_read <- fx_lib_mid (.so) <- fx_lib_entry (.so)
//          <- read_main <- start_thread (libc) <- clone3 (libc)
//   sleep: clock_nanosleep/nanosleep (libc) <- sleep_leaf <- sleep_main <- start_thread <- clone3
//   main:  pthread_join (libc) <- cb_join <- fx_lib_mid (.so) <- fx_lib_entry (.so) <- main
//          <- __libc_start_call_main (libc) <- __libc_start_main (libc) <- _start
//   signal: read (libc) <- on_sigusr1 <- __restore_rt (libc, a signal frame: its CFI is an
//          expression, so the bundle row is "full") <- pthread_kill internals (libc)
//          <- signal_raise <- signal_main <- start_thread <- clone3
// Prints "ready <pid>" once every thread is about to block, then blocks until killed.
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef int (*fx_cb)(int);
int fx_lib_entry(fx_cb cb, int depth);
int fx_lib_block_read(int fd);

static int g_pipe[2];
static sem_t g_ready;
static int g_sig_pipe[2];
static pthread_t g_threads[3];

__attribute__((noinline)) static int cb_read(int depth) {
  sem_post(&g_ready);
  int r = fx_lib_block_read(g_pipe[0]);
  __asm__ volatile("" : "+r"(r));
  return r + depth;
}

__attribute__((noinline)) static void* read_main(void* arg) {
  int r = fx_lib_entry(cb_read, (int)(long)arg);
  __asm__ volatile("" : "+r"(r));
  return (void*)(long)r;
}

__attribute__((noinline)) static int sleep_leaf(int n) {
  struct timespec ts = {3600, 0};
  sem_post(&g_ready);
  int r = nanosleep(&ts, NULL);
  __asm__ volatile("" : "+r"(r));
  return r + n;
}

__attribute__((noinline)) static void* sleep_main(void* arg) {
  int r = sleep_leaf((int)(long)arg);
  __asm__ volatile("" : "+r"(r));
  return (void*)(long)r;
}

__attribute__((noinline)) static void on_sigusr1(int sig) {
  char c = 0;
  sem_post(&g_ready);
  ssize_t n = read(g_sig_pipe[0], &c, 1);
  __asm__ volatile("" : "+r"(n));
  (void)sig;
}

__attribute__((noinline)) static int signal_raise(int n) {
  int r = pthread_kill(pthread_self(), SIGUSR1);
  __asm__ volatile("" : "+r"(r));
  return r + n;
}

__attribute__((noinline)) static void* signal_main(void* arg) {
  int r = signal_raise((int)(long)arg);
  __asm__ volatile("" : "+r"(r));
  return (void*)(long)r;
}

__attribute__((noinline)) static int cb_join(int depth) {
  sem_wait(&g_ready);
  sem_wait(&g_ready);
  sem_wait(&g_ready);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  void* ret = NULL;
  int r = pthread_join(g_threads[0], &ret);
  __asm__ volatile("" : "+r"(r));
  return r + depth + (int)(long)ret;
}

int main(void) {
  if (pipe(g_pipe) != 0 || pipe(g_sig_pipe) != 0 || sem_init(&g_ready, 0, 0) != 0) return 1;
  struct sigaction sa;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sa.sa_handler = on_sigusr1;
  if (sigaction(SIGUSR1, &sa, NULL) != 0) return 1;
  if (pthread_create(&g_threads[0], NULL, read_main, (void*)1L) != 0) return 1;
  if (pthread_create(&g_threads[1], NULL, sleep_main, (void*)2L) != 0) return 1;
  if (pthread_create(&g_threads[2], NULL, signal_main, (void*)3L) != 0) return 1;
  int r = fx_lib_entry(cb_join, 0);
  __asm__ volatile("" : "+r"(r));
  return r == 12345 ? 2 : 0;
}
