// SPDX-License-Identifier: Apache-2.0
// perf fixture: a syscall- and page-fault-heavy loop (write, getppid, mmap/touch/munmap) whose samples have kernel frames.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void write_some(int fd, const char* buf) {
  for (int i = 0; i < 64; i++)
    if (write(fd, buf, 4096) < 0) exit(1);
}

__attribute__((noinline)) static void fault_some(void) {
  char* p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) exit(1);
  for (int i = 0; i < (1 << 20); i += 4096) p[i] = (char)i;
  munmap(p, 1 << 20);
}

__attribute__((noinline)) static long ask_parent(void) {
  long s = 0;
  for (int i = 0; i < 256; i++) s += getppid();
  return s;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  int fd = open("/dev/null", O_WRONLY);
  if (fd < 0) return 1;
  static char buf[4096];
  memset(buf, 'x', sizeof(buf));
  long sink = 0;
  double end = now() + seconds;
  while (now() < end) {
    write_some(fd, buf);
    fault_some();
    sink += ask_parent();
  }
  close(fd);
  printf("%ld\n", sink & 1);
  return 0;
}
