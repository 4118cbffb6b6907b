// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a subprogram's formal parameters, their types and location lists (DwarfIndex::parameters,
// .debug_loc/.debug_loclists) and their values evaluated against a made-up frame (dwarf/frame_args.hpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dwarf/dwarf_index.hpp"
#include "dwarf/frame_args.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::dwarf;

// Input sections (in this order): .debug_info, .debug_abbrev, .debug_str, .debug_str_offsets,
// .debug_addr, .debug_loc, .debug_loclists, .debug_line_str, .debug_ranges, .debug_rnglists, then
// the probe pcs (u64 each), the frame's registers (u64 each, DWARF numbers from 0; the CFA is the
// last), the captured memory (u64 address, then its bytes).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SectionBytes s[13];
  fuzz::split_sections(data, size, s, 13);
  DwarfSections d;
  d.info = s[0];
  d.abbrev = s[1];
  d.str = s[2];
  d.str_offsets = s[3];
  d.addr = s[4];
  d.loc = s[5];
  d.loclists = s[6];
  d.line_str = s[7];
  d.ranges = s[8];
  d.rnglists = s[9];
  DwarfIndexLimits limits;
  limits.max_nodes_per_unit = size_t{1} << 16;
  limits.memory_budget = size_t{16} << 20;
  auto ix = DwarfIndex::build(d, limits);
  if (!ix.ok()) return 0;
  const size_t nregs = s[11].size / 8;
  const uint64_t mem_base = fuzz::word_at(s[12].data, s[12].size, 0);
  const uint8_t* mem = s[12].size > 8 ? s[12].data + 8 : nullptr;
  const size_t mem_len = s[12].size > 8 ? s[12].size - 8 : 0;
  ArgFrame f;
  f.reg = [&](uint16_t r, uint64_t* v) {
    if (nregs == 0 || r >= nregs - 1) return false;
    *v = fuzz::word_at(s[11].data, s[11].size, size_t{r} * 8);
    return true;
  };
  f.read = [&](uint64_t addr, void* buf, size_t len) {
    if (addr < mem_base || addr - mem_base > mem_len || len > mem_len - (addr - mem_base)) return false;
    if (len) std::memcpy(buf, mem + (addr - mem_base), len);
    return true;
  };
  f.has_cfa = nregs > 0;
  f.cfa = nregs > 0 ? fuzz::word_at(s[11].data, s[11].size, (nregs - 1) * 8) : 0;
  FrameParams fp;
  for (size_t i = 0; i + 8 <= s[10].size && i < 64 * 8; i += 8) {
    const uint64_t pc = fuzz::word_at(s[10].data, s[10].size, i);
    if (!ix.value()->parameters(pc, &fp)) {
      if (!fp.params.empty()) __builtin_trap();  // no subprogram: no parameters
      continue;
    }
    for (const ParamInfo& p : fp.params) {
      if (p.where == ParamInfo::Where::kExpr && (p.expr == nullptr || p.expr_len == 0)) __builtin_trap();
      const ArgValue v = param_value(fp, p, f);
      if (v.status == ArgValue::Status::kValue && v.text.empty()) __builtin_trap();  // a value is printed
      if (v.status == ArgValue::Status::kUnknown && v.why.empty()) __builtin_trap();  // and an unknown says why
    }
  }
  return 0;
}
