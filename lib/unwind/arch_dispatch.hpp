// SPDX-License-Identifier: Apache-2.0
// The unwinder's name for the one runtime (architecture, byte order) → traits dispatch, arch::with_arch_traits.
#pragma once

#include "arch/arch_ops.hpp"
#include "core/types.hpp"

namespace stackprov::unwind {

/// arch::with_arch_traits (arch/arch_ops.hpp, the registration list): every entry point that
/// turns a snapshot, a raw register set or a live reader into a walk goes through it.
using arch::with_arch_traits;

/// True for the architectures with_arch_traits dispatches.
inline bool unwinds_arch(Arch arch) {
  return with_arch_traits(arch, Endian::kLittle, [](auto) {});
}

}  // namespace stackprov::unwind
