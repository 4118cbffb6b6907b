// SPDX-License-Identifier: Apache-2.0
// Unit tests for the .dwp unit index (.debug_cu_index v5/v2): lookups by dwo_id and hostile headers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "dwarf/split_dwarf.hpp"

using stackprov::dwarf::DwpIndex;
using stackprov::dwarf::SectionBytes;

namespace {

void put32(std::vector<uint8_t>* v, uint32_t x) {
  for (int i = 0; i < 4; i++) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
void put64(std::vector<uint8_t>* v, uint64_t x) {
  for (int i = 0; i < 8; i++) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
}

/// A v5 index: 2 units in 4 slots, columns INFO (1), ABBREV (3), STR_OFFSETS (6), RNGLISTS (8).
std::vector<uint8_t> index_v5() {
  std::vector<uint8_t> v;
  put32(&v, 5);  // version 5 + padding
  put32(&v, 4);  // columns
  put32(&v, 2);  // units
  put32(&v, 4);  // slots
  const uint64_t sigs[4] = {0, 0x1111, 0, 0x2222};
  for (uint64_t s : sigs) put64(&v, s);
  const uint32_t rows[4] = {0, 1, 0, 2};
  for (uint32_t r : rows) put32(&v, r);
  for (uint32_t c : {1u, 3u, 6u, 8u}) put32(&v, c);
  for (uint32_t o : {0u, 0u, 0u, 0u, 100u, 40u, 24u, 30u}) put32(&v, o);  // offsets
  for (uint32_t z : {100u, 40u, 24u, 30u, 80u, 20u, 16u, 12u}) put32(&v, z);  // sizes
  return v;
}

}  // namespace

TEST_CASE("dwp index v5: rows by dwo_id", "[dwarf][dwp]") {
  auto bytes = index_v5();
  auto ix = DwpIndex::parse(SectionBytes{bytes.data(), bytes.size()}, false);
  REQUIRE(ix.ok());
  CHECK(ix->version() == 5);
  CHECK(ix->size() == 2);
  DwpIndex::Row r;
  REQUIRE(ix->find(0x2222, &r));
  CHECK(r.info.offset == 100);
  CHECK(r.info.size == 80);
  CHECK(r.abbrev.offset == 40);
  CHECK(r.str_offsets.size == 16);
  CHECK(r.rnglists.present);
  CHECK(r.rnglists.offset == 30);
  CHECK(!r.line.present);
  REQUIRE(ix->find(0x1111, &r));
  CHECK(r.info.size == 100);
  CHECK(!ix->find(0x3333, &r));
}

TEST_CASE("dwp index: hostile headers are errors, never reads past the section", "[dwarf][dwp]") {
  auto bytes = index_v5();
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto ix = DwpIndex::parse(SectionBytes{bytes.data(), cut}, false);
    CHECK(!ix.ok());
  }
  auto huge = bytes;
  huge[8] = 0xff;  // units = 0x...ff: does not fit
  huge[11] = 0x7f;
  CHECK(!DwpIndex::parse(SectionBytes{huge.data(), huge.size()}, false).ok());
  auto badver = bytes;
  badver[0] = 7;
  CHECK(!DwpIndex::parse(SectionBytes{badver.data(), badver.size()}, false).ok());
  CHECK(!DwpIndex::parse(SectionBytes{nullptr, 0}, false).ok());
}
