// SPDX-License-Identifier: Apache-2.0
// One x64 unwind step, symbolically (x64_unwind.hpp). The order of the checks and what each
// instruction does follow RtlVirtualUnwind as wine implements it (dlls/ntdll/unwind.c:
// RtlVirtualUnwind2, is_inside_epilog, interpret_epilog), which the tests run as the oracle.
#include "pe/x64_unwind.hpp"

#include <cstring>

#include "pe/pe_bytes.hpp"

namespace stackprov::pe {
namespace {

/// The frame's registers, symbolically: each either its own value at the frame (`loaded` clear)
/// or reloaded from memory at `at`. rsp is always "some register's value + offset".
struct SymRegs {
  X64Loc rsp{kX64Rsp, 0};
  uint16_t loaded = 0;
  X64Loc at[kX64Regs];

  /// The value of register r as a location; false when it was reloaded from memory (its value is
  /// not a register of the frame plus an offset).
  bool value_of(uint8_t r, X64Loc* out) const {
    if (r == kX64Rsp) {
      *out = rsp;
      return true;
    }
    if (loaded & (1u << r)) return false;
    *out = X64Loc{r, 0};
    return true;
  }
  bool load(uint8_t r, X64Loc addr) {
    if (r == kX64Rsp) return false;  // rsp reloaded from memory: not a register plus an offset
    loaded |= static_cast<uint16_t>(1u << r);
    at[r] = addr;
    return true;
  }
};

Error unsupported(uint32_t pc_rva, const char* what) {
  return make_error(SPROV_ERR_UNSUPPORTED, "x64 unwind at RVA 0x%x: %s", pc_rva, what);
}

/// Code bytes at pc, read as needed (at most kMaxEpilogBytes).
class CodeBytes {
 public:
  static constexpr uint32_t kMax = 256;
  CodeBytes(CodeReader code, const void* ctx, uint32_t rva) : code_(code), ctx_(ctx), rva_(rva) {}
  /// Byte i, or -1 when it cannot be read.
  int at(uint32_t i) {
    if (i >= kMax || rva_ + i < rva_) return -1;
    while (have_ <= i) {
      if (code_ == nullptr || !code_(ctx_, rva_ + have_, buf_ + have_, 1)) return -1;
      have_++;
    }
    return buf_[i];
  }
  bool le32(uint32_t i, int32_t* v) {
    uint32_t x = 0;
    for (uint32_t k = 0; k < 4; k++) {
      const int b = at(i + k);
      if (b < 0) return false;
      x |= static_cast<uint32_t>(b) << (8 * k);
    }
    *v = static_cast<int32_t>(x);
    return true;
  }

 private:
  CodeReader code_;
  const void* ctx_;
  uint32_t rva_;
  uint8_t buf_[kMax] = {};
  uint32_t have_ = 0;
};

/// is_inside_epilog: the instructions at pc are an epilog of `f` (an optional add/lea to rsp with
/// REX.W, pops, then ret, ret imm, rep ret or a jmp whose target is outside f).
bool inside_epilog(CodeBytes& c, uint32_t pc_rva, const RuntimeFunction& f) {
  uint32_t i = 0;
  const int b0 = c.at(0);
  if (b0 < 0) return false;
  if ((b0 & 0xf8) == 0x48) {
    const int b1 = c.at(1), b2 = c.at(2);
    if (b1 < 0) return false;
    switch (b1) {
      case 0x81:  // add $imm32, %rsp
        if (b0 != 0x48 || b2 != 0xc4) return false;
        i = 7;
        break;
      case 0x83:  // add $imm8, %rsp
        if (b0 != 0x48 || b2 != 0xc4) return false;
        i = 4;
        break;
      case 0x8d:  // lea disp(reg), %rsp
        if (b2 < 0 || (b0 & 0x06) != 0) return false;  // REX.R and REX.X clear
        if (((b2 >> 3) & 7) != 4 || (b2 & 7) == 4) return false;  // to rsp, no SIB
        if ((b2 >> 6) == 1) {
          i = 4;
        } else if ((b2 >> 6) == 2) {
          i = 7;
        } else {
          return false;
        }
        break;
      default:
        break;
    }
  }
  for (;;) {
    int b = c.at(i);
    if (b < 0) return false;
    if ((b & 0xf0) == 0x40) b = c.at(++i);  // REX
    if (b < 0) return false;
    if (b >= 0x58 && b <= 0x5f) {  // pop
      i++;
      continue;
    }
    switch (b) {
      case 0xc2:
      case 0xc3:
        return true;
      case 0xe9: {
        int32_t rel = 0;
        if (!c.le32(i + 1, &rel)) return false;
        const int64_t target = static_cast<int64_t>(pc_rva) + i + 5 + rel;
        return !(target >= f.begin && target < f.end);
      }
      case 0xeb: {
        const int d = c.at(i + 1);
        if (d < 0) return false;
        const int64_t target = static_cast<int64_t>(pc_rva) + i + 2 + static_cast<int8_t>(d);
        return !(target >= f.begin && target < f.end);
      }
      case 0xf3:
        return c.at(i + 1) == 0xc3;
      default:
        return false;
    }
  }
}

/// interpret_epilog over symbolic registers; the bytes were accepted by inside_epilog.
bool run_epilog(CodeBytes& c, SymRegs& r, X64Plan* p) {
  uint32_t i = 0;
  for (uint32_t guard = 0; guard < CodeBytes::kMax; guard++) {
    uint8_t rex = 0;
    int b = c.at(i);
    if (b < 0) return false;
    if ((b & 0xf0) == 0x40) {
      rex = static_cast<uint8_t>(b & 0x0f);
      b = c.at(++i);
      if (b < 0) return false;
    }
    if (b >= 0x58 && b <= 0x5f) {
      if (!r.load(static_cast<uint8_t>(b - 0x58 + (rex & 1) * 8), r.rsp)) return false;
      r.rsp.offset += 8;
      i++;
      continue;
    }
    switch (b) {
      case 0x81: {
        int32_t imm = 0;
        if (!c.le32(i + 2, &imm)) return false;
        r.rsp.offset += imm;
        i += 6;
        continue;
      }
      case 0x83: {
        const int imm = c.at(i + 2);
        if (imm < 0) return false;
        r.rsp.offset += static_cast<int8_t>(imm);
        i += 3;
        continue;
      }
      case 0x8d: {
        const int modrm = c.at(i + 1);
        if (modrm < 0) return false;
        X64Loc base;
        if (!r.value_of(static_cast<uint8_t>((modrm & 7) + (rex & 1) * 8), &base)) return false;
        if ((modrm >> 6) == 1) {
          const int d = c.at(i + 2);
          if (d < 0) return false;
          r.rsp = X64Loc{base.base, base.offset + static_cast<int8_t>(d)};
          i += 3;
        } else {
          int32_t d = 0;
          if (!c.le32(i + 2, &d)) return false;
          r.rsp = X64Loc{base.base, base.offset + d};
          i += 6;
        }
        continue;
      }
      case 0xc2: {
        const int lo = c.at(i + 1), hi = c.at(i + 2);
        if (lo < 0 || hi < 0) return false;
        p->ra = r.rsp;
        r.rsp.offset += 8 + (lo | hi << 8);
        return true;
      }
      case 0xe9:
      case 0xeb:
      case 0xc3:
      case 0xf3:
        p->ra = r.rsp;
        r.rsp.offset += 8;
        return true;
      default:
        return false;
    }
  }
  return false;
}

void finish(const SymRegs& r, X64Plan* p) {
  p->rsp = r.rsp;
  p->saved = r.loaded;
  for (uint8_t i = 0; i < kX64Regs; i++)
    if (r.loaded & (1u << i)) p->saved_at[i] = r.at[i];
}

}  // namespace

Result<X64Plan> plan_x64_step(const ImageReader& img, std::span<const RuntimeFunction> table, uint32_t pc_rva,
                              bool exact, CodeReader code, const void* code_ctx) {
  X64Plan p;
  SymRegs r;
  const RuntimeFunction* found = find_function(table, pc_rva);
  if (found == nullptr) {  // a leaf: the return address at [rsp]
    p.leaf = true;
    p.ra = r.rsp;
    p.rsp = X64Loc{kX64Rsp, 8};
    return p;
  }
  // RUNTIME_FUNCTION_INDIRECT: an odd unwind RVA names another entry, whose info describes f.
  RuntimeFunction f = *found;
  for (uint32_t depth = 0; f.unwind_rva & 1; depth++) {
    if (depth >= kMaxChainDepth)
      return make_error(SPROV_ERR_LIMIT, "x64 unwind at RVA 0x%x: more than %u indirect entries", pc_rva,
                        kMaxChainDepth);
    const uint32_t at = f.unwind_rva & ~1u;
    const auto b = img(at, kRuntimeFunctionSize);
    if (b.size() < kRuntimeFunctionSize)
      return make_error(SPROV_ERR_TRUNCATED, "x64 unwind at RVA 0x%x: indirect entry at RVA 0x%x outside the image",
                        pc_rva, at);
    f = RuntimeFunction{le32(b.data()), le32(b.data() + 4), le32(b.data() + 8)};
    if (f.begin >= f.end)
      return make_error(SPROV_ERR_CFI, "x64 unwind at RVA 0x%x: indirect entry at RVA 0x%x has begin 0x%x >= end 0x%x",
                        pc_rva, at, f.begin, f.end);
  }
  auto chain = decode_chain(img, f);
  if (!chain.ok()) return chain.error();
  X64Loc frame = r.rsp;
  bool mach = false;
  for (size_t n = 0; n < chain.value().size(); n++) {
    const UnwindInfo& info = chain.value()[n];
    const RuntimeFunction& cur = n == 0 ? f : *chain.value()[n - 1].chained;
    if (info.frame_register != 0) {
      X64Loc v;
      if (!r.value_of(info.frame_register, &v)) return unsupported(pc_rva, "the frame register was reloaded by a chained info");
      frame = X64Loc{v.base, v.offset - info.frame_offset};
    }
    bool in_prolog = false;
    uint32_t prolog_offset = 0;
    if (pc_rva >= cur.begin && pc_rva - cur.begin < info.prolog_size) {
      in_prolog = true;
      prolog_offset = pc_rva - cur.begin;
      p.in_prolog = true;
    } else if (exact && info.code_count != 0) {
      CodeBytes c(code, code_ctx, pc_rva);
      if (inside_epilog(c, pc_rva, cur)) {
        if (!run_epilog(c, r, &p)) return unsupported(pc_rva, "an epilog whose stack pointer comes from memory");
        p.in_epilog = true;
        finish(r, &p);
        return p;
      }
    }
    for (size_t k = 0; k < info.codes.size(); k++) {
      const UnwindCode& uc = info.codes[k];
      if (in_prolog && prolog_offset < uc.prolog_offset) continue;  // not executed yet
      switch (uc.op) {
        case UnwindOp::kPushNonvol:
          if (!r.load(uc.info, r.rsp)) return unsupported(pc_rva, "push of rsp");
          r.rsp.offset += 8;
          break;
        case UnwindOp::kAllocLarge:
        case UnwindOp::kAllocSmall:
          r.rsp.offset += uc.value;
          break;
        case UnwindOp::kSetFpreg:
          r.rsp = frame;
          break;
        case UnwindOp::kSaveNonvol:
        case UnwindOp::kSaveNonvolFar:
          if (!r.load(uc.info, X64Loc{frame.base, frame.offset + uc.value})) return unsupported(pc_rva, "save of rsp");
          break;
        case UnwindOp::kSaveXmm128:
        case UnwindOp::kSaveXmm128Far:
        case UnwindOp::kEpilog:
        case UnwindOp::kSpareCode:
          break;  // xmm registers are not walked; epilog codes describe no prolog operation
        case UnwindOp::kPushMachframe:
          // As RtlVirtualUnwind: honoured only as the last code of an unchained info.
          if ((info.flags & kFlagChainInfo) != 0 || k + 1 != info.codes.size()) break;
          if (uc.info != 0) r.rsp.offset += 8;  // the error code
          p.ra = r.rsp;
          p.rsp_slot = X64Loc{r.rsp.base, r.rsp.offset + 24};
          mach = true;
          break;
      }
    }
    if ((info.flags & kFlagChainInfo) == 0) break;
  }
  if (mach) {
    p.machine_frame = true;
  } else {
    p.ra = r.rsp;
    r.rsp.offset += 8;
  }
  finish(r, &p);
  return p;
}

}  // namespace stackprov::pe
