// SPDX-License-Identifier: Apache-2.0
// Bounded DWARF expression evaluator (DW_OP_*) used by CFI rules; reads memory only through a reader.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stackprov::dwarf {

enum class ExprStatus : uint8_t {
  kOk = 0,
  kBadExpr,        ///< malformed, truncated or an unknown/unsupported opcode
  kMemory,         ///< a DW_OP_deref* read failed
  kNoRegister,     ///< a DW_OP_breg*/DW_OP_regx register is not available
  kStepLimit,      ///< more than kExprMaxSteps operations executed (loops via skip/bra)
  kStackOverflow,  ///< more than kExprMaxStack values pushed
  kStackUnderflow,
  kDivByZero,
};

constexpr int kExprMaxStack = 64;
constexpr int kExprMaxSteps = 4096;

/// Evaluates a DWARF expression (DWARF 5 section 2.5) as CFI uses it.
///
/// `Mem` provides `bool read(uint64_t addr, void* buf, size_t len)` (raw target
/// bytes); `Regs` provides `bool get(uint16_t dwarf_reg, uint64_t* value) const`.
/// `initial`, when non-null, is pushed before the first op (the CFA for
/// DW_CFA_expression / DW_CFA_val_expression). The result is the top of the
/// stack. Values are `addr_size` wide (4 or 8) and wrap like the target's;
/// memory is decoded with the target's endianness. Supported: literals,
/// const*, addr, dup/drop/over/pick/swap/rot, deref/deref_size, arithmetic and
/// logic ops, comparisons, skip/bra, breg0..31, bregx, reg0..31/regx (value of
/// the register as a location result), nop, plus_uconst, call_frame_cfa is
/// rejected (not valid inside CFI). Bounded; no allocation. A `Regs` that also has
/// `bool frame_base(uint64_t*) const`, `bool cfa(uint64_t*) const` and `void on_stack_value() const`
/// (a location expression's, dwarf/frame_args.cpp) gets DW_OP_fbreg, DW_OP_call_frame_cfa and a
/// final DW_OP_stack_value too.
template <class Mem, class Regs>
ExprStatus eval_expression(const uint8_t* expr, size_t len, uint8_t addr_size, bool big_endian,
                           Mem& mem, const Regs& regs, const uint64_t* initial, uint64_t* out);

}  // namespace stackprov::dwarf

#include "dwarf/expression_impl.hpp"
