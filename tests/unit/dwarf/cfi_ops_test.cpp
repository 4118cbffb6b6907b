// SPDX-License-Identifier: Apache-2.0
// Unit tests for find_row: every DW_CFA op, row ranges, remember/restore, limits, bad programs.
#include <catch2/catch.hpp>

#include "cfi_test_util.hpp"
#include "dwarf/cfi.hpp"

using namespace stackprov::dwarf;
using namespace stackprov::test;

namespace {

constexpr uint64_t kVaddr = 0x4000;  // link-time address of the synthetic .eh_frame
constexpr uint64_t kPc = 0x1000;
constexpr uint64_t kRange = 0x100;

/// x86_64-like CIE program: CFA = rsp + 8, ra at CFA - 8.
std::vector<uint8_t> x86_cie_instrs() {
  return bytes([](Section& s) { s.U8(op::def_cfa).ULEB(7).ULEB(8).U8(op::offset | 16).ULEB(1); });
}

/// One CIE + one FDE in an .eh_frame ("zR", pcrel|sdata4 unless the spec says otherwise).
Built make_eh(const std::vector<uint8_t>& fde_instrs, CieSpec c = {}, uint64_t range = kRange,
              CfiVendorOps vendor_ops = CfiVendorOps::kNone) {
  if (c.instrs.empty()) c.instrs = x86_cie_instrs();
  Section s;
  Label cie, fde;
  emit_cie(s, c, &cie);
  emit_fde(
      s, cie, true, c.dwarf64,
      [&](Section& b) {
        pcrel_sdata4(b, kPc, kVaddr);
        b.U32(range);
        b.ULEB(0);
      },
      fde_instrs, &fde);
  s.U32(0);
  Built out;
  out.data = s.Contents();
  out.proto.vaddr = kVaddr;
  out.proto.vendor_ops = vendor_ops;
  out.fde_offset = fde.value();
  return out;
}

CfiStatus row_at(const Built& b, uint64_t pc, CfiRow* row) {
  const CfiSection sec = b.sec();
  FdeInfo fde;
  CfiStatus st = decode_fde(sec, b.fde_offset, &fde);
  if (st != CfiStatus::kOk) return st;
  return find_row(sec, fde, pc, row);
}

CfiRow must_row(const Built& b, uint64_t pc) {
  CfiRow row;
  REQUIRE(row_at(b, pc, &row) == CfiStatus::kOk);
  return row;
}

void check_cfa(const CfiRow& r, uint16_t reg, int64_t off) {
  CHECK(r.cfa.kind == CfaRule::Kind::kRegOffset);
  CHECK(r.cfa.reg == reg);
  CHECK(r.cfa.offset == off);
}

void check_rule(const CfiRow& r, int reg, RegRuleKind kind, int64_t off = 0, uint16_t other = 0) {
  INFO("register " << reg);
  CHECK(r.regs[reg].kind == kind);
  if (kind == RegRuleKind::kOffset || kind == RegRuleKind::kValOffset) {
    CHECK(r.regs[reg].offset == off);
  }
  if (kind == RegRuleKind::kRegister) CHECK(r.regs[reg].reg == other);
}

}  // namespace

TEST_CASE("compact advance_loc/offset/restore and exact row ranges", "[cfi][ops]") {
  Built b = make_eh(bytes([](Section& s) {
    s.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(16).U8(op::offset | 6).ULEB(2);
    s.U8(op::advance_loc | 3).U8(op::def_cfa_register).ULEB(6);
    s.U8(op::advance_loc | 0x3f).U8(op::def_cfa).ULEB(7).ULEB(8).U8(op::restore | 6);
  }));
  CfiRow r = must_row(b, 0x1000);
  CHECK(r.start == 0x1000);
  CHECK(r.end == 0x1001);
  check_cfa(r, 7, 8);
  check_rule(r, 16, RegRuleKind::kOffset, -8);
  check_rule(r, 6, RegRuleKind::kUnspecified);
  CHECK(r.ra_reg == 16);
  CHECK_FALSE(r.signal_frame);

  for (uint64_t pc : {0x1001, 0x1003}) {
    r = must_row(b, pc);
    CHECK(r.start == 0x1001);
    CHECK(r.end == 0x1004);
    check_cfa(r, 7, 16);
    check_rule(r, 6, RegRuleKind::kOffset, -16);
  }
  r = must_row(b, 0x1042);
  CHECK(r.start == 0x1004);
  CHECK(r.end == 0x1043);
  check_cfa(r, 6, 16);
  check_rule(r, 6, RegRuleKind::kOffset, -16);

  r = must_row(b, 0x10ff);
  CHECK(r.start == 0x1043);
  CHECK(r.end == 0x1100);  // last row ends at pc_end
  check_cfa(r, 7, 8);
  check_rule(r, 6, RegRuleKind::kUnspecified);  // DW_CFA_restore: back to the CIE's rule

  CfiRow dummy;
  CHECK(row_at(b, 0x1100, &dummy) == CfiStatus::kNotFound);
  CHECK(row_at(b, 0xfff, &dummy) == CfiStatus::kNotFound);
}

TEST_CASE("advance_loc1/2/4 and MIPS advance_loc8 scale by code_align", "[cfi][ops]") {
  CieSpec c;
  c.code_align = 4;
  c.data_align = -4;
  c.ra = 30;
  c.instrs = bytes([](Section& s) { s.U8(op::def_cfa).ULEB(31).ULEB(0); });
  Built b = make_eh(bytes([](Section& s) {
                      s.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(16);
                      s.U8(op::advance_loc1).U8(2).U8(op::def_cfa_offset).ULEB(32);
                      s.U8(op::advance_loc2).U16(0x10).U8(op::def_cfa_offset).ULEB(48);
                      s.U8(op::advance_loc4).U32(0x20).U8(op::def_cfa_offset).ULEB(64);
                      s.U8(op::mips_advance_loc8).U64(1).U8(op::def_cfa_offset).ULEB(0);
                    }),
                    c);
  struct Want {
    uint64_t pc, start, end;
    int64_t off;
  };
  for (const Want& w : {Want{0x1003, 0x1000, 0x1004, 0}, Want{0x1004, 0x1004, 0x100c, 16},
                        Want{0x100b, 0x1004, 0x100c, 16}, Want{0x104b, 0x100c, 0x104c, 32},
                        Want{0x104c, 0x104c, 0x10cc, 48}, Want{0x10cc, 0x10cc, 0x10d0, 64},
                        Want{0x10d0, 0x10d0, 0x1100, 0}, Want{0x10ff, 0x10d0, 0x1100, 0}}) {
    INFO("pc " << std::hex << w.pc);
    CfiRow r = must_row(b, w.pc);
    CHECK(r.start == w.start);
    CHECK(r.end == w.end);
    check_cfa(r, 31, w.off);
    CHECK(r.ra_reg == 30);
  }
}

TEST_CASE("a row's end is clamped to pc_end", "[cfi][ops]") {
  Built b = make_eh(bytes([](Section& s) { s.U8(op::advance_loc | 0x20).U8(op::def_cfa_offset).ULEB(16); }),
                    CieSpec{}, 0x10);
  CfiRow r = must_row(b, 0x100f);
  CHECK(r.start == 0x1000);
  CHECK(r.end == 0x1010);
}

TEST_CASE("register rule ops", "[cfi][ops]") {
  Built b = make_eh(bytes([](Section& s) {
    s.U8(op::offset_extended).ULEB(3).ULEB(2);        // rbx at cfa-16
    s.U8(op::offset_extended_sf).ULEB(12).SLEB(3);    // r12 at cfa-24
    s.U8(op::offset_extended_sf).ULEB(13).SLEB(-1);   // r13 at cfa+8
    s.U8(op::val_offset).ULEB(14).ULEB(2);            // r14 = cfa-16
    s.U8(op::val_offset_sf).ULEB(15).SLEB(-2);        // r15 = cfa+16
    s.U8(op::same_value).ULEB(5);
    s.U8(op::reg).ULEB(4).ULEB(1);                    // rsi lives in rdx
    s.U8(op::gnu_negative_offset_extended).ULEB(2).ULEB(1);  // rcx at cfa+8
    s.U8(op::gnu_args_size).ULEB(16);
    s.U8(op::nop);
    s.U8(op::undefined).ULEB(16);
    s.U8(op::advance_loc | 4);
    s.U8(op::restore_extended).ULEB(16).U8(op::undefined).ULEB(3).U8(op::nop).U8(op::nop);
  }));
  CfiRow r = must_row(b, 0x1000);
  CHECK(r.end == 0x1004);
  check_rule(r, 3, RegRuleKind::kOffset, -16);
  check_rule(r, 12, RegRuleKind::kOffset, -24);
  check_rule(r, 13, RegRuleKind::kOffset, 8);
  check_rule(r, 14, RegRuleKind::kValOffset, -16);
  check_rule(r, 15, RegRuleKind::kValOffset, 16);
  check_rule(r, 5, RegRuleKind::kSameValue);
  check_rule(r, 4, RegRuleKind::kRegister, 0, 1);
  check_rule(r, 2, RegRuleKind::kOffset, 8);
  check_rule(r, 16, RegRuleKind::kUndefined);
  check_rule(r, 0, RegRuleKind::kUnspecified);

  r = must_row(b, 0x1004);
  CHECK(r.start == 0x1004);
  CHECK(r.end == 0x1100);
  check_rule(r, 16, RegRuleKind::kOffset, -8);  // restore_extended: the CIE's rule
  check_rule(r, 3, RegRuleKind::kUndefined);
  check_rule(r, 12, RegRuleKind::kOffset, -24);
}

TEST_CASE("def_cfa_sf and def_cfa_offset_sf are factored by data_align", "[cfi][ops]") {
  Built b = make_eh(bytes([](Section& s) {
    s.U8(op::def_cfa_sf).ULEB(6).SLEB(-2);  // rbp + 16
    s.U8(op::advance_loc | 2).U8(op::def_cfa_offset_sf).SLEB(-4);  // rbp + 32
  }));
  check_cfa(must_row(b, 0x1001), 6, 16);
  check_cfa(must_row(b, 0x1002), 6, 32);
}

TEST_CASE("expression rules point into the section", "[cfi][ops]") {
  const std::vector<uint8_t> cfa_expr = {0x77, 0x08, 0x06};   // breg7 8; deref
  const std::vector<uint8_t> reg_expr = {0x76, 0x70};         // breg6 -16
  const std::vector<uint8_t> val_expr = {0x91, 0x10, 0x96};   // arbitrary bytes, not evaluated here
  Built b = make_eh(bytes([&](Section& s) {
    s.U8(op::def_cfa_expression).ULEB(cfa_expr.size()).Append(cfa_expr);
    s.U8(op::expression).ULEB(6).ULEB(reg_expr.size()).Append(reg_expr);
    s.U8(op::val_expression).ULEB(3).ULEB(val_expr.size()).Append(val_expr);
    s.U8(op::expression).ULEB(70).ULEB(1).U8(0x30);  // untracked register: ignored
    s.U8(op::advance_loc | 1).U8(op::def_cfa).ULEB(7).ULEB(24);
  }));
  CfiRow r = must_row(b, 0x1000);
  REQUIRE(r.cfa.kind == CfaRule::Kind::kExpression);
  auto span = [&](uint32_t off, uint32_t len) {
    return std::vector<uint8_t>(b.data.begin() + off, b.data.begin() + off + len);
  };
  CHECK(span(r.cfa.expr_offset, r.cfa.expr_len) == cfa_expr);
  REQUIRE(r.regs[6].kind == RegRuleKind::kExpression);
  CHECK(span(r.regs[6].expr_offset, r.regs[6].expr_len) == reg_expr);
  REQUIRE(r.regs[3].kind == RegRuleKind::kValExpression);
  CHECK(span(r.regs[3].expr_offset, r.regs[3].expr_len) == val_expr);
  check_cfa(must_row(b, 0x1001), 7, 24);  // a full def_cfa replaces an expression

  CfiRow dummy;
  Built bad1 = make_eh(bytes([&](Section& s) {
    s.U8(op::def_cfa_expression).ULEB(cfa_expr.size()).Append(cfa_expr).U8(op::def_cfa_offset).ULEB(8);
  }));
  CHECK(row_at(bad1, 0x1000, &dummy) == CfiStatus::kBadCfi);
  Built bad2 = make_eh(bytes([&](Section& s) {
    s.U8(op::def_cfa_expression).ULEB(cfa_expr.size()).Append(cfa_expr).U8(op::def_cfa_register).ULEB(6);
  }));
  CHECK(row_at(bad2, 0x1000, &dummy) == CfiStatus::kBadCfi);
  Built bad3 = make_eh(bytes([&](Section& s) {
    s.U8(op::def_cfa_expression).ULEB(cfa_expr.size()).Append(cfa_expr).U8(op::def_cfa_offset_sf).SLEB(1);
  }));
  CHECK(row_at(bad3, 0x1000, &dummy) == CfiStatus::kBadCfi);
  Built bad4 = make_eh(bytes([&](Section& s) { s.U8(op::expression).ULEB(6).ULEB(200).U8(0x30); }));
  CHECK(row_at(bad4, 0x1000, &dummy) == CfiStatus::kBadCfi);  // block runs past the FDE
}

TEST_CASE("set_loc with absolute and pc-relative encodings", "[cfi][ops]") {
  // Absolute udata8 ("zR" with R = udata8).
  {
    CieSpec c;
    c.aug_data = {pe::udata8};
    c.instrs = x86_cie_instrs();
    Section s;
    Label cie, fde;
    emit_cie(s, c, &cie);
    emit_fde(
        s, cie, true, false, [](Section& f) { f.U64(kPc).U64(kRange).ULEB(0); },
        bytes([](Section& i) {
          i.U8(op::set_loc).U64(0x1020).U8(op::def_cfa_offset).ULEB(16);
          i.U8(op::set_loc).U64(0x1030).U8(op::def_cfa_offset).ULEB(24);
        }),
        &fde);
    Built b;
    b.data = s.Contents();
    b.proto.vaddr = kVaddr;
    b.fde_offset = fde.value();
    CfiRow r = must_row(b, 0x101f);
    CHECK(r.start == 0x1000);
    CHECK(r.end == 0x1020);
    r = must_row(b, 0x1020);
    CHECK(r.start == 0x1020);
    CHECK(r.end == 0x1030);
    check_cfa(r, 7, 16);
    r = must_row(b, 0x1030);
    CHECK(r.end == 0x1100);
    check_cfa(r, 7, 24);
  }
  // pc-relative sdata4: the operand is relative to its own address.
  {
    Built b;
    b.proto.vaddr = kVaddr;
    CieSpec c;
    c.instrs = x86_cie_instrs();
    Section s;
    Label cie, fde;
    emit_cie(s, c, &cie);
    emit_fde(
        s, cie, true, false,
        [&](Section& f) {
          pcrel_sdata4(f, kPc, kVaddr);
          f.U32(kRange).ULEB(0);
          // The instructions, written here so that the set_loc operand's address is known.
          f.U8(op::set_loc);
          pcrel_sdata4(f, 0x1040, kVaddr);
          f.U8(op::def_cfa_offset).ULEB(40);
        },
        {}, &fde);
    b.data = s.Contents();
    b.fde_offset = fde.value();
    CfiRow r = must_row(b, 0x103f);
    CHECK(r.end == 0x1040);
    check_cfa(r, 7, 8);
    r = must_row(b, 0x1040);
    CHECK(r.start == 0x1040);
    check_cfa(r, 7, 40);
  }
  // Backwards set_loc is malformed.
  {
    CieSpec c;
    c.aug_data = {pe::udata8};
    c.instrs = x86_cie_instrs();
    Section s;
    Label cie, fde;
    emit_cie(s, c, &cie);
    emit_fde(
        s, cie, true, false, [](Section& f) { f.U64(kPc).U64(kRange).ULEB(0); },
        bytes([](Section& i) { i.U8(op::advance_loc | 8).U8(op::set_loc).U64(0x1004); }), &fde);
    Built b;
    b.data = s.Contents();
    b.fde_offset = fde.value();
    CfiRow r;
    CHECK(row_at(b, 0x1010, &r) == CfiStatus::kBadCfi);
  }
}

TEST_CASE("remember_state / restore_state nest and save the CFA", "[cfi][ops]") {
  Built b = make_eh(bytes([](Section& s) {
    s.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(16).U8(op::offset | 6).ULEB(2);
    s.U8(op::remember_state).U8(op::def_cfa_offset).ULEB(24).U8(op::remember_state);
    s.U8(op::def_cfa_offset).ULEB(32).U8(op::offset | 3).ULEB(3).U8(op::undefined).ULEB(6);
    s.U8(op::advance_loc | 1).U8(op::restore_state);
    s.U8(op::advance_loc | 1).U8(op::restore_state);
    s.U8(op::advance_loc | 1).U8(op::restore_state);  // empty stack
  }));
  CfiRow r = must_row(b, 0x1001);
  check_cfa(r, 7, 32);
  check_rule(r, 3, RegRuleKind::kOffset, -24);
  check_rule(r, 6, RegRuleKind::kUndefined);
  r = must_row(b, 0x1002);
  check_cfa(r, 7, 24);
  check_rule(r, 3, RegRuleKind::kUnspecified);
  check_rule(r, 6, RegRuleKind::kOffset, -16);
  r = must_row(b, 0x1003);
  check_cfa(r, 7, 16);
  check_rule(r, 6, RegRuleKind::kOffset, -16);
  CHECK(r.start == 0x1003);
  CHECK(r.end == 0x1004);
  CHECK(row_at(b, 0x1004, &r) == CfiStatus::kBadCfi);
}

TEST_CASE("remember_state depth is 16", "[cfi][ops]") {
  auto program = [](int pushes) {
    return bytes([pushes](Section& s) {
      for (int i = 0; i < pushes; ++i) s.U8(op::remember_state).U8(op::def_cfa_offset).ULEB(8 * (i + 2));
      for (int i = 0; i < pushes; ++i) s.U8(op::restore_state);
    });
  };
  CfiRow r;
  r = must_row(make_eh(program(16)), 0x1000);
  check_cfa(r, 7, 8);
  CHECK(row_at(make_eh(program(17)), 0x1000, &r) == CfiStatus::kBadCfi);
}

// aadwarf64 4.4.3: 0x2d DW_CFA_AARCH64_negate_ra_state and 0x2c
// DW_CFA_AARCH64_negate_ra_state_with_pc take no operands and leave the CFA and
// register rules alone (the unwinder strips PAC bits from every arm64 return
// address). Elsewhere 0x2d is SPARC's DW_CFA_GNU_window_save (unsupported) and
// 0x2c no opcode at all.
TEST_CASE("AArch64 negate_ra_state (0x2d) and negate_ra_state_with_pc (0x2c)", "[cfi][ops]") {
  for (const uint8_t opcode : {uint8_t{op::gnu_window_save}, uint8_t{0x2c}}) {
    INFO("opcode 0x" << std::hex << int{opcode});
    // A PACIASP-style prologue: sign, push x29/x30 (16 bytes), then authenticate.
    const auto prog = bytes([opcode](Section& s) {
      s.U8(opcode);
      s.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(16);
      s.U8(op::offset | 29).ULEB(2).U8(op::offset | 30).ULEB(1);
      s.U8(op::advance_loc | 1).U8(opcode).U8(op::def_cfa_offset).ULEB(0);
    });
    CieSpec c;
    c.instrs = bytes([](Section& s) { s.U8(op::def_cfa).ULEB(31).ULEB(0); });
    c.ra = 30;
    CfiRow r;
    CHECK(row_at(make_eh(prog, c), 0x1000, &r) ==
          (opcode == op::gnu_window_save ? CfiStatus::kUnsupported : CfiStatus::kBadCfi));
    Built arm = make_eh(prog, c, kRange, CfiVendorOps::kAarch64);
    check_cfa(must_row(arm, 0x1000), 31, 0);
    r = must_row(arm, 0x1001);
    check_cfa(r, 31, 16);
    check_rule(r, 29, RegRuleKind::kOffset, -16);
    check_rule(r, 30, RegRuleKind::kOffset, -8);
    r = must_row(arm, 0x1002);
    check_cfa(r, 31, 0);
    CHECK(r.start == 0x1002);
  }
}

TEST_CASE("registers beyond kMaxCfiRegs", "[cfi][ops]") {
  CfiRow r;
  // Rules for untracked registers (arm64 d8 = 72) are dropped.
  Built ok = make_eh(bytes([](Section& s) {
    s.U8(op::offset_extended).ULEB(72).ULEB(2).U8(op::restore_extended).ULEB(100);
    s.U8(op::undefined).ULEB(1000).U8(op::same_value).ULEB(kMaxCfiRegs).U8(op::val_offset).ULEB(99).ULEB(1);
    s.U8(op::reg).ULEB(80).ULEB(3).U8(op::reg).ULEB(3).ULEB(80);
  }));
  r = must_row(ok, 0x1000);
  check_rule(r, 3, RegRuleKind::kRegister, 0, 80);
  // ...but the CFA cannot be based on one.
  CHECK(row_at(make_eh(bytes([](Section& s) { s.U8(op::def_cfa).ULEB(72).ULEB(0); })), 0x1000, &r) ==
        CfiStatus::kBadCfi);
  CHECK(row_at(make_eh(bytes([](Section& s) { s.U8(op::def_cfa_sf).ULEB(72).SLEB(0); })), 0x1000, &r) ==
        CfiStatus::kBadCfi);
  CHECK(row_at(make_eh(bytes([](Section& s) { s.U8(op::def_cfa_register).ULEB(72); })), 0x1000, &r) ==
        CfiStatus::kBadCfi);
  CHECK(row_at(make_eh(bytes([](Section& s) { s.U8(op::reg).ULEB(3).ULEB(0x10000); })), 0x1000, &r) ==
        CfiStatus::kBadCfi);
  // A return-address column that cannot be tracked.
  CieSpec c;
  c.ra = 72;
  c.version = 3;
  Built b = make_eh({}, c);
  FdeInfo f;
  CHECK(decode_fde(b.sec(), b.fde_offset, &f) == CfiStatus::kBadCfi);
}

TEST_CASE("unknown opcodes, truncated operands and the op budget", "[cfi][ops]") {
  CfiRow r;
  for (uint8_t bad : {0x17, 0x1b, 0x1c, 0x1e, 0x2c, 0x30, 0x3f}) {
    INFO("opcode " << int(bad));
    CHECK(row_at(make_eh({bad}), 0x1000, &r) == CfiStatus::kBadCfi);
  }
  // Every proper prefix of a multi-byte op fails; the whole op works.
  const auto full = bytes([](Section& s) { s.U8(op::def_cfa).ULEB(300).ULEB(100000); });
  for (size_t n = 1; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    INFO("prefix " << n);
    CHECK(row_at(make_eh(cut), 0x1000, &r) == CfiStatus::kBadCfi);
  }
  const auto ok = bytes([](Section& s) { s.U8(op::def_cfa).ULEB(6).ULEB(100000); });
  check_cfa(must_row(make_eh(ok), 0x1000), 6, 100000);

  // CIE program has 2 ops; the budget counts both programs.
  std::vector<uint8_t> nops(kMaxCfaOps - 2, op::nop);
  CHECK(row_at(make_eh(nops), 0x1000, &r) == CfiStatus::kOk);
  nops.push_back(op::nop);
  CHECK(row_at(make_eh(nops), 0x1000, &r) == CfiStatus::kBadCfi);
}

TEST_CASE("ops after the row containing pc are not interpreted", "[cfi][ops]") {
  // A garbage opcode in a later row does not affect earlier rows.
  Built b = make_eh(bytes([](Section& s) { s.U8(op::advance_loc | 4).U8(0x3f); }));
  CfiRow r = must_row(b, 0x1003);
  CHECK(r.end == 0x1004);
  CHECK(row_at(b, 0x1004, &r) == CfiStatus::kBadCfi);
}
