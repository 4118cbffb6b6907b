// SPDX-License-Identifier: Apache-2.0
// arm64: register sets from ptrace/core/eBPF/ucontext/perf into DWARF numbering.
#include <cstring>

#include "arch/arm64/registers.hpp"

namespace stackprov::arch::arm64 {

Status regs_from_user_regs(const void* data, size_t len, Regs* out) {
  // struct user_pt_regs { u64 regs[31]; u64 sp; u64 pc; u64 pstate; } (arch/arm64/include/uapi/asm/ptrace.h)
  if (data == nullptr || len < 34 * 8)
    return make_error(SPROV_ERR_TRUNCATED, "user_pt_regs: %zu bytes, need %d", len, 34 * 8);
  uint64_t w[33];
  std::memcpy(w, data, sizeof(w));
  Regs r{};
  for (int i = 0; i < 33; i++) r.set(i, w[i]);  // x0..x30, sp, pc: same order as DWARF
  *out = r;
  return {};
}

Status regs_from_pt_regs(const void* data, size_t len, Regs* out) {
  return regs_from_user_regs(data, len, out);  // struct pt_regs starts with user_pt_regs
}

Status regs_from_ucontext(const void*, size_t, Regs*) {
  return make_error(SPROV_ERR_UNSUPPORTED, "arm64 ucontext conversion: planned with the arm64 issue");
}
Status regs_from_prstatus(const void*, size_t, Regs*) {
  return make_error(SPROV_ERR_UNSUPPORTED, "arm64 NT_PRSTATUS conversion: planned with the arm64 issue");
}
Status regs_from_perf(uint64_t, const uint64_t*, size_t, Regs*) {
  return make_error(SPROV_ERR_UNSUPPORTED, "arm64 perf regs conversion: planned with the arm64 issue");
}

}  // namespace stackprov::arch::arm64
