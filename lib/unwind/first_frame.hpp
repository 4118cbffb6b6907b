// SPDX-License-Identifier: Apache-2.0
// First-frame instruction analysis (issue 34): where a frame's exact pc lies in its function's
// prologue or epilogue, the stack pointer is not yet (or no longer) where a body-only table such as
// compact unwind describes it. The code around the pc is read and simulated, as framehop's
// x86_64/aarch64 instruction_analysis does (our own code): a rule in terms of sp for that pc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "unwind/unwind_rule.hpp"

namespace stackprov::unwind {

/// Reads `len` code bytes at link-time `vaddr`; false when they are not all there.
using FirstFrameCode = std::function<bool(uint64_t vaddr, void* buf, size_t len)>;

/// x86_64, the function [start, end) and the exact pc in it:
///  - prologue: every instruction from `start` up to `pc` is one of push r64, mov rbp, rsp,
///    sub rsp, imm8/imm32 (bounded: 24 instructions): cfa = rsp + 8 + the bytes pushed and
///    subtracted, each pushed register at its slot, ra = *(cfa - 8);
///  - epilogue: from `pc` on, only add rsp, imm / pop r64 up to a ret (or a jmp out of the
///    function, a tail call): cfa = rsp + the bytes added and popped + 8, each register still to
///    be popped at its slot.
/// Nullopt: the pc is in the body (the table's rule holds), or the code is unreadable.
/// `with_prologue` false: the epilogue only (a table whose rows describe the prologue: DWARF CFI).
/// DWARF register numbers (rsp 7, ra 16). Pure; thread-safe.
std::optional<UnwindRule> x86_64_first_frame(uint64_t start, uint64_t end, uint64_t pc, const FirstFrameCode& code,
                                             bool with_prologue = true);

/// arm64, as above: the prologue's stp/str pre-index and signed-offset stores of x registers and
/// d pairs, sub sp, mov/add x29, sp, pac/bti hints; the epilogue's ldp/ldr (signed offset and
/// post-index), add sp, autiasp/autibsp up to ret (or a b out of the function). cfa = sp + n; x19-x30
/// at their slots; ra = *(slot of x30) once stored, else lr (DWARF 30). sp is DWARF 31.
std::optional<UnwindRule> arm64_first_frame(uint64_t start, uint64_t end, uint64_t pc, const FirstFrameCode& code,
                                            bool with_prologue = true);

}  // namespace stackprov::unwind
