// SPDX-License-Identifier: Apache-2.0
// The bundle's entropy coder (formats 3 and 4, doc/bundles.md "Format 3"): canonical Huffman codes
// from per-module counts, LSB-first bit streams, bucketed integers; deterministic, bounded decoder.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace stackprov::bundle::entropy {

/// Every table codes symbols 0..255; a code is 1..15 bits long.
inline constexpr unsigned kAlphabet = 256;
inline constexpr unsigned kMaxCodeLen = 15;
/// Codes up to this length decode with one table probe; longer ones bit by bit (rare by design:
/// a symbol that long has a probability below 2^-10).
inline constexpr unsigned kFastBits = 10;

// ---- integers as symbols. v < kIntDirect is the symbol v; larger values are coded by their bit
// width n (7..64) and the bit below the top one, symbol kIntDirect + 2 (n - 7) + that bit, then
// the n - 2 low bits raw. The largest symbol is 64 + 2 * 57 + 1 = 179.
inline constexpr unsigned kIntDirect = 64;
inline constexpr unsigned kIntSymbols = kIntDirect + 2 * 58;

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

/// The symbol of `v`, and the raw bits that follow it (`*nextra` of them, in `*extra`).
inline unsigned int_symbol(uint64_t v, unsigned* nextra, uint64_t* extra) {
  if (v < kIntDirect) {
    *nextra = 0;
    *extra = 0;
    return static_cast<unsigned>(v);
  }
  const unsigned n = static_cast<unsigned>(std::bit_width(v));  // 7..64
  *nextra = n - 2;
  *extra = v & ((uint64_t{1} << (n - 2)) - 1);
  return kIntDirect + 2 * (n - 7) + static_cast<unsigned>((v >> (n - 2)) & 1);
}

/// Appends bits LSB-first: the first bit written is bit 0 of the first byte.
class BitWriter {
 public:
  void put(uint64_t bits, unsigned n) {  // n <= 64
    if (n > 32) {
      put(bits & 0xffffffffu, 32);
      put(bits >> 32, n - 32);
      return;
    }
    acc_ |= (n == 0 ? 0 : (bits & ((uint64_t{1} << n) - 1))) << nacc_;
    nacc_ += n;
    bits_ += n;
    while (nacc_ >= 8) {
      out_.push_back(static_cast<uint8_t>(acc_));
      acc_ >>= 8;
      nacc_ -= 8;
    }
  }
  /// Pads with zero bits to a byte boundary.
  void align() {
    if (nacc_ > 0) put(0, 8 - nacc_);
  }
  uint64_t bits() const { return bits_; }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
  uint64_t acc_ = 0;
  unsigned nacc_ = 0;
  uint64_t bits_ = 0;
};

/// Reads bits LSB-first from [p, end). Reading past the end gives zero bits and sets bad():
/// the caller checks it before trusting what it decoded (every loop it drives is bounded by
/// the bits left, so a hostile stream ends soon).
class BitReader {
 public:
  BitReader() = default;
  BitReader(const uint8_t* p, const uint8_t* end) : start_(p), p_(p), end_(end) { refill(); }

  uint64_t peek(unsigned n) {  // n <= 56
    if (nacc_ < n) refill();
    return acc_ & ((uint64_t{1} << n) - 1);
  }
  void skip(unsigned n) {
    if (nacc_ < n) refill();
    if (n > nacc_) {
      bad_ = true;
      acc_ = 0;
      nacc_ = 0;
      return;
    }
    acc_ >>= n;
    nacc_ -= n;
  }
  uint64_t get(unsigned n) {  // n <= 64
    if (n > 32) {
      const uint64_t lo = get(32);
      return lo | (get(n - 32) << 32);
    }
    const uint64_t v = peek(n);
    skip(n);
    return bad_ ? 0 : v;
  }
  /// Bits consumed since the start.
  uint64_t consumed() const { return static_cast<uint64_t>(p_ - start_) * 8 - nacc_; }
  /// Skips `n` bits (any number); past the end sets bad().
  void skip_bits(uint64_t n) {
    if (n > bits_left()) {
      bad_ = true;
      acc_ = 0;
      nacc_ = 0;
      p_ = end_;
      return;
    }
    if (n <= nacc_) {
      skip(static_cast<unsigned>(n));
      return;
    }
    n -= nacc_;
    acc_ = 0;
    nacc_ = 0;
    p_ += n / 8;
    refill();
    skip(static_cast<unsigned>(n % 8));
  }
  bool bad() const { return bad_; }
  void set_bad() { bad_ = true; }
  /// Bits not yet consumed (the padding of the last byte included).
  uint64_t bits_left() const { return static_cast<uint64_t>(end_ - p_) * 8 + nacc_; }
  /// Whether every bit left is a zero padding bit of the last byte (a canonical stream's end).
  bool at_padded_end() {
    if (bits_left() >= 8) return false;
    return peek(nacc_) == 0;
  }

 private:
  void refill() {
    if (end_ - p_ >= 8) {
      // Whole bytes while 8 are left: one load; the bits of the byte that does not fit whole
      // land above nacc_ and are OR-ed again, equal, by the next refill.
      uint64_t w;
      std::memcpy(&w, p_, 8);
      acc_ |= w << nacc_;
      const unsigned take = (63 - nacc_) >> 3;
      p_ += take;
      nacc_ += take * 8;
      return;
    }
    while (nacc_ <= 56 && p_ < end_) {
      acc_ |= static_cast<uint64_t>(*p_++) << nacc_;
      nacc_ += 8;
    }
  }
  const uint8_t* start_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t acc_ = 0;
  unsigned nacc_ = 0;
  bool bad_ = false;
};

using Lengths = std::array<uint8_t, kAlphabet>;
using Counts = std::array<uint64_t, kAlphabet>;

/// Code lengths for `counts` (0 for an unused symbol), at most kMaxCodeLen; one used symbol gets
/// length 1. Deterministic: equal counts give equal lengths (ties broken by symbol value).
Lengths build_lengths(const Counts& counts);

/// A canonical code: encoding (bit-reversed codes for LSB-first output) and decoding tables.
class Code {
 public:
  /// From code lengths; false unless they form a complete prefix code (Kraft sum exactly 1),
  /// or a single symbol of length 1, or no symbol at all (an unused table: decoding fails).
  bool assign(const Lengths& lengths);
  const Lengths& lengths() const { return len_; }

  void put(BitWriter& w, unsigned sym) const { w.put(code_[sym], len_[sym]); }
  void put_uint(BitWriter& w, uint64_t v) const {
    unsigned nextra;
    uint64_t extra;
    const unsigned s = int_symbol(v, &nextra, &extra);
    put(w, s);
    w.put(extra, nextra);
  }

  /// The next symbol; on a code the table does not have, or past the end, sets r.bad() and
  /// returns 0.
  unsigned get(BitReader& r) const {
    const uint16_t e = fast_[r.peek(kFastBits)];
    if (e >> 8 != 0) {
      r.skip(e >> 8);
      return e & 0xff;
    }
    return get_slow(r);
  }
  uint64_t get_uint(BitReader& r) const {
    const unsigned s = get(r);
    if (s < kIntDirect) return s;
    if (s >= kIntSymbols) {
      r.set_bad();
      return 0;
    }
    const unsigned n = 7 + (s - kIntDirect) / 2;
    const uint64_t top = (uint64_t{2} | ((s - kIntDirect) & 1)) << (n - 2);
    return top | r.get(n - 2);
  }

  /// Writes the lengths compactly: 9 bits n (the highest used symbol + 1), then per symbol below
  /// n 4 bits of length; after a 0, 5 bits more zeros (0..31).
  void write(BitWriter& w) const;
  /// Reads what write() wrote and assign()s it; false on bad bits or lengths.
  bool read(BitReader& r);

 private:
  unsigned get_slow(BitReader& r) const;
  Lengths len_{};
  std::array<uint16_t, kAlphabet> code_{};
  std::array<uint16_t, size_t{1} << kFastBits> fast_{};  // symbol | length << 8; length 0: longer code
  std::array<uint16_t, kMaxCodeLen + 1> count_{};        // codes of each length
  std::array<uint8_t, kAlphabet> sorted_{};              // symbols by (length, symbol)
  unsigned used_ = 0;
};

}  // namespace stackprov::bundle::entropy
