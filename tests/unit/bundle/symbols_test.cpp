// SPDX-License-Identifier: Apache-2.0
// Format 5's symbol-name records (optional section 0x80000002): round trip, hand encoding, older formats, hostile bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "lib/bundle_bytes.hpp"

using namespace stackprov::bundle;

namespace symbols_test {

/// A module of two DWARF ranges ("f" at 0x1000..0x1020, "g" at 0x1030..0x1040) and symbol names
/// that differ from them: "f" over 0x1000..0x1010, then its alias "f_alias" (a symbol at 0x1008
/// nested in it: the record starts after it, at 0x1010, back 8), a PLT stub "p@plt" with no range.
BundleContents contents() {
  ModuleContents m;
  m.id = {stackprov::IdKind::kElfBuildId, {1, 2, 3, 4}};
  m.name = "m.so";
  m.ranges.push_back({0x1000, 0x20, 0, "f", "", 0, 0, "", 0, 0, false});
  m.ranges.push_back({0x1030, 0x10, 0, "g", "", 0, 0, "", 0, 0, false});
  m.symbols.push_back({0x1000, 0x10, 0x1000, "f"});
  m.symbols.push_back({0x1010, 0x10, 0x1008, "f_alias"});
  m.symbols.push_back({0x1030, 0x10, 0x1030, "g"});
  m.symbols.push_back({0x2000, 0x10, 0x2000, "p@plt"});
  BundleContents c;
  c.modules.push_back(std::move(m));
  return c;
}

std::string open_error(const std::vector<uint8_t>& b) {
  auto rd = BundleReader::open(b.data(), b.size());
  if (!rd) return rd.error().message;
  // Records are checked with the string table on the module's first lookup.
  auto s = rd->symbol(0, 0x1000);
  return s ? std::string() : s.error().message;
}
std::string write_error(const BundleContents& c) {
  auto w = write_bundle(c);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == SPROV_ERR_BUNDLE);
  return w.error().message;
}

}  // namespace symbols_test

using namespace symbols_test;

TEST_CASE("bundle symbols: format 5 round-trips the naming rule's names and starts", "[bundle][format][symbols]") {
  const BundleContents c = contents();
  auto w = write_bundle(c);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& b = w.value();
  CHECK(b[8] == 5);
  auto rd = BundleReader::open(b.data(), b.size());
  REQUIRE(rd.ok());
  CHECK(rd->modules()[0].symbol_count == 4);
  struct Want {
    uint64_t addr;
    bool found;
    const char* name;
    uint64_t start;
  };
  for (const Want& x : {Want{0xfff, false, "", 0}, Want{0x1000, true, "f", 0x1000}, Want{0x100f, true, "f", 0x1000},
                        Want{0x1010, true, "f_alias", 0x1008}, Want{0x101f, true, "f_alias", 0x1008},
                        Want{0x1020, false, "", 0}, Want{0x1030, true, "g", 0x1030}, Want{0x1040, false, "", 0},
                        Want{0x2005, true, "p@plt", 0x2000}, Want{0x2010, false, "", 0}}) {
    INFO("address 0x" << std::hex << x.addr);
    auto s = rd->symbol(0, x.addr);
    REQUIRE(s.ok());
    CHECK(s->found == x.found);
    CHECK(s->name == x.name);
    CHECK(s->sym_start == x.start);
  }
  auto all = rd->symbols(0);
  REQUIRE(all.ok());
  REQUIRE(all->size() == c.modules[0].symbols.size());
  for (size_t i = 0; i < all->size(); i++) {
    const SymbolRecord &a = all.value()[i], &e = c.modules[0].symbols[i];
    CHECK((a.addr == e.addr && a.length == e.length && a.sym_start == e.sym_start && a.name == e.name));
  }
  // The ranges answer as before (their own, llvm-symbolizer's names).
  auto chain = rd->lookup(0, 0x1010);
  REQUIRE(chain.ok());
  REQUIRE(chain->size() == 1);
  CHECK((*chain)[0].function == "f");
  // Hand encoding (doc/bundles.md "Symbol names"): head {u32 module 0, u32 n 4, u64 nbytes}, then
  // per record uleb gap, uleb length, uleb (name << 1 | back), [uleb back]. The string table by use
  // count, then bytes: "" (file and call file of two ranges: 4), "f" (2), "g" (2), "f_alias", "m.so"
  // is not in the table (the module name is stored before it), "p@plt": "" 0, "f" 1, "g" 2,
  // "f_alias" 3, "p@plt" 4.
  const int ix = stackprov::test::bundle_section_index(b, 0x80000002u);
  REQUIRE(ix == static_cast<int>(b[12]) - 1);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + ix * 24 + 8)), len = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + ix * 24 + 16));
  const std::vector<uint8_t> want = {0, 0, 0, 0, 4, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0,
                                     0x80, 0x20, 0x10, 1 << 1,   // f: gap 0x1000, length 0x10
                                     0, 0x10, 3 << 1 | 1, 8,      // f_alias: back 8
                                     0x10, 0x10, 2 << 1,          // g
                                     0xc0, 0x1f, 0x10, 4 << 1};   // p@plt: gap 0x2000 - 0x1040
  CHECK(std::vector<uint8_t>(b.begin() + static_cast<std::ptrdiff_t>(off),
                             b.begin() + static_cast<std::ptrdiff_t>(off + len)) == want);
  // Deterministic: shuffled records, the same bytes.
  std::mt19937 rng(5);
  for (int i = 0; i < 5; i++) {
    BundleContents s = c;
    std::shuffle(s.modules[0].symbols.begin(), s.modules[0].symbols.end(), rng);
    auto w2 = write_bundle(s);
    REQUIRE(w2.ok());
    CHECK(w2.value() == b);
  }
}

TEST_CASE("bundle symbols: formats 2 to 4 leave them out and read as before", "[bundle][format][symbols]") {
  const BundleContents c = contents();
  BundleContents plain = c;
  plain.modules[0].symbols.clear();
  for (uint32_t version : {2u, 3u, 4u}) {
    INFO("format " << version);
    auto w = write_bundle(c, version);
    REQUIRE(w.ok());
    auto p = write_bundle(plain, version);
    REQUIRE(p.ok());
    CHECK(w.value() == p.value());  // the older formats' bytes are unchanged by the symbols
    CHECK(stackprov::test::bundle_section_index(w.value(), 0x80000002u) == -1);
    auto rd = BundleReader::open(w->data(), w->size());
    REQUIRE(rd.ok());
    auto s = rd->symbol(0, 0x1010);
    REQUIRE(s.ok());
    CHECK_FALSE(s->found);
    auto chain = rd->lookup(0, 0x1010);
    REQUIRE(chain.ok());
    REQUIRE(chain->size() == 1);
    CHECK((*chain)[0].function == "f");
  }
  // Format 5 without symbols has no such section.
  auto w5 = write_bundle(plain);
  REQUIRE(w5.ok());
  CHECK(stackprov::test::bundle_section_index(w5.value(), 0x80000002u) == -1);
}

TEST_CASE("bundle symbols: the writer refuses invalid records naming them", "[bundle][format][symbols]") {
  {
    BundleContents c = contents();
    c.modules[0].symbols[1].addr = 0x100f;  // overlaps "f"
    c.modules[0].symbols[1].sym_start = 0x100f;
    CHECK_THAT(write_error(c), Catch::Contains("0x100f") && Catch::Contains("overlap"));
  }
  {
    BundleContents c = contents();
    c.modules[0].symbols[2].length = 0;
    CHECK_THAT(write_error(c), Catch::Contains("0x1030") && Catch::Contains("empty"));
  }
  {
    BundleContents c = contents();
    c.modules[0].symbols[2].sym_start = 0x1031;
    CHECK_THAT(write_error(c), Catch::Contains("0x1031") && Catch::Contains("before its symbol"));
  }
}

TEST_CASE("bundle symbols: hostile sections are refused by value, never a crash", "[bundle][format][symbols][hostile]") {
  auto w = write_bundle(contents());
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  const int ix = stackprov::test::bundle_section_index(good, 0x80000002u);
  REQUIRE(ix >= 0);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(good, 32 + ix * 24 + 8));
  auto patched = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[off + at] = v;
    return open_error(b);
  };
  CHECK(open_error(good).empty());
  CHECK_THAT(patched(0, 1), Catch::Contains("module index 1"));             // one module only
  CHECK_THAT(patched(4, 0), Catch::Contains("0 records"));
  CHECK_THAT(patched(4, 6), Catch::Contains("6 records in 15 bytes"));      // more than 15 / 3
  CHECK_THAT(patched(8, 16), Catch::Contains("16 bytes"));                  // beyond the section
  CHECK_THAT(patched(8, 14), Catch::Contains("cut short"));                 // the last record cut
  CHECK_THAT(patched(4, 3), Catch::Contains("bytes after its 3"));          // one record left over
  CHECK_THAT(patched(18, 0), Catch::Contains("record 0") && Catch::Contains("empty"));
  CHECK_THAT(patched(19, 9 << 1), Catch::Contains("names string 9"));
  CHECK_THAT(patched(19, 1 << 1 | 1), Catch::Contains("record 0") && Catch::Contains("symbol starts 0x0"));  // back 0
  CHECK(patched(23, 0x7f).empty());  // f_alias's back 0x7f: a symbol at 0xf91, fine ...
  {
    std::vector<uint8_t> b = good;  // ... but 0x1011 is beyond its address 0x1010
    b[off + 23] = 0x91;
    b[off + 24] = 0x20;
    CHECK_THAT(open_error(b), Catch::Contains("record 1") && Catch::Contains("0x1010"));
  }
  {
    // The section in a format-4 bundle (older formats never have it).
    std::vector<uint8_t> b = good;
    b[8] = 4;
    auto rd = BundleReader::open(b.data(), b.size());
    REQUIRE_FALSE(rd.ok());
    CHECK_THAT(rd.error().message, Catch::Contains("0x80000002") && Catch::Contains("format-4"));
  }
  // Every single-byte corruption: an error or a valid reader whose queries return, never a crash.
  for (size_t o = 0; o < good.size(); o++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[o] ^= x;
      auto rd = BundleReader::open(b.data(), b.size());
      if (!rd) continue;
      for (const ModuleView& v : rd->modules()) {
        (void)rd->symbols(v.index);
        for (uint64_t a = 0xff0; a < 0x2020; a += 7) (void)rd->symbol(v.index, a);
      }
    }
}

namespace symbols_test {

/// small.bundle's records (format 2, committed) with symbol names: each depth-0 range named by its
/// function with a "_sym" suffix, its symbol starting at the range (the bytes of small-v5.bundle).
BundleContents small_with_symbols() {
  const std::string dir = std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/";
  auto v2 = BundleReader::open_file(dir + "small.bundle");
  REQUIRE(v2.ok());
  BundleContents c;
  for (const ModuleView& v : v2->modules()) {
    ModuleContents m;
    m.id = {v.id_kind, std::vector<uint8_t>(v.id.begin(), v.id.end())};
    m.name = std::string(v.name);
    m.sha256_file = v.sha256_file;
    m.sha256_debug = v.sha256_debug;
    m.ranges = v2->ranges(v.index).value();
    m.return_pads = v2->return_pads(v.index).value();
    m.unwind_rows = v2->unwind_rows(v.index).value();
    for (const RangeRecord& r : m.ranges)
      if (r.depth == 0) m.symbols.push_back({r.start, r.length, r.start, r.function + "_sym"});
    c.modules.push_back(std::move(m));
  }
  return c;
}

}  // namespace symbols_test

TEST_CASE("bundle symbols: the committed format-5 bundle reads to its records and is what the writer writes",
          "[bundle][format][symbols]") {
  // tests/data/bundle/small-v5.bundle (also a seed of the fuzz target): written by the format-5
  // writer when it landed (`unit_bundle '[.write-small-v5]'`); stores keep such bytes unchanged.
  const BundleContents c = small_with_symbols();
  const std::string path = std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/small-v5.bundle";
  auto rd = BundleReader::open_file(path);
  REQUIRE(rd.ok());
  REQUIRE(rd->data()[8] == 5);
  size_t checked = 0;
  for (const ModuleContents& m : c.modules) {
    const ModuleView* v = rd->find_module(m.id.kind, m.id.bytes);
    REQUIRE(v != nullptr);
    auto syms = rd->symbols(v->index);
    REQUIRE(syms.ok());
    REQUIRE(syms->size() == m.symbols.size());
    for (const SymbolRecord& y : m.symbols) {
      auto s = rd->symbol(v->index, y.addr + y.length - 1);
      REQUIRE(s.ok());
      CHECK((s->found && s->name == y.name && s->sym_start == y.sym_start));
      ++checked;
    }
  }
  CHECK(checked > 0);
  auto w = write_bundle(c);
  REQUIRE(w.ok());
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(w.value() == file);
}

TEST_CASE("bundle symbols: write tests/data/bundle/small-v5.bundle", "[.write-small-v5]") {
  auto w = write_bundle(small_with_symbols());
  REQUIRE(w.ok());
  std::ofstream f(std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/small-v5.bundle", std::ios::binary);
  f.write(reinterpret_cast<const char*>(w->data()), static_cast<std::streamsize>(w->size()));
  REQUIRE(f.good());
}
