/* SPDX-License-Identifier: Apache-2.0 */
/* Symbolization fixture in C: static inline helpers, constant propagation, a switch, loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline unsigned rotl(unsigned x, int k) { return (x << k) | (x >> (32 - k)); }

static unsigned hash(const char* s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = rotl(h ^ (unsigned char)*s, 5) * 16777619u;
  return h;
}

static int classify(int c) {
  switch (c % 7) {
    case 0: return 3;
    case 1: return c * 2;
    case 2: return c ^ 0x55;
    case 3: return -c;
    default: return c + 11;
  }
}

__attribute__((noinline)) int work(int n, char** argv) {
  int acc = 0;
  for (int i = 0; i < n; i++) acc += classify((int)hash(argv[i]) + i);
  return acc;
}

int main(int argc, char** argv) {
  char* buf = malloc(64);
  if (!buf) return 1;
  strcpy(buf, "fixture");
  printf("%d %u\n", work(argc, argv), hash(buf));
  free(buf);
  return 0;
}
