// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the DWARF expression evaluator (DW_OP_*) with memory and registers taken from the input.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dwarf/expression.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;

namespace {

// Memory: the "stack" section mapped at kBase; every other address fails to read.
constexpr uint64_t kBase = 0x7ffd0000;
struct Mem {
  dwarf::SectionBytes bytes;
  bool read(uint64_t addr, void* buf, size_t len) {
    if (addr < kBase || addr - kBase > bytes.size || len > bytes.size - (addr - kBase)) return false;
    std::memcpy(buf, bytes.data + (addr - kBase), len);
    return true;
  }
};
// Registers 0..15 from the "regs" section (pointing into the stack when its low bits say so).
struct Regs {
  dwarf::SectionBytes bytes;
  bool get(uint16_t reg, uint64_t* v) const {
    if (reg >= 16 || (static_cast<size_t>(reg) + 1) * 8 > bytes.size) return false;
    *v = fuzz::word_at(bytes.data, bytes.size, reg * 8);
    if ((*v & 3) == 1) *v = kBase + ((*v >> 2) & 0xff);
    return true;
  }
};

}  // namespace

// Input sections: flags (bit 0: 4-byte addresses, bit 1: big-endian, bit 2: push an initial value),
// expression, registers, stack bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dwarf::SectionBytes s[4];
  fuzz::split_sections(data, size, s, 4);
  const uint8_t flags = s[0].size ? s[0].data[0] : 0;
  Mem mem{s[3]};
  Regs regs{s[2]};
  const uint64_t initial = kBase + 64;
  uint64_t out = 0;
  const uint8_t addr_size = (flags & 1) ? 4 : 8;
  const auto st = dwarf::eval_expression(s[1].data, s[1].size, addr_size, (flags & 2) != 0, mem, regs,
                                         (flags & 4) ? &initial : nullptr, &out);
  // Values wrap to the target's width: a 4-byte evaluation never yields more than 32 bits.
  if (st == dwarf::ExprStatus::kOk && addr_size == 4 && (out >> 32) != 0) __builtin_trap();
  return 0;
}
