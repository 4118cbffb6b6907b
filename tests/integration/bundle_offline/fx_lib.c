// SPDX-License-Identifier: Apache-2.0
// Shared library of the offline-unwinding fixture: frames the unwinder must cross by the .so's CFI.
#include <unistd.h>

typedef int (*fx_cb)(int);

/* Calls back into the executable; the call is not a tail call (the result is used). */
__attribute__((noinline, visibility("default"))) int fx_lib_mid(fx_cb cb, int depth) {
  volatile int x = depth;
  int r = cb(x + 1);
  __asm__ volatile("" : "+r"(r));
  return r * 3 + x;
}

__attribute__((noinline, visibility("default"))) int fx_lib_entry(fx_cb cb, int depth) {
  int r = fx_lib_mid(cb, depth + 1);
  __asm__ volatile("" : "+r"(r));
  return r + depth;
}

/* Blocks in libc's read(2) on `fd`. */
__attribute__((noinline, visibility("default"))) int fx_lib_block_read(int fd) {
  char c = 0;
  ssize_t n = read(fd, &c, 1);
  __asm__ volatile("" : "+r"(n));
  return (int)n + c;
}
