// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the first-frame prologue/epilogue analysis (lib/unwind/first_frame.*) over hostile code
// bytes: every pc of the input taken as a function [0, size) of x86_64 and of arm64 code; a rule found
// must be a compact rule in terms of sp (a bounded cfa offset, at most kMaxSaved slots).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "unwind/first_frame.hpp"

using namespace stackprov;
using namespace stackprov::unwind;

// Input: code bytes (the seeds in corpus/first_frame/ are the unicorn fixtures' __text sections).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const FirstFrameCode code = [&](uint64_t a, void* buf, size_t n) {
    if (a < 0x1000 || a - 0x1000 > size || n > size - (a - 0x1000)) return false;
    std::memcpy(buf, data + (a - 0x1000), n);
    return true;
  };
  for (uint64_t pc = 0x1000; pc < 0x1000 + size; pc++) {
    for (int arm = 0; arm < 2; arm++) {
      if (arm && pc % 4 != 0) continue;
      auto r = arm ? arm64_first_frame(0x1000, 0x1000 + size, pc, code) : x86_64_first_frame(0x1000, 0x1000 + size, pc, code);
      if (!r) continue;
      if (r->kind != UnwindRule::kCfaReg || r->cfa_reg != (arm ? 31 : 7) || r->cfa_off < 0 || r->nsaved > UnwindRule::kMaxSaved)
        __builtin_trap();
    }
  }
  return 0;
}
