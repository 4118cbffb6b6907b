// SPDX-License-Identifier: Apache-2.0
// x86_64: a return-address column with the "same value" rule ends the walk (it never repeats the pc).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "stackprov/stackprov.h"

#if defined(__x86_64__)

namespace {
sprov_context* g_sv_ctx = nullptr;
sprov_snapshot* g_sv_snap = nullptr;
}  // namespace

extern "C" __attribute__((noinline, used)) void sv_capture() {
  REQUIRE(sprov_snapshot_capture_self(g_sv_ctx, nullptr, &g_sv_snap) == 0);
  __asm__ volatile("" ::: "memory");
}

// sv_fn's CFI says the return address (DWARF column 16, rip) keeps its value: the caller's pc
// would be this very pc. The only correct reading is "no caller".
extern "C" void sv_fn();
__asm__(
    ".text\n"
    ".globl sv_fn\n"
    ".type sv_fn, @function\n"
    "sv_fn:\n"
    ".cfi_startproc\n"
    "sub $8, %rsp\n"
    ".cfi_adjust_cfa_offset 8\n"
    ".cfi_same_value 16\n"
    "call sv_capture\n"
    "add $8, %rsp\n"
    ".cfi_adjust_cfa_offset -8\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size sv_fn, .-sv_fn\n");

TEST_CASE("a same-value return address on x86_64 ends the walk", "[unwind]") {
  REQUIRE(sprov_context_new(nullptr, &g_sv_ctx) == 0);
  sv_fn();
  REQUIRE(g_sv_snap != nullptr);
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_sv_ctx, nullptr, &uw) == 0);
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, g_sv_snap, &st) == 0);
  const size_t n = sprov_stack_frame_count(st);
  sprov_frame f[2];
  for (size_t i = 0; i < 2 && i < n; i++) {
    std::memset(&f[i], 0, sizeof(f[i]));
    f[i].sz = sizeof(f[i]);
    REQUIRE(sprov_stack_frame(st, i, &f[i]) == 0);
  }
  // Frame 0: sv_capture; frame 1: sv_fn (the return address after its call); then the end.
  REQUIRE(n == 2);
  const auto fn = reinterpret_cast<uintptr_t>(&sv_fn);
  CHECK(f[1].pc > fn);
  CHECK(f[1].pc < fn + 32);
  CHECK(sprov_stack_stop_reason(st) == SPROV_STOP_END_OF_STACK);
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(g_sv_snap);
  sprov_context_free(g_sv_ctx);
}

#endif
