// SPDX-License-Identifier: Apache-2.0
// Header-only implementation of eval_expression<Mem, Regs> (DWARF 5 section 2.5), included by expression.hpp.
#pragma once

#include <cstddef>
#include <concepts>
#include <cstdint>

#include "core/leb128.hpp"
#include "dwarf/expression.hpp"

namespace stackprov::dwarf {
namespace expr_detail {

// DW_OP_* opcodes, DWARF 5 section 7.7.1 (table 7.9).
constexpr uint8_t kOpAddr = 0x03;
constexpr uint8_t kOpDeref = 0x06;
constexpr uint8_t kOpConst1u = 0x08;
constexpr uint8_t kOpConst1s = 0x09;
constexpr uint8_t kOpConst2u = 0x0a;
constexpr uint8_t kOpConst2s = 0x0b;
constexpr uint8_t kOpConst4u = 0x0c;
constexpr uint8_t kOpConst4s = 0x0d;
constexpr uint8_t kOpConst8u = 0x0e;
constexpr uint8_t kOpConst8s = 0x0f;
constexpr uint8_t kOpConstu = 0x10;
constexpr uint8_t kOpConsts = 0x11;
constexpr uint8_t kOpDup = 0x12;
constexpr uint8_t kOpDrop = 0x13;
constexpr uint8_t kOpOver = 0x14;
constexpr uint8_t kOpPick = 0x15;
constexpr uint8_t kOpSwap = 0x16;
constexpr uint8_t kOpRot = 0x17;
constexpr uint8_t kOpXderef = 0x18;
constexpr uint8_t kOpAbs = 0x19;
constexpr uint8_t kOpAnd = 0x1a;
constexpr uint8_t kOpDiv = 0x1b;
constexpr uint8_t kOpMinus = 0x1c;
constexpr uint8_t kOpMod = 0x1d;
constexpr uint8_t kOpMul = 0x1e;
constexpr uint8_t kOpNeg = 0x1f;
constexpr uint8_t kOpNot = 0x20;
constexpr uint8_t kOpOr = 0x21;
constexpr uint8_t kOpPlus = 0x22;
constexpr uint8_t kOpPlusUconst = 0x23;
constexpr uint8_t kOpShl = 0x24;
constexpr uint8_t kOpShr = 0x25;
constexpr uint8_t kOpShra = 0x26;
constexpr uint8_t kOpXor = 0x27;
constexpr uint8_t kOpBra = 0x28;
constexpr uint8_t kOpEq = 0x29;
constexpr uint8_t kOpGe = 0x2a;
constexpr uint8_t kOpGt = 0x2b;
constexpr uint8_t kOpLe = 0x2c;
constexpr uint8_t kOpLt = 0x2d;
constexpr uint8_t kOpNe = 0x2e;
constexpr uint8_t kOpSkip = 0x2f;
constexpr uint8_t kOpLit0 = 0x30;
constexpr uint8_t kOpLit31 = 0x4f;
constexpr uint8_t kOpReg0 = 0x50;
constexpr uint8_t kOpReg31 = 0x6f;
constexpr uint8_t kOpBreg0 = 0x70;
constexpr uint8_t kOpBreg31 = 0x8f;
constexpr uint8_t kOpRegx = 0x90;
constexpr uint8_t kOpBregx = 0x92;
constexpr uint8_t kOpDerefSize = 0x94;
constexpr uint8_t kOpNop = 0x96;
// Location expressions only (a `Regs` with frame_base/cfa/on_stack_value: dwarf/frame_args.cpp).
constexpr uint8_t kOpFbreg = 0x91;
constexpr uint8_t kOpCallFrameCfa = 0x9c;
constexpr uint8_t kOpStackValue = 0x9f;

/// A `Regs` that answers a location expression's frame questions (DWARF 5 section 2.5.1.2, 2.6.1.1.4).
template <class Regs>
concept LocationRegs = requires(const Regs& r, uint64_t* v) {
  { r.frame_base(v) } -> std::same_as<bool>;
  { r.cfa(v) } -> std::same_as<bool>;
  r.on_stack_value();
};

/// Cursor over the expression bytes; every read is bounds-checked.
struct ExprReader {
  const uint8_t* p;
  size_t len;
  size_t pos;
  bool big_endian;

  bool fixed(unsigned n, uint64_t* v) {
    if (n > len - pos) return false;
    uint64_t r = 0;
    if (big_endian) {
      for (unsigned i = 0; i < n; ++i) r = (r << 8) | p[pos + i];
    } else {
      for (unsigned i = n; i > 0; --i) r = (r << 8) | p[pos + i - 1];
    }
    pos += n;
    *v = r;
    return true;
  }
  bool uleb(uint64_t* v) {
    if (pos > len) return false;
    const uint8_t* q = read_uleb128(p + pos, p + len, v);
    if (q == nullptr) return false;
    pos = static_cast<size_t>(q - p);
    return true;
  }
  bool sleb(int64_t* v) {
    if (pos > len) return false;
    const uint8_t* q = read_sleb128(p + pos, p + len, v);
    if (q == nullptr) return false;
    pos = static_cast<size_t>(q - p);
    return true;
  }
};

inline uint64_t sign_extend(uint64_t v, unsigned bits) {
  if (bits >= 64) return v;
  const uint64_t m = uint64_t{1} << (bits - 1);
  v &= (uint64_t{1} << bits) - 1;
  return (v ^ m) - m;
}

}  // namespace expr_detail

template <class Mem, class Regs>
ExprStatus eval_expression(const uint8_t* expr, size_t len, uint8_t addr_size, bool big_endian,
                           Mem& mem, const Regs& regs, const uint64_t* initial, uint64_t* out) {
  using namespace expr_detail;
  if (addr_size != 4 && addr_size != 8) return ExprStatus::kBadExpr;
  if (expr == nullptr && len != 0) return ExprStatus::kBadExpr;
  const unsigned bits = addr_size * 8u;
  const uint64_t mask = addr_size == 8 ? ~uint64_t{0} : 0xffffffffu;
  // Values are addr_size wide; signed ops see them sign-extended from that width.
  auto sx = [&](uint64_t v) { return static_cast<int64_t>(sign_extend(v, bits)); };

  uint64_t stack[kExprMaxStack];
  int sp = 0;  // number of values on the stack
#define SPROV_PUSH(v)                                           \
  do {                                                          \
    const uint64_t pushed_ = static_cast<uint64_t>(v) & mask;   \
    if (sp >= kExprMaxStack) return ExprStatus::kStackOverflow; \
    stack[sp] = pushed_;                                        \
    ++sp;                                                       \
  } while (0)
#define SPROV_NEED(n) \
  do {                \
    if (sp < (n)) return ExprStatus::kStackUnderflow; \
  } while (0)

  if (initial != nullptr) SPROV_PUSH(*initial);
  ExprReader r{expr, len, 0, big_endian};
  int steps = 0;
  while (r.pos < len) {
    if (++steps > kExprMaxSteps) return ExprStatus::kStepLimit;
    const uint8_t op = expr[r.pos++];
    uint64_t u = 0;
    int64_t s = 0;
    if (op >= kOpLit0 && op <= kOpLit31) {
      SPROV_PUSH(op - kOpLit0);
      continue;
    }
    if (op >= kOpReg0 && op <= kOpReg31) {
      uint64_t v = 0;
      if (!regs.get(static_cast<uint16_t>(op - kOpReg0), &v)) return ExprStatus::kNoRegister;
      SPROV_PUSH(v);
      continue;
    }
    if (op >= kOpBreg0 && op <= kOpBreg31) {
      if (!r.sleb(&s)) return ExprStatus::kBadExpr;
      uint64_t v = 0;
      if (!regs.get(static_cast<uint16_t>(op - kOpBreg0), &v)) return ExprStatus::kNoRegister;
      SPROV_PUSH(v + static_cast<uint64_t>(s));
      continue;
    }
    switch (op) {
      case kOpAddr:
        if (!r.fixed(addr_size, &u)) return ExprStatus::kBadExpr;
        SPROV_PUSH(u);
        break;
      case kOpConst1u:
      case kOpConst1s:
      case kOpConst2u:
      case kOpConst2s:
      case kOpConst4u:
      case kOpConst4s:
      case kOpConst8u:
      case kOpConst8s: {
        const unsigned n = 1u << ((op - kOpConst1u) / 2);
        if (!r.fixed(n, &u)) return ExprStatus::kBadExpr;
        if ((op - kOpConst1u) & 1) u = sign_extend(u, n * 8);
        SPROV_PUSH(u);
        break;
      }
      case kOpConstu:
        if (!r.uleb(&u)) return ExprStatus::kBadExpr;
        SPROV_PUSH(u);
        break;
      case kOpConsts:
        if (!r.sleb(&s)) return ExprStatus::kBadExpr;
        SPROV_PUSH(s);
        break;
      case kOpDup:
        SPROV_NEED(1);
        SPROV_PUSH(stack[sp - 1]);
        break;
      case kOpDrop:
        SPROV_NEED(1);
        --sp;
        break;
      case kOpOver:
        SPROV_NEED(2);
        SPROV_PUSH(stack[sp - 2]);
        break;
      case kOpPick: {
        if (!r.fixed(1, &u)) return ExprStatus::kBadExpr;
        if (u >= static_cast<uint64_t>(sp)) return ExprStatus::kStackUnderflow;
        SPROV_PUSH(stack[sp - 1 - static_cast<int>(u)]);
        break;
      }
      case kOpSwap: {
        SPROV_NEED(2);
        const uint64_t t = stack[sp - 1];
        stack[sp - 1] = stack[sp - 2];
        stack[sp - 2] = t;
        break;
      }
      case kOpRot: {
        // (a b c -- c a b): top moves to third, second to top, third to second.
        SPROV_NEED(3);
        const uint64_t top = stack[sp - 1];
        stack[sp - 1] = stack[sp - 2];
        stack[sp - 2] = stack[sp - 3];
        stack[sp - 3] = top;
        break;
      }
      case kOpDeref:
      case kOpDerefSize: {
        unsigned n = addr_size;
        if (op == kOpDerefSize) {
          if (!r.fixed(1, &u)) return ExprStatus::kBadExpr;
          if (u == 0 || u > addr_size) return ExprStatus::kBadExpr;
          n = static_cast<unsigned>(u);
        }
        SPROV_NEED(1);
        uint8_t buf[8] = {};
        if (!mem.read(stack[sp - 1], buf, n)) return ExprStatus::kMemory;
        uint64_t v = 0;
        if (big_endian) {
          for (unsigned i = 0; i < n; ++i) v = (v << 8) | buf[i];
        } else {
          for (unsigned i = n; i > 0; --i) v = (v << 8) | buf[i - 1];
        }
        stack[sp - 1] = v & mask;
        break;
      }
      case kOpAbs: {
        SPROV_NEED(1);
        const int64_t v = sx(stack[sp - 1]);
        stack[sp - 1] = (v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v)) & mask;
        break;
      }
      case kOpNeg:
        SPROV_NEED(1);
        stack[sp - 1] = (0 - stack[sp - 1]) & mask;
        break;
      case kOpNot:
        SPROV_NEED(1);
        stack[sp - 1] = ~stack[sp - 1] & mask;
        break;
      case kOpPlusUconst:
        if (!r.uleb(&u)) return ExprStatus::kBadExpr;
        SPROV_NEED(1);
        stack[sp - 1] = (stack[sp - 1] + u) & mask;
        break;
      case kOpAnd:
      case kOpDiv:
      case kOpMinus:
      case kOpMod:
      case kOpMul:
      case kOpOr:
      case kOpPlus:
      case kOpShl:
      case kOpShr:
      case kOpShra:
      case kOpXor:
      case kOpEq:
      case kOpGe:
      case kOpGt:
      case kOpLe:
      case kOpLt:
      case kOpNe: {
        SPROV_NEED(2);
        const uint64_t b = stack[sp - 1];  // top
        const uint64_t a = stack[sp - 2];  // second
        --sp;
        uint64_t v = 0;
        switch (op) {
          case kOpAnd: v = a & b; break;
          case kOpOr: v = a | b; break;
          case kOpXor: v = a ^ b; break;
          case kOpPlus: v = a + b; break;
          case kOpMinus: v = a - b; break;
          case kOpMul: v = a * b; break;
          case kOpDiv: {  // signed, as GCC's unwinder
            if (b == 0) return ExprStatus::kDivByZero;
            const int64_t sa = sx(a), sb = sx(b);
            v = (sb == -1) ? 0 - static_cast<uint64_t>(sa) : static_cast<uint64_t>(sa / sb);
            break;
          }
          case kOpMod:  // unsigned, as GCC's unwinder
            if (b == 0) return ExprStatus::kDivByZero;
            v = a % b;
            break;
          case kOpShl: v = b >= bits ? 0 : a << b; break;
          case kOpShr: v = b >= bits ? 0 : a >> b; break;
          case kOpShra: {
            const int64_t sa = sx(a);
            v = static_cast<uint64_t>(b >= bits ? (sa < 0 ? -1 : 0) : (sa >> b));
            break;
          }
          // Comparisons are signed (DWARF 5 section 2.5.1.4 on the generic type; GCC).
          case kOpEq: v = a == b; break;
          case kOpNe: v = a != b; break;
          case kOpGe: v = sx(a) >= sx(b); break;
          case kOpGt: v = sx(a) > sx(b); break;
          case kOpLe: v = sx(a) <= sx(b); break;
          case kOpLt: v = sx(a) < sx(b); break;
          default: break;
        }
        stack[sp - 1] = v & mask;
        break;
      }
      case kOpSkip:
      case kOpBra: {
        if (!r.fixed(2, &u)) return ExprStatus::kBadExpr;
        const int64_t off = static_cast<int16_t>(static_cast<uint16_t>(u));
        bool take = true;
        if (op == kOpBra) {
          SPROV_NEED(1);
          take = stack[--sp] != 0;
        }
        if (take) {
          const int64_t target = static_cast<int64_t>(r.pos) + off;
          if (target < 0 || target > static_cast<int64_t>(len)) return ExprStatus::kBadExpr;
          r.pos = static_cast<size_t>(target);
        }
        break;
      }
      case kOpRegx: {
        if (!r.uleb(&u)) return ExprStatus::kBadExpr;
        if (u > 0xffff) return ExprStatus::kNoRegister;
        uint64_t v = 0;
        if (!regs.get(static_cast<uint16_t>(u), &v)) return ExprStatus::kNoRegister;
        SPROV_PUSH(v);
        break;
      }
      case kOpBregx: {
        if (!r.uleb(&u) || !r.sleb(&s)) return ExprStatus::kBadExpr;
        if (u > 0xffff) return ExprStatus::kNoRegister;
        uint64_t v = 0;
        if (!regs.get(static_cast<uint16_t>(u), &v)) return ExprStatus::kNoRegister;
        SPROV_PUSH(v + static_cast<uint64_t>(s));
        break;
      }
      case kOpNop:
        break;
      case kOpFbreg:
      case kOpCallFrameCfa:
      case kOpStackValue:
        if constexpr (LocationRegs<Regs>) {
          uint64_t v = 0;
          if (op == kOpStackValue) {
            // The value is the top of the stack, not its address; only as the last operation.
            if (r.pos != len) return ExprStatus::kBadExpr;
            regs.on_stack_value();
            break;
          }
          if (op == kOpFbreg && !r.sleb(&s)) return ExprStatus::kBadExpr;
          if (!(op == kOpFbreg ? regs.frame_base(&v) : regs.cfa(&v))) return ExprStatus::kNoRegister;
          SPROV_PUSH(v + (op == kOpFbreg ? static_cast<uint64_t>(s) : 0));
          break;
        } else {
          return ExprStatus::kBadExpr;  // CFI: not valid there
        }
      case kOpXderef:  // address spaces are not modelled
      default:         // call_frame_cfa, fbreg, push_object_address, call*, pieces, …
        return ExprStatus::kBadExpr;
    }
  }
#undef SPROV_PUSH
#undef SPROV_NEED
  if (sp == 0) return ExprStatus::kStackUnderflow;
  *out = stack[sp - 1];
  return ExprStatus::kOk;
}

}  // namespace stackprov::dwarf
