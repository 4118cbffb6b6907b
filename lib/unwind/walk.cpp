// SPDX-License-Identifier: Apache-2.0
// Dispatch from a snapshot's architecture to the templated unwinder.
#include "unwind/walk.hpp"

#include <cstring>

#include "unwind/arch_dispatch.hpp"

namespace stackprov::unwind {

namespace {

/// walk_arch's unwinder over `snap`, given to `fn(unwinder, regs, pc_is_return_address)`.
template <class Traits, class Fn>
auto with_unwinder(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                   const WalkOptions& opts, Fn&& fn) {
  // The captured registers as they are (one copy, not a loop per register): a register the
  // snapshot lacks is not valid, whatever its slot holds.
  static_assert(Traits::kNumRegs < 64 && Traits::kNumRegs <= memory::kSnapshotMaxRegs, "registers fit the snapshot");
  typename Unwinder<Traits, memory::SnapshotReader>::Regs regs;
  std::memcpy(regs.v, snap.regs, sizeof regs.v);
  regs.valid = snap.regs_valid & ((uint64_t{1} << Traits::kNumRegs) - 1);
  memory::SnapshotReader mem(snap);
  WalkOptions o = opts;
  if (!snap.async.empty()) o.async = &snap.async;  // what the program registered (doc/async-stacks.md)
  Unwinder<Traits, memory::SnapshotReader> uw(modules, cache, o, mem);
  return fn(uw, regs, (snap.flags & memory::Snapshot::kFlagPcIsReturnAddress) != 0);
}

}  // namespace

ModuleSlot snapshot_slot(const memory::Snapshot& snap, size_t index) {
  const memory::SnapshotModule& m = snap.modules[index];
  ModuleSlot slot;
  slot.start = m.start;
  slot.end = m.end;
  slot.bias = m.load_bias;
  slot.snapshot_index = static_cast<int32_t>(index);
  return slot;
}

void walk_snapshot(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                   const WalkOptions& opts, WalkResult* out) {
  const bool known = with_arch_traits(snap.arch, snap.endian, [&](auto traits) {
    with_unwinder<typename decltype(traits)::type>(snap, modules, cache, opts,
                                                   [&](auto& uw, const auto& regs, bool pc_is_ra) {
                                                     uw.walk(regs, pc_is_ra, out);
                                                     return 0;
                                                   });
  });
  if (!known) {
    out->frames.clear();
    out->stop = StopReason::kArchMismatch;
  }
}

size_t walk_snapshot_pcs(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                         const WalkOptions& opts, uint64_t* pcs, WalkResult* out) {
  size_t n = 0;
  const bool known = with_arch_traits(snap.arch, snap.endian, [&](auto traits) {
    n = with_unwinder<typename decltype(traits)::type>(
        snap, modules, cache, opts,
        [&](auto& uw, const auto& regs, bool pc_is_ra) { return uw.walk_pcs(regs, pc_is_ra, pcs, out); });
  });
  if (!known) {
    out->frames.clear();
    out->stop = StopReason::kArchMismatch;
  }
  return n;
}

}  // namespace stackprov::unwind
