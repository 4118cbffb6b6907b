// SPDX-License-Identifier: Apache-2.0
// Fuzz target: Sigstore bundle verification against the production trusted root (no I/O besides setup).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bundle/sigstore.hpp"

using namespace stackprov::bundle;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static TrustedRoot root = [] {
    const char* shared = std::getenv("STACKPROV_SHARED_DIR");
    std::string path = std::string(shared ? shared : "../shared") + "/conformance/sigstore/trusted_root.public-good.json";
    auto raw = read_file(path);
    TrustedRoot r;
    if (raw) {
      auto p = parse_trusted_root(as_sv(raw.value()));
      if (p) r = p.value();
    }
    return r;
  }();
  (void)parse_trusted_root(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)verify_sigstore_bundle(std::string_view(reinterpret_cast<const char*>(data), size), root, {});
  return 0;
}
