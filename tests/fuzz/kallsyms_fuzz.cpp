// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a kallsyms listing (/proc/kallsyms, or perf's copy in its build-id cache, a file any
// user may have written): KernelSymbols::parse and find, CoreListing::open and its window lookups.
#include <cstddef>
#include <cstdint>
#include <string>

#include "perf/kernel_symbols.hpp"

using stackprov::perf::CoreListing;
using stackprov::perf::KernelSymbols;

namespace {
void check(const KernelSymbols::Symbol* s, uint64_t a) {
  if (s == nullptr) return;
  // A symbol found covers the address: start <= a < end, or a == start of an empty one.
  if (a < s->start || (a >= s->end && !(a == s->start && s->end == s->start))) __builtin_trap();
  if (s->name.empty() || s->name.data()[s->name.size()] != '\0') __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const KernelSymbols whole = KernelSymbols::parse(text);
  auto core = CoreListing::open(text);
  uint64_t probes[8] = {0, 1, ~0ull, 0xffffffff81000000ull, 0, 0, 0, 0};
  if (core != nullptr) {
    if (core->etext_address() <= core->text_address()) __builtin_trap();
    const uint64_t span = core->etext_address() - core->text_address();
    probes[4] = core->text_address();
    probes[5] = core->etext_address() - 1;
    probes[6] = core->text_address() + span / 2;
    probes[7] = core->etext_address();
  }
  for (uint64_t a : probes) {
    check(whole.find(a), a);
    if (core != nullptr) check(core->find(a), a);
  }
  return 0;
}
