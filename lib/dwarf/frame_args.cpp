// SPDX-License-Identifier: Apache-2.0
// A formal parameter's value in one frame: its location expression evaluated against the unwound frame, formatted as gdb.
#include "dwarf/frame_args.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/leb128.hpp"
#include "dwarf/expression.hpp"

namespace stackprov::dwarf {

namespace {

constexpr uint8_t kOpReg0 = 0x50, kOpReg31 = 0x6f, kOpRegx = 0x90;

struct Mem {
  const ArgFrame* f;
  bool read(uint64_t addr, void* buf, size_t len) { return f->read && f->read(addr, buf, len); }
};

/// The frame's registers, CFA and frame base for eval_expression (dwarf/expression.hpp LocationRegs).
struct Regs {
  const ArgFrame* f;
  bool have_base = false;
  uint64_t base = 0;
  mutable bool stack_value = false;
  mutable int missing = -1;  ///< the register asked for and not known (for the message)
  bool get(uint16_t reg, uint64_t* v) const {
    if (f->reg && f->reg(reg, v)) return true;
    missing = reg;
    return false;
  }
  bool frame_base(uint64_t* v) const {
    *v = base;
    return have_base;
  }
  bool cfa(uint64_t* v) const {
    *v = f->cfa;
    return f->has_cfa;
  }
  void on_stack_value() const { stack_value = true; }
};

/// A register location: the whole expression is DW_OP_reg0..31 or DW_OP_regx.
bool register_location(const uint8_t* e, size_t n, uint64_t* reg) {
  if (n == 1 && e[0] >= kOpReg0 && e[0] <= kOpReg31) {
    *reg = e[0] - kOpReg0;
    return true;
  }
  if (n >= 2 && e[0] == kOpRegx) {
    const uint8_t* q = read_uleb128(e + 1, e + n, reg);
    return q == e + n;
  }
  return false;
}

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

/// gdb's rendering of one char in quotes (generic_emit_char, host charset ASCII).
std::string quoted_char(uint8_t c) {
  switch (c) {
    case '\a': return "'\\a'";
    case '\b': return "'\\b'";
    case '\f': return "'\\f'";
    case '\n': return "'\\n'";
    case '\r': return "'\\r'";
    case '\t': return "'\\t'";
    case '\v': return "'\\v'";
    case '\033': return "'\\033'";
    case '\'': return "'\\''";
    case '\\': return "'\\\\'";
    default: break;
  }
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char b[8];
  snprintf(b, sizeof b, "'\\%03o'", c);
  return b;
}

std::string why_status(ExprStatus st, const Regs& regs, const uint8_t* e, size_t n) {
  switch (st) {
    case ExprStatus::kNoRegister:
      if (regs.missing >= 0) return "register " + std::to_string(regs.missing) + " not known in this frame";
      return "the frame's CFA or frame base is not known";
    case ExprStatus::kMemory: return "the location reads memory outside the capture";
    default: break;
  }
  for (size_t i = 0; i < n; i++)  // the usual reason, named (a heuristic: the first byte that is such an op)
    if (e[i] == 0xa3 || e[i] == 0xf3) return "DW_OP_entry_value (the value at the call, not kept in this frame)";
  return "a location expression this reader does not evaluate";
}

}  // namespace

bool format_value(const ParamType& t, const uint8_t* bytes, size_t n, bool big_endian, std::string* out,
                  std::string* why) {
  if (t.kind == ParamType::Kind::kUnsupported || t.size == 0 || t.size > 8 || n < t.size) {
    *why = t.name.empty() ? "a type this reader does not print" : "type '" + t.name + "' is not printed";
    return false;
  }
  uint64_t u = 0;
  if (big_endian) {
    for (size_t i = 0; i < t.size; i++) u = (u << 8) | bytes[i];
  } else {
    for (size_t i = t.size; i > 0; i--) u = (u << 8) | bytes[i - 1];
  }
  const unsigned bits = t.size * 8;
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const int64_t sv = bits == 64 ? static_cast<int64_t>(u) : static_cast<int64_t>((u ^ sign) - sign);
  char b[64];
  switch (t.kind) {
    case ParamType::Kind::kSigned: *out = std::to_string(sv); return true;
    case ParamType::Kind::kUnsigned: *out = std::to_string(u); return true;
    case ParamType::Kind::kChar: *out = std::to_string(sv) + " " + quoted_char(static_cast<uint8_t>(u)); return true;
    case ParamType::Kind::kUChar: *out = std::to_string(u) + " " + quoted_char(static_cast<uint8_t>(u)); return true;
    case ParamType::Kind::kBool:
      *out = u == 0 ? "false" : u == 1 ? "true" : std::to_string(u);
      return true;
    case ParamType::Kind::kPointer: *out = hex(u); return true;
    case ParamType::Kind::kFloat: {
      double d = 0;
      if (t.size == 4) {
        float fl = 0;
        const uint32_t w = static_cast<uint32_t>(u);
        std::memcpy(&fl, &w, 4);
        d = fl;
      } else {
        std::memcpy(&d, &u, 8);
      }
      if (std::isnan(d)) {
        *why = "a NaN (gdb prints its payload)";
        return false;
      }
      snprintf(b, sizeof b, t.size == 4 ? "%.9g" : "%.17g", d);
      *out = b;
      return true;
    }
    case ParamType::Kind::kEnum:
      for (const auto& [v, name] : t.enumerators) {
        const uint64_t ev = t.enum_signed ? static_cast<uint64_t>(sv) : u;
        if ((bits == 64 ? v : v & ((uint64_t{1} << bits) - 1)) == (bits == 64 ? ev : ev & ((uint64_t{1} << bits) - 1))) {
          *out = std::string(name);
          return true;
        }
      }
      *why = "not one of the enumerators of '" + t.name + "' (gdb prints flag combinations or the number)";
      return false;
    default: break;
  }
  *why = "a type this reader does not print";
  return false;
}

ArgValue param_value(const FrameParams& fp, const ParamInfo& p, const ArgFrame& f) {
  ArgValue r;
  auto unknown = [&](std::string why) {
    r.status = ArgValue::Status::kUnknown;
    r.why = std::move(why);
    return r;
  };
  switch (p.where) {
    case ParamInfo::Where::kOptimizedOut: r.status = ArgValue::Status::kOptimizedOut; return r;
    case ParamInfo::Where::kUnreadable: return unknown("a location form this reader does not decode");
    case ParamInfo::Where::kConst: {
      uint8_t b[8];
      for (int i = 0; i < 8; i++) b[i] = static_cast<uint8_t>(p.const_value >> (8 * (fp.big_endian ? 7 - i : i)));
      const uint8_t* at = fp.big_endian ? b + 8 - std::min<uint32_t>(p.type.size, 8) : b;
      if (!format_value(p.type, at, 8 - static_cast<size_t>(at - b), fp.big_endian, &r.text, &r.why)) return unknown(r.why);
      r.status = ArgValue::Status::kValue;
      return r;
    }
    case ParamInfo::Where::kExpr: break;
  }
  if (p.type.kind == ParamType::Kind::kUnsupported || p.type.size == 0 || p.type.size > 8) {
    std::string why;
    format_value(p.type, nullptr, 0, fp.big_endian, nullptr, &why);
    return unknown(why);
  }
  Regs regs{&f};
  Mem mem{&f};
  uint64_t value = 0;
  uint64_t reg = 0;
  if (register_location(p.expr, p.expr_len, &reg)) {
    if (reg > 0xffff || !regs.get(static_cast<uint16_t>(reg), &value))
      return unknown("register " + std::to_string(reg) + " not known in this frame");
  } else {
    if (fp.has_frame_base) {
      // The frame base: a register location names the register's value (DWARF 5 section 3.3.5).
      uint64_t base_reg = 0;
      if (register_location(fp.frame_base, fp.frame_base_len, &base_reg)) {
        regs.have_base = base_reg <= 0xffff && regs.get(static_cast<uint16_t>(base_reg), &regs.base);
      } else {
        Regs base_regs{&f};
        regs.have_base = eval_expression(fp.frame_base, fp.frame_base_len, fp.addr_size, fp.big_endian, mem, base_regs,
                                         nullptr, &regs.base) == ExprStatus::kOk &&
                         !base_regs.stack_value;
      }
    }
    const ExprStatus st = eval_expression(p.expr, p.expr_len, fp.addr_size, fp.big_endian, mem, regs, nullptr, &value);
    if (st != ExprStatus::kOk) return unknown(why_status(st, regs, p.expr, p.expr_len));
    if (!regs.stack_value) {  // a memory location: the value's bytes there
      uint8_t b[8] = {};
      if (!mem.read(value, b, p.type.size))
        return unknown("its memory at " + hex(value) + " is not in the capture");
      if (!format_value(p.type, b, p.type.size, fp.big_endian, &r.text, &r.why)) return unknown(r.why);
      r.status = ArgValue::Status::kValue;
      return r;
    }
  }
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<uint8_t>(value >> (8 * i));  // low bytes first
  if (fp.big_endian) {
    uint8_t be[8];
    for (uint32_t i = 0; i < p.type.size; i++) be[i] = b[p.type.size - 1 - i];
    if (!format_value(p.type, be, p.type.size, true, &r.text, &r.why)) return unknown(r.why);
  } else if (!format_value(p.type, b, p.type.size, false, &r.text, &r.why)) {
    return unknown(r.why);
  }
  r.status = ArgValue::Status::kValue;
  return r;
}

}  // namespace stackprov::dwarf
