/* SPDX-License-Identifier: Apache-2.0 */
/* What the test puts at swap_target's library path while the process runs: other code with
   other names (and another build-id), laid out so that the offsets of swap_lib_a's functions
   fall inside these. A module described by this file instead of the mapped one names frames
   other_*. */
volatile unsigned long other_sink;

#define OTHER(n)                                                              \
  __attribute__((noinline)) unsigned long other_##n(unsigned long x) {        \
    for (int i = 0; i < 64; i++) x = x * 6364136223846793005ul + (n) + other_sink; \
    other_sink += x;                                                          \
    return x ^ (x >> 7) ^ (x << 3) ^ (x >> 11) ^ (x << 5) ^ (x >> 13);        \
  }
OTHER(0) OTHER(1) OTHER(2) OTHER(3) OTHER(4) OTHER(5) OTHER(6) OTHER(7)
OTHER(8) OTHER(9) OTHER(10) OTHER(11) OTHER(12) OTHER(13) OTHER(14) OTHER(15)

__attribute__((visibility("default"))) void swap_enter(void) { other_sink += other_0(other_sink); }
