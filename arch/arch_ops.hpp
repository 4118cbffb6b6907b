// SPDX-License-Identifier: Apache-2.0
// Per-architecture operations the unwinder is templated on: one Ops<Traits> specialisation per arch folder, and the one runtime Arch → traits dispatch.
#pragma once

#include <type_traits>

#include "arch/arm64/frame_pointer.hpp"
#include "arch/arm64/registers.hpp"
#include "arch/arm64/return_address.hpp"
#include "arch/arm64/signal_frame.hpp"
#include "arch/mips32/frame_pointer.hpp"
#include "arch/mips32/registers.hpp"
#include "arch/mips32/return_address.hpp"
#include "arch/mips32/signal_frame.hpp"
#include "arch/regs.hpp"
#include "arch/x86_64/frame_pointer.hpp"
#include "arch/x86_64/registers.hpp"
#include "arch/x86_64/return_address.hpp"
#include "arch/x86_64/signal_frame.hpp"

namespace stackprov::arch {

/// Ops<Traits> provides, for the architecture of Traits:
///   kSigreturnLen — code bytes needed to recognise a sigreturn trampoline;
///   sigreturn_kind(code) — 0, or which trampoline the bytes at a pc are;
///   signal_step(regs, mem, kind, &cfa) — restore the interrupted context;
///   fp_step(regs, mem, &cfa) — one frame-pointer step;
///   kHasPrologueAnalysis / prologue_step(regs, mem, code, exact_pc, &cfa) — the
///     instruction-analysis fallback (mips32 only), also as analyze_prologue(pc,
///     exact_pc, code) (code only: cached by the unwinder per pc) and
///     apply_prologue(info, regs, mem, &cfa);
///   kCallBytes / preceded_by_call(code) — scan plausibility (code = the
///     kCallBytes bytes before a candidate return address);
///   bad_pc_step(regs, mem, &cfa) — the caller of a frame whose pc is 0 or
///     unmapped (a call through a bad pointer): the return address the call left;
///     preceded_by_indirect_call(code) — its plausibility check (register/memory calls only);
///   kSigreturnBeforeCfi — recognise the sigreturn trampoline by its code before
///     trying CFI (arm64: the vDSO's __kernel_rt_sigreturn has CFI describing
///     the interrupted x29/x30 frame record, not the interrupted pc);
///   kSignalRowWithoutCode — a bundle row that needs the CFI interpreter but whose CIE marks a
///     signal frame may be restored as the kernel's signal frame without the trampoline's code
///     bytes (one trampoline layout: x86_64, arm64; mips32 has two);
///   kGoPcsp — Go's pclntab SP deltas are a rung (amd64: the return address at sp + delta);
///   kCoroutineEntryLen / coroutine_entry(code) — the code at a return address is a coroutine's
///     entry trampoline, where the coroutine's first function returns (x86_64: glibc's
///     __start_context of makecontext); 0: the architecture has no such rung;
///   kUcontextResume / coroutine_uc_link(regs, entry_sp, mem, &slot, &uc_link) — makecontext's
///     uc_link at a coroutine entry (slot: the stack word it was read from, 0 for a register);
///     resume_regs(mem, uc, regs) — the registers a swapcontext saved in a ucontext_t (a registered
///     resumer, doc/async-stacks.md); kUcontextPc/kUcontextSp — their offsets; false: not supported;
///   regs_from_user_regs / regs_from_pt_regs / regs_from_ucontext(data, len, &regs) and
///     regs_from_perf(mask, values, count, &regs) — a register state from the kernel's layouts
///     (arch/<isa>/conversions.cpp cites them);
///   for_each_call(code, n, addr, big_endian, undecoded, f) — the return pads of a
///     bundle: every call instruction in n bytes of a module's code at addr, decoded
///     linearly from the first byte, as f(CallSite) (big_endian: the module's byte order;
///     undecoded: x86_64 bytes that start no valid instruction, skipped one by one).
template <class Traits>
struct Ops;

template <>
struct Ops<x86_64::Traits> {
  static const char* reg_name(int r) { return x86_64::dwarf_reg_name(r); }  ///< DWARF register r
  static Status regs_from_user_regs(const void* d, size_t n, x86_64::Regs* r) { return x86_64::regs_from_user_regs(d, n, r); }
  static Status regs_from_pt_regs(const void* d, size_t n, x86_64::Regs* r) { return x86_64::regs_from_pt_regs(d, n, r); }
  static Status regs_from_ucontext(const void* d, size_t n, x86_64::Regs* r) { return x86_64::regs_from_ucontext(d, n, r); }
  static Status regs_from_perf(uint64_t mask, const uint64_t* v, size_t count, x86_64::Regs* r) {
    return x86_64::regs_from_perf(mask, v, count, r);
  }
  static constexpr int kSigreturnLen = 9;
  static int sigreturn_kind(const uint8_t* code) { return x86_64::is_sigreturn_trampoline(code) ? 1 : 0; }
  template <class Mem>
  static StepOutcome signal_step(x86_64::Regs& r, Mem& m, int, uint64_t* cfa) {
    return x86_64::signal_step(r, m, cfa);
  }
  template <class Mem>
  static StepOutcome fp_step(x86_64::Regs& r, Mem& m, uint64_t* cfa) {
    return x86_64::fp_step(r, m, cfa);
  }
  static constexpr bool kHasPrologueAnalysis = false;
  template <class Mem, class Code>
  static StepOutcome prologue_step(x86_64::Regs&, Mem&, const Code&, bool, uint64_t*) {
    return StepOutcome::kNotApplicable;
  }
  static constexpr int kCallBytes = 7;
  static bool preceded_by_call(const uint8_t* code) { return x86_64::preceded_by_call(code); }
  static bool preceded_by_indirect_call(const uint8_t* code) { return x86_64::preceded_by_indirect_call(code); }
  template <class Mem>
  static StepOutcome bad_pc_step(x86_64::Regs& r, Mem& m, uint64_t* cfa) {
    return x86_64::bad_pc_step(r, m, cfa);
  }
  static constexpr bool kSigreturnBeforeCfi = false;
  static constexpr bool kSignalRowWithoutCode = true;
  static constexpr bool kGoPcsp = true;
  static constexpr int kCoroutineEntryLen = 10;
  static bool coroutine_entry(const uint8_t* code) { return x86_64::is_start_context(code); }
  static constexpr bool kUcontextResume = true;
  template <class Mem>
  static bool coroutine_uc_link(const x86_64::Regs& r, uint64_t sp, Mem& m, uint64_t* slot, uint64_t* link) {
    return x86_64::coroutine_uc_link(r, sp, m, slot, link);
  }
  template <class Mem>
  static bool resume_regs(Mem& m, uint64_t uc, x86_64::Regs& r) { return x86_64::ucontext_resume_regs(m, uc, r); }
  static constexpr uint64_t kUcontextPc = x86_64::kUcontextGregs + 8 * x86_64::kGregRip;
  static constexpr uint64_t kUcontextSp = x86_64::kUcontextGregs + 8 * x86_64::kGregRsp;
  template <class F>
  static void for_each_call(const uint8_t* code, size_t n, uint64_t addr, bool, size_t* undecoded, F&& f) {
    x86_64::for_each_call(code, n, addr, undecoded, f);
  }
};

template <>
struct Ops<arm64::Traits> {
  static const char* reg_name(int r) { return arm64::dwarf_reg_name(r); }  ///< DWARF register r
  static Status regs_from_user_regs(const void* d, size_t n, arm64::Regs* r) { return arm64::regs_from_user_regs(d, n, r); }
  static Status regs_from_pt_regs(const void* d, size_t n, arm64::Regs* r) { return arm64::regs_from_pt_regs(d, n, r); }
  static Status regs_from_ucontext(const void* d, size_t n, arm64::Regs* r) { return arm64::regs_from_ucontext(d, n, r); }
  static Status regs_from_perf(uint64_t mask, const uint64_t* v, size_t count, arm64::Regs* r) {
    return arm64::regs_from_perf(mask, v, count, r);
  }
  static constexpr int kSigreturnLen = 8;
  static int sigreturn_kind(const uint8_t* code) {
    return arm64::is_sigreturn_trampoline(code) ? arm64::kSigreturnRt : 0;
  }
  template <class Mem>
  static StepOutcome signal_step(arm64::Regs& r, Mem& m, int, uint64_t* cfa) {
    return arm64::signal_step(r, m, cfa);
  }
  template <class Mem>
  static StepOutcome fp_step(arm64::Regs& r, Mem& m, uint64_t* cfa) {
    return arm64::fp_step(r, m, cfa);
  }
  static constexpr bool kHasPrologueAnalysis = false;
  template <class Mem, class Code>
  static StepOutcome prologue_step(arm64::Regs&, Mem&, const Code&, bool, uint64_t*) {
    return StepOutcome::kNotApplicable;
  }
  static constexpr int kCallBytes = 4;
  static bool preceded_by_call(const uint8_t* code) { return arm64::preceded_by_call(code); }
  static bool preceded_by_indirect_call(const uint8_t* code) { return arm64::preceded_by_indirect_call(code); }
  template <class Mem>
  static StepOutcome bad_pc_step(arm64::Regs& r, Mem& m, uint64_t* cfa) {
    return arm64::bad_pc_step(r, m, cfa);
  }
  static constexpr bool kSigreturnBeforeCfi = true;
  static constexpr bool kSignalRowWithoutCode = true;
  static constexpr bool kGoPcsp = false;
  static constexpr int kCoroutineEntryLen = arm64::kStartContextLen;  // glibc's __startcontext
  static bool coroutine_entry(const uint8_t* code) { return arm64::is_start_context(code); }
  static constexpr bool kUcontextResume = true;
  template <class Mem>
  static bool coroutine_uc_link(const arm64::Regs& r, uint64_t, Mem&, uint64_t* slot, uint64_t* link) {
    *slot = 0;  // x19 itself
    return arm64::coroutine_uc_link(r, link);
  }
  template <class Mem>
  static bool resume_regs(Mem& m, uint64_t uc, arm64::Regs& r) { return arm64::ucontext_resume_regs(m, uc, r); }
  static constexpr uint64_t kUcontextPc = arm64::kUcontextPc;
  static constexpr uint64_t kUcontextSp = arm64::kUcontextSp;
  template <class F>
  static void for_each_call(const uint8_t* code, size_t n, uint64_t addr, bool big_endian, size_t*, F&& f) {
    arm64::for_each_call(code, n, addr, big_endian, f);
  }
};

/// mips32 in either byte order (TraitsBE / TraitsLE).
template <bool BigEndian>
struct Ops<mips32::TraitsT<BigEndian>> {
  static const char* reg_name(int r) { return mips32::dwarf_reg_name(r); }  ///< DWARF register r
  static Status regs_from_user_regs(const void* d, size_t n, mips32::Regs* r) {
    return mips32::regs_from_user_regs(d, n, BigEndian, r);
  }
  static Status regs_from_pt_regs(const void* d, size_t n, mips32::Regs* r) {
    return mips32::regs_from_pt_regs(d, n, BigEndian, r);
  }
  static Status regs_from_ucontext(const void* d, size_t n, mips32::Regs* r) {
    return mips32::regs_from_ucontext(d, n, BigEndian, r);
  }
  static Status regs_from_perf(uint64_t mask, const uint64_t* v, size_t count, mips32::Regs* r) {
    return mips32::regs_from_perf(mask, v, count, r);
  }
  static constexpr int kSigreturnLen = 8;
  static int sigreturn_kind(const uint8_t* code) { return mips32::sigreturn_kind(code, BigEndian); }
  template <class Mem>
  static StepOutcome signal_step(mips32::Regs& r, Mem& m, int kind, uint64_t* cfa) {
    return mips32::signal_step<BigEndian>(r, m, kind, cfa);
  }
  template <class Mem>
  static StepOutcome fp_step(mips32::Regs& r, Mem& m, uint64_t* cfa) {
    return mips32::fp_step(r, m, cfa);
  }
  static constexpr bool kHasPrologueAnalysis = true;
  template <class Mem, class Code>
  static StepOutcome prologue_step(mips32::Regs& r, Mem& m, const Code& code, bool exact_pc, uint64_t* cfa) {
    return mips32::prologue_step<BigEndian>(r, m, code, exact_pc, cfa);
  }
  template <class Code>
  static PrologueInfo analyze_prologue(uint64_t pc, bool exact_pc, const Code& code) {
    return mips32::analyze_prologue<BigEndian>(pc, exact_pc, code);
  }
  template <class Mem>
  static StepOutcome apply_prologue(const PrologueInfo& info, mips32::Regs& r, Mem& m, uint64_t* cfa) {
    return mips32::apply_prologue<BigEndian>(info, r, m, cfa);
  }
  /// The call is at ra - 8 (ra skips the delay slot): the 8 bytes before ra.
  static constexpr int kCallBytes = 8;
  static bool preceded_by_call(const uint8_t* code) {
    return mips32::is_call(static_cast<uint32_t>(load_word(code, 4, BigEndian)));
  }
  static bool preceded_by_indirect_call(const uint8_t* code) {
    return mips32::is_indirect_call(static_cast<uint32_t>(load_word(code, 4, BigEndian)));
  }
  template <class Mem>
  static StepOutcome bad_pc_step(mips32::Regs& r, Mem& m, uint64_t* cfa) {
    return mips32::bad_pc_step(r, m, cfa);
  }
  static constexpr bool kSigreturnBeforeCfi = false;
  static constexpr bool kSignalRowWithoutCode = false;
  static constexpr int kCoroutineEntryLen = mips32::kStartContextLen;  // glibc's __start_context
  static bool coroutine_entry(const uint8_t* code) { return mips32::is_start_context(code, BigEndian); }
  static constexpr bool kUcontextResume = true;
  template <class Mem>
  static bool coroutine_uc_link(const mips32::Regs& r, uint64_t, Mem&, uint64_t* slot, uint64_t* link) {
    *slot = 0;  // s0 itself
    return mips32::coroutine_uc_link(r, link);
  }
  template <class Mem>
  static bool resume_regs(Mem& m, uint64_t uc, mips32::Regs& r) {
    return mips32::ucontext_resume_regs<BigEndian>(m, uc, r);
  }
  static constexpr uint64_t kUcontextPc = mips32::kUcontextPcT<BigEndian>;
  static constexpr uint64_t kUcontextSp = mips32::kUcontextSpT<BigEndian>;
  static constexpr bool kGoPcsp = false;
  template <class F>
  static void for_each_call(const uint8_t* code, size_t n, uint64_t addr, bool big_endian, size_t*, F&& f) {
    mips32::for_each_call(code, n, addr, big_endian, f);
  }
};

// ---- the registration list

/// The one dispatch from a runtime (architecture, byte order) to an architecture's traits, and
/// so to its Ops<Traits>: calls `f(std::type_identity<Traits>{})` with the traits of `arch`
/// (mips32: of `endian`) and returns true, or returns false for an architecture without traits
/// (Arch::kUnknown). Adding an architecture is its folder, its Ops specialisation and one case
/// here; every per-arch answer outside arch/ (walks, register counts of bundle rows, return
/// pads, replay bounds) goes through this switch.
template <class F>
bool with_arch_traits(Arch arch, Endian endian, F&& f) {
  switch (arch) {
    case Arch::kX86_64:
      f(std::type_identity<x86_64::Traits>{});
      return true;
    case Arch::kArm64:
      f(std::type_identity<arm64::Traits>{});
      return true;
    case Arch::kMips32:
      if (endian == Endian::kBig)
        f(std::type_identity<mips32::TraitsBE>{});
      else
        f(std::type_identity<mips32::TraitsLE>{});
      return true;
    default:
      return false;
  }
}

}  // namespace stackprov::arch
