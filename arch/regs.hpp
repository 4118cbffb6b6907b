// SPDX-License-Identifier: Apache-2.0
// Register state shared by every arch_ops folder: DWARF-numbered values with a validity mask.
#pragma once

#include <cstdint>
#include <cstring>

namespace stackprov::arch {

/// Register values in DWARF numbering of one architecture. N <= 64.
template <int N>
struct RegState {
  static_assert(N <= 64, "validity mask is 64 bits");
  uint64_t v[N];
  uint64_t valid = 0;

  bool has(int r) const { return r >= 0 && r < N && ((valid >> r) & 1); }
  uint64_t get(int r) const { return v[r]; }
  void set(int r, uint64_t x) {
    v[r] = x;
    valid |= 1ull << r;
  }
  void clear(int r) { valid &= ~(1ull << r); }
  /// For the DWARF expression evaluator: bool get(reg, *value).
  bool get(uint16_t r, uint64_t* out) const {
    if (!has(r)) return false;
    *out = v[r];
    return true;
  }
};

/// Target word of `size` bytes decoded with the target's byte order.
inline uint64_t load_word(const uint8_t* p, int size, bool big_endian) {
  uint64_t x = 0;
  if (!big_endian) {
    for (int i = size - 1; i >= 0; i--) x = (x << 8) | p[i];
  } else {
    for (int i = 0; i < size; i++) x = (x << 8) | p[i];
  }
  return x;
}

/// Reads one target word through a memory reader (`bool read(addr, buf, len)`).
template <class Mem>
inline bool read_word(Mem& mem, uint64_t addr, int size, bool big_endian, uint64_t* out) {
  uint8_t buf[8];
  if (!mem.read(addr, buf, static_cast<size_t>(size))) return false;
  if (size == 8 && !big_endian) {
    std::memcpy(out, buf, 8);
    return true;
  }
  *out = load_word(buf, size, big_endian);
  return true;
}

/// What an arch-specific step produced.
enum class StepOutcome : uint8_t {
  kOk = 0,
  kNotApplicable,  ///< this method does not apply here (try the next rung)
  kMemory,         ///< a needed read failed
  kEnd,            ///< end of stack (e.g. frame pointer 0)
};

/// What an architecture's prologue analysis found in the code at one pc
/// (mips32::analyze_prologue): a pure function of the code bytes, the pc and
/// whether the pc is exact, so the unwinder caches it per module-relative pc
/// (RuleCache) and applies it to each frame's registers.
struct PrologueInfo {
  enum Kind : uint8_t {
    kNotApplicable = 0,
    kLeaf,        ///< no frame allocated: ra is still in the return-address register (exact pc only)
    kFrame,       ///< cfa = base + frame_size; saved registers at base + saved_off
    kEndOfStack,  ///< the outermost frame cleared its return address: pc' = 0, sp' = sp + frame_size
  };
  uint8_t kind = kNotApplicable;
  bool moves_fp = false;     ///< `move fp, sp` ran: fp, not sp, is the base (when fp is known)
  int32_t frame_size = 0;
  uint32_t saved_mask = 0;   ///< bit r: register r was saved before the pc
  int16_t saved_off[32] = {};  ///< from the base, bytes
};

}  // namespace stackprov::arch
