// SPDX-License-Identifier: Apache-2.0
// Unit tests for eval_expression: every DW_OP family, limits, endianness, error statuses.
#include <catch2/catch.hpp>

#include <map>

#include "cfi_builder.hpp"
#include "dwarf/expression.hpp"

using namespace stackprov::dwarf;
using stackprov::test::Section;

namespace {

struct FakeMemory {
  std::map<uint64_t, uint8_t> bytes;
  int reads = 0;
  bool read(uint64_t addr, void* buf, size_t len) {
    ++reads;
    auto* out = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < len; ++i) {
      auto it = bytes.find(addr + i);
      if (it == bytes.end()) return false;
      out[i] = it->second;
    }
    return true;
  }
  void put(uint64_t addr, std::initializer_list<uint8_t> bs) {
    for (uint8_t b : bs) bytes[addr++] = b;
  }
};

struct FakeRegs {
  std::map<uint16_t, uint64_t> values;
  bool get(uint16_t reg, uint64_t* v) const {
    auto it = values.find(reg);
    if (it == values.end()) return false;
    *v = it->second;
    return true;
  }
};

struct Eval {
  FakeMemory mem;
  FakeRegs regs;
  uint8_t addr_size = 8;
  bool big_endian = false;
  uint64_t result = 0;

  ExprStatus run(const std::vector<uint8_t>& e, const uint64_t* initial = nullptr) {
    return eval_expression(e.data(), e.size(), addr_size, big_endian, mem, regs, initial, &result);
  }
  uint64_t value(const std::vector<uint8_t>& e, const uint64_t* initial = nullptr) {
    REQUIRE(run(e, initial) == ExprStatus::kOk);
    return result;
  }
};

std::vector<uint8_t> ops(const std::function<void(Section&)>& f, bool be = false) {
  Section s(be);
  f(s);
  return s.Contents();
}

// DW_OP_* (DWARF 5 section 7.7.1), independent of the implementation's table.
enum : uint8_t {
  addr = 0x03, deref = 0x06, const1u = 0x08, const1s, const2u, const2s, const4u, const4s, const8u,
  const8s, constu, consts, dup_, drop, over, pick, swap, rot, xderef, abs_, and_, div_, minus, mod,
  mul, neg, not_, or_, plus, plus_uconst, shl, shr, shra, xor_, bra, eq, ge, gt, le, lt, ne, skip,
  lit0 = 0x30, reg0 = 0x50, breg0 = 0x70, regx = 0x90, fbreg = 0x91, bregx = 0x92, piece = 0x93,
  deref_size = 0x94, nop = 0x96, push_object_address = 0x97, call2 = 0x98, call_frame_cfa = 0x9c,
};

}  // namespace

TEST_CASE("literals and constants", "[expr]") {
  Eval ev;
  CHECK(ev.value({lit0}) == 0);
  CHECK(ev.value({lit0 + 31}) == 31);
  CHECK(ev.value(ops([](Section& s) { s.U8(addr).U64(0x1122334455667788); })) == 0x1122334455667788);
  CHECK(ev.value({const1u, 0xff}) == 0xff);
  CHECK(ev.value({const1s, 0xff}) == ~uint64_t{0});
  CHECK(ev.value(ops([](Section& s) { s.U8(const2u).U16(0xfffe); })) == 0xfffe);
  CHECK(ev.value(ops([](Section& s) { s.U8(const2s).U16(0xfffe); })) == uint64_t(-2));
  CHECK(ev.value(ops([](Section& s) { s.U8(const4u).U32(0x80000000); })) == 0x80000000);
  CHECK(ev.value(ops([](Section& s) { s.U8(const4s).U32(0x80000000); })) == 0xffffffff80000000);
  CHECK(ev.value(ops([](Section& s) { s.U8(const8u).U64(0x8000000000000001); })) == 0x8000000000000001);
  CHECK(ev.value(ops([](Section& s) { s.U8(const8s).U64(~uint64_t{0}); })) == ~uint64_t{0});
  CHECK(ev.value(ops([](Section& s) { s.U8(constu).ULEB(624485); })) == 624485);
  CHECK(ev.value(ops([](Section& s) { s.U8(consts).SLEB(-123456); })) == uint64_t(-123456));
  CHECK(ev.run({const4u, 1, 2}) == ExprStatus::kBadExpr);  // truncated operand
  CHECK(ev.run({addr, 1, 2, 3}) == ExprStatus::kBadExpr);
}

TEST_CASE("32-bit targets mask values", "[expr]") {
  Eval ev;
  ev.addr_size = 4;
  CHECK(ev.value({const1s, 0xff}) == 0xffffffff);
  CHECK(ev.value(ops([](Section& s) { s.U8(addr).U32(0xdeadbeef); })) == 0xdeadbeef);
  CHECK(ev.value({lit0, neg}) == 0);
  CHECK(ev.value({lit0 + 1, neg}) == 0xffffffff);
  CHECK(ev.value(ops([](Section& s) { s.U8(const4u).U32(0xfffffff0).U8(plus_uconst).ULEB(0x20); })) == 0x10);
  CHECK(ev.value({const1s, 0xf0, lit0 + 4, shra}) == 0xffffffff);  // -16 >> 4 == -1 (32-bit)
  CHECK(ev.value({const1s, 0xff, lit0 + 1, gt}) == 0);             // -1 > 1 is false (signed)
  CHECK(ev.value({const1s, 0xff, abs_}) == 1);
  ev.addr_size = 3;
  CHECK(ev.run({lit0}) == ExprStatus::kBadExpr);
}

TEST_CASE("stack manipulation", "[expr]") {
  Eval ev;
  CHECK(ev.value({lit0 + 1, dup_, plus}) == 2);
  CHECK(ev.value({lit0 + 1, lit0 + 2, drop}) == 1);
  CHECK(ev.value({lit0 + 1, lit0 + 2, over}) == 1);
  CHECK(ev.value({lit0 + 1, lit0 + 2, lit0 + 3, pick, 2}) == 1);
  CHECK(ev.value({lit0 + 1, lit0 + 2, lit0 + 3, pick, 0}) == 3);
  CHECK(ev.run({lit0 + 1, pick, 1}) == ExprStatus::kStackUnderflow);
  CHECK(ev.value({lit0 + 1, lit0 + 2, swap}) == 1);
  CHECK(ev.value({lit0 + 1, lit0 + 2, swap, drop}) == 2);
  // rot: (a b c -- c a b)
  CHECK(ev.value({lit0 + 1, lit0 + 2, lit0 + 3, rot}) == 2);
  CHECK(ev.value({lit0 + 1, lit0 + 2, lit0 + 3, rot, drop}) == 1);
  CHECK(ev.value({lit0 + 1, lit0 + 2, lit0 + 3, rot, drop, drop}) == 3);
  CHECK(ev.run({lit0 + 1, lit0 + 2, rot}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({drop}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({dup_}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({lit0, over}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({lit0, swap}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({nop}) == ExprStatus::kStackUnderflow);
  uint64_t cfa = 0x7000;
  CHECK(ev.value({}, &cfa) == 0x7000);
  CHECK(ev.value({nop}, &cfa) == 0x7000);
}

TEST_CASE("arithmetic and logic", "[expr]") {
  Eval ev;
  auto bin = [&](uint8_t a_op, std::initializer_list<uint8_t> a, std::initializer_list<uint8_t> b) {
    std::vector<uint8_t> e(a);
    e.insert(e.end(), b.begin(), b.end());
    e.push_back(a_op);
    return ev.value(e);
  };
  const std::initializer_list<uint8_t> m7 = {const1s, uint8_t(-7)};
  const std::initializer_list<uint8_t> p2 = {lit0 + 2};
  const std::initializer_list<uint8_t> p12 = {lit0 + 12};
  const std::initializer_list<uint8_t> p10 = {lit0 + 10};
  CHECK(bin(and_, p12, p10) == 8);
  CHECK(bin(or_, p12, p10) == 14);
  CHECK(bin(xor_, p12, p10) == 6);
  CHECK(bin(plus, p12, p10) == 22);
  CHECK(bin(minus, p10, p12) == uint64_t(-2));
  CHECK(bin(mul, m7, p2) == uint64_t(-14));
  CHECK(bin(div_, m7, p2) == uint64_t(-3));  // signed, truncating
  CHECK(bin(mod, p12, p10) == 2);
  CHECK(bin(shl, p10, p2) == 40);
  CHECK(bin(shr, m7, p2) == (uint64_t(-7) >> 2));
  CHECK(bin(shra, m7, p2) == uint64_t(-2));
  CHECK(ev.value({lit0 + 1, const1u, 64, shl}) == 0);
  CHECK(ev.value({lit0 + 1, const1u, 200, shr}) == 0);
  CHECK(ev.value({const1s, 0x80, const1u, 100, shra}) == ~uint64_t{0});
  CHECK(ev.value({const1s, uint8_t(-5), abs_}) == 5);
  CHECK(ev.value({lit0 + 5, abs_}) == 5);
  CHECK(ev.value({lit0 + 5, neg}) == uint64_t(-5));
  CHECK(ev.value({lit0, not_}) == ~uint64_t{0});
  CHECK(ev.value(ops([](Section& s) { s.U8(lit0 + 1).U8(plus_uconst).ULEB(1000); })) == 1001);
  CHECK(ev.run({lit0 + 1, lit0, div_}) == ExprStatus::kDivByZero);
  CHECK(ev.run({lit0 + 1, lit0, mod}) == ExprStatus::kDivByZero);
  // INT64_MIN / -1 wraps instead of trapping.
  CHECK(ev.value(ops([](Section& s) { s.U8(const8u).U64(0x8000000000000000).U8(const1s).U8(0xff).U8(div_); })) ==
        0x8000000000000000);
  CHECK(ev.run({lit0, plus}) == ExprStatus::kStackUnderflow);
  CHECK(ev.run({neg}) == ExprStatus::kStackUnderflow);
}

TEST_CASE("comparisons are signed", "[expr]") {
  Eval ev;
  const uint8_t m1[] = {const1s, 0xff};
  auto cmp = [&](uint8_t op, bool a_neg, uint8_t b) {
    std::vector<uint8_t> e;
    if (a_neg) {
      e = {m1[0], m1[1]};
    } else {
      e = {lit0 + 3};
    }
    e.push_back(b);
    e.push_back(op);
    return ev.value(e);
  };
  CHECK(cmp(lt, true, lit0 + 1) == 1);
  CHECK(cmp(gt, true, lit0 + 1) == 0);
  CHECK(cmp(le, false, lit0 + 3) == 1);
  CHECK(cmp(ge, false, lit0 + 4) == 0);
  CHECK(cmp(ge, false, lit0 + 3) == 1);
  CHECK(cmp(eq, false, lit0 + 3) == 1);
  CHECK(cmp(ne, false, lit0 + 3) == 0);
  CHECK(cmp(ne, true, lit0 + 3) == 1);
  CHECK(cmp(gt, false, lit0 + 2) == 1);
  CHECK(cmp(lt, false, lit0 + 2) == 0);
}

TEST_CASE("control flow: skip and bra", "[expr]") {
  Eval ev;
  // skip over lit1: result lit2.
  CHECK(ev.value(ops([](Section& s) { s.U8(skip).U16(1).U8(lit0 + 1).U8(lit0 + 2); })) == 2);
  // bra taken / not taken.
  auto branch = [](uint8_t cond) {
    return ops([cond](Section& s) { s.U8(cond).U8(bra).U16(4).U8(lit0 + 7).U8(skip).U16(1).U8(lit0 + 9); });
  };
  CHECK(ev.value(branch(lit0 + 1)) == 9);
  CHECK(ev.value(branch(lit0)) == 7);
  // A loop: count down from 5 (x; dup_; bra back ... ) computing the sum 5+4+3+2+1.
  //   lit0(acc) lit5(n) | over over plus swap drop? — use a simple countdown instead:
  //   lit5: [L] lit1 minus dup_ bra L  -> ends with 0
  CHECK(ev.value(ops([](Section& s) {
          s.U8(lit0 + 5).U8(lit0 + 1).U8(minus).U8(dup_).U8(bra).U16(static_cast<uint16_t>(-6));
        })) == 0);
  // Jumping to exactly the end is allowed; past it or before the start is not.
  CHECK(ev.value(ops([](Section& s) { s.U8(lit0 + 3).U8(skip).U16(1).U8(lit0); })) == 3);
  CHECK(ev.run(ops([](Section& s) { s.U8(lit0 + 3).U8(skip).U16(2).U8(lit0); })) == ExprStatus::kBadExpr);
  CHECK(ev.run(ops([](Section& s) { s.U8(skip).U16(static_cast<uint16_t>(-4)); })) == ExprStatus::kBadExpr);
  CHECK(ev.run({skip, 0}) == ExprStatus::kBadExpr);
  CHECK(ev.run(ops([](Section& s) { s.U8(bra).U16(0); })) == ExprStatus::kStackUnderflow);
}

TEST_CASE("limits: steps and stack depth", "[expr]") {
  Eval ev;
  // skip -3 jumps back onto itself forever.
  CHECK(ev.run(ops([](Section& s) { s.U8(lit0).U8(skip).U16(static_cast<uint16_t>(-3)); })) ==
        ExprStatus::kStepLimit);
  std::vector<uint8_t> pushes(kExprMaxStack, lit0 + 1);
  CHECK(ev.value(pushes) == 1);
  pushes.push_back(lit0);
  CHECK(ev.run(pushes) == ExprStatus::kStackOverflow);
  uint64_t init = 1;
  pushes.pop_back();
  CHECK(ev.run(pushes, &init) == ExprStatus::kStackOverflow);  // the initial value counts
  std::vector<uint8_t> many(kExprMaxSteps, nop);
  many.insert(many.begin(), lit0);
  CHECK(ev.run(many) == ExprStatus::kStepLimit);
  many.pop_back();
  CHECK(ev.run(many) == ExprStatus::kOk);
}

TEST_CASE("registers", "[expr]") {
  Eval ev;
  ev.regs.values = {{7, 0x7ff000}, {6, 0x7ff100}, {31, 0x31}, {40, 0x4000}};
  CHECK(ev.value({reg0 + 7}) == 0x7ff000);
  CHECK(ev.value({reg0 + 31}) == 0x31);
  CHECK(ev.value(ops([](Section& s) { s.U8(regx).ULEB(40); })) == 0x4000);
  CHECK(ev.value(ops([](Section& s) { s.U8(breg0 + 7).SLEB(-16); })) == 0x7ff000 - 16);
  CHECK(ev.value(ops([](Section& s) { s.U8(breg0 + 6).SLEB(300); })) == 0x7ff100 + 300);
  CHECK(ev.value(ops([](Section& s) { s.U8(bregx).ULEB(40).SLEB(8); })) == 0x4008);
  CHECK(ev.run({reg0 + 1}) == ExprStatus::kNoRegister);
  CHECK(ev.run({breg0 + 1, 0}) == ExprStatus::kNoRegister);
  CHECK(ev.run(ops([](Section& s) { s.U8(regx).ULEB(41); })) == ExprStatus::kNoRegister);
  CHECK(ev.run(ops([](Section& s) { s.U8(bregx).ULEB(0x10000).SLEB(0); })) == ExprStatus::kNoRegister);
  CHECK(ev.run({breg0 + 7}) == ExprStatus::kBadExpr);  // missing SLEB
}

TEST_CASE("memory: deref, deref_size, endianness", "[expr]") {
  Eval ev;
  ev.mem.put(0x1000, {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88});
  ev.regs.values = {{7, 0x1010}};
  CHECK(ev.value(ops([](Section& s) { s.U8(const2u).U16(0x1000).U8(deref); })) == 0x8877665544332211);
  CHECK(ev.value(ops([](Section& s) { s.U8(const2u).U16(0x1000).U8(deref_size).U8(1); })) == 0x11);
  CHECK(ev.value(ops([](Section& s) { s.U8(const2u).U16(0x1000).U8(deref_size).U8(2); })) == 0x2211);
  CHECK(ev.value(ops([](Section& s) { s.U8(breg0 + 7).SLEB(-16).U8(deref_size).U8(4); })) == 0x44332211);
  CHECK(ev.run(ops([](Section& s) { s.U8(const2u).U16(0x1000).U8(deref_size).U8(9); })) == ExprStatus::kBadExpr);
  CHECK(ev.run(ops([](Section& s) { s.U8(const2u).U16(0x1000).U8(deref_size).U8(0); })) == ExprStatus::kBadExpr);
  CHECK(ev.run(ops([](Section& s) { s.U8(const2u).U16(0x1004).U8(deref); })) == ExprStatus::kMemory);
  CHECK(ev.run({deref}) == ExprStatus::kStackUnderflow);

  Eval be;
  be.big_endian = true;
  be.addr_size = 4;
  be.mem.put(0x2000, {0xde, 0xad, 0xbe, 0xef});
  CHECK(be.value(ops([](Section& s) { s.U8(const2u).U16(0x2000).U8(deref); }, true)) == 0xdeadbeef);
  CHECK(be.value(ops([](Section& s) { s.U8(const2u).U16(0x2000).U8(deref_size).U8(2); }, true)) == 0xdead);
  CHECK(be.value(ops([](Section& s) { s.U8(addr).U32(0x2000).U8(deref); }, true)) == 0xdeadbeef);
  CHECK(be.run(ops([](Section& s) { s.U8(const2u).U16(0x2000).U8(deref_size).U8(8); }, true)) ==
        ExprStatus::kBadExpr);  // larger than an address
  CHECK(be.value(ops([](Section& s) { s.U8(const2s).U16(0xfffe); }, true)) == 0xfffffffe);
}

TEST_CASE("ops that are invalid inside CFI", "[expr]") {
  Eval ev;
  for (uint8_t op : {uint8_t(xderef), uint8_t(fbreg), uint8_t(call_frame_cfa), uint8_t(push_object_address),
                     uint8_t(call2), uint8_t(piece), uint8_t(0x99), uint8_t(0x9a), uint8_t(0xe0),
                     uint8_t(0x00), uint8_t(0xff)}) {
    INFO("op " << int(op));
    CHECK(ev.run({lit0 + 1, lit0 + 1, op, 0, 0, 0, 0}) == ExprStatus::kBadExpr);
  }
}

TEST_CASE("a typical CFI expression: PLT CFA", "[expr]") {
  // GCC/ld's x86_64 .plt CFA: rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
  const std::vector<uint8_t> e = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  Eval ev;
  ev.regs.values = {{7, 0x7fff0000}, {16, 0x401020}};
  CHECK(ev.value(e) == 0x7fff0008);
  ev.regs.values[16] = 0x40102b;
  CHECK(ev.value(e) == 0x7fff0010);
}
