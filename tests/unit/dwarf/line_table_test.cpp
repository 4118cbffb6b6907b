// SPDX-License-Identifier: Apache-2.0
// Unit tests for the DWARF line-program decoder: every opcode, both header forms, lookup rules, hostile input.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dwarf/line_table.hpp"

using namespace stackprov::dwarf;

namespace {

/// Little-endian byte builder for synthetic .debug_line units.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { b.push_back(v); return *this; }
  Bytes& u16(uint16_t v) { return u8(v & 0xff).u8(v >> 8); }
  Bytes& u32(uint32_t v) { return u16(v & 0xffff).u16(v >> 16); }
  Bytes& u64(uint64_t v) { return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32)); }
  Bytes& uleb(uint64_t v) {
    do {
      uint8_t x = v & 0x7f;
      v >>= 7;
      u8(v ? (x | 0x80) : x);
    } while (v);
    return *this;
  }
  Bytes& sleb(int64_t v) {
    for (;;) {
      uint8_t x = v & 0x7f;
      v >>= 7;
      bool done = (v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40));
      u8(done ? x : (x | 0x80));
      if (done) return *this;
    }
  }
  Bytes& str(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return u8(0);
  }
  Bytes& raw(const Bytes& o) {
    b.insert(b.end(), o.b.begin(), o.b.end());
    return *this;
  }
};

constexpr uint8_t kOpcodeBase = 13;
constexpr int8_t kLineBase = -5;
constexpr uint8_t kLineRange = 14;

void common_header_fields(Bytes& h) {
  h.u8(1);            // minimum_instruction_length
  h.u8(1);            // maximum_operations_per_instruction (v4+)
  h.u8(1);            // default_is_stmt
  h.u8(static_cast<uint8_t>(kLineBase)).u8(kLineRange).u8(kOpcodeBase);
  const uint8_t lengths[] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
  for (uint8_t l : lengths) h.u8(l);
}

/// A DWARF 4 unit: dirs {"inc"}, files {a.c (dir 0), b.h (dir 1), /abs/c.h}.
Bytes unit_v4(const Bytes& program) {
  Bytes h;
  common_header_fields(h);
  h.str("inc").u8(0);
  h.str("a.c").uleb(0).uleb(0).uleb(0);
  h.str("b.h").uleb(1).uleb(0).uleb(0);
  h.str("/abs/c.h").uleb(0).uleb(0).uleb(0);
  h.u8(0);
  Bytes body;
  body.u16(4).u32(static_cast<uint32_t>(h.b.size())).raw(h).raw(program);
  Bytes unit;
  unit.u32(static_cast<uint32_t>(body.b.size())).raw(body);
  return unit;
}

/// A DWARF 5 unit with inline strings: dirs {"/cu", "sub"}, files {main.c (0), x.h (1)}.
Bytes unit_v5(const Bytes& program) {
  Bytes h;
  common_header_fields(h);
  h.u8(1).uleb(1).uleb(0x08);  // directory format: DW_LNCT_path, DW_FORM_string
  h.uleb(2).str("/cu").str("sub");
  h.u8(2).uleb(1).uleb(0x08).uleb(2).uleb(0x0b);  // file format: path string, directory_index data1
  h.uleb(2).str("main.c").u8(0).str("x.h").u8(1);
  Bytes body;
  body.u16(5).u8(8).u8(0).u32(static_cast<uint32_t>(h.b.size())).raw(h).raw(program);
  Bytes unit;
  unit.u32(static_cast<uint32_t>(body.b.size())).raw(body);
  return unit;
}

Bytes set_address(uint64_t a) {
  Bytes p;
  p.u8(0).uleb(9).u8(2).u64(a);
  return p;
}
Bytes end_sequence() {
  Bytes p;
  p.u8(0).uleb(1).u8(1);
  return p;
}
uint8_t special(int line_delta, unsigned addr_delta) {
  return static_cast<uint8_t>((line_delta - kLineBase) + kLineRange * addr_delta + kOpcodeBase);
}

LineTable parse(const Bytes& unit, const std::string& comp_dir = "/build") {
  static std::vector<std::vector<uint8_t>> keep;  // string_views in the table point here
  static std::vector<std::string> dirs;
  keep.push_back(unit.b);
  dirs.push_back(comp_dir);
  LineSections s;
  s.line = SectionBytes{keep.back().data(), keep.back().size()};
  auto r = LineTable::parse(s, 0, 8, dirs.back());
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("line table v4: standard, special and extended opcodes") {
  Bytes p;
  p.raw(set_address(0x1000));
  p.u8(5).uleb(7);                 // DW_LNS_set_column 7
  p.u8(1);                         // DW_LNS_copy: 0x1000 line 1 col 7
  p.u8(special(2, 3));             // 0x1003 line 3
  p.u8(0).uleb(2).u8(4).uleb(5);   // DW_LNE_set_discriminator 5
  p.u8(3).sleb(10);                // DW_LNS_advance_line +10 -> 13
  p.u8(2).uleb(4);                 // DW_LNS_advance_pc 4 -> 0x1007
  p.u8(4).uleb(2);                 // DW_LNS_set_file 2
  p.u8(6);                         // DW_LNS_negate_stmt
  p.u8(1);                         // row: 0x1007 line 13 file 2 disc 5, not stmt
  p.u8(8);                         // DW_LNS_const_add_pc: +(255-13)/14 = 17 -> 0x1018
  p.u8(9).u16(0x10);               // DW_LNS_fixed_advance_pc -> 0x1028
  p.u8(10).u8(11).u8(7);           // prologue_end, epilogue_begin, basic_block
  p.u8(12).uleb(1);                // DW_LNS_set_isa
  p.u8(special(-3, 0));            // 0x1028 line 10
  p.u8(0).uleb(3).u8(0x80).u8(0xaa).u8(0xbb);  // unknown extended opcode: skipped by length
  p.u8(2).uleb(8);
  p.raw(end_sequence());           // 0x1030
  LineTable t = parse(unit_v4(p));

  REQUIRE(t.version() == 4);
  REQUIRE(t.sequences().size() == 1);
  CHECK(t.sequences()[0].low == 0x1000);
  CHECK(t.sequences()[0].high == 0x1030);
  const auto& rows = t.rows();
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].address == 0x1000);
  CHECK(rows[0].line == 1);
  CHECK(rows[0].column == 7);
  CHECK(rows[0].is_stmt());
  CHECK(rows[1].address == 0x1003);
  CHECK(rows[1].line == 3);
  CHECK(rows[1].discriminator == 0);
  CHECK(rows[2].address == 0x1007);
  CHECK(rows[2].line == 13);
  CHECK(rows[2].file == 2);
  CHECK(rows[2].discriminator == 5);
  CHECK_FALSE(rows[2].is_stmt());
  CHECK(rows[3].address == 0x1028);
  CHECK(rows[3].line == 10);
  CHECK(rows[3].discriminator == 0);  // reset after each row
  CHECK((rows[3].flags & LineRow::kPrologueEnd));
  CHECK((rows[3].flags & LineRow::kEpilogueBegin));
  CHECK(rows[4].end_sequence());

  CHECK_FALSE(t.lookup(0xfff));
  CHECK(t.lookup(0x1000)->line == 1);
  CHECK(t.lookup(0x1005)->line == 3);
  CHECK(t.lookup(0x1027)->line == 13);
  CHECK(t.lookup(0x102f)->line == 10);
  CHECK_FALSE(t.lookup(0x1030));  // high is exclusive
}

TEST_CASE("line table v4: file paths join comp_dir, include dir and name") {
  Bytes p;
  p.raw(set_address(0x10)).u8(1).u8(2).uleb(1).raw(end_sequence());
  LineTable t = parse(unit_v4(p), "/build");
  std::string s;
  CHECK_FALSE(t.has_file(0));  // file 0 does not exist before DWARF 5
  CHECK_FALSE(t.file_path(0, &s));
  REQUIRE(t.file_path(1, &s));
  CHECK(s == "/build/a.c");
  REQUIRE(t.file_path(2, &s));
  CHECK(s == "/build/inc/b.h");
  REQUIRE(t.file_path(3, &s));
  CHECK(s == "/abs/c.h");
  CHECK_FALSE(t.file_path(4, &s));
}

TEST_CASE("line table v5: file index 0, directory 0 is the compilation directory") {
  Bytes p;
  p.raw(set_address(0x2000));
  p.u8(4).uleb(0).u8(1);       // file 0
  p.u8(4).uleb(1).u8(special(1, 2));
  p.u8(2).uleb(2).raw(end_sequence());
  LineTable t = parse(unit_v5(p), "/ignored-when-dir-absolute");
  REQUIRE(t.version() == 5);
  std::string s;
  REQUIRE(t.has_file(0));
  REQUIRE(t.file_path(0, &s));
  CHECK(s == "/cu/main.c");
  REQUIRE(t.file_path(1, &s));
  CHECK(s == "/ignored-when-dir-absolute/sub/x.h");  // relative include dir: comp_dir first
  CHECK(t.lookup(0x2000)->file == 0);
  CHECK(t.lookup(0x2003)->file == 1);
}

TEST_CASE("line table: several sequences, the last row at an address wins, empty sequences dropped") {
  Bytes p;
  p.raw(set_address(0x3000)).u8(1).u8(3).sleb(4).u8(1);  // two rows at 0x3000: lines 1 and 5
  p.u8(2).uleb(0x10).raw(end_sequence());
  p.raw(set_address(0x500)).raw(end_sequence());         // empty: low == high
  p.raw(set_address(0x100)).u8(3).sleb(99).u8(1).u8(2).uleb(4).raw(end_sequence());
  LineTable t = parse(unit_v4(p));
  REQUIRE(t.sequences().size() == 2);
  CHECK(t.sequences()[0].low == 0x100);  // sorted by high
  CHECK(t.lookup(0x3000)->line == 5);
  CHECK(t.lookup(0x100)->line == 100);
  CHECK_FALSE(t.lookup(0x500));
}

TEST_CASE("line table: hostile input is rejected, never read out of bounds") {
  Bytes p;
  p.raw(set_address(0x10)).u8(1).raw(end_sequence());
  Bytes good = unit_v4(p);
  LineSections s;
  for (size_t cut = 0; cut < good.b.size(); cut++) {  // every truncation
    std::vector<uint8_t> part(good.b.begin(), good.b.begin() + cut);
    s.line = SectionBytes{part.data(), part.size()};
    auto r = LineTable::parse(s, 0, 8, "");
    CHECK_FALSE(r.ok());
  }
  {  // unit length larger than the section
    std::vector<uint8_t> bad = good.b;
    bad[0] = 0xff;
    bad[1] = 0xff;
    s.line = SectionBytes{bad.data(), bad.size()};
    CHECK_FALSE(LineTable::parse(s, 0, 8, "").ok());
  }
  {  // line_range 0 with a special opcode
    Bytes h;
    h.u8(1).u8(1).u8(1).u8(0xfb).u8(0).u8(kOpcodeBase);
    for (int i = 1; i < kOpcodeBase; i++) h.u8(0);
    h.u8(0).u8(0);
    Bytes body;
    body.u16(4).u32(static_cast<uint32_t>(h.b.size())).raw(h).u8(special(0, 1));
    Bytes unit;
    unit.u32(static_cast<uint32_t>(body.b.size())).raw(body);
    s.line = SectionBytes{unit.b.data(), unit.b.size()};
    CHECK_FALSE(LineTable::parse(s, 0, 8, "").ok());
  }
  {  // version out of range, offset out of range
    std::vector<uint8_t> bad = good.b;
    bad[4] = 9;
    s.line = SectionBytes{bad.data(), bad.size()};
    CHECK_FALSE(LineTable::parse(s, 0, 8, "").ok());
    s.line = SectionBytes{good.b.data(), good.b.size()};
    CHECK_FALSE(LineTable::parse(s, good.b.size() + 5, 8, "").ok());
  }
  {  // a row limit bounds the decoder
    Bytes many;
    many.raw(set_address(0));
    for (int i = 0; i < 100; i++) many.u8(special(1, 1));
    many.raw(end_sequence());
    Bytes u = unit_v4(many);
    s.line = SectionBytes{u.b.data(), u.b.size()};
    LineLimits lim;
    lim.max_rows = 10;
    CHECK_FALSE(LineTable::parse(s, 0, 8, "", lim).ok());
    CHECK(LineTable::parse(s, 0, 8, "").ok());
  }
}

TEST_CASE("path_append follows llvm::sys::path::append") {
  std::string p;
  path_append(&p, "/a/");
  path_append(&p, "/b");
  CHECK(p == "/a/b");
  std::string q = "/x";
  path_append(&q, "");
  path_append(&q, "y.c");
  CHECK(q == "/x/y.c");
}
