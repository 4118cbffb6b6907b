// SPDX-License-Identifier: Apache-2.0
// Unit tests for FdeIndex over synthetic sections: build(), the in-place .eh_frame_hdr table, gaps, bad tables.
#include <catch2/catch.hpp>

#include "cfi_test_util.hpp"
#include "dwarf/cfi.hpp"

using namespace stackprov::dwarf;
using namespace stackprov::test;

namespace {

constexpr uint64_t kEhVaddr = 0x4000;
constexpr uint64_t kHdrVaddr = 0x3800;

struct Fn {
  uint64_t pc, range;
};

struct Synthetic {
  Built eh;
  std::vector<uint64_t> fde_offsets;  // in the order of `fns`
};

Synthetic make_index_eh(const std::vector<Fn>& fns) {
  Section s;
  Label cie;
  CieSpec c;
  c.instrs = bytes([](Section& i) { i.U8(op::def_cfa).ULEB(7).ULEB(8).U8(op::offset | 16).ULEB(1); });
  emit_cie(s, c, &cie);
  std::vector<Label> at(fns.size());
  for (size_t i = 0; i < fns.size(); ++i) {
    emit_fde(
        s, cie, true, false,
        [&](Section& f) {
          pcrel_sdata4(f, fns[i].pc, kEhVaddr);
          f.U32(fns[i].range).ULEB(0);
        },
        {op::advance_loc | 1, op::def_cfa_offset, static_cast<uint8_t>(16 + i)}, &at[i]);
  }
  s.U32(0);
  Synthetic out;
  out.eh.data = s.Contents();
  out.eh.proto.vaddr = kEhVaddr;
  for (auto& l : at) out.fde_offsets.push_back(l.value());
  return out;
}

/// .eh_frame_hdr with a datarel|sdata4 table over `sorted` (pc, fde offset) pairs.
std::vector<uint8_t> make_hdr(const std::vector<std::pair<uint64_t, uint64_t>>& sorted,
                              uint8_t table_enc = 0x3b, uint8_t count_enc = 0x03, uint8_t version = 1,
                              uint64_t eh_vaddr = kEhVaddr) {
  Section h;
  h.U8(version).U8(0x1b).U8(count_enc).U8(table_enc);
  h.U32(static_cast<uint32_t>(eh_vaddr - (kHdrVaddr + 4)));  // pcrel|sdata4
  h.U32(sorted.size());
  for (auto [pc, off] : sorted) {
    h.U32(static_cast<uint32_t>(pc - kHdrVaddr)).U32(static_cast<uint32_t>(kEhVaddr + off - kHdrVaddr));
  }
  return h.Contents();
}

}  // namespace

TEST_CASE("build() sorts FDEs, skips empty ranges and reports gaps", "[cfi][index]") {
  const std::vector<Fn> fns = {{0x3000, 0x20}, {0x1000, 0x100}, {0x2000, 0x10}, {0x2800, 0}};
  Synthetic syn = make_index_eh(fns);
  const CfiSection sec = syn.eh.sec();
  FdeIndex idx;
  REQUIRE(FdeIndex::build(sec, &idx) == CfiStatus::kOk);
  CHECK(idx.size() == 3);
  FdeInfo f;
  CHECK(idx.lookup(sec, 0xfff, &f) == CfiStatus::kNotFound);
  for (size_t i : {0, 1, 2}) {
    INFO("fn " << i);
    REQUIRE(idx.lookup(sec, fns[i].pc, &f) == CfiStatus::kOk);
    CHECK(f.fde_offset == syn.fde_offsets[i]);
    REQUIRE(idx.lookup(sec, fns[i].pc + fns[i].range - 1, &f) == CfiStatus::kOk);
    CHECK(f.fde_offset == syn.fde_offsets[i]);
    CHECK(idx.lookup(sec, fns[i].pc + fns[i].range, &f) == CfiStatus::kNotFound);
    CfiRow r;
    REQUIRE(find_row(sec, f, fns[i].pc + fns[i].range - 1, &r) == CfiStatus::kOk);
    CHECK(r.cfa.offset == static_cast<int64_t>(16 + i));
  }
  CHECK(idx.lookup(sec, 0x1800, &f) == CfiStatus::kNotFound);  // gap
  CHECK(idx.lookup(sec, 0x2800, &f) == CfiStatus::kNotFound);  // the empty FDE
  CHECK(idx.lookup(sec, ~uint64_t{0}, &f) == CfiStatus::kNotFound);

  FdeIndex none;
  CHECK(none.empty());
  CHECK(none.lookup(sec, 0x1000, &f) == CfiStatus::kNotFound);
}

TEST_CASE("build() keeps going past a bad FDE and stops at a broken chain", "[cfi][index]") {
  Synthetic syn = make_index_eh({{0x1000, 0x10}, {0x2000, 0x10}});
  // Make the first FDE's CIE pointer invalid: that FDE is skipped, the second one stays.
  syn.eh.data[syn.fde_offsets[0] + 7] = 0x7f;
  FdeIndex idx;
  REQUIRE(FdeIndex::build(syn.eh.sec(), &idx) == CfiStatus::kOk);
  CHECK(idx.size() == 1);
  // A length that overruns the section: scanning stops, earlier FDEs survive.
  Synthetic syn2 = make_index_eh({{0x1000, 0x10}, {0x2000, 0x10}});
  syn2.eh.data[syn2.fde_offsets[1] + 3] = 0x40;
  REQUIRE(FdeIndex::build(syn2.eh.sec(), &idx) == CfiStatus::kOk);
  CHECK(idx.size() == 1);
  // Nothing parseable at all.
  std::vector<uint8_t> junk = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3};
  CfiSection js;
  js.data = junk.data();
  js.size = junk.size();
  CHECK(FdeIndex::build(js, &idx) == CfiStatus::kBadCfi);
  // Empty section: an empty index.
  CfiSection empty;
  REQUIRE(FdeIndex::build(empty, &idx) == CfiStatus::kOk);
  CHECK(idx.empty());
}

TEST_CASE("build() over .debug_frame skips FDEs of discarded sections", "[cfi][index]") {
  Section s;
  Label cie;
  CieSpec c;
  c.eh = false;
  c.aug = "";
  c.instrs = {op::def_cfa, 7, 8};
  emit_cie(s, c, &cie);
  emit_fde(s, cie, false, false, [](Section& f) { f.U64(0).U64(0x40); }, {});
  Label real;
  emit_fde(s, cie, false, false, [](Section& f) { f.U64(0x401000).U64(0x40); }, {}, &real);
  Built b;
  b.data = s.Contents();
  b.proto.is_eh_frame = false;
  FdeIndex idx;
  REQUIRE(FdeIndex::build(b.sec(), &idx) == CfiStatus::kOk);
  CHECK(idx.size() == 1);
  FdeInfo f;
  REQUIRE(idx.lookup(b.sec(), 0x401020, &f) == CfiStatus::kOk);
  CHECK(f.fde_offset == real.value());
  CHECK(idx.lookup(b.sec(), 0x20, &f) == CfiStatus::kNotFound);
}

TEST_CASE("the .eh_frame_hdr table is searched in place", "[cfi][index]") {
  const std::vector<Fn> fns = {{0x1000, 0x100}, {0x2000, 0x10}, {0x3000, 0x20}};
  Synthetic syn = make_index_eh(fns);
  const CfiSection sec = syn.eh.sec();
  std::vector<std::pair<uint64_t, uint64_t>> table;
  for (size_t i = 0; i < fns.size(); ++i) table.push_back({fns[i].pc, syn.fde_offsets[i]});
  const std::vector<uint8_t> hdr = make_hdr(table);
  FdeIndex idx;
  REQUIRE(FdeIndex::from_eh_frame_hdr(hdr.data(), hdr.size(), kHdrVaddr, sec, &idx) == CfiStatus::kOk);
  CHECK(idx.size() == 3);
  FdeInfo f;
  for (size_t i = 0; i < fns.size(); ++i) {
    REQUIRE(idx.lookup(sec, fns[i].pc, &f) == CfiStatus::kOk);
    CHECK(f.fde_offset == syn.fde_offsets[i]);
    REQUIRE(idx.lookup(sec, fns[i].pc + fns[i].range - 1, &f) == CfiStatus::kOk);
    CHECK(f.pc_begin == fns[i].pc);
    CHECK(idx.lookup(sec, fns[i].pc + fns[i].range, &f) == CfiStatus::kNotFound);
  }
  CHECK(idx.lookup(sec, 0x10, &f) == CfiStatus::kNotFound);

  SECTION("unsupported and malformed headers") {
    FdeIndex other;
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr(table, 0x1b).data(), hdr.size(), kHdrVaddr, sec, &other) ==
          CfiStatus::kUnsupported);  // pcrel|sdata4 table
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr(table, 0xff).data(), hdr.size(), kHdrVaddr, sec, &other) ==
          CfiStatus::kUnsupported);  // no table
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr(table, 0x3b, 0xff).data(), hdr.size(), kHdrVaddr, sec,
                                      &other) == CfiStatus::kUnsupported);  // no count
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr({}).data(), 12, kHdrVaddr, sec, &other) ==
          CfiStatus::kUnsupported);  // fde_count 0
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr(table, 0x3b, 0x03, 2).data(), hdr.size(), kHdrVaddr, sec,
                                      &other) == CfiStatus::kUnsupported);  // version 2
    CHECK(FdeIndex::from_eh_frame_hdr(hdr.data(), hdr.size() - 1, kHdrVaddr, sec, &other) ==
          CfiStatus::kBadCfi);  // table does not fit
    CHECK(FdeIndex::from_eh_frame_hdr(hdr.data(), 3, kHdrVaddr, sec, &other) == CfiStatus::kBadCfi);
    CHECK(FdeIndex::from_eh_frame_hdr(make_hdr(table, 0x3b, 0x03, 1, 0x5000).data(), hdr.size(), kHdrVaddr,
                                      sec, &other) == CfiStatus::kBadCfi);  // describes another .eh_frame
  }
  SECTION("table entries pointing outside .eh_frame") {
    auto bad = table;
    bad[1].second = 0x100000;
    const std::vector<uint8_t> h = make_hdr(bad);
    FdeIndex other;
    REQUIRE(FdeIndex::from_eh_frame_hdr(h.data(), h.size(), kHdrVaddr, sec, &other) == CfiStatus::kOk);
    CHECK(other.lookup(sec, 0x2000, &f) == CfiStatus::kBadCfi);
    CHECK(other.lookup(sec, 0x1000, &f) == CfiStatus::kOk);
  }
}
