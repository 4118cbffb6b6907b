// SPDX-License-Identifier: Apache-2.0
// Fuzz target: FdeIndex::from_eh_frame_hdr over a .eh_frame_hdr and its .eh_frame, then lookups and rows.
#include <cstddef>
#include <cstdint>

#include "dwarf/cfi.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::dwarf;

// Input sections (scripts/fuzz-corpus.py): meta (u64 .eh_frame_hdr vaddr, u64 .eh_frame vaddr,
// u64 .text vaddr), .eh_frame_hdr, .eh_frame.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SectionBytes s[3];
  fuzz::split_sections(data, size, s, 3);
  CfiSection eh;
  eh.data = s[2].data;
  eh.size = s[2].size;
  eh.data_vaddr = fuzz::word_at(s[0].data, s[0].size, 0);
  eh.vaddr = fuzz::word_at(s[0].data, s[0].size, 8);
  eh.text_vaddr = fuzz::word_at(s[0].data, s[0].size, 16);
  eh.is_eh_frame = true;
  FdeIndex idx;
  if (FdeIndex::from_eh_frame_hdr(s[1].data, s[1].size, eh.data_vaddr, eh, &idx) != CfiStatus::kOk) return 0;
  // Probe pcs spread over the .eh_frame's FDEs: every 16th byte of the table gives one.
  for (size_t i = 0; i + 8 <= s[1].size && i < 4096; i += 16) {
    const uint64_t pc = eh.text_vaddr + (fuzz::word_at(s[1].data, s[1].size, i) & 0xffff);
    FdeInfo fde;
    if (idx.lookup(eh, pc, &fde) != CfiStatus::kOk) continue;
    if (pc < fde.pc_begin || pc >= fde.pc_end) __builtin_trap();  // lookup returned a non-covering FDE
    CfiRow row;
    if (find_row(eh, fde, pc, &row) == CfiStatus::kOk && (row.start > pc || pc >= row.end)) __builtin_trap();
  }
  return 0;
}
