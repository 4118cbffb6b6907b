// SPDX-License-Identifier: Apache-2.0
// mips32: register sets from ptrace, pt_regs, ucontext, NT_PRSTATUS and perf samples into DWARF numbering.
#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

namespace {

uint64_t word32(const uint8_t* p, int i, bool be) { return load_word(p + 4 * i, 4, be); }

}  // namespace

void regs_from_sigcontext(const uint8_t* p, bool big_endian, Regs* out) {
  Regs r{};
  // 64-bit slots: load_word of 8 bytes in the target order, keep the low half.
  for (int i = 0; i < 32; i++)
    r.set(i, load_word(p + kSigcontextRegs + 8 * i, 8, big_endian) & 0xffffffffull);
  r.set(kPc, load_word(p + kSigcontextPc, 8, big_endian) & 0xffffffffull);
  *out = r;
}

Status regs_from_user_regs(const void* data, size_t len, bool big_endian, Regs* out) {
  constexpr size_t kNeed = kElfNGreg * 4;
  if (data == nullptr || len < kNeed)
    return make_error(SPROV_ERR_TRUNCATED, "elf_gregset_t: %zu bytes, need %zu", len, kNeed);
  const auto* p = static_cast<const uint8_t*>(data);
  Regs r{};
  for (int i = 0; i < 32; i++) r.set(i, word32(p, kEfR0 + i, big_endian));
  r.set(kPc, word32(p, kEfCp0Epc, big_endian));
  *out = r;
  return {};
}

Status regs_from_pt_regs(const void* data, size_t len, bool big_endian, Regs* out) {
  constexpr int kRegs = 8, kEpc = 45;  // word indexes: after pad0[8]; cp0_epc at byte 180
  constexpr size_t kNeed = (kEpc + 1) * 4;
  if (data == nullptr || len < kNeed)
    return make_error(SPROV_ERR_TRUNCATED, "pt_regs: %zu bytes, need %zu", len, kNeed);
  const auto* p = static_cast<const uint8_t*>(data);
  Regs r{};
  for (int i = 0; i < 32; i++) r.set(i, word32(p, kRegs + i, big_endian));
  r.set(kPc, word32(p, kEpc, big_endian));
  *out = r;
  return {};
}

Status regs_from_ucontext(const void* data, size_t len, bool big_endian, Regs* out) {
  constexpr size_t kNeed = kUcontextMcontext + kSigcontextRegs + 32 * 8;
  if (data == nullptr || len < kNeed)
    return make_error(SPROV_ERR_TRUNCATED, "ucontext: %zu bytes, need %zu", len, kNeed);
  regs_from_sigcontext(static_cast<const uint8_t*>(data) + kUcontextMcontext, big_endian, out);
  return {};
}

Status regs_from_prstatus(const void* data, size_t len, bool big_endian, Regs* out) {
  if (data == nullptr || len < kPrstatusRegOffset + kElfNGreg * 4)
    return make_error(SPROV_ERR_TRUNCATED, "NT_PRSTATUS: %zu bytes, need %zu", len,
                      kPrstatusRegOffset + kElfNGreg * 4);
  return regs_from_user_regs(static_cast<const uint8_t*>(data) + kPrstatusRegOffset, kElfNGreg * 4,
                             big_endian, out);
}

Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out) {
  Regs r{};
  size_t idx = 0;
  for (int bit = 0; bit < 64; bit++) {
    if (!((mask >> bit) & 1)) continue;
    if (idx >= count)
      return make_error(SPROV_ERR_TRUNCATED, "perf regs: mask 0x%llx needs more than %zu values",
                        static_cast<unsigned long long>(mask), count);
    const uint64_t v = values[idx++] & 0xffffffffull;
    if (bit == 0) r.set(kPc, v);  // PERF_REG_MIPS_PC
    else if (bit < 32) r.set(bit, v);  // PERF_REG_MIPS_R1..R31
  }
  if (mask & 1) r.set(kZero, 0);
  *out = r;
  return {};
}

}  // namespace stackprov::arch::mips32
