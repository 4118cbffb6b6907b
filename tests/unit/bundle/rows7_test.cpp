// SPDX-License-Identifier: Apache-2.0
// Format 7's unwind rows (doc/bundles.md "Format 7"): the writer's row data against a hand encoding of the page, and hostile tables.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "bundle/entropy.hpp"
#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"
#include "lib/bundle_bytes.hpp"

using namespace stackprov::bundle;

namespace rows7_test {

namespace e = stackprov::bundle::entropy;
using namespace stackprov::bundle::layout;

// A: cfa = rsp + 8, ra at cfa - 8 (the CIE's row); B: cfa = rsp + 16 (after a push); C: no info.
UnwindRowRecord row_a(uint64_t pc) {
  UnwindRowRecord r;
  r.pc = pc;
  r.kind = UnwindRowRecord::kCfaReg;
  r.cfa_reg = 7;
  r.cfa_off = 8;
  r.ra_reg = 16;
  r.ra_off = -1;
  return r;
}
UnwindRowRecord row_b(uint64_t pc) {
  UnwindRowRecord r = row_a(pc);
  r.cfa_off = 16;
  return r;
}
UnwindRowRecord row_c(uint64_t pc) {
  UnwindRowRecord r;
  r.pc = pc;
  r.kind = UnwindRowRecord::kNoInfo;
  return r;
}

/// 30 functions of three rows (A at +0, B at +1, A at +0x10; 0x20 apart), then C: 91 rows, two blocks.
BundleContents contents() {
  ModuleContents m;
  m.id.bytes = {7, 0, 0, 7};
  m.name = "rows7";
  for (uint64_t f = 0; f < 30; f++) {
    const uint64_t pc = 0x1000 + 0x20 * f;
    m.unwind_rows.push_back(row_a(pc));
    m.unwind_rows.push_back(row_b(pc + 1));
    m.unwind_rows.push_back(row_a(pc + 0x10));
  }
  m.unwind_rows.push_back(row_c(0x1000 + 0x20 * 30));
  BundleContents c;
  c.modules.push_back(m);
  return c;
}

struct Field {
  unsigned ctx;
  uint64_t v;
  bool sym = false;
};

/// Codes for `fields` in `n` contexts (each as "Format 3" stores it), written to `w`, then zero bits to a byte.
std::vector<e::Code> codes_for(unsigned n, const std::vector<Field>& fields, e::BitWriter& w) {
  std::vector<e::Counts> counts(n, e::Counts{});
  for (const Field& f : fields) {
    unsigned nx;
    uint64_t x;
    counts[f.ctx][f.sym ? f.v : e::int_symbol(f.v, &nx, &x)]++;
  }
  std::vector<e::Code> codes(n);
  for (unsigned i = 0; i < n; i++) {
    codes[i].assign(e::build_lengths(counts[i]));
    codes[i].write(w);
  }
  w.align();
  return codes;
}

void put(const std::vector<e::Code>& codes, const std::vector<Field>& fields, e::BitWriter& w) {
  for (const Field& f : fields) {
    if (f.sym)
      codes[f.ctx].put(w, static_cast<unsigned>(f.v));
    else
      codes[f.ctx].put_uint(w, f.v);
  }
}

struct RowData {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> offsets;  // of the blocks
};

/// The page's encoding of contents()'s rows, written out by hand. `succ_b` is table row B's successor
/// list (its successor offsets from B; the hostile cases change it).
RowData hand_encoding(const std::vector<int64_t>& succ_b = {-1}) {
  // The table, sorted: A (0), B (1), C (2). Format-4 rows (doc/bundles.md "Format 4"), each against
  // the one before (A against the zero row: kind 4, head 0); pc deltas 0, 1, 1; classes from the mask.
  std::vector<Field> t = {{kCtx7Count, 3}};
  // A: class 0; mask head | cfa reg | cfa off | ra reg | ra off = 47; cfa offset +8; class 2 after.
  t.insert(t.end(), {{kCtxRowDelta4 + 0, 0}, {kCtxRowMask4 + 0, 47, true}, {kCtxRowHead, 1, true},
                     {kCtxRowCfaReg, 7, true}, {kCtxRowCfaOff4 + 0, e::zigzag(8)}, {kCtxRowRaReg, 16, true},
                     {kCtxRowRaOff, 0xff, true}});
  // B: mask cfa off = 2 (class 2 again), +8.
  t.insert(t.end(), {{kCtxRowDelta4 + 2, 1}, {kCtxRowMask4 + 2, 2, true}, {kCtxRowCfaOff4 + 2, e::zigzag(8)}});
  // C: every field back to zero, head 4 (kind 4).
  t.insert(t.end(), {{kCtxRowDelta4 + 2, 1}, {kCtxRowMask4 + 2, 47, true}, {kCtxRowHead, 4, true},
                     {kCtxRowCfaReg, 0, true}, {kCtxRowCfaOff4 + 2, e::zigzag(-16)}, {kCtxRowRaReg, 0, true},
                     {kCtxRowRaOff, 0, true}});
  // Successors in blocks (rows 1..63 and 65..90): A→A 29, A→B 29, B→A 30, A→C 1. A's list by count,
  // ties by index: A, B, C; B's: A. Pairs seen at least 24 times get a context: A→A 13, A→B 14, B→A 15.
  t.insert(t.end(), {{kCtx7SuccCount, 3}, {kCtx7Succ, e::zigzag(0)}, {kCtx7PairFlag, 1, true},
                     {kCtx7Succ, e::zigzag(1)}, {kCtx7PairFlag, 1, true}, {kCtx7Succ, e::zigzag(2)},
                     {kCtx7PairFlag, 0, true}});
  t.push_back({kCtx7SuccCount, succ_b.size()});
  for (int64_t d : succ_b) t.insert(t.end(), {{kCtx7Succ, e::zigzag(d)}, {kCtx7PairFlag, 1, true}});
  t.push_back({kCtx7SuccCount, 0});
  // The blocks: a first row's table index, then per row [rank in A's list of 3: bucket 1] and the pc delta.
  std::vector<std::vector<Field>> blocks(2);
  for (size_t i = 0; i < 91; i++) {
    std::vector<Field>& b = blocks[i / 64];
    const unsigned k = i % 3;
    if (i % 64 == 0) {
      b.push_back({kCtx7First, k == 1 ? 1u : 0u});
      continue;
    }
    if (i == 90) {  // A → C: rank 2, its class (kind 4: 0)
      b.insert(b.end(), {{kCtx7Rank + 1, 2}, {kCtx7Delta + 0, 0x10}});
      continue;
    }
    if (k == 1) b.insert(b.end(), {{kCtx7Rank + 1, 1}, {kRowBlkCtxCount7 + 1, 1}});  // A → B
    if (k == 2) b.push_back({kRowBlkCtxCount7 + 2, 0xf});                            // B → A (one successor)
    if (k == 0) b.insert(b.end(), {{kCtx7Rank + 1, 0}, {kRowBlkCtxCount7 + 0, 0x10}});  // A → A
  }
  e::BitWriter w;
  const std::vector<e::Code> tc = codes_for(kRowTabCtxCount7, t, w);
  put(tc, t, w);
  // A hostile list of B's leaves B → A without its context: those fields are never decoded.
  const unsigned npair = 2 + static_cast<unsigned>(succ_b.size());
  for (auto& b : blocks)
    b.erase(std::remove_if(b.begin(), b.end(), [&](const Field& f) { return f.ctx >= kRowBlkCtxCount7 + npair; }), b.end());
  std::vector<Field> all = blocks[0];
  all.insert(all.end(), blocks[1].begin(), blocks[1].end());
  const std::vector<e::Code> bc = codes_for(kRowBlkCtxCount7 + npair, all, w);
  RowData out;
  for (const auto& b : blocks) {
    w.align();
    out.offsets.push_back(static_cast<uint32_t>(w.bytes().size()));
    put(bc, b, w);
  }
  w.align();
  out.bytes = w.bytes();
  return out;
}

/// `good` (contents() in format 7: the row data is its last section) with module 0's row data and
/// index offsets replaced by `d`.
std::vector<uint8_t> with_rows(const std::vector<uint8_t>& good, const RowData& d) {
  using namespace stackprov::test;
  std::vector<uint8_t> b = bundle_with_last_section(good, kSecRowData, d.bytes);
  REQUIRE_FALSE(b.empty());
  const size_t rec = static_cast<size_t>(bundle_le64(b, 32 + bundle_section_index(b, kSecModules) * 24 + 8));
  for (int i = 0; i < 8; i++) b[rec + kModRowData + 8 + i] = static_cast<uint8_t>(d.bytes.size() >> (8 * i));
  const size_t idx = static_cast<size_t>(bundle_le64(b, 32 + bundle_section_index(b, kSecRowIndex) * 24 + 8) +
                                         8 * bundle_le64(b, rec + kModRowIndex));
  REQUIRE(bundle_le64(b, rec + kModRowIndex + 8) == d.offsets.size());
  for (size_t k = 0; k < d.offsets.size(); k++)
    for (int i = 0; i < 4; i++) b[idx + 8 * k + 4 + i] = static_cast<uint8_t>(d.offsets[k] >> (8 * i));
  return b;
}

std::string rows_error(const std::vector<uint8_t>& b) {
  auto rd = BundleReader::open(b.data(), b.size());
  if (!rd) return rd.error().message;
  auto rows = rd->unwind_rows(0);
  return rows ? std::string() : rows.error().message;
}

}  // namespace rows7_test

TEST_CASE("bundle rows: format 7's row data is the hand encoding of doc/bundles.md", "[bundle][format][rows7]") {
  using namespace rows7_test;
  const BundleContents c = contents();
  auto w = write_bundle(c, 7);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  REQUIRE(good[8] == 7);
  const RowData d = hand_encoding();
  CHECK(with_rows(good, d) == good);
  // And it reads back to every row, equal to format 6's reading of the same rows.
  auto w6 = write_bundle(c, 6);
  REQUIRE(w6.ok());
  auto r7 = BundleReader::open(good.data(), good.size());
  auto r6 = BundleReader::open(w6->data(), w6->size());
  REQUIRE((r7.ok() && r6.ok()));
  auto a7 = r7->unwind_rows(0), a6 = r6->unwind_rows(0);
  REQUIRE((a7.ok() && a6.ok()));
  const std::vector<UnwindRowRecord>& want = c.modules[0].unwind_rows;
  REQUIRE(a7->size() == want.size());
  REQUIRE(a6->size() == want.size());
  for (size_t i = 0; i < want.size(); i++) {
    INFO("row " << i);
    for (const UnwindRowRecord* g : {&a7.value()[i], &a6.value()[i]}) {
      CHECK(g->pc == want[i].pc);
      CHECK(g->kind == want[i].kind);
      CHECK(g->cfa_reg == want[i].cfa_reg);
      CHECK(g->cfa_off == want[i].cfa_off);
      CHECK(g->ra_reg == want[i].ra_reg);
      CHECK(g->ra_off == want[i].ra_off);
      CHECK(g->nsaved == 0);
    }
    auto x = r7->unwind_row(0, want[i].pc);
    REQUIRE(x.ok());
    CHECK((x->found && x->row.pc == want[i].pc && x->row.cfa_off == want[i].cfa_off));
  }
}

TEST_CASE("bundle rows: hostile format-7 row tables are refused by value", "[bundle][format][rows7][hostile]") {
  using namespace rows7_test;
  auto w = write_bundle(contents(), 7);
  REQUIRE(w.ok());
  // B's successor outside the table.
  CHECK_THAT(rows_error(with_rows(w.value(), hand_encoding({5}))),
             Catch::Contains("unwind-row table row 1: successor 0 at +5") && Catch::Contains("outside the 3 rows"));
  // B with no successors: the row after a B cannot be decoded.
  CHECK_THAT(rows_error(with_rows(w.value(), hand_encoding({}))),
             Catch::Contains("follows table row 1, which has no successors"));
  // Every single-byte corruption of the row data: an error or a valid reader, never a crash.
  size_t errors = 0;
  stackprov::test::bundle_each_corruption(w.value(), [&](const std::vector<uint8_t>& b) { errors += !rows_error(b).empty(); });
  CHECK(errors > 0);
}
