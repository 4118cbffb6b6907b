// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the bundle unit tests: locating the conformance files in tests/data/sigstore, reading them.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bundle_test {

/// tests/data/sigstore of this source tree (STACKPROV_SOURCE_DIR is set by ctest; the compiled-in
/// source directory otherwise). Never a folder outside the repository.
inline std::string sigstore_dir() {
  if (const char* s = std::getenv("STACKPROV_SOURCE_DIR")) return std::string(s) + "/tests/data/sigstore";
  return STACKPROV_TEST_SOURCE_DIR "/tests/data/sigstore";
}

/// The file's bytes; throws if it cannot be opened (a missing vector fails the test, never passes it).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read test vector " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace bundle_test
