/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the Windows fixtures that walk their own threads (tests/integration/pdata/walk_self.c,
 * tests/win64/parked_threads.c): a chain of functions of several frame kinds (a frame register from
 * alloca, a large allocation, xmm registers saved across calls, plain pushes) down to CHAIN_BOTTOM(id),
 * which the including file defines; and print_rtl_walk, every frame's rip and rsp as
 * RtlLookupFunctionEntry + RtlVirtualUnwind find them (a function without an entry: a leaf, its return
 * address at [rsp]). Include after <windows.h>, <malloc.h>, <stdint.h> and <stdio.h>. */

static volatile int sink;

static void CHAIN_BOTTOM(int id);

static void print_rtl_walk(CONTEXT c) {
  for (int n = 0; n < 64 && c.Rip != 0; n++) {
    printf("frame %llx %llx\n", (unsigned long long)c.Rip, (unsigned long long)c.Rsp);
    ULONG64 base = 0, frame = 0;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry(c.Rip, &base, NULL);
    void* hd = NULL;
    if (f == NULL) {
      c.Rip = *(ULONG64*)(uintptr_t)c.Rsp;
      c.Rsp += 8;
    } else {
      RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, c.Rip, f, &c, &hd, &frame, NULL);
    }
  }
  printf("end\n");
}

__attribute__((noinline)) static double leaf_xmm(double a, double b, int id) {
  double x = a * 1.5 + b, y = b * 2.5 - a, z = a + b * 3.0;
  CHAIN_BOTTOM(id);
  return x * y + z + sink;
}

__attribute__((noinline)) static int big_frame(int n, int id) {
  volatile char buf[5000];
  buf[n % 5000] = (char)n;
  double r = leaf_xmm(n * 0.5, n * 0.25, id);
  return buf[(n * 7) % 5000] + (int)r;
}

__attribute__((noinline)) static int with_alloca(int n, int id) {
  volatile char* p = alloca(64 + (n & 31));
  p[0] = (char)n;
  int r = big_frame(n + 1, id);
  return r + p[0];
}

__attribute__((noinline)) static int chain(int depth, int id) {
  if (depth == 0) return with_alloca(depth + 3, id);
  int r = chain(depth - 1, id);
  sink += r;
  return r + depth;
}
