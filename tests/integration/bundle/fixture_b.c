// SPDX-License-Identifier: Apache-2.0
// Bundle fixture (C, unit 2): a second compilation unit with its own inlined helper.
static inline int twist(int a, int b) {
  int r = a ^ (b << 3);
  if (r & 1) r = r * 7 + b;
  return r;
}

int mix(int a, int b) { return twist(a, b) + twist(b, a); }
