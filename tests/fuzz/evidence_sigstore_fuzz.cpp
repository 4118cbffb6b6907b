// SPDX-License-Identifier: Apache-2.0
// Fuzz target: Sigstore bundle verification against the production trusted root (no I/O besides setup).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "evidence/sigstore.hpp"

using namespace stackprov::evidence;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The production trusted root from tests/data/sigstore (path compiled in; STACKPROV_FUZZ_TRUSTED_ROOT
  // overrides it for a campaign run elsewhere). Without it the target would fuzz against an empty root,
  // so a missing or unparsable root stops the run.
  static TrustedRoot root = [] {
    const char* env = std::getenv("STACKPROV_FUZZ_TRUSTED_ROOT");
    std::string path = env ? env : STACKPROV_FUZZ_TRUSTED_ROOT;
    auto raw = read_file(path);
    if (!raw) {
      std::fprintf(stderr, "bundle_sigstore_fuzz: cannot read the trusted root %s\n", path.c_str());
      std::abort();
    }
    auto p = parse_trusted_root(as_sv(raw.value()));
    if (!p) {
      std::fprintf(stderr, "bundle_sigstore_fuzz: cannot parse the trusted root %s\n", path.c_str());
      std::abort();
    }
    return p.value();
  }();
  (void)parse_trusted_root(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)verify_sigstore_bundle(std::string_view(reinterpret_cast<const char*>(data), size), root, {});
  return 0;
}
