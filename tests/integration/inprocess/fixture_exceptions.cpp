// SPDX-License-Identifier: Apache-2.0
// Fixture: C++ exception propagation; captures in a destructor run by the unwinder and in a catch block.
#include <cstdio>
#include <cstring>

#include "harness.h"

namespace {
bool g_capture_in_dtor = false;
bool g_capture_in_catch = false;
}  // namespace

struct Guard {
  ~Guard();
};

// Runs from exc_with_guard's landing pad while the exception propagates.
FIXTURE_FN Guard::~Guard() {
  if (g_capture_in_dtor) probe_capture();
  NO_TAIL_CALL();
}

extern "C" {

FIXTURE_FN void exc_thrower(int v) {
  throw v;
}

FIXTURE_FN void exc_with_guard(int v) {
  Guard g;
  exc_thrower(v);
  NO_TAIL_CALL();
}

FIXTURE_FN int exc_catcher(int v) {
  int r = 0;
  try {
    exc_with_guard(v);
  } catch (int got) {
    if (g_capture_in_catch) probe_capture();
    r = got;
  }
  NO_TAIL_CALL();
  return r;
}

}  // extern "C"

int main(int argc, char** argv) {
  const char* mode = harness_init(argc, argv);
  static const chain_elem kDtor[] = {{"probe_capture", 0}, {"Guard::~Guard", 0},
                                     {"exc_with_guard", 0}, {"exc_catcher", 0},
                                     {"main", 0},          {"...", 0}};
  static const chain_elem kCatch[] = {
      {"probe_capture", 0}, {"exc_catcher", 0}, {"main", 0}, {"...", 0}};
  if (std::strcmp(mode, "dtor") == 0) {
    g_capture_in_dtor = true;
    g_expect.chain = kDtor;
    g_expect.chain_len = sizeof(kDtor) / sizeof(kDtor[0]);
  } else if (std::strcmp(mode, "catch") == 0) {
    g_capture_in_catch = true;
    g_expect.chain = kCatch;
    g_expect.chain_len = sizeof(kCatch) / sizeof(kCatch[0]);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  g_expect.bt_complete = 1;
  if (exc_catcher(7) != 7) {
    std::printf("FAIL the exception was not caught\n");
    return 1;
  }
  return harness_finish(harness_check());
}
