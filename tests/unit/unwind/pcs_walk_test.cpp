// SPDX-License-Identifier: Apache-2.0
// The pcs-only walk (sprov_unwinder_unwind_into without frame records) restores the callee-saved
// registers its common frames saved before a frame that needs them: a CFA on rbx after a callee
// that saved and clobbered rbx. Its rules by absolute pc (the rule cache's quick table) answer only
// for the module table they were found in.
#include <catch2/catch.hpp>

#include <execinfo.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "capi/internal.hpp"
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
// ladder applies it with the rbx that pw_mid saved). pw_mid saves rbx, clobbers it and calls pw_mid2,
// which saves that value, clobbers rbx again and calls the capture: two common frames whose rules
// restore rbx, of which the outer one's (pw_mid's, the later step's) is the value pw_outer needs.
extern "C" void pw_outer();
extern "C" void pw_mid();
extern "C" void pw_mid2();
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
    "call pw_mid2\n"
    "pop %rbx\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_restore %rbx\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size pw_mid, .-pw_mid\n"
    ".globl pw_mid2\n"
    ".type pw_mid2, @function\n"
    "pw_mid2:\n"
    ".cfi_startproc\n"
    "push %rbx\n"
    ".cfi_adjust_cfa_offset 8\n"
    ".cfi_offset %rbx, -16\n"
    "mov $0x6b6b6b6b6b6b6b6b, %rbx\n"
    "call pw_capture\n"
    "pop %rbx\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_restore %rbx\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size pw_mid2, .-pw_mid2\n");

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
  // The first walk fills the rule cache, the second the quick table (the steps so far replayed for
  // their saves before each entry is filled), the third takes every common frame from the quick
  // table: its steps, pw_mid2's and pw_mid's saves of rbx among them, replayed in order before
  // pw_outer's frame (pw_mid's, the later, is the value kept).
  for (int round = 0; round < 3; round++) {
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

namespace {

/// The pcs of a pcs-only walk of `snap` by `uw` (Unwinder::walk_pcs, the quick table).
std::vector<uint64_t> pcs_only(sprov_unwinder* uw, const sprov_snapshot* snap, int32_t* stop) {
  std::vector<uint64_t> pcs(256);
  struct sprov_unwind_buf b;
  std::memset(&b, 0, sizeof b);
  b.sz = sizeof b;
  b.pcs = pcs.data();
  b.capacity = static_cast<uint32_t>(pcs.size());
  REQUIRE(sprov_unwinder_unwind_into(uw, snap, &b) == 0);
  pcs.resize(b.count);
  *stop = b.stop_reason;
  return pcs;
}

/// The pcs of `snap`'s walk with frame records (Unwinder::walk: no quick table) by a new unwinder.
std::vector<uint64_t> with_frames(sprov_context* ctx, const sprov_snapshot* snap, int32_t* stop) {
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  std::vector<sprov_raw_frame> frames(256);
  struct sprov_unwind_buf b;
  std::memset(&b, 0, sizeof b);
  b.sz = sizeof b;
  b.frames = frames.data();
  b.frame_sz = sizeof(sprov_raw_frame);
  b.capacity = static_cast<uint32_t>(frames.size());
  REQUIRE(sprov_unwinder_unwind_into(uw, snap, &b) == 0);
  std::vector<uint64_t> pcs;
  for (uint32_t i = 0; i < b.count; i++) pcs.push_back(frames[i].pc);
  *stop = b.stop_reason;
  sprov_unwinder_free(uw);
  return pcs;
}

}  // namespace

TEST_CASE("the pcs-only walk's rules by absolute pc answer only for their own module table", "[unwind]") {
  REQUIRE(sprov_context_new(nullptr, &g_pw_ctx) == 0);
  pw_driver();
  sprov_snapshot* s = g_pw_snap;
  REQUIRE(s != nullptr);
  // The same registers and stack without the module of this test's code: its pcs are then in no
  // module, whatever an unwinder learnt about them from `s`.
  sprov_snapshot* t = nullptr;
  REQUIRE(sprov_snapshot_new(sprov_snapshot_arch(s), SPROV_ENDIAN_LITTLE, &t) == 0);
  for (uint32_t r = 0; r < 17; r++) {
    uint64_t v = 0;
    if (sprov_snapshot_reg(s, r, &v) == 0) REQUIRE(sprov_snapshot_set_reg(t, r, v) == 0);
  }
  uint64_t sp = 0;
  REQUIRE(sprov_snapshot_reg(s, 7, &sp) == 0);
  size_t lo = 8, hi = size_t{1} << 20;  // the longest readable run from sp: the captured stack
  std::vector<uint8_t> stack(hi);
  REQUIRE(sprov_snapshot_read_memory(s, sp, stack.data(), lo) == 0);
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (sprov_snapshot_read_memory(s, sp, stack.data(), mid) == 0 ? lo : hi) = mid;
  }
  REQUIRE(sprov_snapshot_read_memory(s, sp, stack.data(), lo) == 0);
  REQUIRE(sprov_snapshot_add_memory(t, sp, stack.data(), lo) == 0);
  const auto mine = reinterpret_cast<uint64_t>(&pw_mid);
  size_t dropped = 0;
  for (size_t i = 0; i < sprov_snapshot_module_count(s); i++) {
    struct sprov_module_info m;
    std::memset(&m, 0, sizeof m);
    m.sz = sizeof m;
    REQUIRE(sprov_snapshot_module(s, i, &m) == 0);
    if (mine >= m.start && mine < m.end) {
      dropped++;
      continue;
    }
    REQUIRE(sprov_snapshot_add_module(t, &m) == 0);
  }
  REQUIRE(dropped == 1);
  // Frame 0's pc is a return address, as in `s` (a capture at a call site; no C call sets it): the
  // first step is then the pcs-only walk's own.
  t->snap.flags |= stackprov::memory::Snapshot::kFlagPcIsReturnAddress;

  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_pw_ctx, nullptr, &uw) == 0);
  int32_t stop_s = 0, stop_s2 = 0, stop_t = 0, stop_t_frames = 0, stop_s3 = 0;
  pcs_only(uw, s, &stop_s);  // the first walk fills the rule cache, the second the quick table
  const std::vector<uint64_t> walk_s = pcs_only(uw, s, &stop_s2);
  const std::vector<uint64_t> walk_t = pcs_only(uw, t, &stop_t);
  const std::vector<uint64_t> oracle_t = with_frames(g_pw_ctx, t, &stop_t_frames);
  // The walk of `s` goes through this test's frames, and `t`'s walk is another one.
  REQUIRE(walk_s.size() > 4);
  CHECK(walk_s != walk_t);
  // `t` walked by the same unwinder right after `s` is what a fresh unwinder's frame walk gives.
  CHECK(walk_t == oracle_t);
  CHECK(stop_t == stop_t_frames);
  // And `s` again (its table rebuilt, a new stamp): the walk it had.
  CHECK(pcs_only(uw, s, &stop_s3) == walk_s);
  CHECK(stop_s3 == stop_s2);
  int32_t stop_s_frames = 0;
  CHECK(with_frames(g_pw_ctx, s, &stop_s_frames) == walk_s);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(t);
  sprov_snapshot_free(s);
  g_pw_snap = nullptr;
  sprov_context_free(g_pw_ctx);
}

#endif
