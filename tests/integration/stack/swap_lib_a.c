/* SPDX-License-Identifier: Apache-2.0 */
/* The library swap_target maps: swap_enter -> swap_mid -> swap_leaf, parked in pause(), or
   spinning there when SWAP_SPIN is set (for a sampling `stackprov record`). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile int swap_sink;

__attribute__((noinline)) void swap_leaf(void) {
  printf("ready\n");
  fflush(stdout);
  if (getenv("SWAP_SPIN") != NULL)
    for (;;) swap_sink++;
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
