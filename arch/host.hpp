// SPDX-License-Identifier: Apache-2.0
// The traits of the architecture this library runs on (in-process capture, signal-handler unwinding).
#pragma once

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
