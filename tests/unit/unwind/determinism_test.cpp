// SPDX-License-Identifier: Apache-2.0
// Unwinding is a pure function of the snapshot: order, interleaving and threads cannot change it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "object/object_image.hpp"
#include "memory/snapshot.hpp"
#include "stackprov/stackprov.h"
#include "unwind/walk.hpp"

using namespace stackprov;

namespace {

#if defined(__clang__)  // GCC-only attributes: clang ignored them with a warning (the sanitizer build)
#define DET_FN __attribute__((noinline))
#else
#define DET_FN __attribute__((noinline, noipa, optimize("omit-frame-pointer")))
#endif
// Each buffer stays one stack object of its declared size: its address escapes into an empty asm.
// Without it clang (make test-sanitize's build) keeps only the two bytes used, and det_f1, det_f2
// and det_f3 get frames of one size (192 bytes each under ASan), so their CFA rules no longer differ.
#define DET_KEEP(buf) __asm__ volatile("" : : "r"(buf) : "memory")

sprov_context* g_ctx = nullptr;
sprov_snapshot* g_snap = nullptr;

// A chain of functions with different frame sizes, so their CFA rules differ.
DET_FN void det_leaf() {
  volatile char buf[40];
  buf[0] = 1;
  DET_KEEP(buf);
  REQUIRE(sprov_snapshot_capture_self(g_ctx, nullptr, &g_snap) == 0);
  buf[1] = buf[0];
}
DET_FN void det_f1() {
  volatile char buf[200];
  buf[0] = 1;
  DET_KEEP(buf);
  det_leaf();
  buf[1] = buf[0];
}
DET_FN void det_f2() {
  volatile char buf[1000];
  buf[0] = 1;
  DET_KEEP(buf);
  det_f1();
  buf[1] = buf[0];
}
DET_FN void det_f3() {
  volatile char buf[3000];
  buf[0] = 1;
  DET_KEEP(buf);
  det_f2();
  buf[1] = buf[0];
}

struct Walk {
  std::vector<sprov_frame> frames;  // module_path/build_id/module_id pointers cleared: compared by value
  int stop = 0;
  bool operator==(const Walk& o) const {
    if (stop != o.stop || frames.size() != o.frames.size()) return false;
    for (size_t i = 0; i < frames.size(); i++)
      if (std::memcmp(&frames[i], &o.frames[i], sizeof(sprov_frame)) != 0) return false;
    return true;
  }
};

Walk walk_with(sprov_unwinder* uw, const sprov_snapshot* snap) {
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &st) == 0);
  Walk w;
  w.stop = sprov_stack_stop_reason(st);
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    sprov_frame f;
    std::memset(&f, 0, sizeof(f));
    f.sz = sizeof(f);
    REQUIRE(sprov_stack_frame(st, i, &f) == 0);
    f.module_path = nullptr;
    f.build_id = nullptr;
    f.module_id = nullptr;
    w.frames.push_back(f);
  }
  sprov_stack_free(st);
  return w;
}

Walk unwind_fresh(const sprov_snapshot* snap) {
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_ctx, nullptr, &uw) == 0);
  Walk w = walk_with(uw, snap);
  sprov_unwinder_free(uw);
  return w;
}

sprov_snapshot* to_handle(const memory::Snapshot& s) {
  std::vector<uint8_t> bytes = memory::serialize(s);
  sprov_snapshot* h = nullptr;
  REQUIRE(sprov_snapshot_deserialize(bytes.data(), bytes.size(), &h) == 0);
  return h;
}

memory::Snapshot from_handle(const sprov_snapshot* h) {
  void* bytes = nullptr;
  size_t len = 0;
  REQUIRE(sprov_snapshot_serialize(h, &bytes, &len) == 0);
  auto r = memory::deserialize(static_cast<const uint8_t*>(bytes), len);
  sprov_free(bytes);
  REQUIRE(r.ok());
  return r.value();
}

std::string describe(const Walk& w) {
  std::string s = "stop " + std::to_string(w.stop) + ":";
  char buf[96];
  for (const auto& f : w.frames) {
    std::snprintf(buf, sizeof(buf), " [%llx sp %llx cfa %llx m%d]", (unsigned long long)f.pc,
                  (unsigned long long)f.sp, (unsigned long long)f.cfa, f.method);
    s += buf;
  }
  return s;
}

}  // namespace

TEST_CASE("a module at another load address never reuses another address space's rules", "[unwind]") {
  REQUIRE(sprov_context_new(nullptr, &g_ctx) == 0);
  det_f3();
  REQUIRE(g_snap != nullptr);
  const memory::Snapshot s1 = from_handle(g_snap);
  const Walk w1 = unwind_fresh(g_snap);
  INFO("S1 " << describe(w1));
  // Frames 0..3: det_leaf, det_f1, det_f2, det_f3 (return addresses in this executable).
  REQUIRE(w1.frames.size() > 4);
  const sprov_frame& f1 = w1.frames[1];
  const sprov_frame& f3 = w1.frames[3];
  REQUIRE(f1.module_index >= 0);
  REQUIRE(f1.module_index == f3.module_index);
  // The precondition that makes the test meaningful: the two frames' rules differ.
  REQUIRE(f1.cfa - f1.sp != f3.cfa - f3.sp);

  // S2: the same process state with this executable loaded `delta` higher, so that det_f1's
  // return address in S2 is, in absolute terms, det_f3's return address in S1: different code.
  const int64_t delta = static_cast<int64_t>(f3.pc - f1.pc);
  const std::string exe = s1.modules[static_cast<size_t>(f1.module_index)].path;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& m : s1.modules)
    if (m.path == exe) {
      lo = std::min(lo, m.start);
      hi = std::max(hi, m.end);
    }
  memory::Snapshot s2 = s1;
  s2.modules.clear();
  for (memory::SnapshotModule m : s1.modules) {
    if (m.path == exe) {
      m.start += delta;
      m.end += delta;
      m.load_bias += delta;
    }
    REQUIRE(s2.add_module(m).ok());
  }
  auto relocate = [&](uint64_t v) { return v >= lo && v < hi ? v + delta : v; };
  // Every stack word that points into the executable moves with it (native word size and
  // byte order: the snapshot is of this very process).
  for (auto& region : s2.memory)
    for (size_t off = 0; off + sizeof(uintptr_t) <= region.bytes.size(); off += sizeof(uintptr_t)) {
      uintptr_t v;
      std::memcpy(&v, region.bytes.data() + off, sizeof(v));
      v = static_cast<uintptr_t>(relocate(v));
      std::memcpy(region.bytes.data() + off, &v, sizeof(v));
    }
  for (int r = 0; r < memory::kSnapshotMaxRegs; r++)
    if (s2.has_reg(r)) s2.regs[r] = relocate(s2.regs[r]);
  sprov_snapshot* h1 = to_handle(s1);
  sprov_snapshot* h2 = to_handle(s2);

  // The independent answer for S2: S1's walk with this executable's pcs moved by delta.
  Walk want2 = w1;
  for (auto& f : want2.frames)
    if (f.pc >= lo && f.pc < hi) f.pc += delta;
  const Walk fresh1 = unwind_fresh(h1);
  const Walk fresh2 = unwind_fresh(h2);
  INFO("S2 fresh " << describe(fresh2));
  CHECK(fresh1 == w1);
  CHECK(fresh2 == want2);
  REQUIRE(fresh2.frames[1].pc == f3.pc);  // the collision really happens

  // One unwinder, interleaved in every order: byte-identical to the fresh walks.
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(g_ctx, nullptr, &uw) == 0);
  const sprov_snapshot* order[] = {h1, h2, h1, h2, h2, h1, h1, h2};
  for (const sprov_snapshot* h : order) {
    const Walk got = walk_with(uw, h);
    INFO("interleaved " << (h == h1 ? "S1 " : "S2 ") << describe(got));
    CHECK(got == (h == h1 ? fresh1 : fresh2));
  }
  sprov_unwinder_free(uw);
  // The other order from a fresh unwinder: S2 first, then S1.
  REQUIRE(sprov_unwinder_new(g_ctx, nullptr, &uw) == 0);
  CHECK(walk_with(uw, h2) == fresh2);
  CHECK(walk_with(uw, h1) == fresh1);
  sprov_unwinder_free(uw);

  sprov_snapshot_free(h1);
  sprov_snapshot_free(h2);
  sprov_snapshot_free(g_snap);
  g_snap = nullptr;
  sprov_context_free(g_ctx);
  g_ctx = nullptr;
}

TEST_CASE("one snapshot unwound from several threads at once gives one answer", "[unwind][threads]") {
  REQUIRE(sprov_context_new(nullptr, &g_ctx) == 0);
  det_f3();
  REQUIRE(g_snap != nullptr);
  // A deserialized handle: its module-list hash is computed lazily, by whichever thread is first.
  const memory::Snapshot s = from_handle(g_snap);
  sprov_snapshot* shared = to_handle(s);
  const Walk want = unwind_fresh(g_snap);
  constexpr int kThreads = 4;
  std::vector<Walk> got(kThreads * 8);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      sprov_unwinder* uw = nullptr;
      if (sprov_unwinder_new(g_ctx, nullptr, &uw) != 0) return;
      for (int i = 0; i < 8; i++) {
        sprov_stack* st = nullptr;
        if (sprov_unwinder_unwind(uw, shared, &st) != 0) continue;
        Walk& w = got[static_cast<size_t>(t * 8 + i)];
        w.stop = sprov_stack_stop_reason(st);
        for (size_t k = 0; k < sprov_stack_frame_count(st); k++) {
          sprov_frame f;
          std::memset(&f, 0, sizeof(f));
          f.sz = sizeof(f);
          sprov_stack_frame(st, k, &f);
          f.module_path = nullptr;
          f.build_id = nullptr;
          f.module_id = nullptr;
          w.frames.push_back(f);
        }
        sprov_stack_free(st);
      }
      sprov_unwinder_free(uw);
    });
  for (auto& th : threads) th.join();
  for (const Walk& w : got) {
    INFO("want " << describe(want) << "\ngot  " << describe(w));
    CHECK(w == want);
  }
  sprov_snapshot_free(shared);
  sprov_snapshot_free(g_snap);
  g_snap = nullptr;
  sprov_context_free(g_ctx);
  g_ctx = nullptr;
}

namespace {

/// The snapshot's modules loaded from their files (the vDSO and unreadable ones without unwind info).
unwind::ModuleTable load_table(const memory::Snapshot& s) {
  unwind::ModuleTable t;
  for (size_t i = 0; i < s.modules.size(); i++) {
    const memory::SnapshotModule& m = s.modules[i];
    std::shared_ptr<unwind::LoadedModule> mod;
    if (auto img = object::open(m.path); img.ok())
      if (auto lm = unwind::LoadedModule::load(img.value(), {}); lm.ok()) mod = lm.value();
    unwind::ModuleSlot slot{m.start, m.end, m.load_bias, mod.get(), static_cast<int32_t>(i)};
    t.add(slot, std::move(mod));
  }
  t.finish();
  return t;
}

bool same_frames(const unwind::WalkResult& a, const unwind::WalkResult& b) {
  if (a.stop != b.stop || a.frames.size() != b.frames.size()) return false;
  for (size_t i = 0; i < a.frames.size(); i++) {
    const unwind::Frame &x = a.frames[i], &y = b.frames[i];
    if (x.pc != y.pc || x.sp != y.sp || x.cfa != y.cfa || x.method != y.method || x.lookup_prev != y.lookup_prev ||
        x.module_index != y.module_index || x.flags != y.flags)
      return false;
  }
  return true;
}

}  // namespace

// Signal handlers walk with may_allocate false (sprov_unwinder_unwind_signal): no rows are
// compiled, misses run the CFA interpreter; the rule found must be the compiled one's, and cached.
TEST_CASE("a walk that may not allocate gives the compiled rows' frames and caches its misses", "[unwind]") {
  REQUIRE(sprov_context_new(nullptr, &g_ctx) == 0);
  det_f3();
  REQUIRE(g_snap != nullptr);
  const memory::Snapshot snap = from_handle(g_snap);
  sprov_snapshot_free(g_snap);
  g_snap = nullptr;
  sprov_context_free(g_ctx);
  g_ctx = nullptr;
  const unwind::ModuleTable table = load_table(snap);

  unwind::WalkOptions compiled;
  compiled.use_debug_frame = false;
  unwind::RuleCache compiled_cache;
  unwind::WalkResult want;
  unwind::walk_snapshot(snap, table, compiled_cache, compiled, &want);
  // det_leaf, det_f1, det_f2, det_f3, this test case and the test runner above it.
  REQUIRE(want.frames.size() >= 5);

  unwind::WalkOptions signal = compiled;
  signal.may_allocate = false;
  unwind::RuleCache cache;
  unwind::WalkResult first, second;
  unwind::walk_snapshot(snap, table, cache, signal, &first);
  CHECK(same_frames(first, want));
  const uint64_t misses = cache.misses(), hits = cache.hits();
  CHECK(misses > 0);
  // The second walk finds every rule the first one interpreted in the rule cache.
  unwind::walk_snapshot(snap, table, cache, signal, &second);
  CHECK(same_frames(second, want));
  const uint64_t extra = cache.misses() - misses;
#if defined(__x86_64__)
  CHECK(extra == 0);
#else
  // A row the compact rule cannot hold is interpreted again on every walk (mips32el's libc has
  // one on this chain under qemu: 14 misses, then 1); most must still come from the cache.
  CHECK(extra * 4 <= misses);
#endif
  CHECK(cache.hits() - hits + extra >= second.frames.size() - 1);
}
