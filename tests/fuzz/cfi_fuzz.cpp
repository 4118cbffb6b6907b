// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: FdeIndex::build, lookup and find_row over arbitrary .eh_frame/.debug_frame bytes.
#include <cstddef>
#include <cstdint>

#include "dwarf/cfi.hpp"

using namespace stackprov::dwarf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the section flavour; the rest is the section.
  const uint8_t mode = data[0];
  CfiSection sec;
  sec.data = data + 1;
  sec.size = size - 1;
  sec.vaddr = 0x1000;
  sec.data_vaddr = 0x800;
  sec.text_vaddr = 0x2000;
  sec.is_eh_frame = (mode & 1) == 0;
  sec.big_endian = (mode & 2) != 0;
  sec.addr_size = (mode & 4) ? 4 : 8;
  sec.vendor_ops = (mode & 8) ? CfiVendorOps::kAarch64 : CfiVendorOps::kNone;

  FdeIndex idx;
  if (FdeIndex::build(sec, &idx) != CfiStatus::kOk) return 0;
  // Every FDE the scan accepted: look it up at both ends and interpret a few rows.
  for (uint64_t off = 0; off < sec.size; ++off) {
    FdeInfo fde;
    if (decode_fde(sec, off, &fde) != CfiStatus::kOk) continue;
    FdeInfo found;
    for (uint64_t pc : {fde.pc_begin, fde.pc_end - 1, fde.pc_begin + (fde.pc_end - fde.pc_begin) / 2}) {
      if (idx.lookup(sec, pc, &found) != CfiStatus::kOk) continue;
      CfiRow row;
      if (find_row(sec, found, pc, &row) == CfiStatus::kOk) {
        // The row must contain pc and lie inside the FDE.
        if (row.start > pc || pc >= row.end || row.start < found.pc_begin || row.end > found.pc_end) {
          __builtin_trap();
        }
      }
    }
  }
  return 0;
}
