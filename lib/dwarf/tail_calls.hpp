// SPDX-License-Identifier: Apache-2.0
// Tail-call frames from DWARF call-site information, by gdb's rules (gdb/dwarf2/loc.c call_site_find_chain).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dwarf/dwarf_index.hpp"

namespace stackprov::dwarf {

/// What the chain search asks of a module's DWARF and symbols (DwarfIndex answers the first three;
/// a declaration's name needs a symbol table). Addresses are the module's link-time addresses.
struct TailCallQueries {
  std::function<bool(uint64_t ret, CallSiteInfo*)> call_site_at;
  std::function<bool(uint64_t pc, uint64_t* entry)> function_entry;
  std::function<bool(uint64_t entry, std::vector<CallSiteInfo>*)> tail_calls_of;
  /// A call site's target address: kAddress as is, kName through a symbol table; false when unknown.
  std::function<bool(const CallSiteInfo&, uint64_t*)> target_address;
};

struct TailCallLimits {
  size_t max_steps = 100000;  ///< call sites entered by the search (hostile DWARF: a bounded answer)
  size_t max_depth = 256;     ///< tail calls in one chain
};

/// gdb's reconstruction of the frames a tail call left no trace of: between a frame that executes
/// `callee_pc` (exact; a caller frame passes its return address - 1) and its caller, whose return
/// address is `caller_ret`. The caller's call site (return pc `caller_ret`) calls some function;
/// every chain of tail calls from that function to the callee's function is enumerated
/// (call_site_find_chain_1); the answer is the call sites that all chains share at their start
/// (callers) and at their end (callees), and nothing when they share none, when the callee can
/// reach itself by tail calls (func_verify_no_selftailcall), or when any step cannot be resolved
/// (a call site or function without DWARF, a target only a running frame knows). Returns the
/// tail-call sites' return pcs innermost first: the frames to show between callee and caller.
std::vector<uint64_t> tail_call_frames(const TailCallQueries& q, uint64_t caller_ret, uint64_t callee_pc,
                                       const TailCallLimits& limits = {});

}  // namespace stackprov::dwarf
