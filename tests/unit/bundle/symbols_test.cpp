// SPDX-License-Identifier: Apache-2.0
// Formats 5 and 6's symbol-name records (optional section 0x80000002): round trip, hand encodings, older formats, hostile bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"
#include "lib/bundle_bytes.hpp"

using namespace stackprov::bundle;

namespace symbols_test {

/// A module of two DWARF ranges ("f" at 0x1000..0x1020, "g" at 0x1030..0x1040) and symbol names
/// that differ from them: "f" over 0x1000..0x1010, then its alias "f_alias" (a symbol at 0x1008
/// nested in it: the record starts after it, at 0x1010, back 8), a PLT stub "p@plt" with no range.
struct Range0 {
  uint64_t start;
  uint32_t length;
  const char* function;
};

/// One module (build-id {1, 2, 3, id}) of depth-0 ranges without positions, and symbol names.
BundleContents one_module(uint8_t id, const char* name, std::vector<Range0> ranges, std::vector<SymbolRecord> symbols) {
  ModuleContents m;
  m.id = {stackprov::IdKind::kElfBuildId, {1, 2, 3, id}};
  m.name = name;
  for (const Range0& r : ranges) m.ranges.push_back({r.start, r.length, 0, r.function, "", 0, 0, "", 0, 0, false});
  m.symbols = std::move(symbols);
  BundleContents c;
  c.modules.push_back(std::move(m));
  return c;
}

BundleContents contents() {
  return one_module(4, "m.so", {{0x1000, 0x20, "f"}, {0x1030, 0x10, "g"}},
                    {{0x1000, 0x10, 0x1000, "f"}, {0x1010, 0x10, 0x1008, "f_alias"}, {0x1030, 0x10, 0x1030, "g"},
                     {0x2000, 0x10, 0x2000, "p@plt"}});
}

std::string open_error(const std::vector<uint8_t>& b) {
  auto rd = BundleReader::open(b.data(), b.size());
  if (!rd) return rd.error().message;
  // Records are checked with the string table on the module's first lookup.
  auto s = rd->symbol(0, 0x1000);
  return s ? std::string() : s.error().message;
}
/// Every single-byte corruption of `good`: an error or a valid reader whose queries return, never a crash.
void corrupt_every_byte(const std::vector<uint8_t>& good) {
  stackprov::test::bundle_each_corruption(good, [](const std::vector<uint8_t>& b) {
    auto rd = BundleReader::open(b.data(), b.size());
    if (!rd) return;
    for (const ModuleView& v : rd->modules()) {
      (void)rd->symbols(v.index);
      for (uint64_t a = 0xff0; a < 0x2020; a += 7) (void)rd->symbol(v.index, a);
    }
  });
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
  auto w = write_bundle(c, 5);
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
    auto w2 = write_bundle(s, 5);
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
  auto w = write_bundle(contents(), 5);
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
  corrupt_every_byte(good);
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

/// tests/data/bundle/small-v5.bundle to small-v8.bundle.
std::string small_path(uint32_t version) {
  return std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/small-v" + std::to_string(version) + ".bundle";
}

}  // namespace symbols_test

TEST_CASE("bundle symbols: the committed format-5 to 8 bundles read to their records and are what the writers write",
          "[bundle][format][symbols]") {
  // tests/data/bundle/small-v5.bundle to small-v8.bundle (also seeds of the fuzz target): written by
  // the format-5 to 8 writers when each landed (`unit_bundle '[.write-small-v5]'` ... `'[.write-small-v8]'`);
  // stores keep such bytes unchanged.
  const BundleContents c = small_with_symbols();
  for (uint32_t version : {5u, 6u, 7u, 8u}) {
    INFO("format " << version);
    const std::string path = small_path(version);
    auto rd = BundleReader::open_file(path);
    REQUIRE(rd.ok());
    REQUIRE(rd->data()[8] == version);
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
    auto w = write_bundle(c, version);
    REQUIRE(w.ok());
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(w.value() == file);
  }
}

TEST_CASE("bundle symbols: write tests/data/bundle/small-v5.bundle to small-v8.bundle",
          "[.write-small-v5][.write-small-v6][.write-small-v7][.write-small-v8]") {
  for (uint32_t version : {5u, 6u, 7u, 8u}) {
    auto w = write_bundle(small_with_symbols(), version);
    REQUIRE(w.ok());
    std::ofstream f(small_path(version), std::ios::binary);
    f.write(reinterpret_cast<const char*>(w->data()), static_cast<std::streamsize>(w->size()));
    REQUIRE(f.good());
  }
}

// ---- format 6 (doc/bundles.md "Format 6"): the same records, entropy-coded, names given as the range's.

namespace symbols_test {

/// Ranges with C++ names and symbol names of each kind format 6 has: the range's own name at 0x1000
/// (kind 0), its structor alias at 0x1010 and 0x1030 (kind 1: "2Ev" cut, "1Ev" appended; both end where
/// their range ends: run), a name unlike the range's at 0x1050 (kind 2) and a PLT stub no range covers
/// whose name is a range's with "@plt" (kind 3).
BundleContents contents6() {
  return one_module(6, "m6.so", {{0x1000, 0x20, "_ZN3FooC2Ev"}, {0x1030, 0x10, "_ZN3BarD2Ev"}, {0x1050, 0x10, "short"}},
                    {{0x1000, 0x10, 0x1000, "_ZN3FooC2Ev"}, {0x1010, 0x10, 0x1008, "_ZN3FooC1Ev"},
                     {0x1030, 0x10, 0x1030, "_ZN3BarD1Ev"}, {0x1050, 0x8, 0x1050, "other"},
                     {0x2000, 0x10, 0x2000, "_ZN3BarD2Ev@plt"}});
}

size_t string_index(const std::vector<std::string>& t, const std::string& s) {
  auto it = std::find(t.begin(), t.end(), s);
  REQUIRE(it != t.end());
  return static_cast<size_t>(it - t.begin());
}

using stackprov::test::bundle_code_block;
using stackprov::test::bundle_module0_strings;
using Field = stackprov::test::BundleField;

/// The fields of one symbol-name record (layout SymCtx): head in the previous kind's context, gap,
/// [length in its kind's, unless it runs to its range's end], [back], then the kind's name fields
/// (kind 1: cut `a`, suffix `b`; kind 2: string `a`; kind 3: prefix `a`, suffix `b`).
void sym_fields(std::vector<Field>& f, unsigned& prev_kind, unsigned kind, bool run, uint64_t gap, uint64_t len,
                uint64_t back, uint64_t a = 0, uint64_t b = 0) {
  using namespace stackprov::bundle::layout;
  f.push_back({kCtxSymHead + prev_kind, kind | (back != 0 ? kSymBack : 0u) | (run ? kSymRun : 0u), true});
  f.push_back({kCtxSymGap, gap});
  if (!run) f.push_back({kCtxSymLen + kind, len});
  if (back != 0) f.push_back({kCtxSymBackOff, back});
  if (kind == kSymString) f.push_back({kCtxSymName, a});
  if (kind == kSymEdited) f.push_back({kCtxSymCut, a});
  if (kind == kSymJoined) f.push_back({kCtxSymPrefix, a});
  if (kind == kSymEdited || kind == kSymJoined) f.push_back({kCtxSymSuffix, b});
  prev_kind = kind;
}

/// `good` with its symbol-name section (the last one) holding module 0's `n` records in `block`.
std::vector<uint8_t> with_symbol_block(const std::vector<uint8_t>& good, uint32_t n, const std::vector<uint8_t>& block) {
  std::vector<uint8_t> b = stackprov::test::bundle_with_block(good, 0x80000002u, {n}, block);
  REQUIRE_FALSE(b.empty());
  return b;
}


}  // namespace symbols_test

TEST_CASE("bundle symbols: format 6 codes each name as the range's, an edit of it or a string, and reads as format 5",
          "[bundle][format][symbols]") {
  using namespace stackprov::bundle::layout;
  const BundleContents c = contents6();
  auto w6 = write_bundle(c, 6);
  auto w5 = write_bundle(c, 5);
  REQUIRE((w6.ok() && w5.ok()));
  const std::vector<uint8_t>& b = w6.value();
  CHECK(b[8] == 6);
  auto r6 = BundleReader::open(b.data(), b.size());
  auto r5 = BundleReader::open(w5->data(), w5->size());
  REQUIRE((r6.ok() && r5.ok()));
  CHECK(r6->modules()[0].symbol_count == 5);
  // Every answer is format 5's (and the input's).
  auto all6 = r6->symbols(0), all5 = r5->symbols(0);
  REQUIRE((all6.ok() && all5.ok()));
  REQUIRE(all6->size() == c.modules[0].symbols.size());
  for (size_t i = 0; i < all6->size(); i++) {
    const SymbolRecord &a = all6.value()[i], &e = all5.value()[i], &in = c.modules[0].symbols[i];
    CHECK((a.addr == e.addr && a.length == e.length && a.sym_start == e.sym_start && a.name == e.name));
    CHECK(a.name == in.name);
  }
  for (uint64_t a = 0xff8; a < 0x2018; a += 4) {
    INFO("address 0x" << std::hex << a);
    auto s6 = r6->symbol(0, a), s5 = r5->symbol(0, a);
    REQUIRE((s6.ok() && s5.ok()));
    CHECK((s6->found == s5->found && s6->name == s5->name && s6->sym_start == s5->sym_start));
  }
  // The table holds the suffixes and the name no range gives, not the aliases (format 5 has them).
  const std::vector<std::string> t6 = bundle_module0_strings(b), t5 = bundle_module0_strings(w5.value());
  for (const char* alias : {"_ZN3FooC1Ev", "_ZN3BarD1Ev", "_ZN3BarD2Ev@plt"}) {
    CHECK(std::find(t5.begin(), t5.end(), alias) != t5.end());
    CHECK(std::find(t6.begin(), t6.end(), alias) == t6.end());
  }
  // Hand encoding of the block (doc/bundles.md "Format 6").
  std::vector<Field> f;
  unsigned prev = kSymKinds;
  sym_fields(f, prev, kSymSame, false, 0x1000, 0x10, 0);
  sym_fields(f, prev, kSymEdited, true, 0, 0, 8, 3, string_index(t6, "1Ev"));  // to 0x1020, the range's end
  sym_fields(f, prev, kSymEdited, true, 0x10, 0, 0, 3, string_index(t6, "1Ev"));
  sym_fields(f, prev, kSymString, false, 0x10, 0x8, 0, string_index(t6, "other"));
  sym_fields(f, prev, kSymJoined, false, 0x2000 - 0x1058, 0x10, 0, string_index(t6, "_ZN3BarD2Ev"),
             string_index(t6, "@plt"));
  const std::vector<uint8_t> block = bundle_code_block(kSymCtxCount, f);
  CHECK(with_symbol_block(b, 5, block) == b);
  // Deterministic: shuffled records, the same bytes.
  std::mt19937 rng(6);
  for (int i = 0; i < 5; i++) {
    BundleContents s = c;
    std::shuffle(s.modules[0].symbols.begin(), s.modules[0].symbols.end(), rng);
    std::shuffle(s.modules[0].ranges.begin(), s.modules[0].ranges.end(), rng);
    auto w = write_bundle(s, 6);
    REQUIRE(w.ok());
    CHECK(w.value() == b);
  }
  // Names that are all the ranges' own add nothing to the table: the strings equal a bundle's without them.
  BundleContents same = c, none = c;
  same.modules[0].symbols = {{0x1000, 0x20, 0x1000, "_ZN3FooC2Ev"}, {0x1030, 0x10, 0x1030, "_ZN3BarD2Ev"}};  // runs
  none.modules[0].symbols.clear();
  auto ws = write_bundle(same), wn = write_bundle(none);
  REQUIRE((ws.ok() && wn.ok()));
  CHECK(bundle_module0_strings(ws.value()) == bundle_module0_strings(wn.value()));
}

TEST_CASE("bundle symbols: format 6 resolves names and runs across range groups, empty function names included",
          "[bundle][format][symbols]") {
  // 200 touching depth-0 ranges of 4 bytes (a group holds 64): "f", 99 named "", 100 named "g". A
  // list's first record leaves "" unset where a later one names the table's "": one function still.
  std::vector<Range0> ranges = {{0x1000, 4, "f"}};
  for (uint64_t i = 1; i < 200; i++) ranges.push_back({0x1000 + 4 * i, 4, i < 100 ? "" : "g"});
  const BundleContents c = one_module(7, "groups.so", ranges,
                                      {{0x1000, 4, 0x1000, "f"},                 // kind 0, its run
                                       {0x1004, 99 * 4, 0x1004, ""},             // kind 0, a run over two groups
                                       {0x1190, 50 * 4, 0x1190, "g.part.0"},    // kind 3 ("g" + ".part.0")
                                       {0x1258, 50 * 4, 0x1200, "g"}});          // kind 0, a run to the end
  auto w6 = write_bundle(c);
  auto w5 = write_bundle(c, 5);
  REQUIRE((w6.ok() && w5.ok()));
  auto r6 = BundleReader::open(w6->data(), w6->size());
  auto r5 = BundleReader::open(w5->data(), w5->size());
  REQUIRE((r6.ok() && r5.ok()));
  auto all6 = r6->symbols(0), all5 = r5->symbols(0);
  REQUIRE((all6.ok() && all5.ok()));
  REQUIRE(all6->size() == 4);
  for (size_t i = 0; i < 4; i++) {
    const SymbolRecord &a = all6.value()[i], &e = all5.value()[i], &in = c.modules[0].symbols[i];
    INFO("record " << i);
    CHECK((a.addr == e.addr && a.length == e.length && a.sym_start == e.sym_start && a.name == e.name));
    CHECK((a.addr == in.addr && a.length == in.length && a.sym_start == in.sym_start && a.name == in.name));
  }
  for (uint64_t a = 0xffc; a < 0x1330; a += 3) {
    auto s6 = r6->symbol(0, a), s5 = r5->symbol(0, a);
    REQUIRE((s6.ok() && s5.ok()));
    CHECK((s6->found == s5->found && s6->name == s5->name && s6->sym_start == s5->sym_start));
  }
}

TEST_CASE("bundle symbols: hostile format-6 blocks are refused by value, never a crash",
          "[bundle][format][symbols][hostile]") {
  using namespace stackprov::bundle::layout;
  auto w = write_bundle(contents6());
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  const std::vector<std::string> t = bundle_module0_strings(good);
  const uint64_t suffix = string_index(t, "1Ev");
  auto one = [&](unsigned kind, bool run, uint64_t gap, uint64_t len, uint64_t back, uint64_t a = 0, uint64_t b = 0) {
    std::vector<Field> f;
    unsigned prev = kSymKinds;
    sym_fields(f, prev, kind, run, gap, len, back, a, b);
    return open_error(with_symbol_block(good, 1, bundle_code_block(kSymCtxCount, f)));
  };
  CHECK(one(kSymSame, false, 0x1000, 0x10, 0).empty());
  CHECK(one(kSymEdited, false, 0x1030, 0x10, 0, 3, suffix).empty());
  CHECK(one(kSymJoined, true, 0x1030, 0, 0, string_index(t, "_ZN3BarD2Ev"), suffix).empty());
  {
    // A run's length is its range's: 0x1008 to 0x1020.
    std::vector<Field> f;
    unsigned prev = kSymKinds;
    sym_fields(f, prev, kSymSame, true, 0x1008, 0, 0);
    const std::vector<uint8_t> b = with_symbol_block(good, 1, bundle_code_block(kSymCtxCount, f));
    auto rd = BundleReader::open(b.data(), b.size());
    REQUIRE(rd.ok());
    auto all = rd->symbols(0);
    REQUIRE(all.ok());
    REQUIRE(all->size() == 1);
    CHECK((all.value()[0].addr == 0x1008 && all.value()[0].length == 0x18 && all.value()[0].name == "_ZN3FooC2Ev"));
  }
  {
    // A head with a bit no kind has.
    const std::vector<Field> f = {{kCtxSymHead + kSymKinds, 16, true}, {kCtxSymGap, 0x1000}, {kCtxSymLen, 0x10}};
    CHECK_THAT(open_error(with_symbol_block(good, 1, bundle_code_block(kSymCtxCount, f))),
               Catch::Contains("record 0") && Catch::Contains("head 16"));
  }
  CHECK_THAT(one(kSymString, false, 0x1000, 0x10, 0, t.size()), Catch::Contains("names string " + std::to_string(t.size())));
  CHECK_THAT(one(kSymEdited, false, 0x1000, 0x10, 0, 3, t.size() + 5), Catch::Contains("names string"));
  CHECK_THAT(one(kSymJoined, false, 0x1000, 0x10, 0, t.size() + 1, suffix),
             Catch::Contains("names string " + std::to_string(t.size() + 1)));
  CHECK_THAT(one(kSymEdited, false, 0x1000, 0x10, 0, 12, suffix), Catch::Contains("cuts 12 bytes of the 11"));
  CHECK_THAT(one(kSymSame, false, 0x3000, 0x10, 0), Catch::Contains("0x3000") && Catch::Contains("none covers it"));
  CHECK_THAT(one(kSymString, true, 0x3000, 0, 0, 0), Catch::Contains("0x3000") && Catch::Contains("runs to the end"));
  CHECK_THAT(one(kSymSame, false, 0x1000, 0, 0), Catch::Contains("record 0") && Catch::Contains("empty"));
  CHECK_THAT(one(kSymSame, false, 0x1000, 0x10, 0x1001), Catch::Contains("symbol starts 0x1001 before it"));
  CHECK_THAT(one(kSymSame, false, UINT64_MAX, 0x10, 0), Catch::Contains("wraps around"));
  {
    // Two records declared, one coded: cut short.
    std::vector<Field> f;
    unsigned prev = kSymKinds;
    sym_fields(f, prev, kSymSame, false, 0x1000, 0x10, 0);
    const std::vector<uint8_t> block = bundle_code_block(kSymCtxCount, f);
    CHECK_THAT(open_error(with_symbol_block(good, 2, block)), Catch::Contains("cut short"));
    // A block cut in its codes, and one with a byte too many.
    CHECK_THAT(open_error(with_symbol_block(good, 1, std::vector<uint8_t>(block.begin(), block.begin() + 4))),
               Catch::Contains("code") || Catch::Contains("cut short"));
    std::vector<uint8_t> longer = block;
    longer.push_back(1);
    CHECK_THAT(open_error(with_symbol_block(good, 1, longer)), Catch::Contains("bits after its 1 symbol-name records"));
  }
  // Every truncation of the block: an error; every single-byte corruption of the file: never a crash.
  const int ix = stackprov::test::bundle_section_index(good, 0x80000002u);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(good, 32 + ix * 24 + 8));
  const size_t len = static_cast<size_t>(stackprov::test::bundle_le64(good, 32 + ix * 24 + 16));
  for (size_t n = 0; n + 16 < len; n++) {
    const std::vector<uint8_t> cut(good.begin() + static_cast<std::ptrdiff_t>(off + 16),
                                   good.begin() + static_cast<std::ptrdiff_t>(off + 16 + n));
    CHECK_FALSE(open_error(with_symbol_block(good, 5, cut)).empty());
  }
  corrupt_every_byte(good);
}
