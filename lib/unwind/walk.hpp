// SPDX-License-Identifier: Apache-2.0
// Non-template entry point: unwind a snapshot with the unwinder of its architecture.
#pragma once

#include "memory/snapshot.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/unwinder.hpp"

namespace stackprov::unwind {

/// The slot of snapshot module `index` of `snap`'s module list: its range and load bias; no module
/// yet (the caller loads one and sets `module`).
ModuleSlot snapshot_slot(const memory::Snapshot& snap, size_t index);

/// Unwinds `snap` (a pure function of the snapshot and the module table).
/// `modules` must have been built for this snapshot's module list.
void walk_snapshot(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                   const WalkOptions& opts, WalkResult* out);

/// walk_snapshot's pcs alone (Unwinder::walk_pcs): into pcs[0, opts.max_frames), their count
/// returned, out->stop the walk's stop reason; out->frames is scratch.
size_t walk_snapshot_pcs(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                         const WalkOptions& opts, uint64_t* pcs, WalkResult* out);

}  // namespace stackprov::unwind
