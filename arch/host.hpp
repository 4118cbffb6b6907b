// SPDX-License-Identifier: Apache-2.0
// The traits of the architecture this library runs on (live and in-process capture, signal-handler
// unwinding): the one place that asks the compiler which architecture it targets.
#pragma once

#include <cstddef>

#if defined(__aarch64__)
#include "arch/arm64/registers.hpp"
namespace stackprov::arch {
using HostTraits = arm64::Traits;
}
#elif defined(__mips__) && defined(_ABIO32) && _MIPS_SIM == _ABIO32
#include "arch/mips32/registers.hpp"
namespace stackprov::arch {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
using HostTraits = mips32::TraitsBE;
#else
using HostTraits = mips32::TraitsLE;
#endif
}  // namespace stackprov::arch
#else
#include "arch/x86_64/registers.hpp"
namespace stackprov::arch {
using HostTraits = x86_64::Traits;
}
#endif

namespace stackprov::arch {

using HostRegs = RegState<HostTraits::kNumRegs>;

/// The host's ptrace PTRACE_GETREGSET NT_PRSTATUS register set (`len` bytes, as the kernel
/// filled it) in the host's DWARF numbering.
inline Status host_regs_from_user_regs(const void* data, size_t len, HostRegs* out) {
#if defined(__mips__)
  return mips32::regs_from_user_regs(data, len, HostTraits::kBigEndian, out);
#elif defined(__aarch64__)
  return arm64::regs_from_user_regs(data, len, out);
#else
  return x86_64::regs_from_user_regs(data, len, out);
#endif
}

}  // namespace stackprov::arch
