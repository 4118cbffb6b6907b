// SPDX-License-Identifier: Apache-2.0
// Unwound frames and walk results: pc, sp, cfa, module, how each frame was found, why the walk stopped.
#pragma once

#include <cstdint>
#include <vector>

#include "stackprov/stackprov.h"

namespace stackprov::unwind {

/// How a frame was found; values equal enum sprov_method.
enum class Method : uint8_t {
  kNone = SPROV_METHOD_NONE,
  kContext = SPROV_METHOD_CONTEXT,
  kCfiEhFrame = SPROV_METHOD_CFI_EH_FRAME,
  kCfiDebugFrame = SPROV_METHOD_CFI_DEBUG_FRAME,
  kFramePointer = SPROV_METHOD_FRAME_POINTER,
  kScan = SPROV_METHOD_SCAN,
  kSignal = SPROV_METHOD_SIGNAL,
  kPrologue = SPROV_METHOD_PROLOGUE,
  kBadPcReturn = SPROV_METHOD_BAD_PC_RETURN,
  kCfiBundle = SPROV_METHOD_CFI_BUNDLE,
  kCallchain = SPROV_METHOD_CALLCHAIN,
  kTrampoline = SPROV_METHOD_TRAMPOLINE,
  kRuntime = SPROV_METHOD_RUNTIME,
  kUnwindTable = SPROV_METHOD_UNWIND_TABLE,
  kCfiPdata = SPROV_METHOD_CFI_PDATA,
  kCompactUnwind = SPROV_METHOD_COMPACT_UNWIND,
  kTailCall = SPROV_METHOD_TAIL_CALL,
  kAsyncBoundary = SPROV_METHOD_ASYNC_BOUNDARY,
  kKernelStack = SPROV_METHOD_KERNEL_STACK,
};

/// Why a walk ended; values equal enum sprov_stop_reason.
enum class StopReason : uint8_t {
  kNone = SPROV_STOP_NONE,
  kEndOfStack = SPROV_STOP_END_OF_STACK,
  kNoUnwindInfo = SPROV_STOP_NO_UNWIND_INFO,
  kMemoryUnreadable = SPROV_STOP_MEMORY_UNREADABLE,
  kSpNotAdvancing = SPROV_STOP_SP_NOT_ADVANCING,
  kMaxFrames = SPROV_STOP_MAX_FRAMES,
  kBadCfi = SPROV_STOP_BAD_CFI,
  kInvalidPc = SPROV_STOP_INVALID_PC,
  kArchMismatch = SPROV_STOP_ARCH_MISMATCH,
  kCoroutineEntry = SPROV_STOP_COROUTINE_ENTRY,
};

/// The segment of a stack a frame belongs to; values equal enum sprov_domain.
enum class Domain : uint8_t {
  kUser = SPROV_DOMAIN_USER,
  kKernel = SPROV_DOMAIN_KERNEL,
  kRuntime = SPROV_DOMAIN_RUNTIME,
  kAsync = SPROV_DOMAIN_ASYNC,
};

struct Frame {
  uint64_t pc = 0;   ///< as unwound: a return address for caller frames
  uint64_t sp = 0;
  uint64_t cfa = 0;  ///< the CFA of this frame when known (computed by the step out of it)
  int32_t module_index = -1;  ///< into the snapshot's modules
  Method method = Method::kNone;
  /// True when the symbol/CFI lookup for this frame uses pc - 1 (caller
  /// frames); false for frame 0 of a signal-interrupted context.
  bool lookup_prev = false;
  /// kFlag* bits, equal to SPROV_FRAME_* (sprov_frame.flags).
  uint8_t flags = 0;
  /// Whose frame: user code, the kernel, a language runtime's own frame, an async continuation.
  Domain domain = Domain::kUser;
  static constexpr uint8_t kFlagCfiNotInBundle = SPROV_FRAME_CFI_NOT_IN_BUNDLE;
  static constexpr uint8_t kFlagJit = SPROV_FRAME_JIT;
  static constexpr uint8_t kFlagInferred = SPROV_FRAME_INFERRED;
  static constexpr uint8_t kFlagAsyncAwaiter = SPROV_FRAME_ASYNC_AWAITER;
};

/// One frame's registers as the walk knew them (WalkOptions::keep_registers), DWARF-numbered: bit r
/// of `known` says v[r] holds register r. Frame 0: the captured registers; a caller frame: its pc,
/// sp and the callee-saved registers (restored by the step's rule or unchanged by it); a frame
/// restored from a signal frame: every register the signal frame holds; an inferred frame: none.
struct FrameRegs {
  static constexpr int kMax = 64;
  uint64_t known = 0;
  uint64_t v[kMax] = {};
};

/// Where a ucontext coroutine continues when its function returns: glibc makecontext's uc_link,
/// read from the coroutine's stack at a coroutine entry (struct sprov_coroutine_link).
struct CoroutineLink {
  uint32_t frame = 0;    ///< index of the entry trampoline's frame
  uint64_t slot = 0;     ///< where uc_link was read
  uint64_t context = 0;  ///< uc_link (0: the thread exits when the function returns)
  uint64_t pc = 0;       ///< the context's saved pc and sp, when has_regs
  uint64_t sp = 0;
  bool has_regs = false;
};

/// At most this many async boundaries a walk crosses (registered resumers, async stack roots) and
/// coroutine links it records: a cycle in the program's records ends there.
constexpr size_t kMaxAsyncHops = 16;

struct WalkResult {
  std::vector<Frame> frames;
  StopReason stop = StopReason::kNone;
  std::vector<FrameRegs> regs;  ///< parallel to `frames` with WalkOptions::keep_registers, else empty
  std::vector<CoroutineLink> links;  ///< innermost first; capacity kMaxAsyncHops reserved
};

}  // namespace stackprov::unwind
