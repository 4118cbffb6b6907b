// SPDX-License-Identifier: Apache-2.0
// Hostile async stack records (doc/async-stacks.md): cycles, unreadable roots and frames the walk never reached stay bounded and add nothing false.
#include <catch2/catch.hpp>

#if defined(__x86_64__)
#include <cstdint>
#include <cstring>
#include <vector>

#include "stackprov/stackprov.h"

namespace {

thread_local sprov_async_root* t_root = nullptr;

struct AsyncWalk {
  std::vector<uint64_t> pcs;
  std::vector<uint32_t> flags;
  size_t awaiters = 0;
};

AsyncWalk async_unwind(sprov_context* ctx, sprov_snapshot* snap, uint32_t max_frames) {
  sprov_unwinder_opts o;
  std::memset(&o, 0, sizeof o);
  o.sz = sizeof o;
  o.max_frames = max_frames;
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, &o, &uw) == 0);
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &st) == 0);
  AsyncWalk w;
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    sprov_frame fr;
    std::memset(&fr, 0, sizeof fr);
    fr.sz = sizeof fr;
    REQUIRE(sprov_stack_frame(st, i, &fr) == 0);
    w.pcs.push_back(fr.pc);
    w.flags.push_back(fr.flags);
    if (fr.flags & SPROV_FRAME_ASYNC_AWAITER) {
      w.awaiters++;
      REQUIRE(fr.method == SPROV_METHOD_ASYNC_BOUNDARY);
      REQUIRE(fr.domain == SPROV_DOMAIN_ASYNC);
    }
  }
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_snapshot_free(snap);
  return w;
}

/// Captures with `root` as the thread's current root, its stack_frame_ptr this function's frame.
__attribute__((noinline)) sprov_snapshot* capture_with(sprov_context* ctx, sprov_async_root* root, bool own_frame) {
  if (root != nullptr && own_frame) root->stack_frame_ptr = __builtin_frame_address(0);
  t_root = root;
  sprov_snapshot* snap = nullptr;
  REQUIRE(sprov_snapshot_capture_self(ctx, nullptr, &snap) == 0);
  t_root = nullptr;
  asm volatile("" ::: "memory");
  return snap;
}

}  // namespace

TEST_CASE("async stack records: cycles are bounded, bad records add no frames", "[unwind][async]") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  REQUIRE(sprov_async_set_thread_root_slot(&t_root) == 0);
  const AsyncWalk plain = async_unwind(ctx, capture_with(ctx, nullptr, false), 256);
  REQUIRE(plain.awaiters == 0);
  REQUIRE(plain.pcs.size() >= 3);
  const uint64_t ra = plain.pcs[1];  // an address in this binary, as a record's return address

  SECTION("a frame whose parent is itself fills the walk up to max_frames, no further") {
    static sprov_async_frame f;
    f.parent = &f;
    f.return_address = reinterpret_cast<void*>(ra);
    static sprov_async_root r;
    r.top_frame = &f;
    const AsyncWalk w = async_unwind(ctx, capture_with(ctx, &r, true), 64);
    REQUIRE(w.pcs.size() == 64);
    REQUIRE(w.awaiters > 0);
    REQUIRE(w.awaiters < 64);
  }
  SECTION("a root whose next_root is itself is read at most 16 times") {
    static sprov_async_frame f;
    f.parent = nullptr;
    f.return_address = reinterpret_cast<void*>(ra);
    static sprov_async_root r;
    r.top_frame = &f;
    r.next_root = &r;
    const AsyncWalk w = async_unwind(ctx, capture_with(ctx, &r, true), 256);
    // The first splice takes the frame that installed the root; the next ones find no later frame.
    REQUIRE(w.awaiters == 1);
  }
  SECTION("an unreadable root, an unreadable frame, a stack_frame_ptr no frame holds: no awaiters") {
    const AsyncWalk a = async_unwind(ctx, capture_with(ctx, reinterpret_cast<sprov_async_root*>(uintptr_t{0x10}), false), 256);
    REQUIRE(a.awaiters == 0);
    static sprov_async_root r;
    r.top_frame = reinterpret_cast<sprov_async_frame*>(uintptr_t{0x18});
    r.next_root = nullptr;
    const AsyncWalk b = async_unwind(ctx, capture_with(ctx, &r, true), 256);
    REQUIRE(b.awaiters == 0);
    static sprov_async_frame f;
    f.parent = nullptr;
    f.return_address = reinterpret_cast<void*>(ra);
    r.top_frame = &f;
    r.stack_frame_ptr = reinterpret_cast<void*>(uintptr_t{0x1000});
    const AsyncWalk c = async_unwind(ctx, capture_with(ctx, &r, false), 256);
    REQUIRE(c.awaiters == 0);
    REQUIRE(c.pcs.size() == plain.pcs.size());
  }
  sprov_async_set_thread_root_slot(nullptr);
  sprov_context_free(ctx);
}
#endif
