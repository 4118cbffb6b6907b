/* SPDX-License-Identifier: Apache-2.0 */
/* Names that are bytes, not UTF-8, for stack_check.py json-bytes: a function whose symbol is
   "park_\xff\xfe" and a thread named "bad\xff\xfename" (prctl). Prints "ready" once parked. */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

__attribute__((noinline)) void park(void) __asm__("park_\xff\xfe");
__attribute__((noinline)) void park(void) {
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

int main(void) {
  prctl(PR_SET_NAME, "bad\xff\xfename", 0, 0, 0);
  park();
  return 0;
}
