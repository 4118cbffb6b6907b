// SPDX-License-Identifier: Apache-2.0
// One x64 unwind step of a PE image as RtlVirtualUnwind takes it, computed symbolically: where the
// caller's rip, rsp and non-volatile registers are, as "register value at the frame + offset", for
// any register values. The unwind source (unwind/pdata_source) turns a plan into a rule.
#pragma once

#include <cstdint>
#include <span>

#include "core/error.hpp"
#include "pe/unwind_info.hpp"

namespace stackprov::pe {

/// x64 register numbers as UNWIND_CODE and CONTEXT order them (rax, rcx, rdx, rbx, rsp, rbp, rsi,
/// rdi, r8..r15).
inline constexpr uint8_t kX64Rsp = 4;
inline constexpr uint8_t kX64Regs = 16;

/// An address (or a value) as the register `base`'s value at the frame to unwind, plus `offset`.
struct X64Loc {
  uint8_t base = kX64Rsp;
  int64_t offset = 0;
};

/// One step out of a frame. Normal frames: rsp' = base + offset (`rsp`), rip' = [ra]. After a
/// machine frame (`machine_frame`): rip' = [ra], rsp' = [rsp_slot] (the interrupted code's
/// registers; the caller's pc is exact). `saved[r]`: register r is reloaded from [saved_at[r]];
/// the other registers keep their values.
struct X64Plan {
  X64Loc rsp;
  X64Loc ra;
  bool machine_frame = false;
  X64Loc rsp_slot;
  uint16_t saved = 0;  ///< bit r: register r reloaded from memory
  X64Loc saved_at[kX64Regs];
  bool in_prolog = false;  ///< the pc lies in the prolog (codes past it skipped)
  bool in_epilog = false;  ///< the pc lies in an epilog, decoded from the code as RtlVirtualUnwind does
  bool leaf = false;       ///< no RUNTIME_FUNCTION covers the pc: the return address is at [rsp]
};

/// Reads code bytes at an RVA of the loaded image (for epilog detection); false when they are not
/// all inside the image.
using CodeReader = bool (*)(const void* ctx, uint32_t rva, uint8_t* buf, uint32_t len);

/// The plan for a pc at `pc_rva`. `exact`: the pc is where the frame is executing (frame 0, or the
/// frame a machine frame interrupted), so a pc in an epilog is recognised by decoding the
/// instructions there (add/lea rsp, pops, ret, ret imm, rep ret, a jmp out of the function), as
/// RtlVirtualUnwind does for infos with codes; a caller's pc (a return address) is looked up at
/// pc - 1 by the caller of this function and never in an epilog. `table` is read_pdata's table.
/// Follows chained infos (decode_chain) and indirect entries (an odd unwind RVA: the entry at RVA
/// & ~1, at most kMaxChainDepth). Errors: the decoders' (SPROV_ERR_TRUNCATED, SPROV_ERR_CFI,
/// SPROV_ERR_LIMIT); SPROV_ERR_UNSUPPORTED for a step whose frame base is itself restored from
/// memory (a frame register reloaded by an earlier chained info, `pop rsp` in an epilog).
Result<X64Plan> plan_x64_step(const ImageReader& img, std::span<const RuntimeFunction> table, uint32_t pc_rva,
                              bool exact, CodeReader code, const void* code_ctx);

}  // namespace stackprov::pe
