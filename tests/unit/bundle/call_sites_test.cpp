// SPDX-License-Identifier: Apache-2.0
// The optional call-sites section (0x80000003, doc/bundles.md "Call sites"): hand encoding, round trip, older formats, hostile bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"
#include "lib/bundle_bytes.hpp"

using namespace stackprov::bundle;

namespace call_sites_test {

/// Five call sites, three functions and a name: a call at 0x1010 into 0x1100, whose two tail calls
/// (0x1108 to 0x1200, 0x1110 to a target nobody knows) make it a function the search walks through;
/// 0x1200 in two ranges; 0x1308 whose range starts before its entry; a call at 0x1400 back to
/// 0x1100; a call at 0x1410 to "ext", another module's; 0x1100 found by the global name "hot".
BundleContents cs_contents() {
  ModuleContents m;
  m.id = {stackprov::IdKind::kElfBuildId, {9, 8, 7, 6}};
  m.name = "t.so";
  m.ranges.push_back({0x1000, 0x500, 0, "f", "", 0, 0, "", 0, 0, false});
  m.call_sites.push_back({0x1400, false, true, 0x1100, ""});  // out of order: the writer sorts
  m.call_sites.push_back({0x1010, false, true, 0x1100, ""});
  m.call_sites.push_back({0x1108, true, true, 0x1200, ""});
  m.call_sites.push_back({0x1110, true, false, 0, ""});
  m.call_sites.push_back({0x1410, false, false, 0, "ext"});
  m.call_symbols.push_back({"hot", 0x1100, true});
  m.call_functions.push_back({0x1308, {{0x1300, 0x1310}}, {}});
  m.call_functions.push_back({0x1100, {{0x1100, 0x1120}}, {0x1108, 0x1110}});
  m.call_functions.push_back({0x1200, {{0x1230, 0x1240}, {0x1200, 0x1210}}, {}});
  BundleContents c;
  c.modules.push_back(std::move(m));
  return c;
}

/// The section's bytes by doc/bundles.md "Call sites", written out by hand. The module's strings,
/// by uses then bytes: "" (file and call file of the range), "ext", "f", "hot".
const std::vector<uint8_t> kCallSection = {
    // head: module 0, 5 sites, 3 functions, 1 name, 46 bytes
    0, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 46, 0, 0, 0, 0, 0, 0, 0,
    0x90, 0x20, 2, 0xf0, 0x01,  // 0x1010, target: +0xf0 = 0x1100
    0xf8, 0x01, 3, 0xf8, 0x01,  // +0xf8 = 0x1108, tail, target +0xf8 = 0x1200
    0x08, 1,                    // +8 = 0x1110, tail, no target
    0xf0, 0x05, 2, 0x80, 0x7a,  // +0x2f0 = 0x1400, target -0x300 = 0x1100
    0x10, 4, 1,                 // +0x10 = 0x1410, target named by string 1 ("ext")
    0x80, 0x22, 1, 0x00, 0x20, 2, 1, 2,        // entry 0x1100, [0x1100, +0x20), tails: sites 1, 2
    0x80, 0x02, 2, 0x00, 0x10, 0x20, 0x10, 0,  // +0x100 = 0x1200, [0x1200, +0x10), gap 0x20, [0x1230, +0x10)
    0x88, 0x02, 1, 0x78, 0x10, 0,              // +0x108 = 0x1308, [0x1308 - 8, +0x10)
    3, 1, 0x80, 0x22,                          // "hot": global, 0x1100
    0, 0,                                      // zero padding to 8 bytes
};

/// The error of opening `b` and decoding module 0's section ("" when both succeed).
std::string cs_read_error(const std::vector<uint8_t>& b) {
  auto rd = BundleReader::open(b.data(), b.size());
  if (!rd) return rd.error().message;
  auto t = rd->call_sites(0);
  return t ? std::string() : t.error().message;
}
/// The committed seed of format `version` (5, 6 or 7).
std::string seed_path(uint32_t version) {
  return std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/callsites" +
         (version == 5 ? std::string() : "-v" + std::to_string(version)) + ".bundle";
}
std::string cs_write_error(const BundleContents& c) {
  auto w = write_bundle(c);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == SPROV_ERR_BUNDLE);
  return w.error().message;
}

}  // namespace call_sites_test

using namespace call_sites_test;

TEST_CASE("bundle call sites: the section is the documented bytes and reads back to its records",
          "[bundle][format][callsites]") {
  auto w = write_bundle(cs_contents(), 5);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& b = w.value();
  const int ix = stackprov::test::bundle_section_index(b, 0x80000003u);
  REQUIRE(ix >= 0);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + ix * 24 + 8));
  const size_t len = static_cast<size_t>(stackprov::test::bundle_le64(b, 32 + ix * 24 + 16));
  CHECK(len == kCallSection.size() - 2);
  CHECK(std::vector<uint8_t>(b.begin() + off, b.begin() + off + kCallSection.size()) == kCallSection);
  CHECK(off + kCallSection.size() == b.size());  // written last

  auto rd = BundleReader::open(b.data(), b.size());
  REQUIRE(rd.ok());
  CHECK(rd->modules()[0].call_site_count == 5);
  CHECK(rd->modules()[0].call_function_count == 3);
  CHECK(rd->modules()[0].call_symbol_count == 1);
  auto t = rd->call_sites(0);
  REQUIRE(t.ok());
  // The input, sorted: sites by return pc, functions by entry, ranges by address, tails as given.
  REQUIRE(t->sites.size() == 5);
  const CallSiteRecord want_sites[] = {{0x1010, false, true, 0x1100, ""},
                                       {0x1108, true, true, 0x1200, ""},
                                       {0x1110, true, false, 0, ""},
                                       {0x1400, false, true, 0x1100, ""},
                                       {0x1410, false, false, 0, "ext"}};
  for (size_t i = 0; i < 5; i++) {
    INFO("site " << i);
    CHECK(t->sites[i].return_pc == want_sites[i].return_pc);
    CHECK(t->sites[i].tail_call == want_sites[i].tail_call);
    CHECK(t->sites[i].has_target == want_sites[i].has_target);
    if (want_sites[i].has_target) CHECK(t->sites[i].target == want_sites[i].target);
    CHECK(t->sites[i].target_name == want_sites[i].target_name);
  }
  REQUIRE(t->symbols.size() == 1);
  CHECK(t->symbols[0].name == "hot");
  CHECK(t->symbols[0].addr == 0x1100);
  CHECK(t->symbols[0].global);
  REQUIRE(t->functions.size() == 3);
  CHECK(t->functions[0].entry == 0x1100);
  CHECK(t->functions[0].ranges == std::vector<std::pair<uint64_t, uint64_t>>{{0x1100, 0x1120}});
  CHECK(t->functions[0].tails == std::vector<uint64_t>{0x1108, 0x1110});
  CHECK(t->functions[1].entry == 0x1200);
  CHECK(t->functions[1].ranges == std::vector<std::pair<uint64_t, uint64_t>>{{0x1200, 0x1210}, {0x1230, 0x1240}});
  CHECK(t->functions[1].tails.empty());
  CHECK(t->functions[2].entry == 0x1308);
  CHECK(t->functions[2].ranges == std::vector<std::pair<uint64_t, uint64_t>>{{0x1300, 0x1310}});

  // Deterministic: the same records in another order give the same bytes.
  BundleContents c = cs_contents();
  std::swap(c.modules[0].call_functions[0], c.modules[0].call_functions[2]);
  std::swap(c.modules[0].call_sites[1], c.modules[0].call_sites[3]);
  auto w2 = write_bundle(c, 5);
  REQUIRE(w2.ok());
  CHECK(w2.value() == b);
}

TEST_CASE("bundle call sites: a module without them and formats 2 to 4 have no section",
          "[bundle][format][callsites]") {
  BundleContents plain = cs_contents();
  plain.modules[0].call_sites.clear();
  plain.modules[0].call_functions.clear();
  plain.modules[0].call_symbols.clear();
  auto p5 = write_bundle(plain);
  REQUIRE(p5.ok());
  CHECK(stackprov::test::bundle_section_index(p5.value(), 0x80000003u) == -1);
  auto rd = BundleReader::open(p5->data(), p5->size());
  REQUIRE(rd.ok());
  auto t = rd->call_sites(0);
  REQUIRE(t.ok());
  CHECK(t->sites.empty());
  CHECK(t->functions.empty());
  for (uint32_t version : {2u, 3u, 4u}) {
    INFO("format " << version);
    auto w = write_bundle(cs_contents(), version);
    REQUIRE(w.ok());
    auto p = write_bundle(plain, version);
    REQUIRE(p.ok());
    CHECK(w.value() == p.value());
  }
}

TEST_CASE("bundle call sites: the writer refuses inconsistent records naming them", "[bundle][format][callsites]") {
  {
    BundleContents c = cs_contents();
    c.modules[0].call_sites[0].return_pc = 0x1010;  // twice
    CHECK_THAT(cs_write_error(c), Catch::Contains("two call sites return to 0x1010"));
  }
  {
    BundleContents c = cs_contents();
    c.modules[0].call_functions[0].ranges = {{0x1238, 0x1248}};  // into 0x1200's second range
    c.modules[0].call_functions[0].entry = 0x1238;
    CHECK_THAT(cs_write_error(c), Catch::Contains("0x1230..0x1240") && Catch::Contains("0x1238..0x1248") &&
                                   Catch::Contains("overlap"));
  }
  {
    BundleContents c = cs_contents();
    c.modules[0].call_functions[0].entry = 0x1318;  // outside its range
    CHECK_THAT(cs_write_error(c), Catch::Contains("0x1318") && Catch::Contains("entry must lie in one"));
  }
  {
    BundleContents c = cs_contents();
    c.modules[0].call_functions[1].tails.push_back(0x1010);  // a call, not a tail call
    CHECK_THAT(cs_write_error(c), Catch::Contains("0x1100") && Catch::Contains("names 0x1010"));
  }
  {
    BundleContents c = cs_contents();
    c.modules[0].call_sites[0].target_name = "both";  // 0x1400 has a target address already
    CHECK_THAT(cs_write_error(c), Catch::Contains("0x1400") && Catch::Contains("'both'"));
  }
  {
    BundleContents c = cs_contents();
    c.modules[0].call_symbols.push_back({"hot", 0x1200, false});
    CHECK_THAT(cs_write_error(c), Catch::Contains("'hot'") && Catch::Contains("twice"));
  }
}

TEST_CASE("bundle call sites: hostile sections are refused by value, never a crash",
          "[bundle][format][callsites][hostile]") {
  auto w = write_bundle(cs_contents(), 5);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  const int ix = stackprov::test::bundle_section_index(good, 0x80000003u);
  REQUIRE(ix >= 0);
  const size_t off = static_cast<size_t>(stackprov::test::bundle_le64(good, 32 + ix * 24 + 8));
  const size_t data = off + 24;  // the records after the head
  auto patched = [&](size_t at, std::vector<uint8_t> v) {
    std::vector<uint8_t> b = good;
    for (size_t i = 0; i < v.size(); i++) b[at + i] = v[i];
    return cs_read_error(b);
  };
  CHECK(cs_read_error(good).empty());
  // Heads (checked at open).
  CHECK_THAT(patched(off, {1}), Catch::Contains("module index 1"));
  CHECK_THAT(patched(off + 4, {20}), Catch::Contains("20 sites, 3 functions and 1 names in 46 bytes"));  // 58 > 46
  CHECK_THAT(patched(off + 8, {0xff, 0xff, 0xff, 0xff}), Catch::Contains("4294967295 functions"));
  CHECK_THAT(patched(off + 12, {9}), Catch::Contains("5 sites, 3 functions and 9 names in 46 bytes"));
  CHECK_THAT(patched(off + 4, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), Catch::Contains("0 sites, 0 functions and 0 names"));
  CHECK_THAT(patched(off + 16, {47}), Catch::Contains("in 47 bytes (46 left"));  // beyond the section
  CHECK_THAT(patched(off + 16, {45}), Catch::Contains("a head at 69 of the 70-byte section is cut short"));
  // Records (checked by call_sites()).
  CHECK_THAT(patched(off + 4, {3}), Catch::Contains("range 0") && Catch::Contains("wraps around"));  // site 3 read as a function
  CHECK_THAT(patched(data + 2, {6}), Catch::Contains("call site 0 at 0x1010 has unknown flags 0x6"));  // both targets
  CHECK_THAT(patched(data + 2, {8}), Catch::Contains("call site 0 at 0x1010 has unknown flags 0x8"));
  CHECK_THAT(patched(data + 19, {9}), Catch::Contains("call site at 0x1410 names string 9 of 4"));
  CHECK_THAT(patched(data + 42, {7}), Catch::Contains("call-site name at 0x1100 names string 7 of 4"));
  CHECK_THAT(patched(data + 43, {2}), Catch::Contains("global byte 2 is not 0 or 1"));
  CHECK_THAT(patched(data + 5, {0, 0}), Catch::Contains("call site 1") && Catch::Contains("not after"));
  CHECK_THAT(patched(data + 20 + 6, {5}), Catch::Contains("0x1100") && Catch::Contains("names site 5 of 5"));
  CHECK_THAT(patched(data + 20 + 6, {0}), Catch::Contains("names site 0") && Catch::Contains("not a tail-call site"));
  CHECK_THAT(patched(data + 20 + 2, {0}), Catch::Contains("0x1100 has 0 ranges"));
  CHECK_THAT(patched(data + 20 + 2, {0xff, 0x7f}), Catch::Contains("has 16383 ranges"));
  CHECK_THAT(patched(data + 20 + 4, {0}), Catch::Contains("range 0 at 0x1100 length 0x0"));
  CHECK_THAT(patched(data + 36 + 3, {0x08}), Catch::Contains("entry 0x1308 is in none of its ranges"));
  CHECK_THAT(patched(data + 36, {0xb8, 0x00}),  // entry 0x1238: [0x1230, 0x1240) twice
             Catch::Contains("0x1230..0x1240") && Catch::Contains("overlap"));
  {
    // The section in a format-4 bundle (older formats never have it).
    std::vector<uint8_t> b = good;
    b[8] = 4;
    auto rd = BundleReader::open(b.data(), b.size());
    REQUIRE_FALSE(rd.ok());
    CHECK_THAT(rd.error().message, Catch::Contains("0x80000003") && Catch::Contains("format-4"));
  }
  // Every single-byte corruption: an error or a valid reader whose decode returns, never a crash.
  stackprov::test::bundle_each_corruption(good, [](const std::vector<uint8_t>& b) {
    auto rd = BundleReader::open(b.data(), b.size());
    if (!rd) return;
    for (const ModuleView& v : rd->modules()) (void)rd->call_sites(v.index);
  });
}

TEST_CASE("bundle call sites: the committed seeds are what the writers write", "[bundle][format][callsites]") {
  // tests/data/bundle/callsites.bundle and callsites-v6.bundle to callsites-v8.bundle: the fuzz smoke
  // test's seeds with a call-site section in formats 5 to 8.
  for (uint32_t version : {5u, 6u, 7u, 8u}) {
    INFO("format " << version);
    std::ifstream f(seed_path(version), std::ios::binary);
    const std::vector<uint8_t> seed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto w = write_bundle(cs_contents(), version);
    REQUIRE(w.ok());
    CHECK(seed == w.value());
  }
}

TEST_CASE("bundle call sites: write tests/data/bundle/callsites.bundle and callsites-v6.bundle to callsites-v8.bundle",
          "[.write-callsites][.write-callsites-v6][.write-callsites-v7][.write-callsites-v8]") {
  for (uint32_t version : {5u, 6u, 7u, 8u}) {
    auto w = write_bundle(cs_contents(), version);
    REQUIRE(w.ok());
    std::ofstream f(seed_path(version), std::ios::binary);
    f.write(reinterpret_cast<const char*>(w->data()), static_cast<std::streamsize>(w->size()));
    REQUIRE(f.good());
  }
}

// ---- format 6 (doc/bundles.md "Format 6"): the same fields entropy-coded, targets as function indexes.

namespace call_sites_test {

using Field = stackprov::test::BundleField;

/// cs_contents()'s block in format 6, written out by the layout (CallCtx). Functions by entry: 0x1100
/// #0, 0x1200 #1, 0x1308 #2; strings as in format 5.
std::vector<Field> cs_fields6(const std::vector<std::string>& strings) {
  using namespace stackprov::bundle::layout;
  using stackprov::bundle::entropy::zigzag;
  const uint64_t ext = static_cast<uint64_t>(std::find(strings.begin(), strings.end(), "ext") - strings.begin());
  const uint64_t hot = static_cast<uint64_t>(std::find(strings.begin(), strings.end(), "hot") - strings.begin());
  return {
      {kCtxCsDelta, 0x1010}, {kCtxCsFlags, kCallSiteFunction, true}, {kCtxCsFunc, 0},  // 0x1010 calls #0
      {kCtxCsDelta, 0xf8}, {kCtxCsFlags, kCallSiteTail | kCallSiteFunction, true}, {kCtxCsFunc, 1},  // 0x1108 tail #1
      {kCtxCsDelta, 8}, {kCtxCsFlags, kCallSiteTail, true},                            // 0x1110 tail, unknown
      {kCtxCsDelta, 0x2f0}, {kCtxCsFlags, kCallSiteFunction, true}, {kCtxCsFunc, 0},   // 0x1400 calls #0
      {kCtxCsDelta, 0x10}, {kCtxCsFlags, kCallSiteName, true}, {kCtxCsName, ext},      // 0x1410 calls "ext"
      // 0x1100 [0x1100, +0x20); tails: sites 1 and 2, from site 1 (the first at 0x1100 or after)
      {kCtxCfDelta, 0x1100}, {kCtxCfRanges, 1}, {kCtxCfLow, zigzag(0)}, {kCtxCfLen, 0x20}, {kCtxCfTails, 2},
      {kCtxCfTail, zigzag(0)}, {kCtxCfTail, zigzag(1)},
      // +0x100 = 0x1200 [0x1200, +0x10), gap 0x20, [0x1230, +0x10)
      {kCtxCfDelta, 0x100}, {kCtxCfRanges, 2}, {kCtxCfLow, zigzag(0)}, {kCtxCfLen, 0x10}, {kCtxCfGap, 0x20},
      {kCtxCfLen, 0x10}, {kCtxCfTails, 0},
      // +0x108 = 0x1308 [0x1308 - 8, +0x10)
      {kCtxCfDelta, 0x108}, {kCtxCfRanges, 1}, {kCtxCfLow, zigzag(-8)}, {kCtxCfLen, 0x10}, {kCtxCfTails, 0},
      // "hot": global, at function #0
      {kCtxCnName, hot}, {kCtxCnHead, 1 | kCallNameFunction, true}, {kCtxCnFunc, 0},
  };
}

/// `good` with its call-site section holding module 0's `block` alone.
std::vector<uint8_t> with_call_block(const std::vector<uint8_t>& good, const std::vector<uint8_t>& block,
                                     uint32_t sites = 5, uint32_t funcs = 3, uint32_t names = 1) {
  std::vector<uint8_t> b = stackprov::test::bundle_with_block(good, 0x80000003u, {sites, funcs, names}, block);
  REQUIRE_FALSE(b.empty());
  return b;
}

}  // namespace call_sites_test

TEST_CASE("bundle call sites: format 6 is the documented coded block and reads as format 5",
          "[bundle][format][callsites]") {
  auto w = write_bundle(cs_contents(), 6);
  auto w5 = write_bundle(cs_contents(), 5);
  auto w7 = write_bundle(cs_contents(), 7);
  REQUIRE((w.ok() && w5.ok() && w7.ok()));
  const std::vector<uint8_t>& b = w.value();
  CHECK(b[8] == 6);
  const std::vector<std::string> strings = stackprov::test::bundle_module0_strings(b);
  REQUIRE(strings.size() == 4);
  const std::vector<uint8_t> block =
      stackprov::test::bundle_code_block(stackprov::bundle::layout::kCallCtxCount, cs_fields6(strings));
  CHECK(with_call_block(b, block) == b);
  CHECK(with_call_block(w7.value(), block) == w7.value());  // format 7 codes call sites as format 6
  auto rd = BundleReader::open(b.data(), b.size());
  auto r5 = BundleReader::open(w5->data(), w5->size());
  REQUIRE((rd.ok() && r5.ok()));
  auto t = rd->call_sites(0);
  auto t5 = r5->call_sites(0);
  REQUIRE((t.ok() && t5.ok()));
  REQUIRE(t->sites.size() == t5->sites.size());
  for (size_t i = 0; i < t->sites.size(); i++) {
    INFO("site " << i);
    const CallSiteRecord &a = t->sites[i], &e = t5->sites[i];
    CHECK((a.return_pc == e.return_pc && a.tail_call == e.tail_call && a.has_target == e.has_target &&
           a.target_name == e.target_name));
    if (e.has_target) CHECK(a.target == e.target);
  }
  REQUIRE(t->functions.size() == t5->functions.size());
  for (size_t i = 0; i < t->functions.size(); i++) {
    CHECK(t->functions[i].entry == t5->functions[i].entry);
    CHECK(t->functions[i].ranges == t5->functions[i].ranges);
    CHECK(t->functions[i].tails == t5->functions[i].tails);
  }
  REQUIRE(t->symbols.size() == 1);
  CHECK((t->symbols[0].name == "hot" && t->symbols[0].addr == 0x1100 && t->symbols[0].global));
  // Deterministic.
  BundleContents c = cs_contents();
  std::swap(c.modules[0].call_functions[0], c.modules[0].call_functions[2]);
  std::swap(c.modules[0].call_sites[1], c.modules[0].call_sites[3]);
  auto w2 = write_bundle(c, 6);
  REQUIRE(w2.ok());
  CHECK(w2.value() == b);
}

TEST_CASE("bundle call sites: hostile format-6 blocks are refused by value, never a crash",
          "[bundle][format][callsites][hostile]") {
  using namespace stackprov::bundle::layout;
  using stackprov::test::bundle_code_block;
  auto w = write_bundle(cs_contents());
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  const std::vector<std::string> strings = stackprov::test::bundle_module0_strings(good);
  const std::vector<Field> fields = cs_fields6(strings);
  auto with_field = [&](size_t i, uint64_t v) {
    std::vector<Field> f = fields;
    f[i].v = v;
    return cs_read_error(with_call_block(good, bundle_code_block(kCallCtxCount, f)));
  };
  CHECK(cs_read_error(with_call_block(good, bundle_code_block(kCallCtxCount, fields))).empty());
  CHECK_THAT(with_field(2, 3), Catch::Contains("call site 0 at 0x1010 calls function 3 of 3"));
  CHECK_THAT(with_field(1, kCallSiteFunction | kCallSiteName), Catch::Contains("call site 0 at 0x1010 has unknown flags 0xc"));
  CHECK_THAT(with_field(1, 16 | kCallSiteFunction), Catch::Contains("unknown flags 0x18"));
  CHECK_THAT(with_field(13, 9), Catch::Contains("call site at 0x1410 names string 9 of 4"));
  CHECK_THAT(with_field(19, stackprov::bundle::entropy::zigzag(-1)), Catch::Contains("names site 0") &&
                                                                          Catch::Contains("not a tail-call site"));
  CHECK_THAT(with_field(20, stackprov::bundle::entropy::zigzag(5)), Catch::Contains("names site 6 of 5"));
  CHECK_THAT(with_field(35, 7), Catch::Contains("call-site name 0 is at function 7 of 3"));
  CHECK_THAT(with_field(34, 5), Catch::Contains("global byte 5"));
  CHECK_THAT(with_field(15, 0), Catch::Contains("0x1100 has 0 ranges"));
  CHECK_THAT(with_field(30, stackprov::bundle::entropy::zigzag(8)), Catch::Contains("entry 0x1308 is in none of its ranges"));
  // A count the block does not hold; a byte too many: left over; every cut.
  const std::vector<uint8_t> block = bundle_code_block(kCallCtxCount, fields);
  CHECK_FALSE(cs_read_error(with_call_block(good, block, 6)).empty());
  std::vector<uint8_t> longer = block;
  longer.push_back(1);
  CHECK_THAT(cs_read_error(with_call_block(good, longer)), Catch::Contains("bits after its 5 call sites"));
  for (size_t n = 0; n < block.size(); n++)
    CHECK_FALSE(cs_read_error(with_call_block(good, std::vector<uint8_t>(block.begin(), block.begin() +
                                                                          static_cast<std::ptrdiff_t>(n)))).empty());
  // Every single-byte corruption: an error or a valid reader whose decode returns, never a crash.
  stackprov::test::bundle_each_corruption(good, [](const std::vector<uint8_t>& b) {
    auto rd = BundleReader::open(b.data(), b.size());
    if (!rd) return;
    for (const ModuleView& v : rd->modules()) (void)rd->call_sites(v.index);
  });
}
