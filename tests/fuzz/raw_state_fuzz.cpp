// SPDX-License-Identifier: Apache-2.0
// Fuzz target: raw state documents (lib/memory/raw_state.*, doc/raw-state.md): any bytes give a
// snapshot or a named error. Module paths are relative to a directory that does not exist, so no
// file is opened for a relative path (such a module with an identity is placed by the document).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memory/raw_state.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Offline too: modules placed by identity, link_address and size alone (no file opened).
  for (bool offline : {false, true}) {
    auto s = memory::snapshot_from_raw_state(std::string_view(reinterpret_cast<const char*>(data), size),
                                             "/nonexistent-stackprov-fuzz-dir", offline);
    if (!s.ok() && s.error().message.empty()) __builtin_trap();  // every error names what is wrong
    if (s.ok() && s->arch != Arch::kX86_64 && s->arch != Arch::kArm64) __builtin_trap();
    if (s.ok())
      for (const memory::SnapshotModule& m : s->modules)
        if (m.end <= m.start) __builtin_trap();
  }
  return 0;
}
