/* SPDX-License-Identifier: Apache-2.0 */
/* mingw DWARF-in-PE fixture (C): static inline helpers inlined at -O2, a static recursive function, a switch, an export. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline unsigned rotl(unsigned x, int k) { return (x << k) | (x >> (32 - k)); }

static unsigned hash(const char* s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = rotl(h ^ (unsigned char)*s, 5) * 16777619u;
  return h;
}

static inline int square(int x) { return x * x; }

static int classify(int c) {
  switch (c % 7) {
    case 0: return 3;
    case 1: return square(c) * 2;
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

static __attribute__((noinline)) int recurse(int n) { return n <= 1 ? 1 : n * recurse(n - 1) % 1000003; }

/* An export: what names code in an image stripped of its COFF symbols (llvm-symbolizer reads exports then). */
__declspec(dllexport) int exported_entry(int n, char** argv) { return work(n, argv) + recurse(n + 5); }

int main(int argc, char** argv) {
  char buf[64];
  snprintf(buf, sizeof buf, "%d", exported_entry(argc, argv));
  printf("%s %zu\n", buf, strlen(buf));
  return 0;
}
