// SPDX-License-Identifier: Apache-2.0
// Per-architecture operations the unwinder is templated on: one Ops<Traits> specialisation per arch folder.
#pragma once

#include "arch/arm64/frame_pointer.hpp"
#include "arch/arm64/registers.hpp"
#include "arch/arm64/return_address.hpp"
#include "arch/arm64/signal_frame.hpp"
#include "arch/regs.hpp"
#include "arch/x86_64/frame_pointer.hpp"
#include "arch/x86_64/registers.hpp"
#include "arch/x86_64/return_address.hpp"
#include "arch/x86_64/signal_frame.hpp"

namespace stackprov::arch {

/// Ops<Traits> provides, for the architecture of Traits:
///   kSigreturnLen — code bytes needed to recognise the sigreturn trampoline;
///   is_sigreturn(code) — the bytes at a pc are the trampoline;
///   signal_step(regs, mem, &cfa) — restore the interrupted context;
///   fp_step(regs, mem, &cfa) — one frame-pointer step;
///   kCallBytes / preceded_by_call(code) — scan plausibility.
template <class Traits>
struct Ops;

template <>
struct Ops<x86_64::Traits> {
  static constexpr int kSigreturnLen = 9;
  static bool is_sigreturn(const uint8_t* code) { return x86_64::is_sigreturn_trampoline(code); }
  template <class Mem>
  static StepOutcome signal_step(x86_64::Regs& r, Mem& m, uint64_t* cfa) {
    return x86_64::signal_step(r, m, cfa);
  }
  template <class Mem>
  static StepOutcome fp_step(x86_64::Regs& r, Mem& m, uint64_t* cfa) {
    return x86_64::fp_step(r, m, cfa);
  }
  static constexpr int kCallBytes = 7;
  static bool preceded_by_call(const uint8_t* code) { return x86_64::preceded_by_call(code); }
};

/// arm64: the interface is in place; the signal restore is stubbed until the
/// arm64 issue (walk_snapshot does not dispatch arm64 snapshots yet).
template <>
struct Ops<arm64::Traits> {
  static constexpr int kSigreturnLen = 8;
  static bool is_sigreturn(const uint8_t* code) { return arm64::is_sigreturn_trampoline(code); }
  template <class Mem>
  static StepOutcome signal_step(arm64::Regs& r, Mem& m, uint64_t* cfa) {
    return arm64::signal_step(r, m, cfa);
  }
  template <class Mem>
  static StepOutcome fp_step(arm64::Regs& r, Mem& m, uint64_t* cfa) {
    return arm64::fp_step(r, m, cfa);
  }
  static constexpr int kCallBytes = 4;
  static bool preceded_by_call(const uint8_t* code) { return arm64::preceded_by_call(code); }
};

}  // namespace stackprov::arch
