// SPDX-License-Identifier: Apache-2.0
// Dispatch from a snapshot's architecture to the templated unwinder.
#include "unwind/walk.hpp"

namespace stackprov::unwind {

namespace {

template <class Traits>
void walk_arch(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
               const WalkOptions& opts, WalkResult* out) {
  typename Unwinder<Traits, memory::SnapshotReader>::Regs regs{};
  for (int r = 0; r < Traits::kNumRegs; r++)
    if (snap.has_reg(r)) regs.set(r, snap.regs[r]);
  memory::SnapshotReader mem(snap);
  Unwinder<Traits, memory::SnapshotReader> uw(modules, cache, opts, mem);
  uw.walk(regs, (snap.flags & memory::Snapshot::kFlagPcIsReturnAddress) != 0, out);
}

}  // namespace

void walk_snapshot(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                   const WalkOptions& opts, WalkResult* out) {
  switch (snap.arch) {
    case Arch::kX86_64:
      walk_arch<arch::x86_64::Traits>(snap, modules, cache, opts, out);
      return;
    case Arch::kArm64:
      walk_arch<arch::arm64::Traits>(snap, modules, cache, opts, out);
      return;
    case Arch::kMips32:
      if (snap.endian == Endian::kBig)
        walk_arch<arch::mips32::TraitsBE>(snap, modules, cache, opts, out);
      else
        walk_arch<arch::mips32::TraitsLE>(snap, modules, cache, opts, out);
      return;
    default:
      out->frames.clear();
      out->stop = StopReason::kArchMismatch;
      return;
  }
}

}  // namespace stackprov::unwind
