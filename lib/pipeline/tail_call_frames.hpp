// SPDX-License-Identifier: Apache-2.0
// gdb's tail-call frames (DWARF call sites) inserted into an unwound stack: what `stack`
// (sprov_symbolizer_tail_calls) and a trace's capture (resolve_threads) both add.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "memory/snapshot.hpp"
#include "object/object_image.hpp"
#include "symbolize/dwarf_resolver.hpp"
#include "unwind/frame.hpp"

namespace stackprov::pipeline {

/// The file of module `index` of the stack's module list for the search (null: none, e.g. no file).
using TailCallImageOf = std::function<std::shared_ptr<const object::ObjectImage>(int32_t index)>;

/// `frames` with gdb's tail-call frames inserted (doc/unwinding.md "Tail-call frames"): between a
/// frame and its caller found by a CFI table at a return address, the call sites all chains of
/// tail calls share (dwarf::tail_call_frames), asked of the modules that have a frame in the
/// stack through `dwarf` (their files from `image_of`, each loaded on its first question). Each
/// inserted frame has method kTailCall, flag kFlagInferred, pc its site's return pc, sp the
/// callee's CFA, cfa 0. `origin` (optional) receives, per output frame, its index in `frames`, or
/// -1 for an inferred one. At most 65536 frames are inferred.
std::vector<unwind::Frame> with_tail_call_frames(symbolize::DwarfResolver& dwarf,
                                                 const std::vector<unwind::Frame>& frames,
                                                 const std::vector<memory::SnapshotModule>& modules,
                                                 const TailCallImageOf& image_of, std::vector<int64_t>* origin = nullptr);

}  // namespace stackprov::pipeline
