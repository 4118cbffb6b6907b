/* SPDX-License-Identifier: Apache-2.0 */
/* A server forking a child per request, each exiting: the parent maps its own file executable
   MAPS times (MAPS executable mappings, each inherited by every child), forks CHILDREN children
   that exit at once, then a last child that spins SECONDS in forks_leaf <- forks_mid <- main.
   A profiler that never forgets exited children runs out of room for the last one's mappings
   (2^20 / 4,096 = 256 processes) and cannot name its samples.
   usage: forks MAPS CHILDREN SECONDS */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long forks_sink;

/* The spinning child's own CPU time: it takes as many cpu-clock samples on a loaded machine as on an
   idle one (by wall time, a CI run with other tests beside it once got fewer than the check wants). */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void forks_leaf(double seconds) {
  double end = now() + seconds;
  while (now() < end)
    for (int i = 0; i < 100000; i++) forks_sink += i;
}

__attribute__((noinline)) void forks_mid(double seconds) {
  forks_leaf(seconds);
  forks_sink++;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: forks MAPS CHILDREN SECONDS\n");
    return 2;
  }
  const int maps = atoi(argv[1]), children = atoi(argv[2]);
  const double seconds = atof(argv[3]);
  int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return perror("open /proc/self/exe"), 1;
  /* One page of the file each time, at offset 0: no two mappings merge (not contiguous in the
     file). A guard page between them keeps them apart in memory too. */
  for (int i = 0; i < maps; i++) {
    char* p = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mmap(p, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
      return perror("mmap"), 1;
  }
  for (int i = 0; i <= children; i++) {
    pid_t c = fork();
    if (c < 0) return perror("fork"), 1;
    if (c == 0) {
      if (i == children) forks_mid(seconds);
      _exit(0);
    }
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) return fprintf(stderr, "child %d failed\n", i), 1;
    if (i == children) printf("last child %d\n", (int)c);
  }
  return 0;
}
