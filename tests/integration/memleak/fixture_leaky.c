// SPDX-License-Identifier: Apache-2.0
// Leaky fixture of tests/integration/memleak: leaks what the command line asks, each allocator
// from its own call site (site_<kind>), so that the test knows the outstanding bytes per site.
//   fixture_leaky [--wait] [--hold] KIND:SIZE:COUNT ...
// KIND: malloc calloc realloc posix_memalign aligned_alloc memalign valloc (leaked),
//       scoped (malloc via main -> scope_outer -> scope_mid -> site_scoped: the trampoline test),
//       noise (COUNT malloc/free pairs of SIZE from site_noise: never outstanding),
//       contract (COUNT rounds of every allocator's C/glibc contract at sizes around SIZE, all
//       freed: contents kept by realloc, calloc zeroed, alignments, malloc_usable_size,
//       reallocarray overflow; exit 1 naming the first broken one: the in-process sampler's
//       tagged blocks must be indistinguishable from glibc's),
//       hostile (COUNT rounds of what a sampler inside the process must survive, all freed:
//       allocations that leave errno alone, allocations in a pthread key destructor at thread
//       exit, allocations on a makecontext stack with nothing mapped above it; exit 1 naming a
//       changed errno).
// --wait: read one line from stdin before allocating; --hold: after allocating, print "done"
// and wait for stdin to close (a tracer attached with -p reads the outstanding set meanwhile).
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
static void* volatile sink;  // keeps the compiler from dropping allocations

NOINLINE void site_malloc(size_t n) { sink = malloc(n); memset(sink, 1, n); }
NOINLINE void site_calloc(size_t n) { sink = calloc(n, 1); }
NOINLINE void site_realloc(size_t n) {
  void* p = realloc(NULL, n / 2 + 1);  // glibc: malloc inside realloc (a nested allocator call)
  sink = realloc(p, n);
}
NOINLINE void site_posix_memalign(size_t n) {
  void* p = NULL;
  if (posix_memalign(&p, 64, n) == 0) sink = p;
}
NOINLINE void site_aligned_alloc(size_t n) { sink = aligned_alloc(64, n); }
NOINLINE void site_memalign(size_t n) { sink = memalign(128, n); }
NOINLINE void site_valloc(size_t n) { sink = valloc(n); }
NOINLINE void site_noise(size_t n) {
  void* p = malloc(n);
  sink = p;
  free(p);
}
NOINLINE void site_scoped(size_t n) { sink = malloc(n); }
NOINLINE void scope_mid(size_t n, long count) {
  for (long i = 0; i < count; i++) site_scoped(n);
  __asm__ volatile("" ::: "memory");
}
NOINLINE void scope_outer(size_t n, long count) {
  scope_mid(n, count);
  __asm__ volatile("" ::: "memory");
}

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "fixture_leaky: contract broken at size %zu: %s\n", n, #cond); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

static int all_bytes(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

NOINLINE int site_contract(size_t n) {
  unsigned char* p = malloc(n);
  CHECK(p && malloc_usable_size(p) >= n);
  memset(p, 0x5a, n);
  unsigned char* q = realloc(p, 2 * n + 1);  // grow: the n bytes kept
  CHECK(q && all_bytes(q, n, 0x5a) && malloc_usable_size(q) >= 2 * n + 1);
  memset(q, 0x3c, 2 * n + 1);
  p = realloc(q, n / 2 + 1);  // shrink: the first n/2+1 kept
  CHECK(p && all_bytes(p, n / 2 + 1, 0x3c));
  errno = 0;
  volatile size_t huge = SIZE_MAX / 2;  // not a constant: no compile-time warning
  q = reallocarray(p, huge, 3);  // overflow: NULL, ENOMEM, p untouched
  CHECK(q == NULL && errno == ENOMEM && all_bytes(p, n / 2 + 1, 0x3c));
  q = reallocarray(p, 2, n);
  CHECK(q && all_bytes(q, n / 2 + 1, 0x3c));
  free(q);
  unsigned char* z = calloc(n, 1);
  CHECK(z && all_bytes(z, n, 0));
  free(z);
  void* a = NULL;
  CHECK(posix_memalign(&a, 64, n) == 0 && ((uintptr_t)a & 63) == 0 && malloc_usable_size(a) >= n);
  memset(a, 1, n);
  free(a);
  CHECK(posix_memalign(&a, 4096, n) == 0 && ((uintptr_t)a & 4095) == 0);
  free(a);
  a = (void*)1;
  CHECK(posix_memalign(&a, 24, n) == EINVAL && a == (void*)1);  // not a power of two
  a = aligned_alloc(256, n);
  CHECK(a && ((uintptr_t)a & 255) == 0);
  free(a);
  a = memalign(100, n);  // glibc rounds the alignment up to 128
  CHECK(a && ((uintptr_t)a & 127) == 0);
  memset(a, 2, n);
  free(a);
  a = valloc(n);
  CHECK(a && ((uintptr_t)a & ((uintptr_t)sysconf(_SC_PAGESIZE) - 1)) == 0);
  free(a);
  p = malloc(n);
  CHECK(p);
  CHECK(realloc(p, 0) == NULL);  // glibc: frees p
  return 0;
}

static pthread_key_t hostile_key;
static void hostile_destructor(void* p) {  // runs at thread exit, after the sampler's own
  for (int i = 0; i < 200; i++) {
    void* q = malloc(4096);
    memset(q, 1, 4096);
    free(q);
  }
  free(p);
}
static void* hostile_thread(void* arg) {
  (void)arg;
  pthread_setspecific(hostile_key, malloc(10));
  for (int i = 0; i < 50; i++) free(malloc(4096));
  return NULL;
}
static ucontext_t hostile_main, hostile_coro;
static void hostile_body(void) {
  for (int i = 0; i < 200; i++) free(malloc(4096));
}

NOINLINE int site_hostile(size_t n) {
  for (int i = 0; i < 100; i++) {
    errno = 1234;
    void* p = malloc(n);
    if (!p || errno != 1234) {
      fprintf(stderr, "fixture_leaky: malloc(%zu) changed errno to %d\n", n, errno);
      return 1;
    }
    free(p);
    if (errno != 1234) {
      fprintf(stderr, "fixture_leaky: free changed errno to %d\n", errno);
      return 1;
    }
  }
  static int key_made;
  if (!key_made++ && pthread_key_create(&hostile_key, hostile_destructor) != 0) return 1;
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, hostile_thread, NULL) != 0) return 1;
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  size_t sz = 65536;
  char* st = mmap(NULL, sz + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (st == MAP_FAILED) return 1;
  munmap(st + sz, 4096);  // nothing mapped above the coroutine's stack
  getcontext(&hostile_coro);
  hostile_coro.uc_stack.ss_sp = st;
  hostile_coro.uc_stack.ss_size = sz;
  hostile_coro.uc_link = &hostile_main;
  makecontext(&hostile_coro, hostile_body, 0);
  swapcontext(&hostile_main, &hostile_coro);
  munmap(st, sz);
  return 0;
}

int main(int argc, char** argv) {
  int wait = 0, hold = 0;
  char line[64];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--wait") == 0) wait = 1;
    if (strcmp(argv[i], "--hold") == 0) hold = 1;
  }
  if (wait) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin)) return 3;
  }
  for (int i = 1; i < argc; i++) {
    char kind[32];
    size_t size;
    long count;
    if (argv[i][0] == '-') continue;
    if (sscanf(argv[i], "%31[a-z_]:%zu:%ld", kind, &size, &count) != 3) {
      fprintf(stderr, "fixture_leaky: bad spec '%s'\n", argv[i]);
      return 2;
    }
    if (strcmp(kind, "hostile") == 0) {
      for (long k = 0; k < count; k++)
        if (site_hostile(size) != 0) return 1;
      continue;
    }
    if (strcmp(kind, "contract") == 0) {
      for (long k = 0; k < count; k++)
        if (site_contract(size + (size_t)(k % 97)) != 0) return 1;
      continue;
    }
    if (strcmp(kind, "scoped") == 0) {
      scope_outer(size, count);
      continue;
    }
    for (long k = 0; k < count; k++) {
      if (strcmp(kind, "malloc") == 0) site_malloc(size);
      else if (strcmp(kind, "calloc") == 0) site_calloc(size);
      else if (strcmp(kind, "realloc") == 0) site_realloc(size);
      else if (strcmp(kind, "posix_memalign") == 0) site_posix_memalign(size);
      else if (strcmp(kind, "aligned_alloc") == 0) site_aligned_alloc(size);
      else if (strcmp(kind, "memalign") == 0) site_memalign(size);
      else if (strcmp(kind, "valloc") == 0) site_valloc(size);
      else if (strcmp(kind, "noise") == 0) site_noise(size);
      else {
        fprintf(stderr, "fixture_leaky: unknown kind '%s'\n", kind);
        return 2;
      }
    }
  }
  if (hold) {
    printf("done\n");
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin)) {
    }
  }
  return 0;
}
