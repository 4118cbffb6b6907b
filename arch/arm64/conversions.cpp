// SPDX-License-Identifier: Apache-2.0
// arm64: register sets from ptrace, pt_regs, ucontext, NT_PRSTATUS and perf samples into DWARF numbering.
#include <cstring>

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

namespace {

/// regs[31], sp, pc: the first 33 words of user_pt_regs and of sigcontext.regs
/// are already in DWARF order (x0..x30 = 0..30, sp = 31, pc = 32).
void from_words(const uint8_t* p, Regs* out) {
  uint64_t w[33];
  std::memcpy(w, p, sizeof(w));
  Regs r{};
  for (int i = 0; i < 33; i++) r.set(i, w[i]);
  *out = r;
}

}  // namespace

Status regs_from_user_regs(const void* data, size_t len, Regs* out) {
  if (data == nullptr || len < kUserPtRegsSize)
    return make_error(SPROV_ERR_TRUNCATED, "user_pt_regs: %zu bytes, need %zu", len, kUserPtRegsSize);
  from_words(static_cast<const uint8_t*>(data), out);
  return {};
}

Status regs_from_pt_regs(const void* data, size_t len, Regs* out) {
  if (data == nullptr || len < kUserPtRegsSize)
    return make_error(SPROV_ERR_TRUNCATED, "pt_regs: %zu bytes, need %zu", len, kUserPtRegsSize);
  from_words(static_cast<const uint8_t*>(data), out);
  return {};
}

Status regs_from_ucontext(const void* data, size_t len, Regs* out) {
  constexpr size_t kNeed = kUcontextMcontext + kSigcontextRegs + 33 * 8;
  if (data == nullptr || len < kNeed)
    return make_error(SPROV_ERR_TRUNCATED, "ucontext: %zu bytes, need %zu", len, kNeed);
  from_words(static_cast<const uint8_t*>(data) + kUcontextMcontext + kSigcontextRegs, out);
  return {};
}

Status regs_from_prstatus(const void* data, size_t len, Regs* out) {
  if (data == nullptr || len < kPrstatusRegOffset + kUserPtRegsSize)
    return make_error(SPROV_ERR_TRUNCATED, "NT_PRSTATUS: %zu bytes, need %zu", len,
                      kPrstatusRegOffset + kUserPtRegsSize);
  from_words(static_cast<const uint8_t*>(data) + kPrstatusRegOffset, out);
  return {};
}

Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out) {
  // PERF_REG_ARM64_X0 = 0 … PERF_REG_ARM64_LR = 30, SP = 31, PC = 32: the DWARF numbers.
  Regs r{};
  size_t idx = 0;
  for (int bit = 0; bit < 64; bit++) {
    if (!((mask >> bit) & 1)) continue;
    if (idx >= count)
      return make_error(SPROV_ERR_TRUNCATED, "perf regs: mask 0x%llx needs more than %zu values",
                        static_cast<unsigned long long>(mask), count);
    if (bit < Traits::kNumRegs) r.set(bit, values[idx]);
    idx++;
  }
  *out = r;
  return {};
}

}  // namespace stackprov::arch::arm64
