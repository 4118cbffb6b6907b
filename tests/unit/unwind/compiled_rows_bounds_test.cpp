// SPDX-License-Identifier: Apache-2.0
// compile_fde_rows on hostile CFI: the work per FDE is bounded, not only the rows it stores.
#include <catch2/catch.hpp>

#include "../dwarf/cfi_test_util.hpp"
#include "dwarf/cfi.hpp"
#include "unwind/compiled_rows.hpp"

using namespace stackprov;
using namespace stackprov::test;

TEST_CASE("compile_fde_rows: 50,000 one-byte advances with one rule cost bounded work", "[unwind][compiled][hostile]") {
  // review of compiled_rows.cpp: rows with an unchanged rule merge and fill no slot, so the 512-slot
  // cap never stopped the loop, and each row reran the program from the start: 50,000 rows x
  // 50,000 ops. Now at most 2 x cap interpreter calls; the rest of the FDE is left to the interpreter.
  constexpr uint64_t kVaddr = 0x4000, kPc = 0x1000, kRange = 60000;
  CieSpec c;
  c.instrs = bytes([](Section& s) { s.U8(op::def_cfa).ULEB(7).ULEB(8).U8(op::offset | 16).ULEB(1); });
  std::vector<uint8_t> instrs(50000, op::advance_loc | 1);
  Section s;
  Label cie, fde_at;
  emit_cie(s, c, &cie);
  emit_fde(
      s, cie, true, false,
      [&](Section& b) {
        pcrel_sdata4(b, kPc, kVaddr);
        b.U32(kRange);
        b.ULEB(0);
      },
      instrs, &fde_at);
  s.U32(0);
  Built b;
  b.data = s.Contents();
  b.proto.vaddr = kVaddr;
  const dwarf::CfiSection sec = b.sec();
  dwarf::FdeInfo fde;
  REQUIRE(dwarf::decode_fde(sec, fde_at.value(), &fde) == dwarf::CfiStatus::kOk);
  REQUIRE(fde.pc_begin == kPc);
  // The interpreter's own answer at a few pcs: one rule throughout (CFA = r7 + 8).
  for (uint64_t off : {uint64_t{0}, uint64_t{1}, uint64_t{1023}, uint64_t{49999}}) {
    dwarf::CfiRow row;
    REQUIRE(dwarf::find_row(sec, fde, kPc + off, &row) == dwarf::CfiStatus::kOk);
    CHECK(row.cfa.reg == 7);
    CHECK(row.cfa.offset == 8);
  }
  constexpr uint32_t kCap = 512;
  std::vector<unwind::CompiledRow> rows(kCap);
  unwind::RowParams p;
  p.num_regs = 17;
  const uint32_t n = unwind::compile_fde_rows(sec, fde, p, rows.data(), kCap);
  REQUIRE(n == 2);
  CHECK(rows[0].offset == 0);
  CHECK(rows[0].rule.kind == unwind::UnwindRule::kCfaReg);
  CHECK(rows[1].offset == 2 * kCap);  // the first pc after 2 x cap calls, one byte per row
  CHECK(rows[1].rule.kind == unwind::UnwindRule::kFull);
}
