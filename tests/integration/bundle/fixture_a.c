// SPDX-License-Identifier: Apache-2.0
// Bundle fixture (C, unit 1): static inline helpers nested two deep into a noinline loop, -O2 -g.
#include <stdio.h>
#include <stdlib.h>

int mix(int a, int b);

static inline int sq(int x) { return x * x; }
static inline int add_sq(int a, int b) { return sq(a) + sq(b) + mix(a, b); }

__attribute__((noinline)) int compute(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += add_sq(i, n - i);
  return s;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  printf("%d\n", compute(n));
  return 0;
}
