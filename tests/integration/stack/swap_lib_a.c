/* SPDX-License-Identifier: Apache-2.0 */
/* The library swap_target maps: swap_enter -> swap_mid -> swap_leaf, parked in pause(). */
#include <stdio.h>
#include <unistd.h>

volatile int swap_sink;

__attribute__((noinline)) void swap_leaf(void) {
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

__attribute__((noinline)) void swap_mid(void) {
  swap_leaf();
  swap_sink++;
}

__attribute__((visibility("default"), noinline)) void swap_enter(void) {
  swap_mid();
  swap_sink++;
}
