// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the bundle unit tests: locating ../shared conformance files, reading them.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace bundle_test {

inline std::string shared_dir() {
  if (const char* s = std::getenv("STACKPROV_SHARED_DIR")) return s;
  if (const char* s = std::getenv("STACKPROV_SOURCE_DIR")) return std::string(s) + "/../shared";
  return "/work/shared";
}

inline std::string sigstore_dir() { return shared_dir() + "/conformance/sigstore"; }

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace bundle_test
