// SPDX-License-Identifier: Apache-2.0
// First-frame prologue/epilogue analysis by instruction pattern (first_frame.hpp).
#include "unwind/first_frame.hpp"

#include <cstring>

namespace stackprov::unwind {
namespace {

constexpr int kMaxInsns = 32;

/// A compact rule in terms of the stack pointer, built slot by slot (offsets in bytes from the cfa).
struct RuleBuilder {
  UnwindRule r;
  bool ok = true;
  RuleBuilder(uint8_t sp_reg, int64_t cfa_off) {
    r.kind = UnwindRule::kCfaReg;
    r.cfa_reg = sp_reg;
    if (cfa_off < 0 || cfa_off > INT32_MAX) ok = false;
    r.cfa_off = static_cast<int32_t>(cfa_off);
  }
  static bool words(int64_t off, int8_t* out) {
    if (off % 8 != 0 || off / 8 < INT8_MIN || off / 8 > INT8_MAX) return false;
    *out = static_cast<int8_t>(off / 8);
    return true;
  }
  void ra_at(int64_t off) {
    r.ra_kind = UnwindRule::kRaAtCfa;
    if (!words(off, &r.ra_off)) ok = false;
  }
  void ra_in(uint8_t reg) {
    r.ra_kind = UnwindRule::kRaSameValue;
    r.ra_reg = reg;
  }
  void save(uint8_t reg, int64_t off) {
    for (uint8_t i = 0; i < r.nsaved; i++)
      if (r.saved_reg[i] == reg) return;  // the first save (prologue) or load (epilogue) counts
    if (r.nsaved == UnwindRule::kMaxSaved || !words(off, &r.saved_off[r.nsaved])) {
      ok = false;
      return;
    }
    r.saved_reg[r.nsaved++] = reg;
  }
  std::optional<UnwindRule> done() const { return ok ? std::optional<UnwindRule>(r) : std::nullopt; }
};

// ---- x86_64 ----

constexpr uint8_t kX86Rsp = 7;
/// ModRM/opcode register number -> DWARF register number (rax rcx rdx rbx rsp rbp rsi rdi).
constexpr uint8_t kX86DwarfOf[8] = {0, 2, 1, 3, 7, 6, 4, 5};

struct X86Insn {
  enum Kind : uint8_t { kOther, kPush, kPop, kSubRsp, kAddRsp, kMovRbpRsp, kNop, kRet, kJmp };
  Kind kind = kOther;
  uint8_t len = 0;
  uint8_t reg = 0;      ///< DWARF number (push, pop)
  int64_t imm = 0;      ///< sub/add rsp
  uint64_t target = 0;  ///< jmp
};

int32_t le32s(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return static_cast<int32_t>(v);
}

/// Decodes the few instructions prologues and epilogues are made of (Intel SDM vol. 2 encodings).
X86Insn decode_x86(const uint8_t* b, size_t n, uint64_t at) {
  X86Insn i;
  auto has = [n](size_t k) { return n >= k; };
  if (!has(1)) return i;
  const uint8_t op = b[0];
  if (op >= 0x50 && op <= 0x57) return {X86Insn::kPush, 1, kX86DwarfOf[op - 0x50], 0, 0};
  if (op >= 0x58 && op <= 0x5f) return {X86Insn::kPop, 1, kX86DwarfOf[op - 0x58], 0, 0};
  if (op == 0x41 && has(2) && b[1] >= 0x50 && b[1] <= 0x57) return {X86Insn::kPush, 2, static_cast<uint8_t>(8 + b[1] - 0x50), 0, 0};
  if (op == 0x41 && has(2) && b[1] >= 0x58 && b[1] <= 0x5f) return {X86Insn::kPop, 2, static_cast<uint8_t>(8 + b[1] - 0x58), 0, 0};
  if (op == 0xc3) return {X86Insn::kRet, 1, 0, 0, 0};
  if (op == 0xc2 && has(3)) return {X86Insn::kRet, 3, 0, 0, 0};
  if (op == 0xf3 && has(2) && b[1] == 0xc3) return {X86Insn::kRet, 2, 0, 0, 0};                               // rep ret
  if (op == 0xf3 && has(4) && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa) return {X86Insn::kNop, 4, 0, 0, 0};  // endbr64
  if (op == 0x90) return {X86Insn::kNop, 1, 0, 0, 0};
  if (op == 0xe9 && has(5)) return {X86Insn::kJmp, 5, 0, 0, at + 5 + static_cast<int64_t>(le32s(b + 1))};
  if (op == 0xeb && has(2)) return {X86Insn::kJmp, 2, 0, 0, at + 2 + static_cast<int64_t>(static_cast<int8_t>(b[1]))};
  if (op == 0x48 && has(3)) {
    if ((b[1] == 0x89 && b[2] == 0xe5) || (b[1] == 0x8b && b[2] == 0xec)) return {X86Insn::kMovRbpRsp, 3, 0, 0, 0};
    if (b[1] == 0x83 && has(4) && (b[2] == 0xec || b[2] == 0xc4))
      return {b[2] == 0xec ? X86Insn::kSubRsp : X86Insn::kAddRsp, 4, 0, static_cast<int8_t>(b[3]), 0};
    if (b[1] == 0x81 && has(7) && (b[2] == 0xec || b[2] == 0xc4))
      return {b[2] == 0xec ? X86Insn::kSubRsp : X86Insn::kAddRsp, 7, 0, le32s(b + 3), 0};
  }
  return i;
}

/// The instruction at `at`, reading at most 16 bytes and never past `end`.
bool x86_at(const FirstFrameCode& code, uint64_t at, uint64_t end, X86Insn* out) {
  if (at >= end) return false;
  uint8_t buf[16];
  size_t n = end - at < sizeof buf ? static_cast<size_t>(end - at) : sizeof buf;
  while (n > 0 && !code(at, buf, n)) n = n > 8 ? 8 : n - 1;  // near a section's end: fewer bytes
  if (n == 0) return false;
  *out = decode_x86(buf, n, at);
  return out->kind != X86Insn::kOther;
}

// ---- arm64 (Arm ARM, C4.1 "A64 instruction set encoding") ----

constexpr uint8_t kArmSp = 31, kArmLr = 30;

int64_t sext(uint64_t v, int bits) {
  const uint64_t m = 1ull << (bits - 1);
  return static_cast<int64_t>((v ^ m) - m);
}

struct ArmInsn {
  enum Kind : uint8_t { kOther, kNop, kStore, kLoad, kSpAdjust, kSetFp, kRet, kBranch };
  Kind kind = kOther;
  /// Stores/loads: up to two x registers (0xff: none, a d register) at sp + `off` (+ 8), and the
  /// stack pointer moved by `sp_delta` before (pre-index) or after (post-index) the access.
  uint8_t rt[2] = {0xff, 0xff};
  int64_t off = 0;
  int64_t sp_delta = 0;
  bool pre = false;
  uint64_t target = 0;
};

ArmInsn decode_arm64(uint32_t w, uint64_t at) {
  ArmInsn i;
  const uint32_t rn = (w >> 5) & 31, rt = w & 31, rt2 = (w >> 10) & 31;
  if ((w & 0xfffff01f) == 0xd503201f) return {ArmInsn::kNop};  // HINT: nop, pac*sp, aut*sp, bti
  if (w == 0xd65f03c0) return {ArmInsn::kRet};
  if ((w & 0xfc000000) == 0x14000000) {
    i.kind = ArmInsn::kBranch;
    i.target = at + static_cast<uint64_t>(sext(w & 0x03ffffff, 26) * 4);
    return i;
  }
  if ((w & 0xff8003ff) == 0xd10003ff || (w & 0xff8003ff) == 0x910003ff) {  // sub/add sp, sp, #imm{, lsl 12}
    const int64_t imm = static_cast<int64_t>((w >> 10) & 0xfff) << ((w >> 22) & 1 ? 12 : 0);
    i.kind = ArmInsn::kSpAdjust;
    i.sp_delta = (w & 0x40000000) != 0 ? -imm : imm;
    return i;
  }
  if ((w & 0xff8003ff) == 0x910003fd) return {ArmInsn::kSetFp};  // mov/add x29, sp, #imm
  if (rn != kArmSp) return i;
  const uint32_t pair = w & 0xffc00000;
  const int64_t imm7 = sext((w >> 15) & 0x7f, 7) * 8;
  struct PairForm {
    uint32_t bits;
    ArmInsn::Kind kind;
    bool x;      // x registers (else d)
    int mode;    // 1 post-index, 2 signed offset, 3 pre-index
  };
  static constexpr PairForm kPairs[] = {
      {0xa8800000, ArmInsn::kStore, true, 1}, {0xa9000000, ArmInsn::kStore, true, 2}, {0xa9800000, ArmInsn::kStore, true, 3},
      {0xa8c00000, ArmInsn::kLoad, true, 1},  {0xa9400000, ArmInsn::kLoad, true, 2},  {0xa9c00000, ArmInsn::kLoad, true, 3},
      {0x6c800000, ArmInsn::kStore, false, 1}, {0x6d000000, ArmInsn::kStore, false, 2}, {0x6d800000, ArmInsn::kStore, false, 3},
      {0x6cc00000, ArmInsn::kLoad, false, 1},  {0x6d400000, ArmInsn::kLoad, false, 2},  {0x6dc00000, ArmInsn::kLoad, false, 3},
  };
  for (const PairForm& f : kPairs) {
    if (pair != f.bits) continue;
    i.kind = f.kind;
    if (f.x) i.rt[0] = static_cast<uint8_t>(rt), i.rt[1] = static_cast<uint8_t>(rt2);
    if (f.mode == 2) i.off = imm7;
    else i.sp_delta = imm7, i.pre = f.mode == 3;
    return i;
  }
  // str/ldr x, [sp, #imm9]! / [sp], #imm9, and [sp, #uimm12 * 8].
  const uint32_t single = w & 0xffe00c00;
  const int64_t imm9 = sext((w >> 12) & 0x1ff, 9);
  if (single == 0xf8000c00 || single == 0xf8000400 || single == 0xf8400c00 || single == 0xf8400400) {
    i.kind = (w & 0x00400000) != 0 ? ArmInsn::kLoad : ArmInsn::kStore;
    i.rt[0] = static_cast<uint8_t>(rt);
    i.sp_delta = imm9;
    i.pre = (w & 0x800) != 0;
    return i;
  }
  if ((w & 0xffc00000) == 0xf9000000 || (w & 0xffc00000) == 0xf9400000) {
    i.kind = (w & 0x00400000) != 0 ? ArmInsn::kLoad : ArmInsn::kStore;
    i.rt[0] = static_cast<uint8_t>(rt);
    i.off = static_cast<int64_t>((w >> 10) & 0xfff) * 8;
    return i;
  }
  return i;
}

bool arm_at(const FirstFrameCode& code, uint64_t at, uint64_t end, ArmInsn* out) {
  uint8_t b[4];
  if (at >= end || end - at < 4 || !code(at, b, 4)) return false;
  *out = decode_arm64(static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
                          static_cast<uint32_t>(b[3]) << 24,
                      at);
  return out->kind != ArmInsn::kOther;
}

/// The callee-saved x registers and lr a first-frame rule restores (x19-x30).
bool arm_tracked(uint8_t r) { return r >= 19 && r <= 30; }

}  // namespace

std::optional<UnwindRule> x86_64_first_frame(uint64_t start, uint64_t end, uint64_t pc, const FirstFrameCode& code,
                                             bool with_prologue) {
  if (pc < start || pc >= end) return std::nullopt;
  // Epilogue: from pc on, add rsp / pop up to a ret or a tail call.
  {
    struct Slot {
      uint8_t reg;
      int64_t at;
    } pops[kMaxInsns];
    int npops = 0;
    int64_t cur = 0;  // rsp at the ret minus rsp at pc, so far
    uint64_t at = pc;
    for (int k = 0; k < kMaxInsns; k++) {
      X86Insn i;
      if (!x86_at(code, at, end, &i)) break;
      if (i.kind == X86Insn::kPop) {
        pops[npops++] = {i.reg, cur};
        cur += 8;
      } else if (i.kind == X86Insn::kAddRsp && i.imm >= 0) {
        cur += i.imm;
      } else if (i.kind == X86Insn::kRet || (i.kind == X86Insn::kJmp && (i.target < start || i.target >= end))) {
        RuleBuilder b(kX86Rsp, cur + 8);
        b.ra_at(-8);
        for (int s = 0; s < npops; s++)
          if (pops[s].reg != kX86Rsp) b.save(pops[s].reg, pops[s].at - (cur + 8));
        return b.done();
      } else {
        break;
      }
      at += i.len;
    }
  }
  // Prologue: every instruction from the start up to pc a push, sub rsp or mov rbp, rsp.
  if (!with_prologue) return std::nullopt;
  if (pc == start) {
    RuleBuilder b(kX86Rsp, 8);
    b.ra_at(-8);
    return b.done();
  }
  int64_t depth = 8;  // cfa - rsp
  uint64_t at = start;
  struct Slot {
    uint8_t reg;
    int64_t depth;
  } pushes[kMaxInsns];
  int npushes = 0;
  for (int k = 0; k < kMaxInsns && at < pc; k++) {
    X86Insn i;
    if (!x86_at(code, at, end, &i)) return std::nullopt;
    if (i.kind == X86Insn::kPush) {
      depth += 8;
      pushes[npushes++] = {i.reg, depth};
    } else if (i.kind == X86Insn::kSubRsp && i.imm >= 0) {
      depth += i.imm;
    } else if (i.kind != X86Insn::kMovRbpRsp && i.kind != X86Insn::kNop) {
      return std::nullopt;
    }
    at += i.len;
  }
  if (at != pc) return std::nullopt;
  RuleBuilder out(kX86Rsp, depth);
  out.ra_at(-8);
  for (int s = 0; s < npushes; s++) out.save(pushes[s].reg, -pushes[s].depth);
  return out.done();
}

std::optional<UnwindRule> arm64_first_frame(uint64_t start, uint64_t end, uint64_t pc, const FirstFrameCode& code,
                                            bool with_prologue) {
  if (pc < start || pc >= end) return std::nullopt;
  // Epilogue: from pc on, loads from the stack and sp increments up to ret or a tail call.
  {
    struct Slot {
      uint8_t reg;
      int64_t at;  // from sp at pc
    } loads[2 * kMaxInsns];
    int nloads = 0;
    int64_t cur = 0;  // sp at the ret minus sp at pc, so far
    uint64_t at = pc;
    for (int k = 0; k < kMaxInsns; k++) {
      ArmInsn i;
      if (!arm_at(code, at, end, &i)) break;
      if (i.kind == ArmInsn::kLoad) {
        const int64_t base = cur + (i.pre ? i.sp_delta : 0) + i.off;
        for (int r = 0; r < 2; r++)
          if (i.rt[r] != 0xff && arm_tracked(i.rt[r])) loads[nloads++] = {i.rt[r], base + 8 * r};
        cur += i.sp_delta;
      } else if (i.kind == ArmInsn::kSpAdjust && i.sp_delta >= 0) {
        cur += i.sp_delta;
      } else if (i.kind == ArmInsn::kRet || (i.kind == ArmInsn::kBranch && (i.target < start || i.target >= end))) {
        RuleBuilder b(kArmSp, cur);
        bool ra_loaded = false;
        for (int s = 0; s < nloads; s++) {
          if (loads[s].reg == kArmLr && !ra_loaded) {
            b.ra_at(loads[s].at - cur);
            ra_loaded = true;
          } else if (loads[s].reg != kArmLr) {
            b.save(loads[s].reg, loads[s].at - cur);
          }
        }
        if (!ra_loaded) b.ra_in(kArmLr);
        return b.done();
      } else if (i.kind != ArmInsn::kNop) {
        break;
      }
      at += 4;
    }
  }
  // Prologue: from the start up to pc, stores to the stack, sp decrements, the frame pointer set.
  if (!with_prologue) return std::nullopt;
  struct Slot {
    uint8_t reg;
    int64_t at;  // from the cfa
  } stores[2 * kMaxInsns];
  int nstores = 0;
  int64_t depth = 0;  // cfa - sp
  uint64_t at = start;
  for (int k = 0; k < kMaxInsns && at < pc; k++) {
    ArmInsn i;
    if (!arm_at(code, at, end, &i)) return std::nullopt;
    if (i.kind == ArmInsn::kStore) {
      if (i.pre) depth -= i.sp_delta;
      const int64_t base = -depth + i.off;
      for (int r = 0; r < 2; r++)
        if (i.rt[r] != 0xff && arm_tracked(i.rt[r])) stores[nstores++] = {i.rt[r], base + 8 * r};
      if (!i.pre) depth -= i.sp_delta;
    } else if (i.kind == ArmInsn::kSpAdjust && i.sp_delta <= 0) {
      depth -= i.sp_delta;
    } else if (i.kind != ArmInsn::kSetFp && i.kind != ArmInsn::kNop) {
      return std::nullopt;
    }
    at += 4;
  }
  if (at != pc || depth < 0) return std::nullopt;
  RuleBuilder b(kArmSp, depth);
  bool ra_saved = false;
  for (int s = 0; s < nstores; s++) {
    if (stores[s].reg == kArmLr && !ra_saved) {
      b.ra_at(stores[s].at);
      ra_saved = true;
    } else if (stores[s].reg != kArmLr) {
      b.save(stores[s].reg, stores[s].at);
    }
  }
  if (!ra_saved) b.ra_in(kArmLr);
  return b.done();
}

}  // namespace stackprov::unwind
