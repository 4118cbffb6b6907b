// SPDX-License-Identifier: Apache-2.0
// The one dispatch from a runtime (architecture, byte order) to the traits the unwinder is templated on.
#pragma once

#include <type_traits>

#include "arch/arch_ops.hpp"
#include "core/types.hpp"

namespace stackprov::unwind {

/// Calls `f(std::type_identity<Traits>{})` with the traits of `arch` (mips32:
/// of `endian`) and returns true, or returns false for an architecture the
/// unwinder does not walk. Every entry point that turns a snapshot, a raw
/// register set or a live reader into a walk goes through here.
template <class F>
bool with_arch_traits(Arch arch, Endian endian, F&& f) {
  switch (arch) {
    case Arch::kX86_64:
      f(std::type_identity<arch::x86_64::Traits>{});
      return true;
    case Arch::kArm64:
      f(std::type_identity<arch::arm64::Traits>{});
      return true;
    case Arch::kMips32:
      if (endian == Endian::kBig)
        f(std::type_identity<arch::mips32::TraitsBE>{});
      else
        f(std::type_identity<arch::mips32::TraitsLE>{});
      return true;
    default:
      return false;
  }
}

/// True for the architectures with_arch_traits dispatches.
inline bool unwinds_arch(Arch arch) {
  return with_arch_traits(arch, Endian::kLittle, [](auto) {});
}

}  // namespace stackprov::unwind
