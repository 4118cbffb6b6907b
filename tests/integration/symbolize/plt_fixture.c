// SPDX-License-Identifier: Apache-2.0
// Calls through the PLT (lazy, -z now, IBT .plt.sec, AArch64, static IRELATIVE) for symbol_names.py.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

/* The address of malloc is taken: a GOT entry (and a .plt.got stub where the linker makes one). */
void* (*volatile alloc)(size_t) = malloc;

int main(int argc, char** argv) {
  int v[4] = {3, 1, 2, argc};
  qsort(v, 4, sizeof v[0], cmp);
  char* p = alloc(strlen(argv[0]) + 1);
  strcpy(p, argv[0]);
  printf("%s %d\n", p, v[0]);
  free(p);
  return 0;
}
