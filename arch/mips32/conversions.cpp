// SPDX-License-Identifier: Apache-2.0
// mips32: register-set conversions (planned with the arm64/mips32 issue).
#include "arch/mips32/registers.hpp"

namespace stackprov::arch::mips32 {

namespace {
Status planned(const char* what) {
  return make_error(SPROV_ERR_UNSUPPORTED, "mips32 %s conversion: planned with the mips32 issue", what);
}
}  // namespace

Status regs_from_user_regs(const void*, size_t, bool, Regs*) { return planned("ptrace"); }
Status regs_from_pt_regs(const void*, size_t, bool, Regs*) { return planned("pt_regs"); }
Status regs_from_ucontext(const void*, size_t, bool, Regs*) { return planned("ucontext"); }
Status regs_from_prstatus(const void*, size_t, bool, Regs*) { return planned("NT_PRSTATUS"); }
Status regs_from_perf(uint64_t, const uint64_t*, size_t, Regs*) { return planned("perf regs"); }

}  // namespace stackprov::arch::mips32
