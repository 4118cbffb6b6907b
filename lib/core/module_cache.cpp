// SPDX-License-Identifier: Apache-2.0
// ModuleKey hashing (XXH3) and file-identity keys from stat(2).
#include "core/module_cache.hpp"

#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

namespace stackprov {

namespace {
/// Distinct seeds keep a build-id key and a file-identity key with equal bytes apart.
constexpr XXH64_hash_t kBuildIdSeed = 0x62756964;  // "buid"
constexpr XXH64_hash_t kFileSeed = 0x66696c65;     // "file"

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
}  // namespace

size_t ModuleKeyHash::operator()(const ModuleKey& k) const noexcept {
  if (k.by_build_id()) {
    const size_t n = k.build_id.len <= BuildId::kMax ? k.build_id.len : BuildId::kMax;
    return static_cast<size_t>(XXH3_64bits_withSeed(k.build_id.bytes, n, kBuildIdSeed));
  }
  uint8_t b[24];
  put_le64(b, k.dev);
  put_le64(b + 8, k.inode);
  put_le64(b + 16, k.mtime_ns);
  return static_cast<size_t>(XXH3_64bits_withSeed(b, sizeof(b), kFileSeed));
}

Result<ModuleKey> module_key_for_file(const std::string& path, const BuildId& id) {
  ModuleKey key;
  if (!id.empty()) {
    key.build_id = id;
    return key;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return make_error(-err, "stat '%s': %s", path.c_str(), strerror(err));
  }
  key.dev = static_cast<uint64_t>(st.st_dev);
  key.inode = static_cast<uint64_t>(st.st_ino);
  key.mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
                 static_cast<uint64_t>(st.st_mtim.tv_nsec);
  return key;
}

}  // namespace stackprov
