// SPDX-License-Identifier: Apache-2.0
// The one LEB128 reader/writer against the examples of DWARF 5 section 7.6 (tables 7.7 and 7.8).
#include <catch2/catch.hpp>

#include <vector>

#include "core/leb128.hpp"

using namespace stackprov;

TEST_CASE("ULEB128: DWARF 5 table 7.7", "[leb128]") {
  const std::vector<std::pair<uint64_t, std::vector<uint8_t>>> cases = {
      {2, {2}}, {127, {127}}, {128, {0x80, 1}}, {129, {1 + 0x80, 1}}, {130, {2 + 0x80, 1}}, {12857, {57 + 0x80, 100}}};
  for (const auto& [value, enc] : cases) {
    INFO(value);
    uint64_t v = 0;
    CHECK(read_uleb128(enc.data(), enc.data() + enc.size(), &v) == enc.data() + enc.size());
    CHECK(v == value);
    std::vector<uint8_t> out;
    append_uleb128(out, value);
    CHECK(out == enc);
  }
}

TEST_CASE("SLEB128: DWARF 5 table 7.8", "[leb128]") {
  const std::vector<std::pair<int64_t, std::vector<uint8_t>>> cases = {
      {2, {2}},           {-2, {0x7e}},        {127, {127 + 0x80, 0}}, {-127, {1 + 0x80, 0x7f}},
      {128, {0x80, 1}},   {-128, {0x80, 0x7f}}, {129, {1 + 0x80, 1}},  {-129, {0x7f + 0x80, 0x7e}}};
  for (const auto& [value, enc] : cases) {
    INFO(value);
    int64_t v = 0;
    CHECK(read_sleb128(enc.data(), enc.data() + enc.size(), &v) == enc.data() + enc.size());
    CHECK(v == value);
    std::vector<uint8_t> out;
    append_sleb128(out, value);
    CHECK(out == enc);
  }
}

TEST_CASE("LEB128 limits: 64 bits in at most 10 bytes", "[leb128]") {
  uint64_t u = 0;
  int64_t s = 0;
  std::vector<uint8_t> max(9, 0xff);
  max.push_back(0x01);  // UINT64_MAX
  CHECK(read_uleb128(max.data(), max.data() + max.size(), &u) == max.data() + 10);
  CHECK(u == UINT64_MAX);
  max.back() = 0x02;  // bit 64
  CHECK(read_uleb128(max.data(), max.data() + max.size(), &u) == nullptr);
  std::vector<uint8_t> eleven(10, 0x80);
  eleven.push_back(0);
  CHECK(read_uleb128(eleven.data(), eleven.data() + eleven.size(), &u) == nullptr);
  CHECK(read_sleb128(eleven.data(), eleven.data() + eleven.size(), &s) == nullptr);
  // Padded encodings are legal (assemblers pad relocated fields).
  const std::vector<uint8_t> padded = {0x82, 0x80, 0x80, 0x00};
  CHECK(read_uleb128(padded.data(), padded.data() + padded.size(), &u) == padded.data() + 4);
  CHECK(u == 2);
  // Truncated.
  const std::vector<uint8_t> cut = {0x80, 0x80};
  CHECK(read_uleb128(cut.data(), cut.data() + cut.size(), &u) == nullptr);
  CHECK(read_sleb128(cut.data(), cut.data() + cut.size(), &s) == nullptr);
  CHECK(read_uleb128(cut.data(), cut.data(), &u) == nullptr);
  std::vector<uint8_t> out;
  append_sleb128(out, INT64_MIN);
  CHECK(out.size() == 10);
  CHECK(read_sleb128(out.data(), out.data() + out.size(), &s) == out.data() + 10);
  CHECK(s == INT64_MIN);
}
