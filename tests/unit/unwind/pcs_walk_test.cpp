// SPDX-License-Identifier: Apache-2.0
// The pcs-only walk (sprov_unwinder_unwind_into without frame records) restores the callee-saved
// registers its common frames saved before a frame that needs them: a CFA on rbx after a callee
// that saved and clobbered rbx.
#include <catch2/catch.hpp>

#include <execinfo.h>

#include <cstdint>
#include <cstring>

#include "stackprov/fast.h"
#include "stackprov/stackprov.h"

#if defined(__x86_64__)

namespace {
sprov_context* g_pw_ctx = nullptr;
sprov_snapshot* g_pw_snap = nullptr;
void* g_pw_bt[64];
int g_pw_bt_n = 0;
}  // namespace

extern "C" __attribute__((noinline, used)) void pw_capture() {
  g_pw_bt_n = backtrace(g_pw_bt, 64);
  REQUIRE(sprov_snapshot_capture_self(g_pw_ctx, nullptr, &g_pw_snap) == 0);
  __asm__ volatile("" ::: "memory");
}

// pw_outer's CFA is rbx + 16 while it calls pw_mid (a rule neither fast loop takes: the walk's
// ladder applies it with the rbx that pw_mid saved). pw_mid saves rbx, clobbers it and calls the
// capture: its frame is a common one whose rule restores rbx.
extern "C" void pw_outer();
extern "C" void pw_mid();
__asm__(
    ".text\n"
    ".globl pw_outer\n"
    ".type pw_outer, @function\n"
    "pw_outer:\n"
    ".cfi_startproc\n"
    "push %rbx\n"
    ".cfi_adjust_cfa_offset 8\n"
    ".cfi_offset %rbx, -16\n"
    "mov %rsp, %rbx\n"
    ".cfi_def_cfa %rbx, 16\n"
    "call pw_mid\n"
    "mov %rbx, %rsp\n"
    ".cfi_def_cfa %rsp, 16\n"
    "pop %rbx\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_restore %rbx\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size pw_outer, .-pw_outer\n"
    ".globl pw_mid\n"
    ".type pw_mid, @function\n"
    "pw_mid:\n"
    ".cfi_startproc\n"
    "push %rbx\n"
    ".cfi_adjust_cfa_offset 8\n"
    ".cfi_offset %rbx, -16\n"
    "mov $0x5a5a5a5a5a5a5a5a, %rbx\n"
    "call pw_capture\n"
    "pop %rbx\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_restore %rbx\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size pw_mid, .-pw_mid\n");

extern "C" __attribute__((noinline, used)) void pw_driver() {
  pw_outer();
  __asm__ volatile("" ::: "memory");
}

TEST_CASE("the pcs-only walk restores the saved registers a later frame's CFA needs", "[unwind]") {
  REQUIRE(sprov_context_new(nullptr, &g_pw_ctx) == 0);
  pw_driver();
  REQUIRE(g_pw_snap != nullptr);
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_pw_ctx, nullptr, &uw) == 0);
  uint64_t pcs[128];
  for (int round = 0; round < 2; round++) {  // the second walk from the rule cache (pcs_run's frames)
    struct sprov_unwind_buf b;
    std::memset(&b, 0, sizeof b);
    b.sz = sizeof b;
    b.pcs = pcs;
    b.capacity = 128;
    REQUIRE(sprov_unwinder_unwind_into(uw, g_pw_snap, &b) == 0);
    CHECK(b.stop_reason == SPROV_STOP_END_OF_STACK);
    // backtrace() (libgcc's unwinder) in pw_capture: its first frames are its own (and, under a
    // sanitizer, its interceptor's), ours the capture's; from the return address in pw_mid on,
    // the same return addresses.
    const auto in = [](uint64_t pc, const void* fn, uint64_t len) {
      return pc > reinterpret_cast<uint64_t>(fn) && pc <= reinterpret_cast<uint64_t>(fn) + len;
    };
    REQUIRE(g_pw_bt_n >= 5);
    int bt_at = 0;
    while (bt_at < g_pw_bt_n && !in(reinterpret_cast<uint64_t>(g_pw_bt[bt_at]), reinterpret_cast<const void*>(&pw_mid), 24))
      bt_at++;
    REQUIRE(bt_at < g_pw_bt_n);
    uint32_t at = 0;
    while (at < b.count && pcs[at] != reinterpret_cast<uint64_t>(g_pw_bt[bt_at])) at++;
    REQUIRE(at < b.count);
    CHECK(b.count - at == static_cast<uint32_t>(g_pw_bt_n - bt_at));
    for (int i = bt_at; i < g_pw_bt_n && at + static_cast<uint32_t>(i - bt_at) < b.count; i++)
      CHECK(pcs[at + static_cast<uint32_t>(i - bt_at)] == reinterpret_cast<uint64_t>(g_pw_bt[i]));
    // pw_mid, pw_outer (past the frame whose CFA is rbx + 16), pw_driver.
    REQUIRE(at + 2 < b.count);
    CHECK(in(pcs[at], reinterpret_cast<const void*>(&pw_mid), 24));
    CHECK(in(pcs[at + 1], reinterpret_cast<const void*>(&pw_outer), 24));
    CHECK(in(pcs[at + 2], reinterpret_cast<const void*>(&pw_driver), 64));
  }
  sprov_unwinder_free(uw);
  sprov_snapshot_free(g_pw_snap);
  sprov_context_free(g_pw_ctx);
}

#endif
