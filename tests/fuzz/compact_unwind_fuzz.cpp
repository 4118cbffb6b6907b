// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the __unwind_info decoder (lib/macho/compact_unwind.*): the section's arrays and pages,
// lookups at every entry and between entries, and every encoding decoded for x86_64 and arm64.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "macho/compact_unwind.hpp"

using namespace stackprov;
using namespace stackprov::macho;

// Input: the section's bytes (the seeds in corpus/compact_unwind/ are the fixtures' __unwind_info);
// the same bytes are the "code" a frameless-indirect encoding reads its `sub rsp, imm32` from.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> sec(data, size);
  const CodeReader code = [&](uint64_t a, void* buf, size_t n) {
    if (a > size || n > size - a) return false;
    std::memcpy(buf, data + a, n);
    return true;
  };
  auto t = CompactUnwindTable::parse(sec);
  if (!t.ok()) return 0;
  for (size_t p = 0; p < t->pages().size(); p++) {
    const SecondLevelPage& pg = t->pages()[p];
    for (const PageEntry& e : pg.entries) {
      for (uint32_t at : {e.function_offset, e.function_offset + 1}) {
        auto f = t->find(at);
        if (!f) continue;
        if (f->start > at || (f->end <= at && f->end != f->start)) __builtin_trap();  // the range holds the address
        for (Arch a : {Arch::kX86_64, Arch::kArm64}) {
          auto r = a == Arch::kX86_64 ? decode_x86_64(f->encoding, f->start, code) : decode_arm64(f->encoding);
          if (r.ok() && r->nsaved > CompactRule::kMaxSaved) __builtin_trap();
        }
      }
    }
  }
  return 0;
}
