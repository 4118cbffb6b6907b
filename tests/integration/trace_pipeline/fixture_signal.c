// SPDX-License-Identifier: Apache-2.0
// Trace fixture: the main thread parked inside a SIGUSR1 handler (its stack crosses libc's __restore_rt), a worker parked in nanosleep.
//
//   main:   read (libc) <- on_usr1 <- __restore_rt (libc) <- pthread_kill internals, raise (libc)
//           <- main <- __libc_start_call_main, __libc_start_main (libc) <- _start
//   worker: clock_nanosleep, nanosleep (libc) <- worker <- start_thread, clone3 (libc)
// Writes "pid PID" to argv[1] from inside the handler once both threads are about to block, then
// blocks until killed.
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* g_ready_path;
static int g_pipe[2];
static sem_t g_worker_ready;

__attribute__((noinline)) static void* worker(void* arg) {
  struct timespec ts = {3600, 0};
  sem_post(&g_worker_ready);
  int r = nanosleep(&ts, NULL);
  __asm__ volatile("" : "+r"(r));
  return (void*)(long)r + (long)arg;
}

__attribute__((noinline)) static void on_usr1(int sig) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "pid %d\n", (int)getpid());
  int fd = open(g_ready_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    (void)!write(fd, buf, (size_t)n);
    close(fd);
  }
  char c;
  ssize_t r = read(g_pipe[0], &c, 1);  // never written: blocks inside the handler
  __asm__ volatile("" : "+r"(r));
  (void)sig;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_ready_path = argv[1];
  if (pipe(g_pipe) != 0 || sem_init(&g_worker_ready, 0, 0) != 0) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
  sem_wait(&g_worker_ready);
  signal(SIGUSR1, on_usr1);
  raise(SIGUSR1);
  return 0;
}
