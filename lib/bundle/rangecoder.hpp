// SPDX-License-Identifier: Apache-2.0
// Format 8's range records (doc/bundles.md "Format 8"): an adaptive binary range coder and the per-module model of the records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace stackprov::bundle {

namespace rc {

/// An adaptive bit: the probability of a 0 in 1/65536 (kept within [kProbMin, 65536 - kProbMin]) and
/// how many bits it has seen (its adaptation rate: 1/2, 1/4, ... down to 1/2^kRateShift).
struct Prob {
  uint16_t p = 32768;
  uint8_t n = 0;
};
inline constexpr unsigned kRateShift = 5;
inline constexpr uint32_t kProbMin = 32;

inline void update(Prob& pr, unsigned bit) {
  const unsigned sh = pr.n < kRateShift ? pr.n + 1u : kRateShift;
  if (pr.n < kRateShift) pr.n++;
  uint32_t p = pr.p;
  if (bit != 0)
    p -= p >> sh;
  else
    p += (65536 - p) >> sh;
  pr.p = static_cast<uint16_t>(p < kProbMin ? kProbMin : p > 65536 - kProbMin ? 65536 - kProbMin : p);
}

/// LZMA's range encoder (carry propagation through a cached byte and a run of 0xff), with 16-bit
/// probabilities: `bound = (range >> 16) * p`. The first byte written is always 0.
class Encoder {
 public:
  /// Codes `bit` with `pr` and adapts `pr`; returns `bit` (so one model serves both directions).
  unsigned bit(Prob& pr, unsigned bit);
  /// The low `n` bits of `v` (n <= 32), most significant first, each with probability 1/2.
  uint64_t direct(uint64_t v, unsigned n);
  /// Flushes (5 bytes) and returns the bytes; the encoder is spent.
  std::vector<uint8_t> finish();

 private:
  void shift_low();
  uint64_t low_ = 0;
  uint32_t range_ = 0xffffffffu;
  uint8_t cache_ = 0;
  uint64_t cache_size_ = 1;
  std::vector<uint8_t> out_;
};

/// The decoder of Encoder's bytes. Reading past the end sets bad() and yields zero bytes; a stream is
/// whole when it ends with every byte read and the code at 0 (finished()).
class Decoder {
 public:
  Decoder(const uint8_t* p, const uint8_t* end);
  unsigned bit(Prob& pr, unsigned = 0);
  uint64_t direct(uint64_t = 0, unsigned n = 0);
  bool bad() const { return bad_; }
  /// Every byte consumed, none missing, and the code 0: the stream ended where the encoder's did.
  bool finished() const { return !bad_ && p_ == end_ && code_ == 0; }

 private:
  uint8_t next() {
    if (p_ == end_) {
      bad_ = true;
      return 0;
    }
    return *p_++;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  uint32_t range_ = 0xffffffffu;
  uint32_t code_ = 0;
  bool bad_ = false;
};

}  // namespace rc

/// One range record as format 8 codes it: the start relative to the module's base, string indexes
/// into the module's string table (kNone8 for "" where the table has no ""), depth-0 call sites
/// kNone8, 0, 0.
struct Range8 {
  uint32_t start = 0, len = 0;
  uint32_t fn = 0, file = 0, line = 0, col = 0;
  uint32_t call_file = 0, call_line = 0, call_col = 0;
};
inline constexpr uint32_t kNone8 = UINT32_MAX;

/// Format 8: at most this many range records per byte of a module's range bytes. The reader checks the
/// module's count against it before it allocates (<= 92 bytes a record while decoding, 36 kept); the
/// writer pads a denser stream with zero bytes in front of the coded records (real modules code to
/// 0.5-0.7 records a byte: libc.so.6, python3.11).
inline constexpr uint64_t kMaxRanges8PerByte = 2;
inline constexpr uint64_t kMaxDepths8 = 128;

/// Codes a module's range records, per depth in address order (each depth non-empty, records of one
/// depth sorted, not overlapping, depth d > 0 inside depth d - 1's records), string indexes < nstr.
/// Layout: uleb depth count, per depth uleb record count, uleb padding, that many zero bytes, then the
/// range-coded records (doc/bundles.md "Format 8"); nothing at all for no records. Deterministic: the bytes depend on the records and nstr only.
std::vector<uint8_t> encode_ranges8(const std::vector<std::vector<Range8>>& depths, uint32_t nstr);

/// Decodes `n` bytes written by encode_ranges8 into `out` (per depth), checking everything a lookup
/// relies on: depth and record counts against `nranges` (the module table's) and kMaxRanges8PerByte
/// before allocating, string indexes < nstr, records inside 4 GiB above the base, sorted, not
/// overlapping, each deeper record inside the records of the depth above, the stream ending exactly
/// at its last byte. Errors are SPROV_ERR_BUNDLE naming module `mi` and the record.
Status decode_ranges8(const uint8_t* p, size_t n, size_t mi, uint64_t nranges, uint32_t nstr,
                      std::vector<std::vector<Range8>>* out);

}  // namespace stackprov::bundle
