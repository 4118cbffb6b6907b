// SPDX-License-Identifier: Apache-2.0
// `symbolize --verbose` / `stack --verbose` fixture: a function with DWARF, one from a unit built without -g
// (why_nodebug.c), and with "wait" an idle main a live stack can be taken of.
#include <string.h>
#include <unistd.h>

int why_nodebug(int x);

#ifndef WHY_VARIANT
#define WHY_VARIANT 1
#endif

__attribute__((noinline)) int why_leaf(int x) {
  // WHY_VARIANT changes the code, so that a second build has another build-id.
  return x * 3 + WHY_VARIANT;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "wait") == 0) {
    for (;;) pause();  // until the test kills it
  }
  return why_leaf(argc) + why_nodebug(argc) > 0 ? 0 : 1;
}
