/* SPDX-License-Identifier: Apache-2.0 */
/* The fast-path tests' checks: each failed CHECK prints what differs and counts; the test exits 1 when any failed. */
#ifndef STACKPROV_TESTS_FAST_CHECK_H
#define STACKPROV_TESTS_FAST_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
      failures++;                                                     \
    }                                                                 \
  } while (0)

#endif
