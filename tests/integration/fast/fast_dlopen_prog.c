/* SPDX-License-Identifier: Apache-2.0 */
/* Recorded by perf in the MMAP2 test: dlopens the test library and runs it.  Usage: fast_dlopen_prog LIB */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  uint64_t (*work)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "fast_dl_work");
  if (work == NULL) return 1;
  volatile uint64_t x = work(300000);
  (void)x;
  return 0;
}
