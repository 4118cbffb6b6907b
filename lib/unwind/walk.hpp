// SPDX-License-Identifier: Apache-2.0
// Non-template entry point: unwind a snapshot with the unwinder of its architecture.
#pragma once

#include "memory/snapshot.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/unwinder.hpp"

namespace stackprov::unwind {

/// Unwinds `snap` (a pure function of the snapshot and the module table).
/// `modules` must have been built for this snapshot's module list.
void walk_snapshot(const memory::Snapshot& snap, const ModuleTable& modules, RuleCache& cache,
                   const WalkOptions& opts, WalkResult* out);

}  // namespace stackprov::unwind
