// SPDX-License-Identifier: Apache-2.0
// The CFA program interpreter: runs CIE + FDE DW_CFA_* instructions up to a pc and yields one row.
#include <cstring>
#include <type_traits>

#include "dwarf/cfi.hpp"
#include "dwarf/cfi_reader.hpp"

namespace stackprov::dwarf {
namespace {

using detail::ByteReader;

// DW_CFA_* opcodes, DWARF 5 section 7.24 (table 7.29), plus GNU/MIPS/AArch64 extensions.
constexpr uint8_t kCfaAdvanceLoc = 0x40;  // high 2 bits; low 6 = delta
constexpr uint8_t kCfaOffset = 0x80;      // high 2 bits; low 6 = register
constexpr uint8_t kCfaRestore = 0xc0;     // high 2 bits; low 6 = register
constexpr uint8_t kCfaNop = 0x00;
constexpr uint8_t kCfaSetLoc = 0x01;
constexpr uint8_t kCfaAdvanceLoc1 = 0x02;
constexpr uint8_t kCfaAdvanceLoc2 = 0x03;
constexpr uint8_t kCfaAdvanceLoc4 = 0x04;
constexpr uint8_t kCfaOffsetExtended = 0x05;
constexpr uint8_t kCfaRestoreExtended = 0x06;
constexpr uint8_t kCfaUndefined = 0x07;
constexpr uint8_t kCfaSameValue = 0x08;
constexpr uint8_t kCfaRegister = 0x09;
constexpr uint8_t kCfaRememberState = 0x0a;
constexpr uint8_t kCfaRestoreState = 0x0b;
constexpr uint8_t kCfaDefCfa = 0x0c;
constexpr uint8_t kCfaDefCfaRegister = 0x0d;
constexpr uint8_t kCfaDefCfaOffset = 0x0e;
constexpr uint8_t kCfaDefCfaExpression = 0x0f;
constexpr uint8_t kCfaExpression = 0x10;
constexpr uint8_t kCfaOffsetExtendedSf = 0x11;
constexpr uint8_t kCfaDefCfaSf = 0x12;
constexpr uint8_t kCfaDefCfaOffsetSf = 0x13;
constexpr uint8_t kCfaValOffset = 0x14;
constexpr uint8_t kCfaValOffsetSf = 0x15;
constexpr uint8_t kCfaValExpression = 0x16;
constexpr uint8_t kCfaMipsAdvanceLoc8 = 0x1d;   // binutils include/dwarf2.def
constexpr uint8_t kCfaAarch64NegateRaStateWithPc = 0x2c;  // aadwarf64 4.4.3 (CfiVendorOps::kAarch64)
constexpr uint8_t kCfaGnuWindowSave = 0x2d;     // == DW_CFA_AARCH64_negate_ra_state
constexpr uint8_t kCfaGnuArgsSize = 0x2e;
constexpr uint8_t kCfaGnuNegativeOffsetExtended = 0x2f;

/// DW_CFA_remember_state depth (fixed, no allocation).
constexpr int kMaxStateDepth = 16;

/// Everything remember_state saves: the CFA rule and the register rules.
struct RuleSet {
  CfaRule cfa;
  RegRule regs[kMaxCfiRegs];
};
static_assert(std::is_trivially_copyable_v<RuleSet>);

class Interpreter {
 public:
  Interpreter(const CfiSection& sec, const FdeInfo& fde, uint64_t pc)
      : sec_(sec), fde_(fde), pc_(pc), loc_(fde.pc_begin), end_(fde.pc_end) {}

  /// Runs [begin, begin + len) of sec_.data. `initial` is null for the CIE program.
  CfiStatus run(uint64_t begin, uint64_t len, const RuleSet* initial);

  bool done() const { return done_; }
  RuleSet& rules() { return cur_; }
  uint64_t loc() const { return loc_; }
  uint64_t end() const { return end_; }

 private:
  CfiStatus advance_to(uint64_t new_loc);
  CfiStatus advance_by(uint64_t delta);
  RegRule* slot(uint64_t reg) {
    // Rules for registers the row does not track (e.g. arm64 d8..d15 = 72..79,
    // x86_64 xmm*) are legal CFI but irrelevant to unwinding: they are dropped.
    return reg < static_cast<uint64_t>(kMaxCfiRegs) ? &cur_.regs[reg] : nullptr;
  }
  int64_t factored(int64_t v) const {
    return static_cast<int64_t>(static_cast<uint64_t>(v) *
                                static_cast<uint64_t>(fde_.data_align));
  }

  const CfiSection& sec_;
  const FdeInfo& fde_;
  uint64_t pc_;
  uint64_t loc_;
  uint64_t end_;
  bool done_ = false;
  uint32_t ops_ = 0;
  int depth_ = 0;
  RuleSet cur_;
  // Raw storage so that entering find_row does not construct 16 RuleSets.
  alignas(RuleSet) unsigned char stack_[kMaxStateDepth * sizeof(RuleSet)];
};

CfiStatus Interpreter::advance_to(uint64_t new_loc) {
  if (new_loc < loc_) return CfiStatus::kBadCfi;  // locations only move forward
  if (new_loc > pc_) {
    end_ = new_loc < fde_.pc_end ? new_loc : fde_.pc_end;
    done_ = true;
  } else {
    loc_ = new_loc;
  }
  return CfiStatus::kOk;
}

CfiStatus Interpreter::advance_by(uint64_t delta) {
  uint64_t d = 0;
  if (__builtin_mul_overflow(delta, fde_.code_align, &d)) return CfiStatus::kBadCfi;
  const uint64_t new_loc = loc_ + d;
  if (new_loc < loc_) return CfiStatus::kBadCfi;
  return advance_to(new_loc);
}

CfiStatus Interpreter::run(uint64_t begin, uint64_t len, const RuleSet* initial) {
  constexpr CfiStatus kBad = CfiStatus::kBadCfi;
  ByteReader r{sec_.data, static_cast<size_t>(begin + len), static_cast<size_t>(begin),
               sec_.big_endian};
  while (!done_ && r.pos < r.end) {
    if (++ops_ > kMaxCfaOps) return kBad;
    uint8_t op = 0;
    r.u8(&op);
    const uint8_t low = op & 0x3f;
    CfiStatus st = CfiStatus::kOk;
    uint64_t reg = 0, u = 0;
    int64_t s = 0;
    switch (op & 0xc0) {
      case kCfaAdvanceLoc:
        st = advance_by(low);
        if (st != CfiStatus::kOk) return st;
        continue;
      case kCfaOffset:
        if (!r.uleb(&u)) return kBad;
        if (RegRule* rr = slot(low)) *rr = RegRule{RegRuleKind::kOffset, 0, factored(static_cast<int64_t>(u)), 0, 0};
        continue;
      case kCfaRestore:
        if (RegRule* rr = slot(low)) *rr = initial ? initial->regs[low] : RegRule{};
        continue;
      default:
        break;
    }
    switch (op) {
      case kCfaNop:
        break;
      case kCfaSetLoc: {
        uint64_t addr = 0;
        if (!detail::read_encoded(r, fde_.fde_encoding, sec_.vaddr, sec_, fde_.addr_size, false,
                                  &addr)) {
          return kBad;
        }
        st = advance_to(addr);
        break;
      }
      case kCfaAdvanceLoc1:
        if (!r.uN(1, &u)) return kBad;
        st = advance_by(u);
        break;
      case kCfaAdvanceLoc2:
        if (!r.u16(&u)) return kBad;
        st = advance_by(u);
        break;
      case kCfaAdvanceLoc4:
        if (!r.u32(&u)) return kBad;
        st = advance_by(u);
        break;
      case kCfaMipsAdvanceLoc8:
        if (!r.u64(&u)) return kBad;
        st = advance_by(u);
        break;
      case kCfaOffsetExtended:
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kOffset, 0, factored(static_cast<int64_t>(u)), 0, 0};
        break;
      case kCfaOffsetExtendedSf:
        if (!r.uleb(&reg) || !r.sleb(&s)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kOffset, 0, factored(s), 0, 0};
        break;
      case kCfaGnuNegativeOffsetExtended:
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (RegRule* rr = slot(reg)) {
          *rr = RegRule{RegRuleKind::kOffset, 0, -factored(static_cast<int64_t>(u)), 0, 0};
        }
        break;
      case kCfaValOffset:
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kValOffset, 0, factored(static_cast<int64_t>(u)), 0, 0};
        break;
      case kCfaValOffsetSf:
        if (!r.uleb(&reg) || !r.sleb(&s)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kValOffset, 0, factored(s), 0, 0};
        break;
      case kCfaRestoreExtended:
        if (!r.uleb(&reg)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = initial ? initial->regs[reg] : RegRule{};
        break;
      case kCfaUndefined:
        if (!r.uleb(&reg)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kUndefined, 0, 0, 0, 0};
        break;
      case kCfaSameValue:
        if (!r.uleb(&reg)) return kBad;
        if (RegRule* rr = slot(reg)) *rr = RegRule{RegRuleKind::kSameValue, 0, 0, 0, 0};
        break;
      case kCfaRegister:
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (u > 0xffff) return kBad;
        if (RegRule* rr = slot(reg)) {
          *rr = RegRule{RegRuleKind::kRegister, static_cast<uint16_t>(u), 0, 0, 0};
        }
        break;
      case kCfaRememberState:
        if (depth_ >= kMaxStateDepth) return kBad;
        std::memcpy(stack_ + depth_ * sizeof(RuleSet), &cur_, sizeof(RuleSet));
        ++depth_;
        break;
      case kCfaRestoreState:
        if (depth_ == 0) return kBad;
        --depth_;
        std::memcpy(&cur_, stack_ + depth_ * sizeof(RuleSet), sizeof(RuleSet));
        break;
      case kCfaDefCfa:
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (reg >= static_cast<uint64_t>(kMaxCfiRegs)) return kBad;
        cur_.cfa = CfaRule{CfaRule::Kind::kRegOffset, static_cast<uint16_t>(reg),
                           static_cast<int64_t>(u), 0, 0};
        break;
      case kCfaDefCfaSf:
        if (!r.uleb(&reg) || !r.sleb(&s)) return kBad;
        if (reg >= static_cast<uint64_t>(kMaxCfiRegs)) return kBad;
        cur_.cfa = CfaRule{CfaRule::Kind::kRegOffset, static_cast<uint16_t>(reg), factored(s), 0, 0};
        break;
      case kCfaDefCfaRegister:
        // DWARF 5 section 6.4.2.2: only valid while the CFA rule is register+offset.
        if (!r.uleb(&reg)) return kBad;
        if (reg >= static_cast<uint64_t>(kMaxCfiRegs)) return kBad;
        if (cur_.cfa.kind != CfaRule::Kind::kRegOffset) return kBad;
        cur_.cfa.reg = static_cast<uint16_t>(reg);
        break;
      case kCfaDefCfaOffset:
        if (!r.uleb(&u)) return kBad;
        if (cur_.cfa.kind != CfaRule::Kind::kRegOffset) return kBad;
        cur_.cfa.offset = static_cast<int64_t>(u);
        break;
      case kCfaDefCfaOffsetSf:
        if (!r.sleb(&s)) return kBad;
        if (cur_.cfa.kind != CfaRule::Kind::kRegOffset) return kBad;
        cur_.cfa.offset = factored(s);
        break;
      case kCfaDefCfaExpression:
        if (!r.uleb(&u)) return kBad;
        if (u > r.remaining()) return kBad;
        cur_.cfa = CfaRule{CfaRule::Kind::kExpression, 0, 0, static_cast<uint32_t>(r.pos),
                           static_cast<uint32_t>(u)};
        r.pos += static_cast<size_t>(u);
        break;
      case kCfaExpression:
      case kCfaValExpression: {
        if (!r.uleb(&reg) || !r.uleb(&u)) return kBad;
        if (u > r.remaining()) return kBad;
        const RegRuleKind kind =
            op == kCfaExpression ? RegRuleKind::kExpression : RegRuleKind::kValExpression;
        if (RegRule* rr = slot(reg)) {
          *rr = RegRule{kind, 0, 0, static_cast<uint32_t>(r.pos), static_cast<uint32_t>(u)};
        }
        r.pos += static_cast<size_t>(u);
        break;
      }
      case kCfaGnuArgsSize:
        if (!r.uleb(&u)) return kBad;  // the value only matters to the EH personality
        break;
      case kCfaGnuWindowSave:
        // DW_CFA_AARCH64_negate_ra_state; elsewhere SPARC register windows.
        if (sec_.vendor_ops != CfiVendorOps::kAarch64) return CfiStatus::kUnsupported;
        break;  // the RA signing state is not kept (CfiVendorOps::kAarch64)
      case kCfaAarch64NegateRaStateWithPc:
        if (sec_.vendor_ops != CfiVendorOps::kAarch64) return kBad;
        break;
      default:
        return kBad;
    }
    if (st != CfiStatus::kOk) return st;
  }
  return CfiStatus::kOk;
}

}  // namespace

CfiStatus find_row(const CfiSection& sec, const FdeInfo& fde, uint64_t pc, CfiRow* out) {
  if (out == nullptr || sec.data == nullptr) return CfiStatus::kBadCfi;
  if (pc < fde.pc_begin || pc >= fde.pc_end) return CfiStatus::kNotFound;
  const uint64_t cie_end = uint64_t{fde.cie_instr_offset} + fde.cie_instr_len;
  const uint64_t fde_end = uint64_t{fde.fde_instr_offset} + fde.fde_instr_len;
  if (cie_end > sec.size || fde_end > sec.size) return CfiStatus::kBadCfi;
  if (fde.addr_size != 4 && fde.addr_size != 8) return CfiStatus::kBadCfi;

  Interpreter in(sec, fde, pc);
  CfiStatus st = in.run(fde.cie_instr_offset, fde.cie_instr_len, nullptr);
  if (st != CfiStatus::kOk) return st;
  if (!in.done()) {
    // DW_CFA_restore* in the FDE program go back to the CIE's rules.
    RuleSet initial;
    std::memcpy(&initial, &in.rules(), sizeof(RuleSet));
    st = in.run(fde.fde_instr_offset, fde.fde_instr_len, &initial);
    if (st != CfiStatus::kOk) return st;
  }
  const RuleSet& rs = in.rules();
  out->start = in.loc();
  out->end = in.end();
  out->cfa = rs.cfa;
  std::memcpy(out->regs, rs.regs, sizeof(rs.regs));
  out->ra_reg = fde.ra_reg;
  out->signal_frame = fde.signal_frame;
  return CfiStatus::kOk;
}

}  // namespace stackprov::dwarf
