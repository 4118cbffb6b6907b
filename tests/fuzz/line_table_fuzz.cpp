// SPDX-License-Identifier: Apache-2.0
// Fuzz target: LineTable::parse over every line program of a .debug_line, lookups at row addresses.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dwarf/line_table.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::dwarf;

// Input sections: .debug_line, .debug_line_str, .debug_str.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SectionBytes s[3];
  fuzz::split_sections(data, size, s, 3);
  LineSections ls{s[0], s[1], s[2], false};
  LineLimits limits;
  limits.max_rows = size_t{1} << 16;
  uint64_t off = 0;
  for (int unit = 0; unit < 16 && off + 4 <= ls.line.size; unit++) {
    auto t = LineTable::parse(ls, off, 8, "/comp/dir", limits);
    // The next program: the unit_length of this one (32-bit DWARF only; 64-bit stops the walk).
    const uint32_t len = static_cast<uint32_t>(fuzz::word_at(ls.line.data + off, 4, 0));
    if (len >= 0xfffffff0u) break;
    off += 4 + static_cast<uint64_t>(len);
    if (!t.ok()) continue;
    const LineTable& lt = t.value();
    std::string path;
    for (size_t i = 0; i < lt.file_count() + 1; i++) (void)lt.file_path(i, &path);
    const auto& seqs = lt.sequences();
    for (size_t i = 0; i < seqs.size() && i < 64; i++) {
      const LineSequence& q = seqs[i];
      if (q.first_row > q.last_row || q.last_row > lt.row_count()) __builtin_trap();
      const std::optional<LineRow> r = lt.lookup(q.low);
      if (r && r->address > q.low) __builtin_trap();  // the row found starts at or before addr
      // llvm-symbolizer's rule (the sequence with the smallest high above addr, if it contains
      // addr): a sequence's low address is found unless another sequence ends inside it.
      bool shadowed = q.last_row - q.first_row < 2;
      for (size_t j = 0; j < seqs.size() && !shadowed; j++)
        shadowed = j != i && seqs[j].high > q.low && seqs[j].high <= q.high;
      if (!shadowed && !r) __builtin_trap();
    }
  }
  return 0;
}
