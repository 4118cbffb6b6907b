/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper (C and C++), x86_64: a JIT-style function without CFI, written into executable memory
 * the test mapped. Used by tests/unit/unwind/jit_into_test.cpp and tests/integration/fast/fast_sigjit.c
 * (tests/integration/jit/fixture_jit.c, compiled alone by its test, has its own copy). */
#ifndef STACKPROV_TESTS_JIT_EMIT_H
#define STACKPROV_TESTS_JIT_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* push rbp; mov rbp,rsp; movabs rax,TARGET; call rax; nop; pop rbp; ret: a frame-pointer function
 * that calls TARGET; its call returns to offset 16. Writes 20 bytes at P and returns that length. */
static inline size_t jit_emit_fp_caller(uint8_t* p, const void* target) {
  size_t n = 0;
  uint64_t t = (uint64_t)(uintptr_t)target;
  p[n++] = 0x55;
  p[n++] = 0x48, p[n++] = 0x89, p[n++] = 0xe5;
  p[n++] = 0x48, p[n++] = 0xb8;
  memcpy(p + n, &t, 8);
  n += 8;
  p[n++] = 0xff, p[n++] = 0xd0;
  p[n++] = 0x90;
  p[n++] = 0x5d;
  p[n++] = 0xc3;
  return n;
}

#endif
