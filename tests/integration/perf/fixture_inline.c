// SPDX-License-Identifier: Apache-2.0
// perf fixture: a hot loop in functions inlined two deep (hot_a -> outer_inline -> mid_inline) beside
// a plain one (plain_b), for the inlined frames of folded and SVG output. Built -O2 -g.
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long mid_inline(unsigned long x) {
  for (int i = 0; i < 4000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}
static inline __attribute__((always_inline)) unsigned long outer_inline(unsigned long x) {
  x = mid_inline(x ^ 0x9e3779b97f4a7c15ul);
  asm volatile("" ::: "memory");
  return x + 3;
}
__attribute__((noinline)) unsigned long hot_a(unsigned long x) {
  x = outer_inline(x);
  asm volatile("" ::: "memory");
  return x + 1;
}
__attribute__((noinline)) unsigned long plain_b(unsigned long x) {
  for (int i = 0; i < 2000; i++) x ^= (x << 7) ^ (x >> 9) ^ (unsigned long)i;
  asm volatile("" ::: "memory");
  return x;
}

int main(int argc, char** argv) {
  unsigned long x = 7;
  const long n = argc > 1 ? atol(argv[1]) : 20000;
  for (long i = 0; i < n; i++) {
    x = hot_a(x);
    x = plain_b(x);
  }
  sink = x;
  printf("%lu\n", x);
  return 0;
}
