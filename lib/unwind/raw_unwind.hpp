// SPDX-License-Identifier: Apache-2.0
// Raw unwinding: registers in ptrace/perf/pt_regs/ucontext layouts + stack bytes + a module table -> frames.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "core/types.hpp"
#include "unwind/address_space.hpp"
#include "unwind/frame.hpp"
#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"
#include "unwind/unwinder.hpp"

namespace stackprov::unwind {

/// Register layouts; values equal enum sprov_regs_format.
enum class RegsFormat : int32_t {
  kDwarf = SPROV_REGS_DWARF,
  kPtrace = SPROV_REGS_PTRACE,
  kPerf = SPROV_REGS_PERF,
  kPtRegs = SPROV_REGS_PT_REGS,
  kUcontext = SPROV_REGS_UCONTEXT,
};

/// A real return address and the stack slot (or entry sp) it was saved for;
/// the layout of struct sprov_shadow_entry.
struct ShadowRecord {
  uint64_t return_address;
  uint64_t slot;
};

/// Shadow records considered per walk (the rest are ignored).
constexpr size_t kMaxShadowRecords = 64;

/// What a raw walk reads: registers, stack bytes, optional shadow stack.
struct RawWalkInput {
  RegsFormat format = RegsFormat::kDwarf;
  const void* regs = nullptr;
  size_t regs_len = 0;
  uint64_t regs_mask = 0;
  bool pc_is_return_address = false;
  uint64_t stack_addr = 0;
  const uint8_t* stack = nullptr;
  size_t stack_len = 0;
  /// The calling thread's own stack [lo, hi) (signal handlers): when hi != 0 the
  /// stack bytes are read in place from the converted sp up to hi (stack_* above
  /// are ignored; an sp outside [lo, hi) is an error), and other reads go to the
  /// own process through process_vm_readv, which fails instead of faulting.
  uint64_t self_stack_lo = 0;
  uint64_t self_stack_hi = 0;
  const ShadowRecord* shadow = nullptr;
  size_t shadow_count = 0;
};

/// Walks `in` over `version`'s modules. Fills `out` (whose frame capacity must
/// be at least opts.max_frames for the walk not to allocate) and *repaired
/// (return addresses taken from shadow records; their frames get method
/// kTrampoline). Errors only for register input that does not fit the format
/// (an unsupported format, too few bytes); nothing is allocated on success.
Status walk_raw(Arch arch, Endian endian, const RawWalkInput& in, const AddressSpaceVersion& version,
                RuleCache& cache, const WalkOptions& opts, WalkResult* out, uint32_t* repaired);

}  // namespace stackprov::unwind
