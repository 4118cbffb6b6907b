// SPDX-License-Identifier: Apache-2.0
// An unwinder fed snapshots of interleaved processes keeps their module tables (a small LRU) instead of rebuilding them.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "stackprov/stackprov.h"

namespace {

uint64_t module_lookups(sprov_context* ctx) {
  struct sprov_context_stats st;
  std::memset(&st, 0, sizeof st);
  st.sz = sizeof st;
  REQUIRE(sprov_context_stats(ctx, &st) == 0);
  return st.module_cache_hits + st.module_cache_misses;
}

/// A snapshot with this thread's registers and module list minus module `drop`: another "process".
sprov_snapshot* variant(const sprov_snapshot* base, size_t drop) {
  sprov_snapshot* out = nullptr;
  REQUIRE(sprov_snapshot_new(sprov_snapshot_arch(base), SPROV_ENDIAN_LITTLE, &out) == 0);
  for (uint32_t r = 0; r < 64; r++) {
    uint64_t v;
    if (sprov_snapshot_reg(base, r, &v) == 0) REQUIRE(sprov_snapshot_set_reg(out, r, v) == 0);
  }
  for (size_t i = 0; i < sprov_snapshot_module_count(base); i++) {
    if (i == drop) continue;
    struct sprov_module_info m;
    std::memset(&m, 0, sizeof m);
    m.sz = sizeof m;
    REQUIRE(sprov_snapshot_module(base, i, &m) == 0);
    REQUIRE(sprov_snapshot_add_module(out, &m) == 0);
  }
  return out;
}

}  // namespace

TEST_CASE("interleaved module lists reuse their tables", "[unwind][lru]") {
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_snapshot* base = nullptr;
  REQUIRE(sprov_snapshot_capture_self(ctx, nullptr, &base) == 0);
  const size_t n = sprov_snapshot_module_count(base);
  REQUIRE(n >= 4);
  // Four distinct module lists: the unwinder keeps the current table and three recent ones.
  std::vector<sprov_snapshot*> snaps;
  for (size_t d = 0; d < 4; d++) snaps.push_back(variant(base, n - 1 - d));
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  auto unwind = [&](sprov_snapshot* s) {
    sprov_stack* st = nullptr;
    REQUIRE(sprov_unwinder_unwind(uw, s, &st) == 0);
    sprov_stack_free(st);
  };
  for (sprov_snapshot* s : snaps) unwind(s);
  // Each first table resolved its modules through the context's cache...
  const uint64_t after_first = module_lookups(ctx);
  REQUIRE(after_first > 0);
  // ...and switching between the four lists afterwards resolves none again.
  for (int round = 0; round < 3; round++)
    for (size_t i : {0, 2, 1, 3, 3, 0}) unwind(snaps[i]);
  CHECK(module_lookups(ctx) == after_first);
  // A fifth list evicts the least recently used one, which is then rebuilt.
  sprov_snapshot* fifth = variant(base, 0);
  unwind(fifth);
  const uint64_t after_fifth = module_lookups(ctx);
  CHECK(after_fifth > after_first);
  unwind(snaps[1]);  // still held: the last round used 1 after 2
  CHECK(module_lookups(ctx) == after_fifth);
  unwind(snaps[2]);  // the least recently used before the fifth came: evicted, rebuilt
  CHECK(module_lookups(ctx) > after_fifth);
  sprov_snapshot_free(fifth);
  for (sprov_snapshot* s : snaps) sprov_snapshot_free(s);
  sprov_snapshot_free(base);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
}
