/* SPDX-License-Identifier: Apache-2.0 */
/* A process that parks inside a dlopened library, for stack_check.py swapped-module: the test
   then replaces or deletes the library's file while the process keeps the original mapped.
   Usage: swap_target LIB   (prints "ready" once parked)
   A line "load PATH" on stdin dlopens PATH as well (another spelling of LIB's path loads the file
   now at that path beside the one mapped) and prints "loaded" or the error. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void* loader(void* unused) {
  (void)unused;
  char line[4096];
  while (fgets(line, sizeof line, stdin) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "load ", 5) != 0) continue;
    void* h = dlopen(line + 5, RTLD_NOW);
    if (h != NULL)
      printf("loaded\n");
    else
      printf("dlopen %s: %s\n", line + 5, dlerror());
    fflush(stdout);
  }
  return NULL;
}

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
  pthread_t t;
  if (pthread_create(&t, NULL, loader, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 2;
  }
  enter(); /* prints "ready" and parks */
  return 0;
}
