// SPDX-License-Identifier: Apache-2.0
// ModuleKey hashing (XXH3) and file-identity keys from stat(2).
#include "core/module_cache.hpp"

#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

namespace stackprov {

namespace {
constexpr XXH64_hash_t kKeySeed = 0x6d6f646b;  // "modk"

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
}  // namespace

size_t ModuleKeyHash::operator()(const ModuleKey& k) const noexcept {
  const size_t n = k.build_id.len <= ModuleId::kMax ? k.build_id.len : ModuleId::kMax;
  uint8_t b[ModuleId::kMax + 27];
  b[0] = static_cast<uint8_t>(n);  // the length first: no id's bytes read as another's file identity
  std::memcpy(b + 1, k.build_id.bytes, n);
  put_le64(b + 1 + n, k.dev);
  put_le64(b + 9 + n, k.inode);
  put_le64(b + 17 + n, k.mtime_ns);
  b[25 + n] = static_cast<uint8_t>(k.source);
  b[26 + n] = n ? static_cast<uint8_t>(k.build_id.kind) : 0;  // empty ids are equal whatever their kind
  return static_cast<size_t>(XXH3_64bits_withSeed(b, n + 27, kKeySeed));
}

FileIdentity file_identity_of(const struct ::stat& st) {
#ifdef _WIN32
  // mingw's stat has no inode (0) and whole seconds: the identity is weaker than on Linux.
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_mtime) * 1000000000ull};
#else
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_mtim.tv_nsec)};
#endif
}

Result<ModuleKey> module_key_for_file(const std::string& path, const ModuleId& id) {
  ModuleKey key;
  key.build_id = id;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    // The code's own text (strerror) comes first in the last error: the path is what to add.
    return make_error(-err, "module file '%s'", path.c_str());
  }
  const FileIdentity file = file_identity_of(st);
  key.dev = file.dev;
  key.inode = file.ino;
  key.mtime_ns = file.mtime_ns;
  return key;
}

}  // namespace stackprov
