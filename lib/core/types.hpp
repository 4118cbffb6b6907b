// SPDX-License-Identifier: Apache-2.0
// Small value types shared by every layer: architecture tags and module identities (ModuleId).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace stackprov {

/// The name a process's maps give the vDSO, kept as a module's path: the one spelling of it.
inline constexpr std::string_view kVdsoName = "[vdso]";

/// Matches enum sprov_arch in the public header.
enum class Arch : uint8_t { kUnknown = 0, kX86_64 = 1, kArm64 = 2, kMips32 = 3 };
enum class Endian : uint8_t { kLittle = 0, kBig = 1 };

const char* arch_name(Arch a);

/// Which file a module was read from, from fstat(2) of the descriptor it was read through (not
/// from a path, which may name another file by then). All zero: unknown.
struct FileIdentity {
  uint64_t dev = 0;       ///< st_dev
  uint64_t ino = 0;       ///< st_ino
  uint64_t mtime_ns = 0;  ///< st_mtim in ns
  bool known() const { return dev != 0 || ino != 0 || mtime_ns != 0; }
  bool operator==(const FileIdentity&) const = default;
};

/// What a module's identity bytes are. The values are the bundle format's (doc/bundles.md) and
/// the snapshot format's; kNone is an empty identity.
enum class IdKind : uint8_t {
  kNone = 0,
  kElfBuildId = 1,  ///< ELF NT_GNU_BUILD_ID descriptor bytes, as in the note (usually 20)
  kPdbGuidAge = 2,  ///< PDB: 16-byte GUID (as stored in the RSDS record) then 4-byte LE age
  kMachoUuid = 3,   ///< Mach-O LC_UUID, 16 bytes
  /// PE code id, the key Windows symbol stores file images under: TimeDateStamp then SizeOfImage,
  /// each a u32 LE (8 bytes). Weaker than kPdbGuidAge (a link time and a size, not a random GUID):
  /// only for images without a CodeView record (doc/windows.md "Code identity").
  kPeCodeId = 4,
};
inline constexpr uint8_t kMaxIdKind = 4;

/// "none", "elf-build-id", "pdb-guid-age", "macho-uuid", "pe-code-id"; "unknown" outside the enum.
const char* id_kind_name(IdKind k) noexcept;
/// The kind id_kind_name names (`name` one of its answers other than "unknown"), else nullopt.
std::optional<IdKind> id_kind_from_name(std::string_view name) noexcept;
/// The platform whose modules carry identities of kind `k` (traces' "platform", bundles' "os"):
/// "linux" for ELF build-ids (and an empty identity: every capture path today reads Linux
/// processes and cores), "windows" for PDB GUID+age and PE code ids, "macos" for Mach-O UUIDs.
const char* platform_of(IdKind k) noexcept;

/// A module's identity, never its path or version: the kind and up to 64 bytes. Two ids are equal
/// when both are empty, or when kind and bytes are equal (the same bytes of two kinds differ).
struct ModuleId {
  static constexpr size_t kMax = 64;
  IdKind kind = IdKind::kNone;
  uint8_t bytes[kMax] = {};
  uint8_t len = 0;

  bool empty() const { return len == 0; }
  /// Lowercase hex of the bytes (the kind is not in it: an ELF build-id prints as readelf does).
  std::string hex() const;
  /// `n` bytes (at most kMax) of kind `kind`; an empty id (kind kNone) when n is 0.
  static ModuleId from_bytes(const void* p, size_t n, IdKind kind = IdKind::kElfBuildId);
  /// Parses lowercase/uppercase hex; returns an empty id on bad input.
  static ModuleId from_hex(std::string_view hex, IdKind kind = IdKind::kElfBuildId);
  bool operator==(const ModuleId& o) const {
    return len == o.len && (len == 0 || kind == o.kind) && std::memcmp(bytes, o.bytes, len) == 0;
  }
  bool operator!=(const ModuleId& o) const { return !(*this == o); }
};

}  // namespace stackprov
