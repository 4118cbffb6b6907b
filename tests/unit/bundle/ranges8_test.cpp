// SPDX-License-Identifier: Apache-2.0
// Format 8's range records (doc/bundles.md "Format 8"): the range coder against hand-computed bytes, the records against format 7's, hostile streams.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "bundle/rangecoder.hpp"
#include "lib/bundle_bytes.hpp"

using namespace stackprov::bundle;

namespace ranges8_test {

/// A module whose records exercise every path of the model: several functions and files, repeated
/// runs (the match model), positions coming back (the position class), gaps at every depth, call
/// sites equal to the parent's position and not, a depth-0 record with a call site.
ModuleContents module8(uint32_t seed, size_t nfunc) {
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, std::vector<uint8_t>(20, static_cast<uint8_t>(seed))};
  m.name = "r8.so";
  std::mt19937 rng(seed);
  uint64_t pc = 0x400000;
  for (size_t f = 0; f < nfunc; f++) {
    const std::string fn = "_Z2f" + std::to_string(f % 37) + "v", file = f % 3 == 0 ? "a.c" : f % 3 == 1 ? "b.S" : "c.h";
    const uint32_t base_line = 10 + static_cast<uint32_t>(rng() % 500);
    const size_t nrec = 2 + rng() % 12;
    const uint64_t fstart = pc;
    for (size_t i = 0; i < nrec; i++) {
      const bool repeat = f % 4 == 1;  // the same run of records each time: copies for the match model
      const uint32_t len = repeat ? 4 + static_cast<uint32_t>(i % 3) : 1 + static_cast<uint32_t>(rng() % 40);
      const uint32_t line = repeat ? 100 + static_cast<uint32_t>(i) : base_line + static_cast<uint32_t>(rng() % 9) - 2;
      const uint32_t col = repeat ? 1 : (i % 2 == 0 ? 5 : static_cast<uint32_t>(rng() % 30));
      m.ranges.push_back({pc, len, 0, fn, file, line, col, "", 0, 0});
      pc += len;
    }
    const uint64_t fend = pc;
    if (fend - fstart > 24 && f % 2 == 0) {  // an inlined call, sometimes with a callee of its own
      const uint64_t s1 = fstart + 3 + rng() % 8;
      const uint64_t l1 = (fend - s1) / 2;
      const RangeRecord* at = nullptr;
      for (const RangeRecord& r : m.ranges)
        if (r.depth == 0 && r.start <= s1 && s1 < r.start + r.length) at = &r;
      const bool from_parent = rng() % 4 != 0;
      // The call site, copied before the records below grow m.ranges (`at` points into it).
      const std::string call_file = from_parent ? at->file : "other.c";
      const uint32_t call_line = from_parent ? at->line : 77, call_col = from_parent ? at->column : 4;
      m.ranges.push_back({s1, static_cast<uint32_t>(l1 / 2), 1, "inl" + std::to_string(f % 5), "inl.h",
                          20 + static_cast<uint32_t>(f % 7), 3, call_file, call_line, call_col});
      m.ranges.push_back({s1 + l1 / 2 + 2, static_cast<uint32_t>(l1 / 2 - 2), 1, "inl" + std::to_string(f % 5), "inl.h",
                          21 + static_cast<uint32_t>(f % 7), 3, call_file, call_line, call_col});
      if (f % 3 == 0 && l1 / 2 > 4)
        m.ranges.push_back({s1 + 1, static_cast<uint32_t>(l1 / 2 - 2), 2, "leaf", "leaf.h", 5, 1, "inl.h",
                            20 + static_cast<uint32_t>(f % 7), 3});
    }
    pc += f % 5 == 0 ? 16 - (pc & 15) : 0;  // alignment gaps
  }
  m.ranges[1].call_line = 9;  // a depth-0 record with a call site: kept, though nothing uses it
  return m;
}

void check_same_ranges(const std::vector<RangeRecord>& a, const std::vector<RangeRecord>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); i++) {
    INFO("record " << i);
    CHECK(a[i].start == b[i].start);
    CHECK(a[i].length == b[i].length);
    CHECK(a[i].depth == b[i].depth);
    CHECK(a[i].function == b[i].function);
    CHECK(a[i].file == b[i].file);
    CHECK(a[i].line == b[i].line);
    CHECK(a[i].column == b[i].column);
    CHECK(a[i].call_file == b[i].call_file);
    CHECK(a[i].call_line == b[i].call_line);
    CHECK(a[i].call_column == b[i].call_column);
    CHECK(a[i].from_symtab == b[i].from_symtab);
  }
}

/// Module 0's range bytes (section 5) of a written bundle.
std::vector<uint8_t> range_bytes(const std::vector<uint8_t>& b) {
  const int sec = stackprov::test::bundle_section_index(b, 5);
  REQUIRE(sec >= 0);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + sec * 24 + 8));
  const size_t len = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + sec * 24 + 16));
  return {b.begin() + static_cast<std::ptrdiff_t>(off), b.begin() + static_cast<std::ptrdiff_t>(off + len)};
}

}  // namespace ranges8_test

using namespace ranges8_test;

TEST_CASE("bundle ranges8: the range coder's bytes equal a hand computation", "[bundle][ranges8]") {
  // LZMA's encoder with 16-bit probabilities (doc/bundles.md "Format 8"): range 0xffffffff, a fresh
  // probability 0x8000, bound = (range >> 16) * p = 0xffff * 0x8000 = 0x7fff8000.
  {  // a 0: range = bound, low 0: the flush writes the cache byte and four zero bytes.
    rc::Encoder e;
    rc::Prob p;
    e.bit(p, 0);
    CHECK(p.p == 0x8000 + 0x4000);  // first update halves the distance to 1 (rate 1/2)
    CHECK(e.finish() == std::vector<uint8_t>{0x00, 0x00, 0x00, 0x00, 0x00});
  }
  {  // a 1: low = 0x7fff8000 -> bytes 00 7f ff 80 00 (the 0xff held back until the byte after it settles).
    rc::Encoder e;
    rc::Prob p;
    e.bit(p, 1);
    CHECK(p.p == 0x4000);
    const std::vector<uint8_t> b = e.finish();
    CHECK(b == std::vector<uint8_t>{0x00, 0x7f, 0xff, 0x80, 0x00});
    rc::Decoder d(b.data(), b.data() + b.size());
    rc::Prob q;
    CHECK(d.bit(q) == 1);
    CHECK(d.finished());
  }
  {  // 1, 1 with one probability: the second bound is (0x80007fff >> 16) * 0x4000 = 0x20000000, so
     // low = 0x9fff8000: bytes 00 9f ff 80 00.
    rc::Encoder e;
    rc::Prob p;
    e.bit(p, 1);
    e.bit(p, 1);
    CHECK(p.p == 0x4000 - (0x4000 >> 2));  // rate 1/4 the second time
    CHECK(e.finish() == std::vector<uint8_t>{0x00, 0x9f, 0xff, 0x80, 0x00});
  }
  {  // a probability adapts down to 1/32 and stays within [32, 65504]
    rc::Prob p;
    for (int i = 0; i < 1000; i++) rc::update(p, 1);
    CHECK(p.p == rc::kProbMin);
    for (int i = 0; i < 1000; i++) rc::update(p, 0);
    CHECK(p.p == 65536 - rc::kProbMin);
    CHECK(p.n == rc::kRateShift);
  }
}

TEST_CASE("bundle ranges8: random bits and direct bits round-trip; the end is exact", "[bundle][ranges8]") {
  std::mt19937 rng(8);
  std::vector<unsigned> bits, direct;
  rc::Encoder e;
  std::vector<rc::Prob> probs(16);
  for (int i = 0; i < 20000; i++) {
    const unsigned ctx = rng() % 16, bit = (rng() % 100) < ctx * 6 ? 1u : 0u;
    bits.push_back(ctx << 1 | bit);
    e.bit(probs[ctx], bit);
    if (i % 7 == 0) {
      direct.push_back(rng() & 0xfff);
      e.direct(direct.back(), 12);
    }
  }
  const std::vector<uint8_t> b = e.finish();
  rc::Decoder d(b.data(), b.data() + b.size());
  std::vector<rc::Prob> q(16);
  size_t di = 0;
  for (size_t i = 0; i < bits.size(); i++) {
    REQUIRE(d.bit(q[bits[i] >> 1]) == (bits[i] & 1));
    if (i % 7 == 0) REQUIRE(d.direct(0, 12) == direct[di++]);
  }
  CHECK(d.finished());
  // One byte short: the decoder reads past the end (bad); one byte more: not finished.
  rc::Decoder shorter(b.data(), b.data() + b.size() - 1);
  std::vector<rc::Prob> q2(16);
  for (size_t i = 0; i < bits.size(); i++) {
    shorter.bit(q2[bits[i] >> 1]);
    if (i % 7 == 0) shorter.direct(0, 12);
  }
  CHECK(shorter.bad());
  CHECK_FALSE(shorter.finished());
}

TEST_CASE("bundle ranges8: records round-trip and answer as format 7's", "[bundle][ranges8]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u);
  BundleContents c;
  c.modules.push_back(module8(seed, 400));
  auto w7 = write_bundle(c, 7), w8 = write_bundle(c, 8);
  REQUIRE(w7.ok());
  REQUIRE(w8.ok());
  CHECK(w8.value()[8] == 8);
  CHECK(w8->size() < w7->size());
  auto r7 = BundleReader::open(w7->data(), w7->size()), r8 = BundleReader::open(w8->data(), w8->size());
  REQUIRE(r7.ok());
  REQUIRE(r8.ok());
  auto a7 = r7->ranges(0), a8 = r8->ranges(0);
  REQUIRE(a7.ok());
  REQUIRE(a8.ok());
  check_same_ranges(a8.value(), a7.value());
  // Every address of the module and a few past it: the same chain, frame by frame.
  const RangeRecord& last = a7->back();
  uint64_t hi = 0;
  for (const RangeRecord& r : a7.value()) hi = std::max(hi, r.start + r.length);
  (void)last;
  size_t compared = 0;
  for (uint64_t a = 0x400000 - 4; a < hi + 4; a++) {
    auto c7 = r7->lookup(0, a), c8 = r8->lookup(0, a);
    REQUIRE(c7.ok());
    REQUIRE(c8.ok());
    REQUIRE(c7->size() == c8->size());
    for (size_t k = 0; k < c7->size(); k++) {
      INFO("address 0x" << std::hex << a << " frame " << k);
      CHECK((*c8)[k].function == (*c7)[k].function);
      CHECK((*c8)[k].file == (*c7)[k].file);
      CHECK((*c8)[k].line == (*c7)[k].line);
      CHECK((*c8)[k].column == (*c7)[k].column);
    }
    compared += !c7->empty();
  }
  CHECK(compared > 1000);
  // Determinism: writing again gives the same bytes.
  auto again = write_bundle(c, 8);
  REQUIRE(again.ok());
  CHECK(again.value() == w8.value());
}

TEST_CASE("bundle ranges8: hostile streams are refused with an error naming the problem", "[bundle][ranges8][hostile]") {
  BundleContents c;
  c.modules.push_back(module8(4, 60));
  auto w = write_bundle(c, 8);
  REQUIRE(w.ok());
  const std::vector<uint8_t> good = range_bytes(w.value());
  const uint64_t n = c.modules[0].ranges.size();
  const uint32_t nstr = static_cast<uint32_t>(stackprov::test::bundle_module0_strings(w.value()).size());
  REQUIRE(nstr > 0);
  std::vector<std::vector<Range8>> out;
  REQUIRE(decode_ranges8(good.data(), good.size(), 0, n, nstr, &out).ok());
  uint64_t total = 0;
  for (const auto& d : out) total += d.size();
  CHECK(total == n);

  auto message = [&](const std::vector<uint8_t>& b, uint64_t count, uint32_t strings) {
    stackprov::Status s = decode_ranges8(b.data(), b.size(), 0, count, strings, &out);
    return s.ok() ? std::string("ok") : s.error().message;
  };
  std::vector<uint8_t> cut(good.begin(), good.end() - 1);
  CHECK_THAT(message(cut, n, nstr), Catch::Contains("cut short"));
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  CHECK_THAT(message(longer, n, nstr), Catch::Contains("do not end at their last byte"));
  CHECK_THAT(message(good, n + 1, nstr), Catch::Contains("the module table says"));
  CHECK_THAT(message(good, n, 2), Catch::Contains("past the 2 strings"));
  CHECK_THAT(message(std::vector<uint8_t>{0x81, 0x01}, 1, nstr), Catch::Contains("129 depths"));
  // Counts are checked before anything is allocated: 2^28 records in 3 bytes.
  CHECK_THAT(message(std::vector<uint8_t>{0x01, 0x80, 0x80}, uint64_t{1} << 28, nstr), Catch::Contains("a byte"));
  CHECK(message({}, 0, nstr) == "ok");

  // A depth-0 call site with no file puts "none" (index nstr) in the files' recency list; a later
  // record naming that rank is no string.
  {
    std::vector<std::vector<Range8>> hostile(1);
    hostile[0].push_back({0, 4, 0, 0, 10, 1, kNone8, 5, 0});
    hostile[0].push_back({4, 4, 0, 2, 11, 1, kNone8, 0, 0});  // file 2 of 2 strings: the remembered "none"
    const std::vector<uint8_t> b = encode_ranges8(hostile, 2);
    CHECK_THAT(message(b, 2, 2), Catch::Contains("past the 2 strings"));
  }

  // Every byte corrupted three ways: an error, or records that keep every rule a lookup relies on.
  size_t refused = 0;
  for (size_t off = 0; off < good.size(); off++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[off] ^= x;
      stackprov::Status s = decode_ranges8(b.data(), b.size(), 0, n, nstr, &out);
      if (!s) {
        refused++;
        CHECK_THAT(s.error().message, Catch::StartsWith("bundle: module 0: "));
        continue;
      }
      for (size_t d = 0; d < out.size(); d++)
        for (size_t i = 0; i < out[d].size(); i++) {
          const Range8& r = out[d][i];
          REQUIRE(r.len > 0);
          REQUIRE(uint64_t{r.start} + r.len <= (uint64_t{1} << 32));
          REQUIRE(r.fn < nstr);
          REQUIRE(r.file < nstr);
          if (i > 0) REQUIRE(uint64_t{out[d][i - 1].start} + out[d][i - 1].len <= r.start);
        }
    }
  CHECK(refused > good.size());  // most corruptions are caught (a byte changes everything after it)
}

TEST_CASE("bundle ranges8: a corrupted range stream fails the lookup, not the open", "[bundle][ranges8][hostile]") {
  BundleContents c;
  c.modules.push_back(module8(5, 40));
  auto w = write_bundle(c, 8);
  REQUIRE(w.ok());
  std::vector<uint8_t> b = w.value();
  const int sec = stackprov::test::bundle_section_index(b, 5);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + sec * 24 + 8));
  const size_t len = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + sec * 24 + 16));
  b[off + len - 2] ^= 0x55;  // inside the coded records' last bytes
  b[off + len / 2] ^= 0x55;
  auto rd = BundleReader::open(b.data(), b.size());
  REQUIRE(rd.ok());  // open does not decode ranges (<= 1 ms)
  auto chain = rd->lookup(0, 0x400000);
  REQUIRE_FALSE(chain.ok());
  CHECK_THAT(chain.error().message, Catch::StartsWith("bundle: module 0: "));
  CHECK_FALSE(rd->ranges(0).ok());
  // Return pads and unwind rows do not need the range records.
  CHECK(rd->unwind_rows(0).ok());
}

TEST_CASE("bundle ranges8: a stream denser than 2 records a byte is padded, and reads back", "[bundle][ranges8]") {
  // 20,000 records of one shape: the match model codes each in far less than a bit.
  BundleContents c;
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, {8, 8, 8, 8}};
  m.name = "dense.so";
  for (uint64_t i = 0; i < 20000; i++) m.ranges.push_back({0x1000 + 4 * i, 4, 0, "f", "f.c", 7, 1, "", 0, 0});
  c.modules.push_back(m);
  auto w = write_bundle(c, 8);
  REQUIRE(w.ok());
  const std::vector<uint8_t> b = range_bytes(w.value());
  CHECK(b.size() >= 20000 / kMaxRanges8PerByte);
  CHECK(b.size() <= 20000 / kMaxRanges8PerByte + 4);
  // uleb 1 depth, uleb 20000 (3 bytes), the padding's uleb (2 bytes), then its zeros.
  REQUIRE(b.size() > 8);
  CHECK(b[0] == 1);
  CHECK(b[4] >= 0x80);
  CHECK(b[6] == 0);
  CHECK(b[7] == 0);
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  auto r = rd->ranges(0);
  REQUIRE(r.ok());
  check_same_ranges(r.value(), c.modules[0].ranges);
  // A padding byte that is not zero is refused.
  std::vector<uint8_t> bad = b;
  bad[7] = 1;
  std::vector<std::vector<Range8>> out;
  const uint32_t nstr = static_cast<uint32_t>(stackprov::test::bundle_module0_strings(w.value()).size());
  stackprov::Status s = decode_ranges8(bad.data(), bad.size(), 0, 20000, nstr, &out);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("padding byte 1 is not zero"));
}
