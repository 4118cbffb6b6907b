// SPDX-License-Identifier: Apache-2.0
// Fuzz target: .debug_cu_index of a DWARF package (DwpIndex) and the split-unit finder over .debug_info.dwo.
#include <cstddef>
#include <cstdint>

#include "dwarf/split_dwarf.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::dwarf;

// Input sections: .debug_cu_index, .debug_info.dwo.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SectionBytes s[2];
  fuzz::split_sections(data, size, s, 2);
  uint64_t pos = 0;
  for (int i = 0; i < 64 && find_dwo_unit(s[1], false, 0, &pos); i++) {
    if (pos >= s[1].size) __builtin_trap();  // a unit found lies inside the section
    pos++;
  }
  auto ix = DwpIndex::parse(s[0], false);
  if (!ix.ok()) return 0;
  DwpIndex::Row row;
  for (size_t i = 0; i + 8 <= s[0].size && i < 4096; i += 8) {
    if (ix.value().find(fuzz::word_at(s[0].data, s[0].size, i), &row)) {
      for (const auto* c : {&row.info, &row.abbrev, &row.line, &row.str_offsets, &row.rnglists})
        if (c->present && c->offset + c->size < c->offset) __builtin_trap();  // wrapping contribution
    }
  }
  return 0;
}
