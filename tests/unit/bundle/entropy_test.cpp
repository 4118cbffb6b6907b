// SPDX-License-Identifier: Apache-2.0
// The format-3 entropy coder (lib/bundle/entropy.hpp) against independent answers: RFC 1951's canonical
// code example, a priority-queue Huffman cost, and hostile tables and streams.
#include <catch2/catch.hpp>

#include <functional>
#include <queue>
#include <random>
#include <string>

#include "bundle/entropy.hpp"

using namespace stackprov::bundle::entropy;

namespace {

/// The optimal (unlimited) Huffman cost sum(count x length) by the textbook method: repeatedly
/// merge the two lightest weights; the cost is the sum of all merged weights.
uint64_t reference_cost(const Counts& c) {
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> q;
  for (uint64_t v : c)
    if (v != 0) q.push(v);
  if (q.size() == 1) return q.top();  // one symbol: a 1-bit code
  uint64_t cost = 0;
  while (q.size() > 1) {
    const uint64_t a = q.top();
    q.pop();
    const uint64_t b = q.top();
    q.pop();
    cost += a + b;
    q.push(a + b);
  }
  return cost;
}

uint64_t cost(const Counts& c, const Lengths& l) {
  uint64_t s = 0;
  for (unsigned i = 0; i < kAlphabet; i++) s += c[i] * l[i];
  return s;
}

/// The bits a symbol takes on the wire, first bit first, as a string of '0'/'1'.
std::string wire(const Code& code, unsigned sym) {
  BitWriter w;
  code.put(w, sym);
  const uint64_t n = w.bits();
  w.align();
  std::string out;
  for (uint64_t i = 0; i < n; i++) out += ((w.bytes()[i / 8] >> (i % 8)) & 1) ? '1' : '0';
  return out;
}

}  // namespace

TEST_CASE("entropy: canonical codes are RFC 1951's (3.2.2: lengths 3,3,3,3,3,2,4,4 for A..H)", "[bundle][entropy]") {
  Lengths l{};
  const uint8_t lens[8] = {3, 3, 3, 3, 3, 2, 4, 4};
  for (unsigned i = 0; i < 8; i++) l['A' + i] = lens[i];
  Code c;
  REQUIRE(c.assign(l));
  const char* want[8] = {"010", "011", "100", "101", "110", "00", "1110", "1111"};  // the RFC's table
  for (unsigned i = 0; i < 8; i++) {
    INFO("symbol " << char('A' + i));
    CHECK(wire(c, 'A' + i) == want[i]);
  }
}

TEST_CASE("entropy: lengths are optimal Huffman lengths (equal cost to a priority-queue Huffman), Kraft-complete",
          "[bundle][entropy]") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; round++) {
    Counts c{};
    const unsigned used = 1 + static_cast<unsigned>(rng() % 60);
    for (unsigned k = 0; k < used; k++) c[rng() % kAlphabet] += 1 + rng() % 1000;
    const Lengths l = build_lengths(c);
    Code code;
    REQUIRE(code.assign(l));  // a complete prefix code (or a single 1-bit symbol)
    INFO("round " << round);
    CHECK(cost(c, l) == reference_cost(c));
    for (unsigned i = 0; i < kAlphabet; i++) CHECK((l[i] != 0) == (c[i] != 0));
  }
}

TEST_CASE("entropy: a skewed distribution is limited to 15-bit codes and stays decodable", "[bundle][entropy]") {
  Counts c{};
  uint64_t w = 1;
  for (unsigned i = 0; i < 40; i++, w = w * 2 + 1) c[i] = w;  // Fibonacci-like: unlimited depth 39
  const Lengths l = build_lengths(c);
  unsigned longest = 0;
  for (uint8_t v : l) longest = std::max<unsigned>(longest, v);
  CHECK(longest <= kMaxCodeLen);
  CHECK(longest > kFastBits);  // the slow path below is exercised
  Code code;
  REQUIRE(code.assign(l));
  BitWriter bw;
  for (unsigned i = 0; i < 40; i++) code.put(bw, i);
  bw.align();
  BitReader r(bw.bytes().data(), bw.bytes().data() + bw.bytes().size());
  for (unsigned i = 0; i < 40; i++) CHECK(code.get(r) == i);  // long codes take the slow path
  CHECK_FALSE(r.bad());
  CHECK(r.at_padded_end());
}

TEST_CASE("entropy: integers and tables round-trip, edge values included", "[bundle][entropy]") {
  const uint64_t vals[] = {0, 1, 63, 64, 65, 127, 128, 255, 256, 1000, 65535, 65536, (1ull << 32) - 1, 1ull << 32,
                           (1ull << 63) - 1, 1ull << 63, UINT64_MAX};
  Counts c{};
  for (uint64_t v : vals) {
    unsigned n;
    uint64_t x;
    const unsigned s = int_symbol(v, &n, &x);
    REQUIRE(s < kIntSymbols);
    c[s]++;
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, INT64_MIN, INT64_MAX}) c[zigzag(v) & 63]++;
  Code code;
  REQUIRE(code.assign(build_lengths(c)));
  BitWriter w;
  code.write(w);  // the table travels with the stream
  for (uint64_t v : vals) code.put_uint(w, v);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, INT64_MIN, INT64_MAX}) code.put_uint(w, zigzag(v) & 63);
  w.align();
  BitReader r(w.bytes().data(), w.bytes().data() + w.bytes().size());
  Code back;
  REQUIRE(back.read(r));
  CHECK(back.lengths() == code.lengths());
  for (uint64_t v : vals) CHECK(back.get_uint(r) == v);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, INT64_MIN, INT64_MAX}) {
    CHECK(unzigzag(zigzag(v)) == v);
    CHECK(back.get_uint(r) == (zigzag(v) & 63));
  }
  CHECK_FALSE(r.bad());
  CHECK(r.at_padded_end());
}

TEST_CASE("entropy: hostile tables and streams are refused, never read past the end", "[bundle][entropy]") {
  Lengths over{};  // over-subscribed: three 1-bit codes
  over[0] = over[1] = over[2] = 1;
  Code c;
  CHECK_FALSE(c.assign(over));
  Lengths incomplete{};  // 1 + 2 bits: a code word is missing
  incomplete[0] = 1;
  incomplete[1] = 2;
  CHECK_FALSE(c.assign(incomplete));
  Lengths too_long{};
  too_long[0] = 16;
  CHECK_FALSE(c.assign(too_long));
  Lengths single{};
  single[9] = 2;  // one symbol must have length 1
  CHECK_FALSE(c.assign(single));

  // A single-symbol code: "0" decodes, "1" is not a code word.
  single[9] = 1;
  REQUIRE(c.assign(single));
  const uint8_t ones[1] = {0xfe};
  BitReader r(ones, ones + 1);
  CHECK(c.get(r) == 9);
  CHECK_FALSE(r.bad());
  (void)c.get(r);
  CHECK(r.bad());

  // An unused table decodes nothing.
  Code empty;
  REQUIRE(empty.assign(Lengths{}));
  const uint8_t zero[2] = {0, 0};
  BitReader r2(zero, zero + 2);
  (void)empty.get(r2);
  CHECK(r2.bad());

  // Reading past the end: zero bits and bad(), for any request.
  BitReader r3(zero, zero + 1);
  CHECK(r3.get(8) == 0);
  CHECK_FALSE(r3.bad());
  CHECK(r3.get(1) == 0);
  CHECK(r3.bad());

  // Table bytes: every byte string of 3 bytes either is refused or reads as a prefix code by the
  // Kraft equality (sum of 2^-length exactly 1), one 1-bit symbol, or no symbol at all.
  size_t accepted = 0;
  for (unsigned a = 0; a < 256; a++)
    for (unsigned b = 0; b < 256; b += 5) {
      const uint8_t t[3] = {static_cast<uint8_t>(a), static_cast<uint8_t>(b), 0x5a};
      BitReader tr(t, t + 3);
      Code k;
      if (!k.read(tr)) continue;
      accepted++;
      unsigned used = 0, ones = 0;
      uint64_t kraft = 0;  // in units of 2^-15
      for (uint8_t v : k.lengths()) {
        if (v == 0) continue;
        used++;
        ones += v == 1;
        kraft += uint64_t{1} << (kMaxCodeLen - v);
      }
      INFO("bytes " << a << " " << b);
      CHECK((used == 0 || (used == 1 && ones == 1) || kraft == (uint64_t{1} << kMaxCodeLen)));
    }
  CHECK(accepted > 0);  // some 3-byte strings are codes (e.g. n = 0: no symbol)
}
