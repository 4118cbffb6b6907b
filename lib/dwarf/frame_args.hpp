// SPDX-License-Identifier: Apache-2.0
// A formal parameter's value in one frame, from its DWARF location and what the unwind knows, printed as gdb's `info args`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "dwarf/dwarf_index.hpp"

namespace stackprov::dwarf {

/// What the unwinder knows of one frame: its registers (DWARF numbers; the ones the walk restored
/// or kept), its CFA, and the captured memory (the stacks a snapshot copied, a core's segments).
struct ArgFrame {
  std::function<bool(uint16_t reg, uint64_t* value)> reg;
  std::function<bool(uint64_t addr, void* buf, size_t len)> read;
  bool has_cfa = false;
  uint64_t cfa = 0;
};

struct ArgValue {
  enum class Status : uint8_t {
    kValue,         ///< `text` is the value as gdb prints it
    kOptimizedOut,  ///< the DWARF says there is none at this pc: gdb's <optimized out>
    kUnknown,       ///< not readable from what the unwind knows, or a type not printed: `why` says which
  };
  Status status = Status::kUnknown;
  std::string text;
  std::string why;
};

/// The value of `p` (DwarfIndex::parameters at the frame's lookup pc) in frame `f`. A value is
/// printed only when every input is known: the location (a register location DW_OP_reg*, a memory
/// location from DW_OP_breg*/DW_OP_fbreg/DW_OP_call_frame_cfa and arithmetic read from captured
/// memory, a DW_OP_stack_value, DW_AT_const_value) and the type (kSigned ... kEnum). DW_OP_entry_value,
/// DW_OP_piece, implicit values, registers the frame does not know and memory outside the capture
/// are kUnknown, never a guess.
ArgValue param_value(const FrameParams& fp, const ParamInfo& p, const ArgFrame& f);

/// `bytes` (the value's `n` bytes, target order) as gdb prints a value of type `t`: decimal
/// integers, "true"/"false", "65 'A'" for chars (C escapes, octal outside ASCII), %.9g/%.17g for
/// float/double, "0x..." for pointers (without the string gdb adds for a char pointer), an
/// enumerator's name. False (`*why` set) for a type or value gdb prints otherwise.
bool format_value(const ParamType& t, const uint8_t* bytes, size_t n, bool big_endian, std::string* out,
                  std::string* why);

}  // namespace stackprov::dwarf
