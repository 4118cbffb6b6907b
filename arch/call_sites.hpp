// SPDX-License-Identifier: Apache-2.0
// Call sites shared by every arch_ops folder: a call instruction found in code, and the linear sweep of fixed-width ISAs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/regs.hpp"

namespace stackprov::arch {

/// A call instruction found in code: [addr, addr + length). Its return pad, where the callee
/// returns to, is addr + length (+ 4 more on mips32: the delay slot executes first).
struct CallSite {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint64_t pad = 0;
};

/// The calls in `n` bytes of code at address `addr` of a 4-byte fixed-width ISA (arm64,
/// mips32): every 4-byte-aligned word, read in the given byte order, that `is_call(word)`
/// accepts, as f(CallSite{at, 4, at + pad_after}) in address order.
template <class IsCall, class F>
void for_each_word_call(const uint8_t* code, size_t n, uint64_t addr, bool big_endian, uint32_t pad_after,
                        IsCall&& is_call, F&& f) {
  const size_t skew = (4 - addr % 4) % 4;  // instructions are 4-byte aligned
  for (size_t i = skew; i + 4 <= n; i += 4) {
    const uint32_t w = static_cast<uint32_t>(load_word(code + i, 4, big_endian));
    if (is_call(w)) f(CallSite{addr + i, 4, addr + i + pad_after});
  }
}

}  // namespace stackprov::arch
