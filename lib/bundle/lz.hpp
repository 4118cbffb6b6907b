// SPDX-License-Identifier: Apache-2.0
// The bundle's string-table compression: a small deterministic LZ77 (LZ4-like sequences; format 4 entropy-codes them), bounds-checked decoders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bundle/entropy.hpp"
#include "bundle/format_layout.hpp"

namespace stackprov::bundle::lz {

// Stream: sequences of  u8 token (literal count << 4 | (match length - 4)), [uleb literal
// count - 15 when the nibble is 15], literals, then — unless the stream ends here —
// u16 LE offset (1..65535, back from the output position), [uleb match length - 19 when
// the nibble is 15]. The match copies byte by byte (it may overlap its own output).
inline constexpr size_t kMinMatch = 4;
inline constexpr size_t kWindow = 65535;
inline constexpr int kChainDepth = 32;

/// Compresses `in` deterministically (the output depends on the bytes only).
inline std::vector<uint8_t> compress(const uint8_t* in, size_t n) {
  std::vector<uint8_t> out;
  constexpr size_t kHashBits = 16;
  std::vector<int64_t> head(size_t{1} << kHashBits, -1);
  std::vector<int64_t> prev(n, -1);
  auto hash = [&](size_t i) {
    uint32_t v;
    std::memcpy(&v, in + i, 4);
    return (v * 2654435761u) >> (32 - kHashBits);
  };
  auto insert = [&](size_t i) {
    if (i + kMinMatch > n) return;
    const uint32_t h = hash(i);
    prev[i] = head[h];
    head[h] = static_cast<int64_t>(i);
  };
  size_t lit_start = 0, i = 0;
  auto emit = [&](size_t lit_end, size_t off, size_t mlen) {
    const size_t nlit = lit_end - lit_start;
    const size_t mcode = mlen == 0 ? 0 : mlen - kMinMatch;
    out.push_back(static_cast<uint8_t>((std::min<size_t>(nlit, 15) << 4) | std::min<size_t>(mcode, 15)));
    if (nlit >= 15) layout::put_uleb(out, nlit - 15);
    out.insert(out.end(), in + lit_start, in + lit_end);
    if (mlen == 0) return;
    out.push_back(static_cast<uint8_t>(off));
    out.push_back(static_cast<uint8_t>(off >> 8));
    if (mcode >= 15) layout::put_uleb(out, mcode - 15);
  };
  while (i + kMinMatch <= n) {
    size_t best_len = 0, best_off = 0;
    int64_t cand = head[hash(i)];
    for (int k = 0; k < kChainDepth && cand >= 0 && i - static_cast<size_t>(cand) <= kWindow; k++) {
      const size_t c = static_cast<size_t>(cand);
      size_t l = 0;
      while (i + l < n && in[c + l] == in[i + l]) l++;
      if (l > best_len) {
        best_len = l;
        best_off = i - c;
      }
      cand = prev[c];
    }
    if (best_len >= kMinMatch) {
      emit(i, best_off, best_len);
      for (size_t k = 0; k < best_len; k++) insert(i + k);
      i += best_len;
      lit_start = i;
    } else {
      insert(i);
      i++;
    }
  }
  emit(n, 0, 0);  // the final literals (possibly none)
  return out;
}

/// The stream that stores `in` as one literal run (no matches).
inline std::vector<uint8_t> store(const uint8_t* in, size_t n) {
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(std::min<size_t>(n, 15) << 4));
  if (n >= 15) layout::put_uleb(out, n - 15);
  out.insert(out.end(), in, in + n);
  return out;
}

/// Decompresses exactly `out_len` bytes from [p, p + n) into `out`. False on any
/// malformed, truncated or over-long input (never reads or writes out of bounds).
inline bool decompress(const uint8_t* p, size_t n, size_t out_len, std::string* out) {
  out->clear();
  out->resize(out_len);
  char* o = out->data();
  size_t w = 0;
  layout::Cursor c{p, p + n};
  while (c.left() > 0) {
    const uint8_t tok = c.u8();
    uint64_t nlit = tok >> 4;
    if (nlit == 15) nlit += c.uleb();
    if (!c.ok() || nlit > c.left() || nlit > out_len - w) return false;
    std::memcpy(o + w, c.p, nlit);
    c.p += nlit;
    w += nlit;
    if (c.left() == 0) {
      if ((tok & 15) != 0) return false;
      break;
    }
    const uint8_t lo = c.u8(), hi = c.u8();
    const size_t off = static_cast<size_t>(lo) | (static_cast<size_t>(hi) << 8);
    uint64_t mlen = (tok & 15) + kMinMatch;
    if ((tok & 15) == 15) mlen += c.uleb();
    if (!c.ok() || off == 0 || off > w || mlen > out_len - w) return false;
    for (size_t k = 0; k < mlen; k++, w++) o[w] = o[w - off];
  }
  return w == out_len;
}

// ---- Format 4: the same sequences, entropy-coded (doc/bundles.md "Format 4"). A bit stream
// (bundle/entropy.hpp): four canonical codes (literal count, literal byte, offset, match length −
// 4), then per sequence: literal count, the literals, and — unless the output is complete — the
// offset and the match length; then zero bits to a byte boundary.
enum Ctx : unsigned { kCtxLitCount, kCtxLiteral, kCtxOffset, kCtxMatchLen, kCtxCount };

/// The sequences of an lz stream (compress() or store()), for coding them otherwise.
struct Seq {
  size_t lit_start, nlit, off, mlen;  // mlen 0: the last sequence
};
inline std::vector<Seq> sequences(const std::vector<uint8_t>& z) {
  std::vector<Seq> out;
  layout::Cursor c{z.data(), z.data() + z.size()};
  size_t w = 0;
  while (c.left() > 0) {
    const uint8_t tok = c.u8();
    uint64_t nlit = tok >> 4;
    if (nlit == 15) nlit += c.uleb();
    Seq q{w, static_cast<size_t>(nlit), 0, 0};
    c.p += nlit;
    w += nlit;
    if (c.left() > 0) {
      const uint8_t lo = c.u8(), hi = c.u8();
      q.off = static_cast<size_t>(lo) | (static_cast<size_t>(hi) << 8);
      q.mlen = (tok & 15) + kMinMatch;
      if ((tok & 15) == 15) q.mlen += c.uleb();
    }
    w += q.mlen;
    out.push_back(q);
  }
  return out;
}

/// Format 4: `in` (n bytes) as the entropy-coded sequences of `z` (its compress() or store()).
inline std::vector<uint8_t> encode_coded(const uint8_t* in, const std::vector<uint8_t>& z) {
  const std::vector<Seq> seqs = sequences(z);
  std::vector<entropy::Counts> counts(kCtxCount);
  auto count_uint = [&](unsigned k, uint64_t v) {
    unsigned nx;
    uint64_t x;
    counts[k][entropy::int_symbol(v, &nx, &x)]++;
  };
  for (const Seq& q : seqs) {
    count_uint(kCtxLitCount, q.nlit);
    for (size_t i = 0; i < q.nlit; i++) counts[kCtxLiteral][in[q.lit_start + i]]++;
    if (q.mlen == 0) continue;
    count_uint(kCtxOffset, q.off);
    count_uint(kCtxMatchLen, q.mlen - kMinMatch);
  }
  entropy::BitWriter w;
  std::vector<entropy::Code> codes(kCtxCount);
  for (unsigned k = 0; k < kCtxCount; k++) {
    codes[k].assign(entropy::build_lengths(counts[k]));
    codes[k].write(w);
  }
  for (const Seq& q : seqs) {
    codes[kCtxLitCount].put_uint(w, q.nlit);
    for (size_t i = 0; i < q.nlit; i++) codes[kCtxLiteral].put(w, in[q.lit_start + i]);
    if (q.mlen == 0) continue;
    codes[kCtxOffset].put_uint(w, q.off);
    codes[kCtxMatchLen].put_uint(w, q.mlen - kMinMatch);
  }
  w.align();
  return std::move(w.bytes());
}

/// Decodes what encode_coded() wrote: exactly `out_len` bytes, then only zero padding. False on
/// any bad code, truncation or over-long output. Each sequence but the last adds at least
/// kMinMatch bytes, so the loop ends after out_len / kMinMatch + 1 sequences at most.
inline bool decompress_coded(const uint8_t* p, size_t n, size_t out_len, std::string* out) {
  out->clear();
  out->resize(out_len);
  char* o = out->data();
  entropy::BitReader r(p, p + n);
  entropy::Code codes[kCtxCount];
  for (auto& c : codes)
    if (!c.read(r)) return false;
  size_t w = 0;
  for (;;) {
    const uint64_t nlit = codes[kCtxLitCount].get_uint(r);
    if (r.bad() || nlit > out_len - w || nlit > r.bits_left()) return false;  // a literal takes a bit at least
    for (uint64_t i = 0; i < nlit; i++) o[w++] = static_cast<char>(codes[kCtxLiteral].get(r));
    if (r.bad()) return false;
    if (w == out_len) break;
    const uint64_t off = codes[kCtxOffset].get_uint(r);
    const uint64_t mlen = codes[kCtxMatchLen].get_uint(r) + kMinMatch;
    if (r.bad() || off == 0 || off > w || off > kWindow || mlen > out_len - w) return false;
    for (size_t k = 0; k < mlen; k++, w++) o[w] = o[w - off];
  }
  return r.at_padded_end();
}

}  // namespace stackprov::bundle::lz
