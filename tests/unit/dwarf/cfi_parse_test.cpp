// SPDX-License-Identifier: Apache-2.0
// Unit tests for decode_fde / read_encoded_pointer: augmentations, encodings, .debug_frame versions, malformed bytes.
#include <catch2/catch.hpp>

#include <random>

#include "cfi_test_util.hpp"
#include "dwarf/cfi.hpp"

using namespace stackprov::dwarf;
using namespace stackprov::test;

namespace {

constexpr uint64_t kParseVaddr = 0x4000;

std::vector<uint8_t> parse_x86_cie_instrs() {
  return bytes([](Section& s) { s.U8(op::def_cfa).ULEB(7).ULEB(8).U8(op::offset | 16).ULEB(1); });
}

/// CIE `c` followed by one FDE whose fields (after the CIE pointer) are written by `fields`.
Built make(const CieSpec& c, const std::function<void(Section&)>& fields, bool big_endian = false,
           const std::vector<uint8_t>& fde_instrs = {}) {
  Section s(big_endian);
  Label cie, fde;
  emit_cie(s, c, &cie);
  emit_fde(s, cie, c.eh, c.dwarf64, fields, fde_instrs, &fde);
  Built b;
  b.data = s.Contents();
  b.proto.vaddr = c.eh ? kParseVaddr : 0;
  b.proto.is_eh_frame = c.eh;
  b.proto.big_endian = big_endian;
  b.fde_offset = fde.value();
  return b;
}

FdeInfo must_decode(const Built& b) {
  FdeInfo f;
  REQUIRE(decode_fde(b.sec(), b.fde_offset, &f) == CfiStatus::kOk);
  return f;
}

CfiStatus decode(const Built& b) {
  FdeInfo f;
  return decode_fde(b.sec(), b.fde_offset, &f);
}

}  // namespace

TEST_CASE("zPLR with indirect personality and pc-relative LSDA", "[cfi][parse]") {
  CieSpec c;
  c.aug = "zPLR";
  c.instrs = parse_x86_cie_instrs();
  c.aug_data = bytes([](Section& s) {
    s.U8(pe::indirect | pe::pcrel | pe::sdata4).U32(0x1234);  // personality (skipped)
    s.U8(pe::pcrel | pe::sdata4);                             // L
    s.U8(pe::pcrel | pe::sdata4);                             // R
  });
  Built b = make(c, [](Section& f) {
    pcrel_sdata4(f, 0x1000, kParseVaddr);
    f.U32(0x80).ULEB(4);
    pcrel_sdata4(f, 0x9000, kParseVaddr);
  });
  FdeInfo f = must_decode(b);
  CHECK(f.pc_begin == 0x1000);
  CHECK(f.pc_end == 0x1080);
  CHECK(f.fde_encoding == (pe::pcrel | pe::sdata4));
  CHECK(f.code_align == 1);
  CHECK(f.data_align == -8);
  CHECK(f.ra_reg == 16);
  CHECK(f.cie_offset == 0);
  CHECK(f.fde_offset == b.fde_offset);
  CHECK(f.cie_instr_len == parse_x86_cie_instrs().size());
  CHECK(f.fde_instr_len == 0);
  CHECK_FALSE(f.signal_frame);
}

TEST_CASE("zPLR with absolute udata8 personality, udata4 LSDA and pointers", "[cfi][parse]") {
  CieSpec c;
  c.aug = "zPLR";
  c.aug_data = bytes([](Section& s) {
    s.U8(pe::absptr).U64(0x1122334455667788);
    s.U8(pe::udata4).U8(pe::udata4);
  });
  const auto instrs = bytes([](Section& s) { s.U8(op::def_cfa_offset).ULEB(16); });
  Built b = make(c, [](Section& f) { f.U32(0x1000).U32(0x100).ULEB(4).U32(0x8000); }, false, instrs);
  FdeInfo f = must_decode(b);
  CHECK(f.pc_begin == 0x1000);
  CHECK(f.pc_end == 0x1100);
  CHECK(f.fde_instr_len == instrs.size());
  CHECK(b.data[f.fde_instr_offset] == op::def_cfa_offset);
}

TEST_CASE("LEB128 personality, sdata8 pointers, extra FDE augmentation bytes", "[cfi][parse]") {
  CieSpec c;
  c.aug = "zPR";
  c.aug_data = bytes([](Section& s) { s.U8(pe::uleb128).ULEB(0x123456789).U8(pe::sdata8); });
  Built b = make(c, [](Section& f) { f.U64(0x7000).U64(0x20).ULEB(3).Append({1, 2, 3}); }, false,
                 {op::nop});
  FdeInfo f = must_decode(b);
  CHECK(f.pc_begin == 0x7000);
  CHECK(f.pc_end == 0x7020);
  CHECK(f.fde_instr_len == 1);  // the 3 augmentation bytes were skipped by length
}

TEST_CASE("pointer encodings for pc_begin", "[cfi][parse]") {
  SECTION("datarel|sdata4") {
    CieSpec c;
    c.aug_data = {pe::datarel | pe::sdata4};
    Built b = make(c, [](Section& f) { f.U32(static_cast<uint32_t>(-0xf000)).U32(0x10).ULEB(0); });
    b.proto.data_vaddr = 0x10000;
    FdeInfo f = must_decode(b);
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.pc_end == 0x1010);
  }
  SECTION("textrel|udata2, range udata2") {
    CieSpec c;
    c.aug_data = {pe::textrel | pe::udata2};
    Built b = make(c, [](Section& f) { f.U16(0x800).U16(0x10).ULEB(0); });
    b.proto.text_vaddr = 0x800;
    FdeInfo f = must_decode(b);
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.pc_end == 0x1010);
  }
  SECTION("uleb128") {
    CieSpec c;
    c.aug_data = {pe::uleb128};
    FdeInfo f = must_decode(make(c, [](Section& f) { f.ULEB(0x400000).ULEB(0x300).ULEB(0); }));
    CHECK(f.pc_begin == 0x400000);
    CHECK(f.pc_end == 0x400300);
  }
  SECTION("pcrel|sleb128 pointing backwards") {
    CieSpec c;
    c.aug_data = {pe::pcrel | pe::sleb128};
    Built b = make(c, [](Section& f) {
      // field at section offset o: value = 0x1000 - (kParseVaddr + o); SLEB can't use labels, so compute.
      f.SLEB(0x1000 - static_cast<int64_t>(kParseVaddr + f.Size())).SLEB(0x40).ULEB(0);
    });
    FdeInfo f = must_decode(b);
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.pc_end == 0x1040);
  }
  SECTION("sdata2 is sign-extended") {
    CieSpec c;
    c.aug_data = {pe::sdata2};
    Built b = make(c, [](Section& f) { f.U16(0xfff0).U16(0x20).ULEB(0); });
    FdeInfo f;
    CHECK(decode_fde(b.sec(), b.fde_offset, &f) == CfiStatus::kBadCfi);  // wraps past the top
  }
  SECTION("indirect pc_begin is unsupported, funcrel is rejected") {
    CieSpec c;
    c.aug_data = {pe::indirect | pe::pcrel | pe::sdata4};
    CHECK(decode(make(c, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); })) == CfiStatus::kUnsupported);
    c.aug_data = {pe::funcrel | pe::udata4};
    CHECK(decode(make(c, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); })) == CfiStatus::kBadCfi);
    c.aug_data = {0x07};  // not a value format
    CHECK(decode(make(c, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); })) == CfiStatus::kBadCfi);
  }
}

TEST_CASE("augmentation strings", "[cfi][parse]") {
  SECTION("S marks a signal frame") {
    CieSpec c;
    c.aug = "zRS";
    c.instrs = parse_x86_cie_instrs();
    Built b = make(c, [](Section& f) {
      pcrel_sdata4(f, 0x1000, kParseVaddr);
      f.U32(0x10).ULEB(0);
    });
    FdeInfo f = must_decode(b);
    CHECK(f.signal_frame);
    CfiRow r;
    REQUIRE(find_row(b.sec(), f, 0x1000, &r) == CfiStatus::kOk);
    CHECK(r.signal_frame);
  }
  SECTION("L with omit encoding") {
    CieSpec c;
    c.aug = "zLR";
    c.aug_data = {pe::omit, pe::udata4};
    FdeInfo f = must_decode(make(c, [](Section& f) { f.U32(0x1000).U32(0x10).ULEB(0); }));
    CHECK(f.pc_end == 0x1010);
    CHECK(f.fde_instr_len == 0);  // no LSDA pointer in the FDE's augmentation data
  }
  SECTION("unknown letters after z are skipped by the augmentation length") {
    CieSpec c;
    c.aug = "zRX";
    c.aug_data = {pe::udata4, 0xaa, 0xbb};
    c.instrs = {op::nop};
    FdeInfo f = must_decode(make(c, [](Section& f) { f.U32(0x1000).U32(0x10).ULEB(0); }));
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.cie_instr_len == 1);
  }
  SECTION("B (arm64 B-key) carries no data") {
    CieSpec c;
    c.aug = "zRB";
    c.aug_data = {pe::udata4};
    CHECK(must_decode(make(c, [](Section& f) { f.U32(0x1000).U32(0x10).ULEB(0); })).pc_end == 0x1010);
  }
  SECTION("empty augmentation in .eh_frame uses absptr") {
    CieSpec c;
    c.aug = "";
    FdeInfo f = must_decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); }));
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.fde_encoding == pe::absptr);
  }
  SECTION("GCC's ancient eh augmentation and unknown non-z strings are unsupported") {
    CieSpec c;
    c.aug = "eh";
    CHECK(decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); })) == CfiStatus::kUnsupported);
    c.aug = "abc";
    CHECK(decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); })) == CfiStatus::kUnsupported);
  }
  SECTION("augmentation data longer than the CIE") {
    CieSpec c;
    c.aug_data = {pe::udata4};
    Built b = make(c, [](Section& f) { f.U32(0x1000).U32(0x10).ULEB(0); });
    // Patch the 'z' length byte (right after ra) to 0x7f.
    const size_t zlen_at = 4 + 4 + 1 + 3 + 1 + 1 + 1;  // length, id, version, "zR\0", caf, daf, ra
    REQUIRE(b.data[zlen_at] == 1);
    b.data[zlen_at] = 0x7f;
    CHECK(decode(b) == CfiStatus::kBadCfi);
  }
}

TEST_CASE(".debug_frame versions 1, 3 and 4", "[cfi][parse]") {
  SECTION("v1: CIE pointer is a section offset, ra is a byte") {
    Section s;
    Label cie0, cie1, fde;
    CieSpec c;
    c.eh = false;
    c.aug = "";
    c.instrs = bytes([](Section& i) { i.U8(op::def_cfa).ULEB(6).ULEB(16); });
    emit_cie(s, c, &cie0);
    c.instrs = parse_x86_cie_instrs();
    emit_cie(s, c, &cie1);
    emit_fde(s, cie1, false, false, [](Section& f) { f.U64(0x401000).U64(0x30); },
             {op::advance_loc | 4, op::def_cfa_offset, 16}, &fde);
    Built b;
    b.data = s.Contents();
    b.proto.is_eh_frame = false;
    b.fde_offset = fde.value();
    FdeInfo f = must_decode(b);
    CHECK(f.cie_offset == cie1.value());
    CHECK(f.cie_version == 1);
    CHECK(f.pc_begin == 0x401000);
    CHECK(f.pc_end == 0x401030);
    CfiRow r;
    REQUIRE(find_row(b.sec(), f, 0x401003, &r) == CfiStatus::kOk);
    CHECK(r.cfa.reg == 7);
    CHECK(r.cfa.offset == 8);
    CHECK(r.end == 0x401004);
  }
  SECTION("v3: ra is ULEB") {
    CieSpec c;
    c.eh = false;
    c.aug = "";
    c.version = 3;
    c.ra = 33;
    c.code_align = 4;
    c.data_align = -8;
    FdeInfo f = must_decode(make(c, [](Section& f) { f.U64(0x2000).U64(0x40); }));
    CHECK(f.ra_reg == 33);
    CHECK(f.cie_version == 3);
    CHECK(f.code_align == 4);
  }
  SECTION("v4: address_size from the CIE overrides the section's") {
    CieSpec c;
    c.eh = false;
    c.aug = "";
    c.version = 4;
    c.v4_addr_size = 4;
    c.ra = 31;
    Built b = make(c, [](Section& f) { f.U32(0x400100).U32(0x40); }, /*big_endian=*/true);
    FdeInfo f = must_decode(b);
    CHECK(f.addr_size == 4);
    CHECK(f.pc_begin == 0x400100);
    CHECK(f.pc_end == 0x400140);
  }
  SECTION("v4: segment selectors and odd address sizes are unsupported") {
    CieSpec c;
    c.eh = false;
    c.aug = "";
    c.version = 4;
    c.v4_seg_size = 2;
    CHECK(decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); })) == CfiStatus::kUnsupported);
    c.v4_seg_size = 0;
    c.v4_addr_size = 2;
    CHECK(decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); })) == CfiStatus::kUnsupported);
  }
  SECTION("unknown versions") {
    CieSpec c;
    c.eh = false;
    c.aug = "";
    c.version = 2;
    CHECK(decode(make(c, [](Section& f) { f.U64(0x1000).U64(0x10); })) == CfiStatus::kUnsupported);
    CieSpec e;
    e.version = 4;  // .eh_frame knows 1 and 3 only
    CHECK(decode(make(e, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); })) == CfiStatus::kUnsupported);
  }
}

TEST_CASE("64-bit DWARF lengths and ids", "[cfi][parse]") {
  SECTION(".debug_frame") {
    CieSpec c;
    c.eh = false;
    c.dwarf64 = true;
    c.aug = "";
    c.version = 3;
    c.instrs = parse_x86_cie_instrs();
    Built b = make(c, [](Section& f) { f.U64(0x5000).U64(0x50); }, false, {op::advance_loc | 2});
    FdeInfo f = must_decode(b);
    CHECK(f.pc_begin == 0x5000);
    CHECK(f.pc_end == 0x5050);
    CfiRow r;
    REQUIRE(find_row(b.sec(), f, 0x5001, &r) == CfiStatus::kOk);
    CHECK(r.end == 0x5002);
    CHECK(r.regs[16].offset == -8);
  }
  SECTION(".eh_frame") {
    CieSpec c;
    c.dwarf64 = true;
    Built b = make(c, [](Section& f) {
      pcrel_sdata4(f, 0x1000, kParseVaddr);
      f.U32(0x10).ULEB(0);
    });
    FdeInfo f = must_decode(b);
    CHECK(f.pc_begin == 0x1000);
    CHECK(f.pc_end == 0x1010);
  }
  SECTION("reserved length values") {
    CieSpec c;
    Built b = make(c, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); });
    b.data[0] = 0xf0;
    b.data[1] = b.data[2] = b.data[3] = 0xff;
    CHECK(decode(b) == CfiStatus::kBadCfi);
  }
}

TEST_CASE("big-endian 32-bit .debug_frame (mips-like)", "[cfi][parse]") {
  CieSpec c;
  c.eh = false;
  c.aug = "";
  c.code_align = 4;
  c.data_align = -4;
  c.ra = 31;
  c.instrs = bytes([](Section& i) { i.U8(op::def_cfa).ULEB(29).ULEB(0); });
  Built b = make(c, [](Section& f) { f.U32(0x400100).U32(0x40); }, true,
                 bytes([](Section& i) {
                   i.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(32).U8(op::offset | 31).ULEB(1);
                   i.U8(op::advance_loc2).U16(0x0102);
                 }, true));
  b.proto.addr_size = 4;
  FdeInfo f = must_decode(b);
  CHECK(f.pc_begin == 0x400100);
  CHECK(f.pc_end == 0x400140);
  CfiRow r;
  REQUIRE(find_row(b.sec(), f, 0x400104, &r) == CfiStatus::kOk);
  CHECK(r.start == 0x400104);
  CHECK(r.end == 0x400140);  // advance_loc2 0x102*4 is past pc_end: clamped
  CHECK(r.cfa.reg == 29);
  CHECK(r.cfa.offset == 32);
  CHECK(r.regs[31].kind == RegRuleKind::kOffset);
  CHECK(r.regs[31].offset == -4);
}

TEST_CASE("decode_fde on CIEs, terminators and bad CIE pointers", "[cfi][parse]") {
  CieSpec c;
  Built b = make(c, [](Section& f) { f.U32(0).U32(0x10).ULEB(0); });
  FdeInfo f;
  CHECK(decode_fde(b.sec(), 0, &f) == CfiStatus::kBadCfi);  // a CIE
  CHECK(decode_fde(b.sec(), b.data.size(), &f) == CfiStatus::kBadCfi);
  CHECK(decode_fde(b.sec(), b.data.size() + 100, &f) == CfiStatus::kBadCfi);
  // CIE pointer that leads before the section.
  Built p = b;
  p.data[p.fde_offset + 4] = 0xff;
  p.data[p.fde_offset + 5] = 0xff;
  CHECK(decode(p) == CfiStatus::kBadCfi);
  // CIE pointer to an FDE (itself).
  Built self = b;
  self.data[self.fde_offset + 4] = 4;
  self.data[self.fde_offset + 5] = self.data[self.fde_offset + 6] = self.data[self.fde_offset + 7] = 0;
  CHECK(decode(self) == CfiStatus::kBadCfi);
  // .debug_frame CIE pointer beyond the section.
  CieSpec d;
  d.eh = false;
  d.aug = "";
  Built dbg = make(d, [](Section& f) { f.U64(0x1000).U64(0x10); });
  dbg.data[dbg.fde_offset + 4] = 0x00;
  dbg.data[dbg.fde_offset + 7] = 0x10;
  CHECK(decode(dbg) == CfiStatus::kBadCfi);
}

TEST_CASE("every truncation of a valid CIE+FDE is rejected", "[cfi][parse][robust]") {
  CieSpec c;
  c.aug = "zPLR";
  c.instrs = parse_x86_cie_instrs();
  c.aug_data = bytes([](Section& s) {
    s.U8(pe::indirect | pe::pcrel | pe::sdata4).U32(0x1234).U8(pe::pcrel | pe::sdata4).U8(pe::pcrel | pe::sdata4);
  });
  const auto instrs = bytes([](Section& s) {
    s.U8(op::advance_loc | 1).U8(op::def_cfa_offset).ULEB(16).U8(op::offset | 6).ULEB(2);
    s.U8(op::advance_loc1).U8(20).U8(op::def_cfa_register).ULEB(6);
  });
  const Built full = make(c, [](Section& f) {
    pcrel_sdata4(f, 0x1000, kParseVaddr);
    f.U32(0x80).ULEB(4);
    pcrel_sdata4(f, 0x9000, kParseVaddr);
  }, false, instrs);
  FdeInfo ok = must_decode(full);
  CHECK(ok.fde_instr_len == instrs.size());

  // (1) The section ends early: the entry lengths overrun it.
  for (size_t n = 0; n < full.data.size(); ++n) {
    INFO("section size " << n);
    Built t = full;
    t.data.resize(n);
    FdeInfo f;
    CHECK(decode_fde(t.sec(), t.fde_offset, &f) == CfiStatus::kBadCfi);
    FdeIndex idx;
    const CfiStatus st = FdeIndex::build(t.sec(), &idx);
    CHECK((st == CfiStatus::kBadCfi || (st == CfiStatus::kOk && idx.empty())));
    CHECK(idx.lookup(t.sec(), 0x1000, &f) == CfiStatus::kNotFound);
  }
  // (2) The FDE's own length shrinks: fields run past the entry.
  const uint32_t fde_len = full.data[full.fde_offset];  // < 256 here
  const uint32_t instr_at = ok.fde_instr_offset - full.fde_offset - 4;
  for (uint32_t len = 0; len < fde_len; ++len) {
    INFO("fde length " << len);
    Built t = full;
    t.data[t.fde_offset] = static_cast<uint8_t>(len);
    FdeInfo f;
    const CfiStatus st = decode_fde(t.sec(), t.fde_offset, &f);
    if (len < instr_at) {
      CHECK(st == CfiStatus::kBadCfi);
      continue;
    }
    REQUIRE(st == CfiStatus::kOk);
    CHECK(f.fde_instr_len == len - instr_at);
    // Shortened programs either stop at an op boundary (ok) or are cut inside an op.
    CfiRow r;
    const CfiStatus rs = find_row(t.sec(), f, 0x107f, &r);
    const uint32_t n = len - instr_at;
    const bool boundary = n == 0 || n == 1 || n == 3 || n == 5 || n == 7 || n == 9 || n == 11;
    CHECK(rs == (boundary ? CfiStatus::kOk : CfiStatus::kBadCfi));
  }
  // (3) The CIE's length shrinks.
  const uint32_t cie_len = full.data[0];
  for (uint32_t len = 0; len < cie_len; ++len) {
    Built t = full;
    t.data[0] = static_cast<uint8_t>(len);
    FdeInfo f;
    const CfiStatus st = decode_fde(t.sec(), t.fde_offset, &f);
    INFO("cie length " << len);
    // Cutting only the initial instructions leaves a valid (shorter) CIE.
    const bool in_instrs = len >= cie_len - parse_x86_cie_instrs().size();
    if (!in_instrs) CHECK(st == CfiStatus::kBadCfi);
  }
}

TEST_CASE("random bytes never crash the parser", "[cfi][parse][robust]") {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> data(rng() % 200);
    for (auto& v : data) v = static_cast<uint8_t>(rng());
    // Give half of the inputs a plausible first length so parsing gets deeper.
    if (iter % 2 && data.size() >= 8) {
      data[0] = static_cast<uint8_t>(data.size() / 2);
      data[1] = data[2] = data[3] = 0;
      data[4] = data[5] = data[6] = data[7] = 0;
    }
    CfiSection sec;
    sec.data = data.data();
    sec.size = data.size();
    sec.is_eh_frame = iter % 3 != 0;
    sec.big_endian = iter % 5 == 0;
    sec.addr_size = iter % 7 == 0 ? 4 : 8;
    FdeIndex idx;
    if (FdeIndex::build(sec, &idx) == CfiStatus::kOk) {
      for (uint64_t off = 0; off < data.size(); off += 4) {
        FdeInfo f;
        if (decode_fde(sec, off, &f) == CfiStatus::kOk) {
          CfiRow r;
          (void)find_row(sec, f, f.pc_begin, &r);
          (void)find_row(sec, f, f.pc_end - 1, &r);
        }
      }
    }
  }
  SUCCEED("no crash");
}

TEST_CASE("read_encoded_pointer", "[cfi][parse]") {
  CfiSection sec;
  sec.data_vaddr = 0x10000;
  sec.text_vaddr = 0x20000;
  const std::vector<uint8_t> d = bytes([](Section& s) {
    s.U32(0xfffffff0).ULEB(300).SLEB(-2).U16(0x8000).U64(0x123456789a);
  });
  size_t pos = 0;
  uint64_t v = 0;
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::pcrel | pe::sdata4, 0x1000, sec, &v));
  CHECK(v == 0x1000 - 0x10);
  CHECK(pos == 4);
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::datarel | pe::uleb128, 0, sec, &v));
  CHECK(v == 0x10000 + 300);
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::textrel | pe::sleb128, 0, sec, &v));
  CHECK(v == 0x20000 - 2);
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::sdata2, 0, sec, &v));
  CHECK(v == 0xffffffffffff8000);
  size_t p2 = pos;
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::absptr, 0, sec, &v));
  CHECK(v == 0x123456789a);
  CHECK(pos == d.size());
  CHECK_FALSE(read_encoded_pointer(d.data(), d.size(), &pos, pe::udata4, 0, sec, &v));  // at end
  CHECK_FALSE(read_encoded_pointer(d.data(), d.size(), &p2, pe::indirect | pe::udata4, 0, sec, &v));
  CHECK_FALSE(read_encoded_pointer(d.data(), d.size(), &p2, pe::omit, 0, sec, &v));
  CHECK_FALSE(read_encoded_pointer(d.data(), d.size(), &p2, pe::funcrel | pe::udata4, 0, sec, &v));
  // 32-bit targets wrap at 32 bits.
  CfiSection s32;
  s32.addr_size = 4;
  pos = 0;
  REQUIRE(read_encoded_pointer(d.data(), d.size(), &pos, pe::pcrel | pe::sdata4, 0x8, s32, &v));
  CHECK(v == 0xfffffff8);
}
