// SPDX-License-Identifier: Apache-2.0
// FDE lookup indexes: the .eh_frame_hdr binary search table viewed in place, or a table built by scanning.
#include <algorithm>

#include "dwarf/cfi.hpp"
#include "dwarf/cfi_reader.hpp"

namespace stackprov::dwarf {
namespace {

using detail::ByteReader;

// LSB 5.0 Core, section 10.6.2 ".eh_frame_hdr".
constexpr uint8_t kEhFrameHdrVersion = 1;
/// The only table encoding searched in place: DW_EH_PE_datarel | DW_EH_PE_sdata4,
/// i.e. pairs of signed 32-bit offsets from the start of .eh_frame_hdr.
constexpr uint8_t kHdrTableEncoding = detail::kPeDatarel | detail::kPeSdata4;  // 0x3b
constexpr size_t kHdrEntrySize = 8;

inline int32_t load_s32(const uint8_t* p, bool big_endian) {
  uint32_t v;
  if (big_endian) {
    v = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  } else {
    v = (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
  }
  return static_cast<int32_t>(v);
}

}  // namespace

CfiStatus FdeIndex::from_eh_frame_hdr(const uint8_t* hdr, size_t hdr_size, uint64_t hdr_vaddr,
                                      const CfiSection& eh_frame, FdeIndex* out) {
  if (hdr == nullptr || out == nullptr || hdr_size < 4) return CfiStatus::kBadCfi;
  if (eh_frame.addr_size != 4 && eh_frame.addr_size != 8) return CfiStatus::kBadCfi;
  ByteReader r{hdr, hdr_size, 0, eh_frame.big_endian};
  uint8_t version = 0, eh_frame_ptr_enc = 0, fde_count_enc = 0, table_enc = 0;
  r.u8(&version);
  r.u8(&eh_frame_ptr_enc);
  r.u8(&fde_count_enc);
  r.u8(&table_enc);
  if (version != kEhFrameHdrVersion) return CfiStatus::kUnsupported;
  // datarel inside .eh_frame_hdr is relative to the start of the header (LSB 10.6.2).
  CfiSection hsec = eh_frame;
  hsec.data_vaddr = hdr_vaddr;
  uint64_t eh_frame_ptr = 0;
  if (eh_frame_ptr_enc == detail::kPeOmit) return CfiStatus::kUnsupported;
  if (!detail::read_encoded(r, eh_frame_ptr_enc, hdr_vaddr, hsec, eh_frame.addr_size, false,
                            &eh_frame_ptr)) {
    return CfiStatus::kBadCfi;
  }
  if (eh_frame_ptr != (eh_frame.vaddr & detail::addr_mask(eh_frame.addr_size))) {
    return CfiStatus::kBadCfi;  // the caller's .eh_frame is not the one this header describes
  }
  if (fde_count_enc == detail::kPeOmit || table_enc == detail::kPeOmit) {
    return CfiStatus::kUnsupported;  // no search table (libunwind PR#694)
  }
  uint64_t fde_count = 0;
  if (!detail::read_encoded(r, fde_count_enc, hdr_vaddr, hsec, eh_frame.addr_size, false,
                            &fde_count)) {
    return CfiStatus::kBadCfi;
  }
  if (table_enc != kHdrTableEncoding) return CfiStatus::kUnsupported;
  if (fde_count == 0) return CfiStatus::kUnsupported;
  if (fde_count > r.remaining() / kHdrEntrySize) return CfiStatus::kBadCfi;
  FdeIndex idx;
  idx.hdr_table_ = hdr + r.pos;
  idx.hdr_count_ = static_cast<size_t>(fde_count);
  idx.hdr_vaddr_ = hdr_vaddr;
  *out = std::move(idx);
  return CfiStatus::kOk;
}

CfiStatus FdeIndex::build(const CfiSection& sec, FdeIndex* out) {
  if (out == nullptr) return CfiStatus::kBadCfi;
  if (sec.size > 0 && sec.data == nullptr) return CfiStatus::kBadCfi;
  if (sec.size > UINT32_MAX) return CfiStatus::kUnsupported;
  if (sec.addr_size != 4 && sec.addr_size != 8) return CfiStatus::kBadCfi;
  std::vector<Entry> entries;
  bool chain_broken = false;
  uint64_t pos = 0;
  // Each entry is at least 8 bytes, so the loop runs at most size / 8 times.
  while (pos < sec.size) {
    detail::EntryHeader h;
    if (detail::read_entry_header(sec, pos, &h) != CfiStatus::kOk) {
      chain_broken = true;
      break;
    }
    if (h.terminator) break;
    if (!h.is_cie) {
      FdeInfo f;
      // A malformed or unsupported FDE is skipped: the others stay usable.
      if (decode_fde(sec, pos, &f) == CfiStatus::kOk && f.pc_end > f.pc_begin &&
          // .debug_frame FDEs of discarded (gc'd / COMDAT) sections keep pc_begin 0.
          (sec.is_eh_frame || f.pc_begin != 0)) {
        entries.push_back(Entry{f.pc_begin, pos});
      }
    }
    pos = h.end;
  }
  if (chain_broken && entries.empty()) return CfiStatus::kBadCfi;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.pc_begin < b.pc_begin; });
  FdeIndex idx;
  idx.entries_ = std::move(entries);
  *out = std::move(idx);
  return CfiStatus::kOk;
}

ptrdiff_t FdeIndex::find(const CfiSection& sec, uint64_t pc) const {
  if (hdr_table_ != nullptr) {
    const uint64_t mask = detail::addr_mask(sec.addr_size);
    const bool be = sec.big_endian;
    auto initial_loc = [&](size_t i) {
      return (hdr_vaddr_ + static_cast<uint64_t>(int64_t{load_s32(hdr_table_ + i * kHdrEntrySize, be)})) & mask;
    };
    // Last entry whose initial location is <= pc.
    size_t lo = 0, hi = hdr_count_;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (initial_loc(mid) <= pc) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return static_cast<ptrdiff_t>(lo) - 1;
  }
  auto it = std::upper_bound(entries_.begin(), entries_.end(), pc,
                             [](uint64_t v, const Entry& e) { return v < e.pc_begin; });
  return (it - entries_.begin()) - 1;
}

uint64_t FdeIndex::entry_pc(const CfiSection& sec, size_t i) const {
  if (i >= size()) return 0;
  if (hdr_table_ != nullptr)
    return (hdr_vaddr_ + static_cast<uint64_t>(int64_t{load_s32(hdr_table_ + i * kHdrEntrySize, sec.big_endian)})) &
           detail::addr_mask(sec.addr_size);
  return entries_[i].pc_begin;
}

CfiStatus FdeIndex::decode_entry(const CfiSection& sec, size_t i, FdeInfo* fde) const {
  if (fde == nullptr || i >= size()) return CfiStatus::kBadCfi;
  if (hdr_table_ != nullptr) {
    const uint64_t mask = detail::addr_mask(sec.addr_size);
    const uint8_t* e = hdr_table_ + i * kHdrEntrySize;
    const uint64_t fde_addr =
        (hdr_vaddr_ + static_cast<uint64_t>(int64_t{load_s32(e + 4, sec.big_endian)})) & mask;
    if (fde_addr < sec.vaddr || fde_addr - sec.vaddr >= sec.size) return CfiStatus::kBadCfi;
    return decode_fde(sec, fde_addr - sec.vaddr, fde);
  }
  return decode_fde(sec, entries_[i].fde_offset, fde);
}

CfiStatus FdeIndex::lookup(const CfiSection& sec, uint64_t pc, FdeInfo* fde) const {
  if (fde == nullptr) return CfiStatus::kBadCfi;
  const ptrdiff_t i = find(sec, pc);
  if (i < 0) return CfiStatus::kNotFound;
  FdeInfo f;
  CfiStatus st = decode_entry(sec, static_cast<size_t>(i), &f);
  if (st != CfiStatus::kOk) return st;
  if (pc < f.pc_begin || pc >= f.pc_end) return CfiStatus::kNotFound;
  *fde = f;
  return CfiStatus::kOk;
}

}  // namespace stackprov::dwarf
