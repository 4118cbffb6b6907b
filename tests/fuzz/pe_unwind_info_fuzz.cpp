// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: read_pdata, find_function, decode_unwind_info and decode_chain over arbitrary image
// bytes, and one symbolic unwind step (plan_x64_step, epilog decoding included) at pcs of the table.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pe/unwind_info.hpp"
#include "pe/x64_unwind.hpp"

using namespace stackprov::pe;

// Input: u32 pdata RVA, u32 pdata size (little-endian), then the loaded image (byte i at RVA i).
// The seeds in corpus/pe_unwind_info/ are tests/unit/pe's fixtures laid out that way (their
// exception directory's RVA and size, then SizeOfImage bytes with every section at its RVA).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint32_t pdata_rva = data[0] | data[1] << 8 | data[2] << 16 | static_cast<uint32_t>(data[3]) << 24;
  const uint32_t pdata_size = data[4] | data[5] << 8 | data[6] << 16 | static_cast<uint32_t>(data[7]) << 24;
  const std::span<const uint8_t> image(data + 8, size - 8);
  const ImageReader img = flat_image_reader(image);
  const std::span<const uint8_t> pdata = img(pdata_rva, pdata_size);

  auto table = read_pdata(pdata);
  if (table.ok()) {
    // One unwind step at the first pcs of each function (at most 256 steps), exact and not: any
    // answer or a named error; an epilog is recognised only at an exact pc.
    struct Code {
      std::span<const uint8_t> image;
    } code{image};
    auto read_code = [](const void* ctx, uint32_t rva, uint8_t* buf, uint32_t len) {
      const auto& im = static_cast<const Code*>(ctx)->image;
      if (rva > im.size() || len > im.size() - rva) return false;
      std::copy_n(im.data() + rva, len, buf);
      return true;
    };
    size_t steps = 0;
    for (const RuntimeFunction& f : *table) {
      for (uint32_t pc = f.begin; pc < f.end && pc - f.begin < 8 && steps < 256; pc++, steps++) {
        for (bool exact : {false, true}) {
          auto p = plan_x64_step(img, *table, pc, exact, read_code, &code);
          if (p.ok() && p->in_epilog && !exact) __builtin_trap();
        }
      }
    }
    for (const RuntimeFunction& f : *table) {
      // Sorted and disjoint: each entry is found at both of its ends, and nothing right after it
      // but the next entry.
      if (find_function(*table, f.begin) != &f || find_function(*table, f.end - 1) != &f) __builtin_trap();
      const RuntimeFunction* after = find_function(*table, f.end);
      if (after && after->begin != f.end) __builtin_trap();
    }
  }
  // Every whole 12-byte entry, accepted table or not (at most 4096: the input bounds the rest).
  const size_t n = std::min<size_t>(pdata.size() / kRuntimeFunctionSize, 4096);
  for (size_t i = 0; i < n; i++) {
    const uint8_t* p = pdata.data() + i * kRuntimeFunctionSize;
    auto u32 = [](const uint8_t* q) { return q[0] | q[1] << 8 | q[2] << 16 | static_cast<uint32_t>(q[3]) << 24; };
    const RuntimeFunction f{u32(p), u32(p + 4), u32(p + 8)};
    auto chain = decode_chain(img, f);
    if (!chain.ok()) continue;
    if (chain->empty() || chain->size() > kMaxChainDepth) __builtin_trap();
    for (size_t k = 0; k < chain->size(); k++) {
      const UnwindInfo& u = (*chain)[k];
      unsigned slots = 0;
      for (const UnwindCode& c : u.codes) slots += c.slots;
      if (slots > u.code_count) __builtin_trap();
      if ((k + 1 < chain->size()) != u.chained.has_value()) __builtin_trap();
    }
  }
  return 0;
}
