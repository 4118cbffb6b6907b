/* SPDX-License-Identifier: Apache-2.0 */
/* A library the SIGPROF test dlopens and dlcloses in a loop while samples are taken. */
#include <stdint.h>

__attribute__((noinline)) static uint64_t mix(uint64_t x) {
  for (int i = 0; i < 64; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

__attribute__((visibility("default"))) uint64_t fast_dl_work(uint64_t rounds) {
  uint64_t x = rounds;
  for (uint64_t i = 0; i < rounds; i++) x ^= mix(x + i);
  return x;
}
