// SPDX-License-Identifier: Apache-2.0
// A reader that serves from a snapshot and copies what it must read live into it (self-contained captures).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memory/snapshot.hpp"

namespace stackprov::memory {

/// Reads from `snap` first; on a miss reads the containing page(s) through
/// `live` and adds the bytes not yet covered to `snap`, so that a later
/// offline walk of the snapshot sees the same memory. Bounded by `budget`
/// bytes of additions.
template <class Live>
class RecordingReader {
 public:
  RecordingReader(Snapshot& snap, Live& live, size_t budget = 4u << 20)
      : snap_(snap), live_(live), budget_(budget) {}

  bool read(uint64_t addr, void* buf, size_t len) {
    if (SnapshotReader(snap_).read(addr, buf, len)) return true;
    if (len == 0 || addr + len < addr) return false;
    const uint64_t lo = addr & ~(kPage - 1);
    const uint64_t hi = (addr + len + kPage - 1) & ~(kPage - 1);
    if (hi - lo > budget_) return false;
    std::vector<uint8_t> page(hi - lo);
    if (!live_.read(lo, page.data(), page.size())) {
      // The whole page may not be readable (a guard page next to it): read exactly.
      if (!live_.read(addr, buf, len)) return false;
      add_uncovered(addr, static_cast<const uint8_t*>(buf), len);
      return true;
    }
    add_uncovered(lo, page.data(), page.size());
    return SnapshotReader(snap_).read(addr, buf, len);
  }

  size_t added() const { return added_; }

 private:
  static constexpr uint64_t kPage = 4096;

  /// Adds [addr, addr+len) minus the parts already in the snapshot.
  void add_uncovered(uint64_t addr, const uint8_t* bytes, size_t len) {
    uint64_t cur = addr;
    const uint64_t end = addr + len;
    while (cur < end) {
      uint64_t next_start = end;  // first existing region starting after cur
      bool covered = false;
      for (const MemoryRegion& r : snap_.memory) {
        const uint64_t rend = r.addr + r.size();
        if (cur >= r.addr && cur < rend) {
          cur = rend;
          covered = true;
          break;
        }
        if (r.addr > cur) next_start = std::min(next_start, r.addr);
      }
      if (covered) continue;
      const uint64_t piece_end = std::min(end, next_start);
      if (piece_end - cur > budget_) return;
      if (snap_.add_memory(cur, bytes + (cur - addr), piece_end - cur).ok()) {
        budget_ -= piece_end - cur;
        added_ += piece_end - cur;
      }
      cur = piece_end;
    }
  }

  Snapshot& snap_;
  Live& live_;
  size_t budget_;
  size_t added_ = 0;
};

}  // namespace stackprov::memory
