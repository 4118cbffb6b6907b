/* SPDX-License-Identifier: Apache-2.0 */
/* integration_raw_state_elf fixture: main -> outer -> middle -> leaf_fn, where gdb stops. */
__attribute__((noinline)) int leaf_fn(volatile int* p) { return *p * 7 + 3; }
__attribute__((noinline)) int middle(int x) {
  volatile int v = x;
  return leaf_fn(&v) + 1;
}
__attribute__((noinline)) int outer(int x) {
  volatile int buf[64];
  buf[x & 63] = middle(x + 1);
  return buf[x & 63] + 2;
}
int main(int argc, char** argv) {
  (void)argv;
  return outer(argc) & 0x7f;
}
