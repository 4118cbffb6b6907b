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

// x86_64's usual prologue row: cfa = rsp + 24, ra at cfa - 8, rbp at cfa - 16, rbx at cfa - 24.
static UnwindRule prologue_row() {
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
  return r;
}

TEST_CASE("rule cache entries say which rules the walk's common step takes, and the slots they read",
          "[unwind]") {
  RuleCache c;
  const UnwindRule r = prologue_row();
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

TEST_CASE("rule cache entries carry the pcs-only walk's form: CFA base, slot words, other saved registers",
          "[unwind]") {
  RuleCache c;
  // x86_64 (rsp 7, rbp 6): rbx at word 0 of the span, rbp at word 1, ra at word 2.
  const UnwindRule r = prologue_row();
  c.insert(0x1000, 1, r, 17, 7, 6);
  const RuleCache::Entry* e = c.probe_entry(0x1000, 1);
  REQUIRE(e != nullptr);
  CHECK((e->pcs & 3) == RuleCache::kPcsCfaSp);
  CHECK((e->pcs >> 2) == 1);  // rbx
  CHECK(e->ra_rel == 2);
  CHECK(e->fp_rel == 1);
  CHECK(e->other_reg[0] == 3);
  CHECK(e->other_rel[0] == 0);
  // Without the architecture's sp and fp (the default), no pcs form.
  c.insert(0x1000, 1, r, 17);
  CHECK(c.probe_entry(0x1000, 1)->pcs == 0);
  // The CFA on rbp after `mov %rsp,%rbp`: cfa = rbp + 16, rbp at cfa - 16, ra at cfa - 8.
  UnwindRule f;
  f.kind = UnwindRule::kCfaReg;
  f.cfa_reg = 6;
  f.cfa_off = 16;
  f.ra_off = -1;
  f.nsaved = 1;
  f.saved_reg[0] = 6;
  f.saved_off[0] = -2;
  c.insert(0x2000, 1, f, 17, 7, 6);
  e = c.probe_entry(0x2000, 1);
  CHECK((e->pcs & 3) == RuleCache::kPcsCfaFp);
  CHECK((e->pcs >> 2) == 0);
  CHECK(e->fp_rel == 0);
  CHECK(e->ra_rel == 1);
  // The CFA on another register (rbx, as some hand-written code has it): common, no pcs form.
  UnwindRule b = f;
  b.cfa_reg = 3;
  c.insert(0x3000, 1, b, 17, 7, 6);
  CHECK(c.probe_entry(0x3000, 1)->common == 1);
  CHECK(c.probe_entry(0x3000, 1)->pcs == 0);
  // Five saved registers besides rbp (rbx, r12-r15: a function that saves every callee-saved
  // register) fit; a sixth does not (arm64's x19-x28 may).
  UnwindRule many;
  many.kind = UnwindRule::kCfaReg;
  many.cfa_reg = 7;
  many.cfa_off = 64;
  many.ra_off = -1;
  const uint8_t regs[6] = {6, 3, 12, 13, 14, 15};
  for (int i = 0; i < 6; i++) {
    many.saved_reg[i] = regs[i];
    many.saved_off[i] = static_cast<int8_t>(-2 - i);
  }
  many.nsaved = 6;
  c.insert(0x4000, 1, many, 17, 7, 6);
  e = c.probe_entry(0x4000, 1);
  CHECK((e->pcs & 3) == RuleCache::kPcsCfaSp);
  CHECK((e->pcs >> 2) == 5);
  CHECK(e->fp_rel == 5);  // the span starts at cfa - 7 words (r15): rbp at cfa - 2 words
  CHECK(e->other_reg[4] == 15);
  CHECK(e->other_rel[4] == 0);
  many.saved_reg[0] = 1;  // rdx in rbp's place: six others
  c.insert(0x5000, 1, many, 17, 7, 6);
  CHECK(c.probe_entry(0x5000, 1)->pcs == 0);
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
