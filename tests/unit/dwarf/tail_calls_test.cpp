// SPDX-License-Identifier: Apache-2.0
// gdb's tail-call chain search (dwarf/tail_calls.hpp) on made-up call graphs: the answers gdb's
// call_site_find_chain_1 / chain_candidate / func_verify_no_selftailcall give (gdb/dwarf2/loc.c).
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "dwarf/tail_calls.hpp"

using namespace stackprov::dwarf;

namespace {

/// Functions at 0x1000 * k (each 0x1000 long); a call site is (return pc, target function).
struct Graph {
  std::map<uint64_t, CallSiteInfo> sites;                  // by return pc
  std::map<uint64_t, std::vector<uint64_t>> tails;         // function entry -> its tail-call sites
  std::map<uint64_t, bool> has_dwarf;                      // functions with a DWARF subprogram

  void function(uint64_t entry) { has_dwarf[entry] = true; tails[entry]; }
  /// A call (tail or not) in the function at `from`, returning to `ret`, to `to` (0: unknown target).
  void call(uint64_t from, uint64_t ret, uint64_t to, bool tail) {
    CallSiteInfo s;
    s.return_pc = ret;
    s.tail_call = tail;
    s.target = to ? CallSiteInfo::Target::kAddress : CallSiteInfo::Target::kUnknown;
    s.target_addr = to;
    sites[ret] = s;
    if (tail) tails[from].push_back(ret);
  }
  TailCallQueries queries() {
    TailCallQueries q;
    q.call_site_at = [this](uint64_t ret, CallSiteInfo* out) {
      auto it = sites.find(ret);
      if (it == sites.end()) return false;
      *out = it->second;
      return true;
    };
    q.function_entry = [this](uint64_t pc, uint64_t* entry) {
      const uint64_t e = pc & ~uint64_t{0xfff};
      if (!has_dwarf.count(e)) return false;
      *entry = e;
      return true;
    };
    q.tail_calls_of = [this](uint64_t entry, std::vector<CallSiteInfo>* out) {
      out->clear();
      if (!has_dwarf.count(entry)) return false;
      for (uint64_t r : tails[entry]) out->push_back(sites[r]);
      return true;
    };
    q.target_address = [](const CallSiteInfo& s, uint64_t* out) {
      *out = s.target_addr;
      return s.target == CallSiteInfo::Target::kAddress;
    };
    return q;
  }
};

constexpr uint64_t C = 0x1000, A = 0x2000, B = 0x3000, D = 0x4000, M = 0x5000, L = 0x6000;

}  // namespace

TEST_CASE("tail calls: a single tail call is one frame", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, L}) g.function(f);
  g.call(C, C + 0x10, A, false);  // the caller's call site
  g.call(A, A + 0x20, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8) == std::vector<uint64_t>{A + 0x20});
}

TEST_CASE("tail calls: a chain is innermost first", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, B, L}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, B, true);
  g.call(B, B + 0x30, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8) == std::vector<uint64_t>{B + 0x30, A + 0x20});
}

TEST_CASE("tail calls: a direct call gives none", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, L}) g.function(f);
  g.call(C, C + 0x10, L, false);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
}

TEST_CASE("tail calls: two chains sharing nothing give none", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, B, D, L}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, B, true);
  g.call(A, A + 0x28, D, true);
  g.call(B, B + 0x30, L, true);
  g.call(D, D + 0x40, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
}

TEST_CASE("tail calls: chains sharing their end keep the callees", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, B, D, M, L}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, B, true);
  g.call(A, A + 0x28, D, true);
  g.call(B, B + 0x30, M, true);
  g.call(D, D + 0x40, M, true);
  g.call(M, M + 0x50, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8) == std::vector<uint64_t>{M + 0x50});
}

TEST_CASE("tail calls: chains sharing their start keep the callers", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, B, D, M, L}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, M, true);
  g.call(M, M + 0x50, B, true);
  g.call(M, M + 0x58, D, true);
  g.call(B, B + 0x30, L, true);
  g.call(D, D + 0x40, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8) == std::vector<uint64_t>{A + 0x20});
}

TEST_CASE("tail calls: a callee that can reach itself by tail calls gives none", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, L, M}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, L, true);
  g.call(L, L + 0x60, M, true);
  g.call(M, M + 0x50, L, true);
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
}

TEST_CASE("tail calls: a step that cannot be resolved gives none", "[dwarf][tailcall]") {
  SECTION("an unknown target on the way") {
    Graph g;
    for (uint64_t f : {C, A, B, L}) g.function(f);
    g.call(C, C + 0x10, A, false);
    g.call(A, A + 0x20, L, true);
    g.call(A, A + 0x28, 0, true);  // e.g. DW_AT_call_target: only a running frame knows it
    CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
  }
  SECTION("a target without DWARF") {
    Graph g;
    for (uint64_t f : {C, A, L}) g.function(f);
    g.call(C, C + 0x10, A, false);
    g.call(A, A + 0x20, L, true);
    g.call(A, A + 0x28, B, true);  // B has no subprogram
    CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
  }
  SECTION("no call site at the caller's return address") {
    Graph g;
    for (uint64_t f : {C, A, L}) g.function(f);
    g.call(A, A + 0x20, L, true);
    CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8).empty());
  }
}

TEST_CASE("tail calls: a loop of tail calls and a large graph end", "[dwarf][tailcall]") {
  Graph g;
  for (uint64_t f : {C, A, B, L}) g.function(f);
  g.call(C, C + 0x10, A, false);
  g.call(A, A + 0x20, B, true);
  g.call(B, B + 0x30, L, true);
  g.call(B, B + 0x38, A, true);  // B -> A -> B ... never enters a call site twice
  CHECK(tail_call_frames(g.queries(), C + 0x10, L + 0x8) == std::vector<uint64_t>{B + 0x30, A + 0x20});

  // 40 layers of two functions each calling both of the next layer: 2^40 chains, cut by the bound.
  Graph big;
  big.function(C);
  big.function(L);
  const uint64_t base = 0x100000;
  for (uint64_t layer = 0; layer < 40; layer++)
    for (uint64_t k = 0; k < 2; k++) big.function(base + (layer * 2 + k) * 0x1000);
  big.call(C, C + 0x10, base, false);
  for (uint64_t layer = 0; layer < 40; layer++)
    for (uint64_t k = 0; k < 2; k++) {
      const uint64_t f = base + (layer * 2 + k) * 0x1000;
      if (layer + 1 == 40) {
        big.call(f, f + 0x10, L, true);
      } else {
        big.call(f, f + 0x10, base + ((layer + 1) * 2) * 0x1000, true);
        big.call(f, f + 0x18, base + ((layer + 1) * 2 + 1) * 0x1000, true);
      }
    }
  TailCallLimits lim;
  lim.max_steps = 20000;
  CHECK(tail_call_frames(big.queries(), C + 0x10, L + 0x8, lim).empty());
}
