// SPDX-License-Identifier: Apache-2.0
// Compact unwind rules: translation from CFI rows, the direct-mapped cache, module lookup.
#include <catch2/catch.hpp>

#include "unwind/module_unwind.hpp"
#include "unwind/unwind_rule.hpp"

using namespace stackprov;
using namespace stackprov::unwind;
using dwarf::RegRuleKind;

namespace {
dwarf::CfiRow x86_row(uint16_t cfa_reg, int64_t cfa_off) {
  dwarf::CfiRow row;
  row.cfa.kind = dwarf::CfaRule::Kind::kRegOffset;
  row.cfa.reg = cfa_reg;
  row.cfa.offset = cfa_off;
  row.ra_reg = 16;
  row.regs[16].kind = RegRuleKind::kOffset;
  row.regs[16].offset = -8;
  return row;
}
}  // namespace

TEST_CASE("a typical x86_64 row becomes a compact rule", "[unwind]") {
  // After push %rbp; push %rbx: CFA = rsp+24, rbp at c-16, rbx at c-24, ra at c-8.
  dwarf::CfiRow row = x86_row(7, 24);
  row.regs[6].kind = RegRuleKind::kOffset;
  row.regs[6].offset = -16;
  row.regs[3].kind = RegRuleKind::kOffset;
  row.regs[3].offset = -24;
  UnwindRule r = translate_row(row, 8, 17);
  REQUIRE(r.kind == UnwindRule::kCfaReg);
  CHECK(r.cfa_reg == 7);
  CHECK(r.cfa_off == 24);
  CHECK(r.ra_kind == UnwindRule::kRaAtCfa);
  CHECK(r.ra_off == -1);
  REQUIRE(r.nsaved == 2);
  CHECK(r.saved_reg[0] == 3);
  CHECK(r.saved_off[0] == -3);
  CHECK(r.saved_reg[1] == 6);
  CHECK(r.saved_off[1] == -2);
}

TEST_CASE("rows the compact form cannot express fall back to the interpreter", "[unwind]") {
  dwarf::CfiRow expr = x86_row(7, 8);
  expr.cfa.kind = dwarf::CfaRule::Kind::kExpression;  // PLT-style CFA expression
  CHECK(translate_row(expr, 8, 17).kind == UnwindRule::kFull);

  dwarf::CfiRow valoff = x86_row(7, 8);
  valoff.regs[3].kind = RegRuleKind::kValOffset;
  CHECK(translate_row(valoff, 8, 17).kind == UnwindRule::kFull);

  dwarf::CfiRow far = x86_row(7, 8);
  far.regs[6].kind = RegRuleKind::kOffset;
  far.regs[6].offset = -8 * 200;  // beyond int8 words
  CHECK(translate_row(far, 8, 17).kind == UnwindRule::kFull);

  dwarf::CfiRow odd = x86_row(7, 8);
  odd.regs[6].kind = RegRuleKind::kOffset;
  odd.regs[6].offset = -12;  // not word aligned
  CHECK(translate_row(odd, 8, 17).kind == UnwindRule::kFull);
}

TEST_CASE("an undefined return address column ends the stack", "[unwind]") {
  dwarf::CfiRow row = x86_row(7, 8);
  row.regs[16].kind = RegRuleKind::kUndefined;  // _start: DW_CFA_undefined rip
  CHECK(translate_row(row, 8, 17).kind == UnwindRule::kEndOfStack);
}

TEST_CASE("signal-frame rows keep the flag", "[unwind]") {
  dwarf::CfiRow row = x86_row(7, 8);
  row.signal_frame = true;
  CHECK(translate_row(row, 8, 17).signal_frame == 1);
}

TEST_CASE("rule cache hits only for the same pc and generation", "[unwind]") {
  RuleCache c;
  UnwindRule r;
  r.kind = UnwindRule::kCfaReg;
  r.cfa_off = 16;
  CHECK(c.find(0x401000, 1) == nullptr);
  c.insert(0x401000, 1, r, 17);
  REQUIRE(c.find(0x401000, 1) != nullptr);
  CHECK(c.find(0x401000, 1)->cfa_off == 16);
  CHECK(c.find(0x401000, 2) == nullptr);  // another module generation
  CHECK(c.find(0x401001, 1) == nullptr);
  CHECK(c.hits() == 2);
  CHECK(c.misses() == 3);
  c.clear();
  CHECK(c.find(0x401000, 1) == nullptr);
}

TEST_CASE("rule cache entries say which rules the walk's common step takes, and the slots they read",
          "[unwind]") {
  RuleCache c;
  // x86_64's usual prologue row: cfa = rsp + 24, ra at cfa - 8, rbp at cfa - 16, rbx at cfa - 24.
  UnwindRule r;
  r.kind = UnwindRule::kCfaReg;
  r.cfa_reg = 7;
  r.cfa_off = 24;
  r.ra_off = -1;
  r.nsaved = 2;
  r.saved_reg[0] = 6;
  r.saved_off[0] = -2;
  r.saved_reg[1] = 3;
  r.saved_off[1] = -3;
  c.insert(0x1000, 1, r, 17);
  const RuleCache::Entry* e = c.probe_entry(0x1000, 1);
  REQUIRE(e != nullptr);
  CHECK(e->common == 1);
  CHECK(e->span_lo == -3);      // the rbx slot, cfa - 24
  CHECK(e->span_words == 3);    // cfa - 24 .. cfa - 1: rbx, rbp, ra
  // A saved register the architecture's file does not hold (17 registers on x86_64): not common.
  UnwindRule wide = r;
  wide.saved_reg[1] = 20;
  c.insert(0x2000, 1, wide, 17);
  CHECK(c.probe_entry(0x2000, 1)->common == 0);
  CHECK(c.probe_entry(0x2000, 1)->rule.saved_reg[1] == 20);  // kept as given: the loop answers it
  // A signal frame, a return address in a register and a row for the interpreter: not common.
  UnwindRule sig = r;
  sig.signal_frame = 1;
  c.insert(0x3000, 1, sig, 17);
  CHECK(c.probe_entry(0x3000, 1)->common == 0);
  UnwindRule same = r;
  same.ra_kind = UnwindRule::kRaSameValue;
  c.insert(0x4000, 1, same, 17);
  CHECK(c.probe_entry(0x4000, 1)->common == 0);
  UnwindRule full;
  full.kind = UnwindRule::kFull;
  c.insert(0x5000, 1, full, 17);
  CHECK(c.probe_entry(0x5000, 1)->common == 0);
  // A leaf's row reads the return address alone; an insert of 0 registers never makes a rule common.
  UnwindRule leaf;
  leaf.kind = UnwindRule::kCfaReg;
  leaf.cfa_reg = 7;
  leaf.cfa_off = 8;
  leaf.ra_off = -1;
  c.insert(0x6000, 1, leaf, 17);
  CHECK(c.probe_entry(0x6000, 1)->common == 1);
  CHECK(c.probe_entry(0x6000, 1)->span_lo == -1);
  CHECK(c.probe_entry(0x6000, 1)->span_words == 1);
  c.insert(0x1000, 1, r, 0);
  CHECK(c.probe_entry(0x1000, 1)->common == 0);
}

TEST_CASE("module table finds the module holding a pc", "[unwind]") {
  ModuleTable t;
  ModuleSlot a;
  a.start = 0x1000;
  a.end = 0x2000;
  a.snapshot_index = 0;
  ModuleSlot b;
  b.start = 0x5000;
  b.end = 0x6000;
  b.snapshot_index = 1;
  t.add(b, nullptr);
  t.add(a, nullptr);
  t.finish();
  CHECK(t.find(0xfff) == nullptr);
  REQUIRE(t.find(0x1000) != nullptr);
  CHECK(t.find(0x1000)->snapshot_index == 0);
  CHECK(t.find(0x1fff)->snapshot_index == 0);
  CHECK(t.find(0x2000) == nullptr);
  CHECK(t.find(0x5800)->snapshot_index == 1);
  CHECK(t.find(0x6000) == nullptr);
}

TEST_CASE("module table: a hint gives find()'s answer, also where slots overlap or are empty", "[unwind]") {
  // Overlapping slots (find() takes the last start <= pc, then checks its end),
  // an empty slot sharing a start, and disjoint ones.
  const std::vector<std::vector<std::pair<uint64_t, uint64_t>>> layouts = {
      {{0x1000, 0x2000}, {0x2000, 0x3000}, {0x5000, 0x6000}},
      {{0x1000, 0x4000}, {0x2000, 0x2800}},
      {{0x1000, 0x1000}, {0x1000, 0x2000}, {0x3000, 0x4000}},
  };
  for (const auto& layout : layouts) {
    ModuleTable t;
    for (size_t i = 0; i < layout.size(); i++) {
      ModuleSlot s;
      s.start = layout[i].first;
      s.end = layout[i].second;
      s.snapshot_index = static_cast<int32_t>(i);
      t.add(s, nullptr);
    }
    t.finish();
    std::vector<const ModuleSlot*> hints = {nullptr};
    for (uint64_t pc = 0x800; pc < 0x6800; pc += 0x100)
      if (const ModuleSlot* s = t.find(pc)) hints.push_back(s);
    for (uint64_t pc = 0x800; pc < 0x6800; pc += 0x80)
      for (const ModuleSlot* h : hints) {
        INFO("pc 0x" << std::hex << pc);
        CHECK(t.find_near(pc, h) == t.find(pc));
      }
  }
}
