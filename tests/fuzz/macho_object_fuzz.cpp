// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the Mach-O reader (lib/macho/macho_object.*) on raw bytes: fat headers and slices, load
// commands, segments and sections, nlist symbols, the export trie, function starts, the debug map; then
// every query an upper layer makes of the image, each slice of a fat file in turn.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "macho/compact_unwind.hpp"
#include "macho/macho_object.hpp"

using namespace stackprov;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  auto slices = macho::read_slices(bytes, "fuzz");
  if (!slices.ok()) return 0;
  if (slices->empty() || slices->size() > macho::kMaxFatArchs) __builtin_trap();
  for (const macho::Slice& s : *slices) {
    if (s.offset > size || s.size > size - s.offset) __builtin_trap();
    macho::SliceChoice c;
    c.arch = s.arch;
    auto r = macho::MachoObject::from_bytes(bytes, "fuzz", c);
    if (!r.ok()) continue;
    const macho::MachoObject& o = *r.value();
    (void)macho::uuid_string(o.id());
    for (const char* n : {"__TEXT,__text", "__TEXT,__unwind_info", "__TEXT,__eh_frame", ".debug_info", ".debug_line",
                          ".debug_str_offsets"})
      if (auto sec = o.section(n); sec && sec->size != 0 && (sec->data < o.file_bytes().data() ||
                                                              sec->data + sec->size > o.file_bytes().data() + o.file_bytes().size()))
        __builtin_trap();  // a section's bytes lie inside the slice
    const auto syms = o.symbols();
    for (size_t i = 0; i < syms.size(); i++) {
      if (std::strlen(syms[i].name.data()) != syms[i].name.size()) __builtin_trap();
      if (i > 0 && syms[i].addr <= syms[i - 1].addr) __builtin_trap();  // sorted, one per address
      auto hit = o.symbol_at(syms[i].addr);
      if (syms[i].size != 0 && (!hit || hit->addr != syms[i].addr)) __builtin_trap();
    }
    for (size_t i = 1; i < o.function_starts().size(); i++)
      if (o.function_starts()[i] <= o.function_starts()[i - 1]) __builtin_trap();
    for (const auto& t : o.unwind_tables())
      if (t.kind == "compact_unwind") {
        auto u = macho::CompactUnwindTable::parse({t.data.data, t.data.size});
        if (u.ok() && !u->index().empty()) (void)u->find(u->index().front().function_offset);
      }
    uint8_t buf[16];
    for (const auto& c2 : o.code_sections()) {
      (void)o.read_code(c2.addr, buf, sizeof buf);
      (void)o.read_code(c2.end - 1, buf, 1);
    }
    for (const auto& seg : o.loaded_segments()) (void)o.load_bias(0x100000, seg.offset);
    // The debug map's ranges (what the DWARF resolver looks addresses up in): sorted, disjoint, each
    // naming an entry of the map. Its objects are files by path: not opened here.
    const auto ranges = o.debug_map_ranges();
    for (size_t i = 0; i < ranges.size(); i++) {
      const auto& r = ranges[i];
      if (r.size == 0 || r.addr + r.size < r.addr) __builtin_trap();
      if (i > 0 && ranges[i - 1].addr + ranges[i - 1].size > r.addr) __builtin_trap();
      if (r.object >= o.debug_map().size() || r.symbol >= o.debug_map()[r.object].symbols.size()) __builtin_trap();
      if (o.debug_map()[r.object].symbols[r.symbol].addr != r.addr) __builtin_trap();
    }
  }
  return 0;
}
