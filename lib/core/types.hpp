// SPDX-License-Identifier: Apache-2.0
// Small value types shared by every layer: architecture tags and module identities.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace stackprov {

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

/// A GNU build-id (NT_GNU_BUILD_ID descriptor): up to 64 bytes, usually 20.
struct BuildId {
  static constexpr size_t kMax = 64;
  uint8_t bytes[kMax] = {};
  uint8_t len = 0;

  bool empty() const { return len == 0; }
  std::string hex() const;
  static BuildId from_bytes(const void* p, size_t n);
  /// Parses lowercase/uppercase hex; returns an empty BuildId on bad input.
  static BuildId from_hex(std::string_view hex);
  bool operator==(const BuildId& o) const {
    return len == o.len && std::memcmp(bytes, o.bytes, len) == 0;
  }
  bool operator!=(const BuildId& o) const { return !(*this == o); }
};

}  // namespace stackprov
