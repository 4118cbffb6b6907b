// SPDX-License-Identifier: Apache-2.0
// Helpers for the CFI unit tests: DW_CFA/DW_EH_PE constants and CIE/FDE emitters over the byte builder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cfi_builder.hpp"
#include "dwarf/cfi.hpp"

namespace stackprov::test {

// DWARF 5 section 7.24, written out again so the tests do not share the implementation's table.
namespace op {
constexpr uint8_t advance_loc = 0x40, offset = 0x80, restore = 0xc0, nop = 0x00, set_loc = 0x01,
                  advance_loc1 = 0x02, advance_loc2 = 0x03, advance_loc4 = 0x04,
                  offset_extended = 0x05, restore_extended = 0x06, undefined = 0x07,
                  same_value = 0x08, reg = 0x09, remember_state = 0x0a, restore_state = 0x0b,
                  def_cfa = 0x0c, def_cfa_register = 0x0d, def_cfa_offset = 0x0e,
                  def_cfa_expression = 0x0f, expression = 0x10, offset_extended_sf = 0x11,
                  def_cfa_sf = 0x12, def_cfa_offset_sf = 0x13, val_offset = 0x14,
                  val_offset_sf = 0x15, val_expression = 0x16, mips_advance_loc8 = 0x1d,
                  gnu_window_save = 0x2d, gnu_args_size = 0x2e,
                  gnu_negative_offset_extended = 0x2f;
}  // namespace op

// LSB 10.5.1.
namespace pe {
constexpr uint8_t absptr = 0x00, uleb128 = 0x01, udata2 = 0x02, udata4 = 0x03, udata8 = 0x04,
                  sleb128 = 0x09, sdata2 = 0x0a, sdata4 = 0x0b, sdata8 = 0x0c, pcrel = 0x10,
                  textrel = 0x20, datarel = 0x30, funcrel = 0x40, indirect = 0x80, omit = 0xff;
}

/// Writes one CIE/FDE entry: length (32- or 64-bit DWARF), then whatever `body` emits.
inline void entry(Section& s, bool dwarf64, const std::function<void(Section&)>& body) {
  Label start, end;
  if (dwarf64) {
    s.U32(0xffffffff).D64(end - start);
  } else {
    s.D32(end - start);
  }
  s.Mark(&start);
  body(s);
  s.Mark(&end);
}

struct CieSpec {
  bool eh = true;
  bool dwarf64 = false;
  uint8_t version = 1;
  std::string aug = "zR";
  uint8_t v4_addr_size = 8;
  uint8_t v4_seg_size = 0;
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra = 16;
  /// Augmentation data after the 'z' length; filled by the caller.
  std::vector<uint8_t> aug_data = {pe::pcrel | pe::sdata4};
  std::vector<uint8_t> instrs;
};

inline void emit_cie(Section& s, const CieSpec& c, Label* at) {
  s.Mark(at);
  entry(s, c.dwarf64, [&](Section& b) {
    if (c.eh) {
      c.dwarf64 ? b.U64(0) : b.U32(0);
    } else {
      c.dwarf64 ? b.U64(~uint64_t{0}) : b.U32(0xffffffff);
    }
    b.U8(c.version).String(c.aug);
    if (c.version == 4) b.U8(c.v4_addr_size).U8(c.v4_seg_size);
    b.ULEB(c.code_align).SLEB(c.data_align);
    if (c.version == 1) {
      b.U8(c.ra);
    } else {
      b.ULEB(c.ra);
    }
    if (!c.aug.empty() && c.aug[0] == 'z') b.ULEB(c.aug_data.size()).Append(c.aug_data);
    b.Append(c.instrs);
  });
}

/// Writes an FDE pointing at `cie`; `fields` writes pc_begin, pc_range and any augmentation data.
inline void emit_fde(Section& s, const Label& cie, bool eh, bool dwarf64,
                     const std::function<void(Section&)>& fields, const std::vector<uint8_t>& instrs,
                     Label* at = nullptr) {
  if (at) s.Mark(at);
  entry(s, dwarf64, [&](Section& b) {
    Label field;
    b.Mark(&field);
    if (eh) {
      dwarf64 ? b.D64(field - cie) : b.D32(field - cie);
    } else {
      dwarf64 ? b.D64(cie) : b.D32(cie);
    }
    fields(b);
    b.Append(instrs);
  });
}

/// pc-relative sdata4 pc_begin for an .eh_frame at `vaddr`.
inline void pcrel_sdata4(Section& b, uint64_t target, uint64_t vaddr) {
  Label here;
  b.Mark(&here);
  b.D32(Label(target) - here - static_cast<int64_t>(vaddr));
}

/// Instruction bytes built with a throwaway Section.
inline std::vector<uint8_t> bytes(const std::function<void(Section&)>& f, bool big_endian = false) {
  Section s(big_endian);
  f(s);
  return s.Contents();
}

/// Section bytes plus the CfiSection settings to view them with.
struct Built {
  std::vector<uint8_t> data;
  dwarf::CfiSection proto;  ///< data/size are filled in by sec()
  uint64_t fde_offset = 0;
  dwarf::CfiSection sec() const {
    dwarf::CfiSection s = proto;
    s.data = data.data();
    s.size = data.size();
    return s;
  }
};

}  // namespace stackprov::test
