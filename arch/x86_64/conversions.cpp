// SPDX-License-Identifier: Apache-2.0
// x86_64: register sets from ptrace, pt_regs, ucontext, NT_PRSTATUS and perf samples into DWARF numbering.
#include <cstring>

#include "arch/x86_64/registers.hpp"

namespace stackprov::arch::x86_64 {

namespace {

/// user_regs_struct word index -> DWARF register (-1: not a DWARF register we track).
/// <sys/user.h>: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss.
constexpr int kUserRegsToDwarf[21] = {kR15, kR14, kR13, kR12, kRbp, kRbx, kR11, kR10, kR9, kR8, kRax,
                                      kRcx, kRdx, kRsi, kRdi, -1,   kRip, -1,   -1,   kRsp, -1};

Status from_user_layout(const void* data, size_t len, size_t need, const char* what, Regs* out) {
  if (data == nullptr || len < need)
    return make_error(SPROV_ERR_TRUNCATED, "%s: %zu bytes, need %zu", what, len, need);
  uint64_t w[21];
  std::memcpy(w, data, sizeof(w));
  // Written in place (a Regs zeroed, filled and copied cost more than the walk of a frame in the
  // raw entry point); the registers not set stay 0, as before.
  std::memset(out->v, 0, sizeof(out->v));
  out->valid = 0;
  for (int i = 0; i < 21; i++)
    if (kUserRegsToDwarf[i] >= 0) out->set(kUserRegsToDwarf[i], w[i]);
  return {};
}

}  // namespace

Status regs_from_user_regs(const void* data, size_t len, Regs* out) {
  return from_user_layout(data, len, 27 * 8, "user_regs_struct", out);
}

Status regs_from_pt_regs(const void* data, size_t len, Regs* out) {
  return from_user_layout(data, len, 21 * 8, "pt_regs", out);
}

Status regs_from_prstatus(const void* data, size_t len, Regs* out) {
  constexpr size_t kPrRegOffset = 112;  // struct elf_prstatus, linux/elfcore.h (x86_64)
  if (data == nullptr || len < kPrRegOffset + 27 * 8)
    return make_error(SPROV_ERR_TRUNCATED, "NT_PRSTATUS: %zu bytes, need %zu", len,
                      kPrRegOffset + 27 * 8);
  return regs_from_user_regs(static_cast<const uint8_t*>(data) + kPrRegOffset, 27 * 8, out);
}

Status regs_from_ucontext(const void* data, size_t len, Regs* out) {
  // glibc sys/ucontext.h: uc_flags(8) uc_link(8) uc_stack(24) then mcontext gregs[23]:
  // R8 R9 R10 R11 R12 R13 R14 R15 RDI RSI RBP RBX RDX RAX RCX RSP RIP ...
  constexpr size_t kGregsOffset = 40;
  constexpr int kGregToDwarf[17] = {kR8,  kR9,  kR10, kR11, kR12, kR13, kR14, kR15, kRdi,
                                    kRsi, kRbp, kRbx, kRdx, kRax, kRcx, kRsp, kRip};
  if (data == nullptr || len < kGregsOffset + 17 * 8)
    return make_error(SPROV_ERR_TRUNCATED, "ucontext: %zu bytes, need %zu", len, kGregsOffset + 17 * 8);
  uint64_t g[17];
  std::memcpy(g, static_cast<const uint8_t*>(data) + kGregsOffset, sizeof(g));
  Regs r{};
  for (int i = 0; i < 17; i++) r.set(kGregToDwarf[i], g[i]);
  *out = r;
  return {};
}

Status regs_from_perf(uint64_t mask, const uint64_t* values, size_t count, Regs* out) {
  // arch/x86/include/uapi/asm/perf_regs.h bit -> DWARF register.
  constexpr int kPerfToDwarf[24] = {kRax, kRbx, kRcx, kRdx, kRsi, kRdi, kRbp, kRsp, kRip, -1, -1, -1,
                                    -1,   -1,   -1,   -1,   kR8,  kR9,  kR10, kR11, kR12, kR13, kR14, kR15};
  Regs r{};
  size_t idx = 0;
  for (int bit = 0; bit < 64; bit++) {
    if (!((mask >> bit) & 1)) continue;
    if (idx >= count)
      return make_error(SPROV_ERR_TRUNCATED, "perf regs: mask 0x%llx needs more than %zu values",
                        static_cast<unsigned long long>(mask), count);
    if (bit < 24 && kPerfToDwarf[bit] >= 0) r.set(kPerfToDwarf[bit], values[idx]);
    idx++;
  }
  *out = r;
  return {};
}

}  // namespace stackprov::arch::x86_64
