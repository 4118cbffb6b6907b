// SPDX-License-Identifier: Apache-2.0
// The unwinding ladder's rungs and their order per architecture (issue 32): the order is made
// here once from the architecture's capabilities (arch/arch_ops.hpp), so that the unwinder's step
// is one loop over it with no architecture or format branch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace stackprov::unwind {

/// One way to find a frame's caller (doc/architecture.md "The ladder"). Each rung either finds
/// the caller (the frame's method says which), stops the walk, or passes to the next.
enum class Rung : uint8_t {
  kCoroutineEntry,  ///< a return address on a coroutine's entry trampoline: the coroutine's stack ends
  kBadPc,           ///< an exact pc that is 0 or in no module: the return address a bad call left
  kSigreturnFirst,  ///< the sigreturn trampoline by its code, before the tables (arm64's vDSO)
  kTable,           ///< the module's unwind source: CFI, bundle rows, .pdata, compact unwind, ...
  kSigreturn,       ///< the sigreturn trampoline by its code
  kSignalRow,       ///< a table row marking a signal frame, its code not at hand (a core)
  kGoPcsp,          ///< Go's pclntab SP deltas
  kFramePointer,
  kPrologue,        ///< instruction analysis of the function's prologue
  kScan,            ///< opt-in: the first plausible return address on the stack
};

/// A ladder: the rungs an architecture has, in the order a step tries them.
struct Ladder {
  std::array<Rung, 10> rungs{};
  size_t size = 0;
  constexpr void add(Rung r) { rungs[size++] = r; }
  constexpr const Rung* begin() const { return rungs.data(); }
  constexpr const Rung* end() const { return rungs.data() + size; }
};

/// The ladder of the architecture whose operations are `Ops` (arch::Ops<Traits>).
template <class Ops>
constexpr Ladder ladder_of() {
  Ladder l;
  if (Ops::kCoroutineEntryLen > 0) l.add(Rung::kCoroutineEntry);
  l.add(Rung::kBadPc);
  if (Ops::kSigreturnBeforeCfi) l.add(Rung::kSigreturnFirst);
  l.add(Rung::kTable);
  l.add(Rung::kSigreturn);
  if (Ops::kSignalRowWithoutCode) l.add(Rung::kSignalRow);
  if (Ops::kGoPcsp) l.add(Rung::kGoPcsp);
  l.add(Rung::kFramePointer);
  if (Ops::kHasPrologueAnalysis) l.add(Rung::kPrologue);
  l.add(Rung::kScan);
  return l;
}

}  // namespace stackprov::unwind
