// SPDX-License-Identifier: Apache-2.0
// Hostile .pdata/.xdata: truncated infos, counts beyond the bytes, missing operand slots, chain cycles, bad tables.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pe/unwind_info.hpp"

using namespace stackprov;
using namespace stackprov::pe;
using Catch::Matchers::Contains;

namespace {

/// A synthetic image: bytes at RVA = offset, written by hand per the UNWIND_INFO layout
/// (exception-handling-x64: header bytes version|flags<<3, prolog size, count, frame reg|offset<<4).
struct Image {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(0x200, 0);
  void put(uint32_t at, std::initializer_list<uint8_t> b) {
    if (at + b.size() > bytes.size()) bytes.resize(at + b.size());
    std::memcpy(bytes.data() + at, b.begin(), b.size());
  }
  void put32(uint32_t at, uint32_t v) {
    put(at, {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)});
  }
  void header(uint32_t at, uint8_t version, uint8_t flags, uint8_t prolog, uint8_t count, uint8_t frame = 0) {
    put(at, {uint8_t(version | flags << 3), prolog, count, frame});
  }
  /// A chained info at `at` continuing the entry {begin, end, target}.
  void chained_to(uint32_t at, uint32_t target) {
    header(at, 1, kFlagChainInfo, 0, 0);
    put32(at + 4, 0x1000);
    put32(at + 8, 0x1010);
    put32(at + 12, target);
  }
  ImageReader reader() const { return flat_image_reader(bytes); }
};

std::vector<uint8_t> pdata_of(std::initializer_list<RuntimeFunction> fs) {
  std::vector<uint8_t> out;
  for (const auto& f : fs) {
    for (uint32_t v : {f.begin, f.end, f.unwind_rva}) {
      for (int k = 0; k < 4; k++) out.push_back(uint8_t(v >> (8 * k)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a well-formed synthetic info decodes", "[pe][hostile]") {
  Image img;
  img.header(0x40, 1, kFlagEHandler, 9, 5, 0x35);  // rbp, frame offset 3 * 16
  img.put(0x44, {9, 0x03,                           // at 9: SET_FPREG
                 4, 0x01, 0x02, 0x01,               // at 4: ALLOC_LARGE info 0, 0x102 * 8
                 1, 0x50,                           // at 1: PUSH_NONVOL rbp
                 0, 0x12});                         // at 0: ALLOC_SMALL info 1 (16)
  img.put32(0x50, 0x1234);                          // handler (after the padding slot)
  auto u = decode_unwind_info(img.reader(), 0x40);
  REQUIRE(u.ok());
  CHECK(u->frame_register == 5);
  CHECK(u->frame_offset == 0x30);
  REQUIRE(u->codes.size() == 4);
  CHECK(u->codes[0].value == 0x30);
  CHECK(u->codes[1].value == 0x810);
  CHECK(u->codes[1].slots == 2);
  CHECK(u->codes[3].value == 16);
  CHECK(u->handler_rva == 0x1234);
  CHECK(u->handler_data_rva == 0x54);
}

TEST_CASE("truncated infos and counts beyond the image are errors naming the RVA and count", "[pe][hostile]") {
  Image img;
  img.bytes.resize(0x102);
  img.header(0xfc, 1, 0, 0, 0);
  // Header at 0x100 would need 4 bytes, the image has 2 there.
  auto a = decode_unwind_info(img.reader(), 0x100);
  REQUIRE(!a.ok());
  CHECK(a.error().code == SPROV_ERR_TRUNCATED);
  CHECK_THAT(a.error().message, Contains("rva 0x100") && Contains("header"));
  // Count 10: 20 bytes of codes after a header with only 2 bytes behind it.
  img.bytes.resize(0x200);
  img.header(0x1f8, 1, 0, 0, 10);
  auto b = decode_unwind_info(img.reader(), 0x1f8);
  REQUIRE(!b.ok());
  CHECK(b.error().code == SPROV_ERR_TRUNCATED);
  CHECK_THAT(b.error().message, Contains("rva 0x1f8") && Contains("10 unwind codes"));
  // The chained entry (12 bytes) past the end.
  img.bytes.resize(0x1f0 + 8);
  img.header(0x1f0, 1, kFlagChainInfo, 0, 1);
  auto c = decode_unwind_info(img.reader(), 0x1f0);
  REQUIRE(!c.ok());
  CHECK(c.error().code == SPROV_ERR_TRUNCATED);
  CHECK_THAT(c.error().message, Contains("chained entry"));
  // RVAs near 4 GiB do not wrap.
  auto d = decode_unwind_info(img.reader(), 0xfffffffc);
  REQUIRE(!d.ok());
  CHECK(d.error().code == SPROV_ERR_TRUNCATED);
  // Misaligned.
  auto e = decode_unwind_info(img.reader(), 0x42);
  REQUIRE(!e.ok());
  CHECK_THAT(e.error().message, Contains("rva 0x42") && Contains("aligned"));
}

TEST_CASE("an operation whose operand slots lie beyond CountOfCodes is an error", "[pe][hostile]") {
  Image img;
  SECTION("ALLOC_LARGE info 0 without its extra slot") {
    img.header(0x40, 1, 0, 4, 1);
    img.put(0x44, {4, 0x01, 0xff, 0xff});  // the padding slot is not an operand
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK(u.error().code == SPROV_ERR_CFI);
    CHECK_THAT(u.error().message, Contains("ALLOC_LARGE needs 2 slots, only 1 of 1"));
  }
  SECTION("ALLOC_LARGE info 1 with one extra slot of two") {
    img.header(0x40, 1, 0, 4, 2);
    img.put(0x44, {4, 0x11, 0, 0x10});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("ALLOC_LARGE needs 3 slots, only 2 of 2"));
  }
  SECTION("ALLOC_LARGE with op info 2") {
    img.header(0x40, 1, 0, 4, 3);
    img.put(0x44, {4, 0x21, 0, 0, 0, 0});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("ALLOC_LARGE with op info 2"));
  }
  SECTION("SAVE_XMM128_FAR as the last code") {
    img.header(0x40, 1, 0, 8, 2);
    img.put(0x44, {8, 0x00, 4, 0x69});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("code 1: SAVE_XMM128_FAR needs 3 slots, only 1 of 2"));
  }
}

TEST_CASE("undefined operations, versions and flags are errors naming the value", "[pe][hostile]") {
  Image img;
  auto error_of = [&](uint8_t version, uint8_t flags, uint8_t op_byte, uint8_t frame = 0) {
    img.header(0x40, version, flags, 1, 1, frame);
    img.put(0x44, {1, op_byte, 0, 0});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK(u.error().code == SPROV_ERR_CFI);
    return u.error().message;
  };
  for (uint8_t op = 11; op < 16; op++) {
    CHECK_THAT(error_of(1, 0, op), Contains("op " + std::to_string(op) + " (unknown) is not defined in version 1"));
  }
  CHECK_THAT(error_of(1, 0, 6), Contains("op 6 (EPILOG) is not defined in version 1"));
  CHECK_THAT(error_of(2, 0, 7), Contains("op 7 (SPARE_CODE) is not defined in version 2"));
  CHECK_THAT(error_of(3, 0, 0), Contains("version 3"));
  CHECK_THAT(error_of(0, 0, 0), Contains("version 0"));
  CHECK_THAT(error_of(1, 8, 0), Contains("undefined flags 0x8"));
  CHECK_THAT(error_of(1, kFlagChainInfo | kFlagEHandler, 0), Contains("flags 0x5: chained info with a handler"));
  CHECK_THAT(error_of(1, 0, 0x2a), Contains("PUSH_MACHFRAME with op info 2"));
  CHECK_THAT(error_of(1, 0, 0x03), Contains("SET_FPREG without a frame register"));
}

TEST_CASE("version-2 epilog codes: layout, padding and misplacement", "[pe][hostile]") {
  Image img;
  SECTION("size, at-end flag, a further epilog and a padding descriptor") {
    img.header(0x40, 2, 0, 1, 4);
    img.put(0x44, {3, 0x16, 0x34, 0x16, 0, 0x06, 1, 0x30});  // size 3 at end; end - 0x134; padding; push rbx
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(u.ok());
    CHECK(u->epilog_size == 3);
    REQUIRE(u->epilogs.size() == 2);
    CHECK(u->epilogs[0] == Epilog{3, 3});
    CHECK(u->epilogs[1] == Epilog{0x134, 3});
    REQUIRE(u->codes.size() == 1);
    CHECK(u->codes[0].info == 3);
    // decode_chain checks the epilogs against the function: 0x134 bytes from the end do not fit in 0x100.
    auto c = decode_chain(img.reader(), RuntimeFunction{0x1000, 0x1100, 0x40});
    REQUIRE(!c.ok());
    CHECK_THAT(c.error().message, Contains("end - 0x134 starts before function [0x1000, 0x1100)"));
    CHECK(decode_chain(img.reader(), RuntimeFunction{0x1000, 0x1134, 0x40}).ok());
  }
  SECTION("an EPILOG code after a prolog code") {
    img.header(0x40, 2, 0, 1, 2);
    img.put(0x44, {1, 0x30, 3, 0x16});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("code 1: EPILOG after the prolog codes"));
  }
  SECTION("a first EPILOG of size 0") {
    img.header(0x40, 2, 0, 0, 2);
    img.put(0x44, {0, 0x16, 0, 0x06});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("first EPILOG with size 0"));
  }
  SECTION("an epilog closer to the end than its size") {
    img.header(0x40, 2, 0, 0, 2);
    img.put(0x44, {8, 0x06, 4, 0x06});
    auto u = decode_unwind_info(img.reader(), 0x40);
    REQUIRE(!u.ok());
    CHECK_THAT(u.error().message, Contains("end - 0x4 is shorter than its size 8"));
  }
}

TEST_CASE("chains: links followed, cycles and overlong chains are errors", "[pe][hostile]") {
  Image img;
  img.bytes.resize(0x1000);
  SECTION("a two-link chain") {
    img.chained_to(0x40, 0x80);
    img.header(0x80, 1, 0, 1, 1);
    img.put(0x84, {1, 0x30, 0, 0});
    auto c = decode_chain(img.reader(), RuntimeFunction{0x2000, 0x2010, 0x40});
    REQUIRE(c.ok());
    REQUIRE(c->size() == 2);
    CHECK((*c)[1].rva == 0x80);
    CHECK((*c)[0].chained == RuntimeFunction{0x1000, 0x1010, 0x80});
  }
  SECTION("a cycle of two") {
    img.chained_to(0x40, 0x80);
    img.chained_to(0x80, 0x40);
    auto c = decode_chain(img.reader(), RuntimeFunction{0x2000, 0x2010, 0x40});
    REQUIRE(!c.ok());
    CHECK(c.error().code == SPROV_ERR_CFI);
    CHECK_THAT(c.error().message, Contains("comes back to rva 0x40 after 2 infos"));
  }
  SECTION("an info chained to itself") {
    img.chained_to(0x40, 0x40);
    auto c = decode_chain(img.reader(), RuntimeFunction{0x2000, 0x2010, 0x40});
    REQUIRE(!c.ok());
    CHECK_THAT(c.error().message, Contains("comes back to rva 0x40 after 1 infos"));
  }
  SECTION("a chain longer than kMaxChainDepth") {
    for (uint32_t k = 0; k < 40; k++) img.chained_to(0x40 + 16 * k, 0x40 + 16 * (k + 1));
    auto c = decode_chain(img.reader(), RuntimeFunction{0x2000, 0x2010, 0x40});
    REQUIRE(!c.ok());
    CHECK(c.error().code == SPROV_ERR_LIMIT);
    CHECK_THAT(c.error().message, Contains("longer than 32 infos"));
  }
  SECTION("a chained entry with begin >= end") {
    img.chained_to(0x40, 0x80);
    img.put32(0x48, 0x1000);  // end = begin
    auto c = decode_chain(img.reader(), RuntimeFunction{0x2000, 0x2010, 0x40});
    REQUIRE(!c.ok());
    CHECK_THAT(c.error().message, Contains("chained entry begin 0x1000 is not below end 0x1000"));
  }
}

TEST_CASE("read_pdata rejects partial, empty, unsorted and overlapping entries, naming them", "[pe][hostile]") {
  auto ok = read_pdata(pdata_of({{0x1000, 0x1010, 0x40}, {0x1010, 0x1020, 0x50}, {0x1100, 0x1200, 0x60}}));
  REQUIRE(ok.ok());
  CHECK(ok->size() == 3);
  CHECK(find_function(*ok, 0x100f) == &(*ok)[0]);
  CHECK(find_function(*ok, 0x1010) == &(*ok)[1]);
  CHECK(find_function(*ok, 0x1050) == nullptr);
  CHECK(find_function(*ok, 0xfff) == nullptr);
  CHECK(find_function(*ok, 0x1200) == nullptr);
  CHECK(find_function({}, 0x1000) == nullptr);
  CHECK(read_pdata({}).ok());

  auto bytes = pdata_of({{0x1000, 0x1010, 0x40}});
  bytes.pop_back();
  auto partial = read_pdata(bytes);
  REQUIRE(!partial.ok());
  CHECK_THAT(partial.error().message, Contains("11 bytes"));

  auto empty = read_pdata(pdata_of({{0x1000, 0x1010, 0x40}, {0x1020, 0x1020, 0x50}}));
  REQUIRE(!empty.ok());
  CHECK_THAT(empty.error().message, Contains("entry 1: begin 0x1020 is not below end 0x1020"));

  auto unsorted = read_pdata(pdata_of({{0x1100, 0x1110, 0x40}, {0x1000, 0x1010, 0x50}}));
  REQUIRE(!unsorted.ok());
  CHECK(unsorted.error().code == SPROV_ERR_CFI);
  CHECK_THAT(unsorted.error().message, Contains("entry 1: begin 0x1000 is below entry 0's begin 0x1100"));

  auto overlap = read_pdata(pdata_of({{0x1000, 0x1020, 0x40}, {0x1010, 0x1030, 0x50}}));
  REQUIRE(!overlap.ok());
  CHECK_THAT(overlap.error().message, Contains("entry 1: [0x1010, 0x1030) overlaps entry 0 [0x1000, 0x1020)"));
}

TEST_CASE("random infos decode or fail without reading outside the reader's spans", "[pe][hostile]") {
  // The reader hands out a fresh copy of exactly the bytes asked for and frees the previous one: a
  // read past a span, or of a span after the next call, is a heap error the sanitizer builds report.
  std::mt19937 rng(33);
  size_t decoded = 0;
  for (int round = 0; round < 20000; round++) {
    std::vector<uint8_t> bytes(4 + rng() % 64);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    bytes[0] = static_cast<uint8_t>((bytes[0] & ~7) | (1 + rng() % 2));  // mostly versions 1 and 2
    if (rng() % 2) bytes[0] &= 0x3f;                                      // often no undefined flags
    if (rng() % 2) bytes[2] = static_cast<uint8_t>(rng() % 8);            // often a small count
    std::vector<uint8_t> copy;
    const ImageReader reader = [&](uint32_t rva, uint32_t len) -> std::span<const uint8_t> {
      if (uint64_t{rva} + len > bytes.size()) return {};
      copy = std::vector<uint8_t>(bytes.begin() + rva, bytes.begin() + rva + len);  // the last span freed
      return copy;
    };
    auto u = decode_unwind_info(reader, 0);
    if (!u.ok()) {
      CHECK(!u.error().message.empty());
      continue;
    }
    decoded++;
    unsigned slots = 0;
    for (const auto& c : u->codes) slots += c.slots;
    CHECK(slots <= u->code_count);
  }
  CHECK(decoded > 100);
}
