// SPDX-License-Identifier: Apache-2.0
// Architecture names, identity kinds and module-id hex conversion.
#include "core/types.hpp"

namespace stackprov {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::kX86_64:
      return "x86_64";
    case Arch::kArm64:
      return "arm64";
    case Arch::kMips32:
      return "mips32";
    default:
      return "unknown";
  }
}

const char* id_kind_name(IdKind k) noexcept {
  switch (k) {
    case IdKind::kNone:
      return "none";
    case IdKind::kElfBuildId:
      return "elf-build-id";
    case IdKind::kPdbGuidAge:
      return "pdb-guid-age";
    case IdKind::kMachoUuid:
      return "macho-uuid";
    case IdKind::kPeCodeId:
      return "pe-code-id";
  }
  return "unknown";
}

std::optional<IdKind> id_kind_from_name(std::string_view name) noexcept {
  for (uint8_t k = 0; k <= kMaxIdKind; k++)
    if (name == id_kind_name(static_cast<IdKind>(k))) return static_cast<IdKind>(k);
  return std::nullopt;
}

const char* platform_of(IdKind k) noexcept {
  switch (k) {
    case IdKind::kPdbGuidAge:
    case IdKind::kPeCodeId:
      return "windows";
    case IdKind::kMachoUuid:
      return "macos";
    default:
      return "linux";
  }
}

std::string ModuleId::hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(len * 2);
  for (size_t i = 0; i < len; i++) {
    s.push_back(kDigits[bytes[i] >> 4]);
    s.push_back(kDigits[bytes[i] & 15]);
  }
  return s;
}

ModuleId ModuleId::from_bytes(const void* p, size_t n, IdKind kind) {
  ModuleId id;
  if (n > kMax) n = kMax;
  if (n == 0) return id;
  std::memcpy(id.bytes, p, n);
  id.len = static_cast<uint8_t>(n);
  id.kind = kind;
  return id;
}

ModuleId ModuleId::from_hex(std::string_view hex, IdKind kind) {
  ModuleId id;
  if (hex.size() % 2 != 0 || hex.size() / 2 > kMax) return id;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return ModuleId{};
    id.bytes[i / 2] = static_cast<uint8_t>(hi << 4 | lo);
  }
  id.len = static_cast<uint8_t>(hex.size() / 2);
  if (id.len != 0) id.kind = kind;
  return id;
}

}  // namespace stackprov
