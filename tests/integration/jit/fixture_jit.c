// SPDX-License-Identifier: Apache-2.0
// JIT fixture (x86_64): two functions generated into an anonymous executable mapping (frame-pointer prologue, no
// CFI, no module), named in /tmp/perf-PID.map as a JIT writes it; they call back into native code that blocks
// ("block": for `stackprov stack --pid`) or spins ("spin SECONDS": for perf record / perf-import).
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;
static const char* mode;
static double seconds = 1.0;
volatile uint64_t sink;

static void on_term(int sig) { (void)sig; stop_flag = 1; }

__attribute__((noinline)) void native_callback(void) {
  if (strcmp(mode, "block") == 0) {
    printf("READY\n");
    fflush(stdout);
    while (!stop_flag) pause();
    return;
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100000; i++) sink += (uint64_t)i * i;
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

// push rbp; mov rbp,rsp; movabs rax,TARGET; call rax; nop (a return address inside the function); pop rbp; ret
static size_t emit_caller(uint8_t* p, void* target) {
  size_t n = 0;
  p[n++] = 0x55;
  p[n++] = 0x48; p[n++] = 0x89; p[n++] = 0xe5;
  p[n++] = 0x48; p[n++] = 0xb8;
  uint64_t t = (uint64_t)(uintptr_t)target;
  memcpy(p + n, &t, 8);
  n += 8;
  p[n++] = 0xff; p[n++] = 0xd0;
  p[n++] = 0x90;
  p[n++] = 0x5d;
  p[n++] = 0xc3;
  return n;
}

int main(int argc, char** argv) {
  mode = argc > 1 ? argv[1] : "block";
  if (argc > 2) seconds = atof(argv[2]);
  signal(SIGTERM, on_term);
  uint8_t* code = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 1;
  uint8_t* inner = code + 0x100;  // leaves gaps: addresses the map does not name
  uint8_t* outer = code + 0x400;
  size_t inner_len = emit_caller(inner, (void*)native_callback);
  size_t outer_len = emit_caller(outer, inner);
  if (mprotect(code, 8192, PROT_READ | PROT_EXEC) != 0) return 1;
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return 1;
  // As node --perf-basic-prof writes them: hex start and size without 0x, names with spaces.
  fprintf(f, "%lx %zx LazyCompile:*jitInner /srv/app.js:7\n", (unsigned long)(uintptr_t)inner, inner_len);
  fprintf(f, "%lx %zx LazyCompile:~jitOuter /srv/app.js:3\n", (unsigned long)(uintptr_t)outer, outer_len);
  fclose(f);
  ((void (*)(void))outer)();
  // "block" removes its map; "spin" leaves it for perf script / perf-import to read later (the test removes it).
  if (strcmp(mode, "block") == 0) unlink(path);
  return 0;
}
