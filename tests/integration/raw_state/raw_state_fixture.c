/* SPDX-License-Identifier: Apache-2.0 */
/* integration_raw_state_elf fixture: main -> outer -> middle -> leaf_fn, where gdb stops; with an
 * argument, main -> outer -> fp_middle -> fp_leaf, where gdb stops at fp_leaf's `ret`: after its
 * `pop %rbp`, when the CFI still says rbp is saved at CFA-16 (GCC emits no .cfi_restore there), a
 * slot below the stack pointer and so outside a stack copied from the sp (perf's, the eBPF
 * sampler's); fp_middle's CFA is rbp-based. */
#define FP __attribute__((noinline, optimize("no-omit-frame-pointer")))
__attribute__((noinline)) int leaf_fn(volatile int* p) { return *p * 7 + 3; }
__attribute__((noinline)) int middle(int x) {
  volatile int v = x;
  return leaf_fn(&v) + 1;
}
FP int fp_leaf(volatile int* p) { return leaf_fn(p) + 5; } /* a call: GCC keeps the frame */
FP int fp_middle(int x) {
  volatile int v = x;
  return fp_leaf(&v) + 1;
}
__attribute__((noinline)) int outer(int x, int fp) {
  volatile int buf[64];
  buf[x & 63] = fp ? fp_middle(x + 1) : middle(x + 1);
  return buf[x & 63] + 2;
}
int main(int argc, char** argv) {
  (void)argv;
  return outer(argc, argc > 1) & 0x7f;
}
