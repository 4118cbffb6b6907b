// SPDX-License-Identifier: Apache-2.0
// Format 7's unwind rows (doc/bundles.md "Format 7") against the CFI rows of real modules and format 6's reading of them.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "object/object_image.hpp"
#include "unwind/bundle_rows.hpp"
#include "unwind/module_unwind.hpp"

using namespace stackprov;

namespace rows7_test {

std::string libc_path() {
  std::string p;
  if (FILE* f = popen("cc -print-file-name=libc.so.6", "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, f) != nullptr) p += buf;
    pclose(f);
  }
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
  return p;
}

/// The rows the builder takes from `path`'s .eh_frame/.debug_frame: our CFI interpreter on the ELF.
std::vector<bundle::UnwindRowRecord> cfi_rows(const std::string& path) {
  auto img = object::open(path);
  REQUIRE(img.ok());
  auto lm = unwind::LoadedModule::load(img.value(), {});
  REQUIRE(lm.ok());
  auto rows = unwind::bundle_unwind_rows(*lm.value());
  REQUIRE(rows.ok());
  return std::move(rows.value());
}

std::string row_text(const bundle::UnwindRowRecord& r) {
  std::string s = "pc 0x" + std::to_string(r.pc) + " kind " + std::to_string(r.kind) + " cfa r" +
                  std::to_string(r.cfa_reg) + "+" + std::to_string(r.cfa_off) + " ra " + std::to_string(r.ra_kind) +
                  "/r" + std::to_string(r.ra_reg) + "/" + std::to_string(r.ra_off) + " sig " +
                  std::to_string(r.signal_frame) + " dbg " + std::to_string(r.from_debug_frame) + " saved";
  for (size_t i = 0; i < r.nsaved; i++) s += " r" + std::to_string(r.saved_reg[i]) + "@" + std::to_string(r.saved_off[i]);
  return s;
}

/// A bundle of one module holding `rows` only, in format `version`.
std::vector<uint8_t> rows_bundle(const std::vector<bundle::UnwindRowRecord>& rows, uint32_t version) {
  bundle::BundleContents c;
  bundle::ModuleContents m;
  m.id.bytes = {7, 7, 7, 7};
  m.name = "rows";
  m.unwind_rows = rows;
  c.modules.push_back(std::move(m));
  auto w = bundle::write_bundle(c, version);
  REQUIRE(w.ok());
  return std::move(w.value());
}

uint64_t section_len(const std::vector<uint8_t>& b, uint32_t type) {
  auto ld = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= static_cast<uint64_t>(b[at + static_cast<size_t>(i)]) << (8 * i);
    return v;
  };
  for (uint64_t i = 0; i < ld(12, 4); i++)
    if (ld(32 + 24 * i, 4) == type) return ld(32 + 24 * i + 16, 8);
  return 0;
}

void check_module(const std::string& path) {
  INFO(path);
  const std::vector<bundle::UnwindRowRecord> want = cfi_rows(path);
  REQUIRE(want.size() > 100);
  const std::vector<uint8_t> b6 = rows_bundle(want, 6), b7 = rows_bundle(want, 7);
  REQUIRE(b7[8] == 7);
  CHECK(rows_bundle(want, 7) == b7);  // deterministic
  auto r6 = bundle::BundleReader::open(b6.data(), b6.size());
  auto r7 = bundle::BundleReader::open(b7.data(), b7.size());
  REQUIRE(r6.ok());
  REQUIRE(r7.ok());
  auto all6 = r6->unwind_rows(0);
  auto all7 = r7->unwind_rows(0);
  REQUIRE(all6.ok());
  REQUIRE(all7.ok());
  REQUIRE(all6->size() == want.size());
  REQUIRE(all7->size() == want.size());
  size_t lookups = 0;
  for (size_t i = 0; i < want.size(); i++) {
    const std::string w = row_text(want[i]);
    REQUIRE(row_text(all6.value()[i]) == w);  // the independent answers agree ...
    REQUIRE(row_text(all7.value()[i]) == w);  // ... and format 7 gives every row
    // A lookup at the row's pc, inside it and just before it answers the same in both formats.
    const uint64_t end = i + 1 < want.size() ? want[i + 1].pc : want[i].pc + 16;
    for (uint64_t pc : {want[i].pc, want[i].pc + (end - want[i].pc) / 2, want[i].pc - 1}) {
      auto a6 = r6->unwind_row(0, pc);
      auto a7 = r7->unwind_row(0, pc);
      REQUIRE(a6.ok());
      REQUIRE(a7.ok());
      REQUIRE(a6->found == a7->found);
      if (a6->found) REQUIRE(row_text(a7->row) == row_text(a6->row));
      lookups++;
    }
  }
  CHECK(lookups == 3 * want.size());
  // What format 7 is for: the same rows in fewer bytes (row index + row data).
  CHECK(section_len(b7, 8) + section_len(b7, 9) < section_len(b6, 8) + section_len(b6, 9));
}

}  // namespace rows7_test

TEST_CASE("format 7 unwind rows equal the CFI rows and format 6's answers: this test binary", "[unwind][bundle][format7]") {
  rows7_test::check_module("/proc/self/exe");
}

TEST_CASE("format 7 unwind rows equal the CFI rows and format 6's answers: libc.so.6", "[unwind][bundle][format7]") {
  const std::string libc = rows7_test::libc_path();
  REQUIRE(libc.find('/') != std::string::npos);
  rows7_test::check_module(libc);
}
