/* SPDX-License-Identifier: Apache-2.0 */
/* A process that parks inside a dlopened library, for stack_check.py swapped-module: the test
   then replaces or deletes the library's file while the process keeps the original mapped.
   Usage: swap_target LIB   (prints "ready" once parked) */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: swap_target LIB\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  void (*enter)(void) = (void (*)(void))dlsym(h, "swap_enter");
  if (enter == NULL) {
    fprintf(stderr, "dlsym swap_enter: %s\n", dlerror());
    return 2;
  }
  enter(); /* prints "ready" and parks */
  return 0;
}
