// SPDX-License-Identifier: Apache-2.0
// Tail-call frames from DWARF call-site information, by gdb's rules (gdb/dwarf2/loc.c, dwarf2/frame-tailcall.c).
#include "dwarf/tail_calls.hpp"

#include <algorithm>
#include <deque>
#include <unordered_set>

namespace stackprov::dwarf {

namespace {

/// A failed step: gdb throws NO_ENTRY_VALUE_ERROR and shows no tail-call frame.
struct NoChain {};

/// The tail-call sites of the function at `entry`; a function without DWARF fails the search.
const std::vector<CallSiteInfo>& tails_of(const TailCallQueries& q, uint64_t entry,
                                          std::deque<std::pair<uint64_t, std::vector<CallSiteInfo>>>* memo) {
  for (auto& [e, v] : *memo)
    if (e == entry) return v;
  std::vector<CallSiteInfo> v;
  if (!q.tail_calls_of(entry, &v)) throw NoChain{};
  memo->emplace_back(entry, std::move(v));
  return memo->back().second;
}

uint64_t target_of(const TailCallQueries& q, const CallSiteInfo& s) {
  uint64_t a = 0;
  if (!q.target_address(s, &a)) throw NoChain{};
  return a;
}

/// gdb's chain_candidate: the chains' common start (callers) and end (callees).
struct Result {
  bool have = false;
  std::vector<uint64_t> sites;  ///< the first chain's call sites (return pcs), caller side first
  size_t callers = 0, callees = 0;
};

/// False when the chains share nothing (gdb resets its result and gives up).
bool candidate(Result* r, const std::vector<uint64_t>& chain) {
  if (!r->have) {
    r->have = true;
    r->sites = chain;
    r->callers = r->callees = chain.size();
    return true;
  }
  const size_t len = chain.size();
  const size_t callers = std::min(r->callers, len);
  for (size_t i = 0; i < callers; i++)
    if (r->sites[i] != chain[i]) {
      r->callers = i;
      break;
    }
  if (r->callers > len) r->callers = len;
  const size_t callees = std::min(r->callees, len);
  for (size_t i = 0; i < callees; i++)
    if (r->sites[r->sites.size() - 1 - i] != chain[len - 1 - i]) {
      r->callees = i;
      break;
    }
  if (r->callees > len) r->callees = len;
  return r->callers != 0 || r->callees != 0;
}

}  // namespace

std::vector<uint64_t> tail_call_frames(const TailCallQueries& q, uint64_t caller_ret, uint64_t callee_pc,
                                       const TailCallLimits& limits) {
  try {
    uint64_t callee = 0;
    if (!q.function_entry(callee_pc, &callee)) return {};
    CallSiteInfo first;
    if (!q.call_site_at(caller_ret, &first)) return {};
    // A deque: the chain holds pointers to its lists while it grows.
    std::deque<std::pair<uint64_t, std::vector<CallSiteInfo>>> memo;
    size_t steps = 0;

    // func_verify_no_selftailcall: every function the callee reaches by tail calls, none the callee.
    {
      std::unordered_set<uint64_t> seen;
      std::vector<uint64_t> todo{callee};
      while (!todo.empty()) {
        const uint64_t at = todo.back();
        todo.pop_back();
        for (const CallSiteInfo& s : tails_of(q, at, &memo)) {
          if (++steps > limits.max_steps) return {};
          const uint64_t t = target_of(q, s);
          if (t == callee) return {};
          if (seen.insert(t).second) todo.push_back(t);
        }
      }
    }

    // call_site_find_chain_1: a depth-first walk over the tail-call sites from the caller's
    // target, each chain entering a call site at most once. As gdb: a function's first tail-call
    // site is tried on entering it; the others as siblings when the walk backtracks.
    struct Entered {
      const std::vector<CallSiteInfo>* list;  ///< the list the site is in (its siblings)
      size_t index;
    };
    std::vector<Entered> chain;
    std::vector<uint64_t> pcs;  // chain's return pcs
    std::unordered_set<uint64_t> in_chain;
    Result r;
    const CallSiteInfo* site = &first;
    for (;;) {
      if (++steps > limits.max_steps) return {};
      const uint64_t target = target_of(q, *site);
      Entered cand{nullptr, 0};
      if (target == callee) {
        if (!candidate(&r, pcs)) return {};
      } else if (const auto& list = tails_of(q, target, &memo); !list.empty()) {
        cand = {&list, 0};
      }
      for (;;) {
        if (cand.list != nullptr) {
          const uint64_t pc = (*cand.list)[cand.index].return_pc;
          if (in_chain.insert(pc).second) {
            if (chain.size() >= limits.max_depth) return {};
            chain.push_back(cand);
            pcs.push_back(pc);
            break;
          }
        }
        cand = {nullptr, 0};
        while (!chain.empty()) {
          const Entered e = chain.back();
          chain.pop_back();
          in_chain.erase(pcs.back());
          pcs.pop_back();
          if (e.index + 1 < e.list->size()) {
            cand = {e.list, e.index + 1};
            break;
          }
        }
        if (cand.list == nullptr) break;
      }
      if (chain.empty()) break;
      site = &(*chain.back().list)[chain.back().index];
    }
    if (!r.have) return {};
    // dwarf2/frame-tailcall.c pretend_pc: the callees' sites innermost first, then the callers'.
    std::vector<uint64_t> out;
    const size_t len = r.sites.size();
    for (size_t i = 0; i < r.callees; i++) out.push_back(r.sites[len - 1 - i]);
    if (r.callees != len)
      for (size_t i = 0; i < r.callers; i++) out.push_back(r.sites[r.callers - 1 - i]);
    return out;
  } catch (const NoChain&) {
    return {};
  }
}

}  // namespace stackprov::dwarf
