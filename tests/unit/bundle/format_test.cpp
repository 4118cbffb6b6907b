// SPDX-License-Identifier: Apache-2.0
// Bundle file format: round trip against the input records, determinism, hostile bytes, limits.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "bundle/format.hpp"
#include "evidence/encoding.hpp"

using namespace stackprov::bundle;

namespace {

RangeRecord rr(uint64_t start, uint32_t len, uint16_t depth, std::string fn, std::string file, uint32_t line,
               uint32_t col, std::string cfile = "", uint32_t cline = 0, uint32_t ccol = 0) {
  return RangeRecord{start, len, depth, std::move(fn), std::move(file), line, col, std::move(cfile), cline, ccol};
}

UnwindRowRecord row(uint64_t pc, uint8_t kind, uint8_t cfa_reg, int32_t cfa_off, int8_t ra_off,
                    std::vector<std::pair<uint8_t, int8_t>> saved = {}) {
  UnwindRowRecord r;
  r.pc = pc;
  r.kind = kind;
  r.cfa_reg = cfa_reg;
  r.cfa_off = cfa_off;
  r.ra_off = ra_off;
  r.nsaved = static_cast<uint8_t>(saved.size());
  for (size_t i = 0; i < saved.size(); i++) {
    r.saved_reg[i] = saved[i].first;
    r.saved_off[i] = saved[i].second;
  }
  return r;
}

/// A generated module: `nfunc` functions, each with nested inline ranges (deterministic).
ModuleContents generated_module(uint8_t seed, size_t nfunc) {
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, std::vector<uint8_t>(20, seed)};
  m.name = "gen" + std::to_string(seed) + ".so";
  std::mt19937 rng(seed);
  uint64_t pc = 0x10000;
  for (size_t f = 0; f < nfunc; f++) {
    const uint32_t len = 64 + rng() % 512;
    const std::string fn = "_Z4gen" + std::to_string(f) + "v";
    // Depth 0 split in two line records; an inlined callee in the middle, with its own callee.
    m.ranges.push_back(rr(pc, len / 2, 0, fn, "gen.c", 100 + static_cast<uint32_t>(f), 1));
    m.ranges.push_back(rr(pc + len / 2, len - len / 2, 0, fn, "gen.c", 101 + static_cast<uint32_t>(f), 3));
    const uint64_t s1 = pc + 8 + rng() % 16, l1 = len / 3;
    m.ranges.push_back(rr(s1, static_cast<uint32_t>(l1), 1, "inl_" + std::to_string(f % 7), "inl.h", 20, 2, "gen.c",
                          100 + static_cast<uint32_t>(f), 9));
    if (f % 3 == 0)
      m.ranges.push_back(rr(s1 + 4, static_cast<uint32_t>(l1 / 2), 2, "leaf", "leaf.h", 5, 7, "inl.h", 21, 4));
    m.return_pads.push_back({pc + 5, {{fn, "gen.c", 100 + static_cast<uint32_t>(f), 1}}});
    m.unwind_rows.push_back(row(pc, UnwindRowRecord::kCfaReg, 7, 8, -1));
    m.unwind_rows.push_back(row(pc + 4, UnwindRowRecord::kCfaReg, 7, 16, -1, {{6, -2}}));
    m.unwind_rows.push_back(row(pc + len - 1, UnwindRowRecord::kCfaReg, 7, 8, -1));
    pc += len + (f % 5 == 0 ? 32 : 0);  // a few gaps without symbols
  }
  m.unwind_rows.push_back(row(pc, UnwindRowRecord::kNoInfo, 0, 0, 0));
  return m;
}

BundleContents sample_contents() {
  BundleContents c;
  ModuleContents a;
  a.id = {IdKind::kElfBuildId, {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
  a.name = "libdemo.so.1";
  a.sha256_file.fill(0x11);
  a.sha256_debug.fill(0x22);
  a.ranges = {
      rr(0x1000, 0x40, 0, "main", "main.c", 10, 1),
      rr(0x1040, 0xc0, 0, "main", "main.c", 12, 3),
      rr(0x1040, 0x40, 1, "_ZL5inl_av", "inl.h", 30, 5, "main.c", 12, 7),
      rr(0x1050, 0x10, 2, "_ZL5inl_bv", "inl2.h", 40, 9, "inl.h", 31, 11),
      rr(0x1090, 0x10, 1, "_ZL5inl_av", "inl.h", 32, 5, "main.c", 14, 7),
      rr(0x1200, 0x80, 0, "_Z3fooi", "foo.cc", 3, 0),
  };
  a.return_pads = {
      {0x1055, {{"main", "main.c", 12, 7}, {"_ZL5inl_av", "inl.h", 31, 11}, {"_ZL5inl_bv", "inl2.h", 41, 2}}},
      {0x1205, {{"_Z3fooi", "foo.cc", 4, 2}}},
  };
  a.unwind_rows = {row(0x1000, UnwindRowRecord::kCfaReg, 7, 8, -1),
                   row(0x1001, UnwindRowRecord::kCfaReg, 7, 16, -1, {{6, -2}}),
                   row(0x1004, UnwindRowRecord::kCfaReg, 6, 16, -1, {{6, -2}, {3, -3}, {12, -4}}),
                   row(0x1100, UnwindRowRecord::kNoInfo, 0, 0, 0),
                   row(0x1200, UnwindRowRecord::kEndOfStack, 7, 8, 0),
                   row(0x1280, UnwindRowRecord::kFull, 7, 0, 0)};
  a.unwind_rows[2].signal_frame = true;
  a.unwind_rows[2].ra_kind = UnwindRowRecord::kRaSameValue;
  a.unwind_rows[2].ra_reg = 30;
  a.unwind_rows[5].from_debug_frame = true;
  c.modules.push_back(a);

  ModuleContents b;  // PDB identity: GUID + age
  b.id = {IdKind::kPdbGuidAge, std::vector<uint8_t>(20, 0x5a)};
  b.name = "demo.pdb";
  b.ranges = {rr(0x401000, 0x20, 0, "?f@@YAXXZ", "f.cpp", 7, 0)};
  b.debug_blob = {'P', 'D', 'B', 0, 1, 2, 3};
  c.modules.push_back(b);

  ModuleContents m;  // Mach-O UUID, no records at all
  m.id = {IdKind::kMachoUuid, std::vector<uint8_t>(16, 0x33)};
  m.name = "libmac.dylib";
  c.modules.push_back(m);

  c.modules.push_back(generated_module(7, 300));
  c.modules.push_back(generated_module(9, 50));

  // One long function: more depth-0 records than a group holds, with inlined ranges that
  // cross the group boundaries (written as pieces, the first flagged "continues"), and
  // depth-0 records whose position is the inlined call site (stored as inherited).
  ModuleContents l;
  l.id = {IdKind::kElfBuildId, std::vector<uint8_t>(20, 0x77)};
  l.name = "long.so";
  for (uint32_t i = 0; i < 40; i++) {
    const bool at_call = i >= 3 && i <= 26;
    l.ranges.push_back(rr(0x2000 + 4 * i, 4, 0, "long", "long.c", at_call ? 5 : 100 + i, at_call ? 1 : i % 3));
  }
  l.ranges.push_back(rr(0x200a, 0x64, 1, "inl", "inl.h", 7, 2, "long.c", 5, 1));
  l.ranges.push_back(rr(0x2014, 0x3c, 2, "leaf", "leaf.h", 9, 4, "inl.h", 8, 3));
  l.ranges.push_back(rr(0x2078, 0x1e, 1, "inl2", "inl.h", 20, 2, "long.c", 130, 6));
  l.return_pads = {{0x2031, {{"long", "long.c", 5, 1}, {"inl", "inl.h", 8, 3}, {"leaf", "leaf.h", 9, 4}}},
                   {0x2046, {{"long", "long.c", 5, 1}, {"inl", "inl.h", 8, 3}, {"leaf", "leaf.h", 10, 4}}}};
  c.modules.push_back(l);
  return c;
}

/// Independent answer: the chain at `addr` by a linear scan over the input ranges.
std::vector<FrameRecord> naive_chain(const ModuleContents& m, uint64_t addr) {
  std::vector<const RangeRecord*> hits;
  for (uint16_t d = 0;; d++) {
    const RangeRecord* hit = nullptr;
    for (const RangeRecord& r : m.ranges)
      if (r.depth == d && addr >= r.start && addr - r.start < r.length) hit = &r;
    if (hit == nullptr) break;
    hits.push_back(hit);
  }
  std::vector<FrameRecord> out;
  for (size_t i = 0; i < hits.size(); i++) {
    const RangeRecord* pos = i + 1 < hits.size() ? hits[i + 1] : hits[i];
    const bool call = i + 1 < hits.size();
    out.push_back({hits[i]->function, call ? pos->call_file : pos->file, call ? pos->call_line : pos->line,
                   call ? pos->call_column : pos->column});
  }
  return out;
}

void check_frames(const std::vector<FrameView>& got, const std::vector<FrameRecord>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); i++) {
    CHECK(got[i].function == want[i].function);
    CHECK(got[i].file == want[i].file);
    CHECK(got[i].line == want[i].line);
    CHECK(got[i].column == want[i].column);
  }
}

void check_row(const UnwindRowRecord& got, const UnwindRowRecord& want) {
  CHECK(got.pc == want.pc);
  CHECK(got.kind == want.kind);
  CHECK(got.cfa_reg == want.cfa_reg);
  CHECK(got.cfa_off == want.cfa_off);
  CHECK(got.ra_kind == want.ra_kind);
  CHECK(got.ra_reg == want.ra_reg);
  CHECK(got.ra_off == want.ra_off);
  CHECK(got.signal_frame == want.signal_frame);
  CHECK(got.from_debug_frame == want.from_debug_frame);
  REQUIRE(got.nsaved == want.nsaved);
  for (size_t i = 0; i < want.nsaved; i++) {
    CHECK(got.saved_reg[i] == want.saved_reg[i]);
    CHECK(got.saved_off[i] == want.saved_off[i]);
  }
}

/// Every address of interest of a module: range edges +-1 and a stride through them.
std::vector<uint64_t> probe_addresses(const ModuleContents& m) {
  std::vector<uint64_t> a = {0, 1, UINT64_MAX};
  for (const RangeRecord& r : m.ranges)
    for (uint64_t x : {r.start - 1, r.start, r.start + 1, r.start + r.length - 1, r.start + r.length}) a.push_back(x);
  for (const UnwindRowRecord& r : m.unwind_rows)
    for (uint64_t x : {r.pc - 1, r.pc, r.pc + 1}) a.push_back(x);
  for (const ReturnPadRecord& p : m.return_pads)
    for (uint64_t x : {p.addr - 1, p.addr, p.addr + 1}) a.push_back(x);
  return a;
}

void check_against_input(const BundleReader& rd, const BundleContents& c) {
  REQUIRE(rd.modules().size() == c.modules.size());
  for (const ModuleContents& m : c.modules) {
    const ModuleView* v = rd.find_module(m.id.kind, m.id.bytes);
    REQUIRE(v != nullptr);
    CHECK(v->name == m.name);
    CHECK(std::equal(v->id.begin(), v->id.end(), m.id.bytes.begin(), m.id.bytes.end()));
    CHECK(v->sha256_file == m.sha256_file);
    CHECK(v->sha256_debug == m.sha256_debug);
    CHECK(std::equal(v->debug_blob.begin(), v->debug_blob.end(), m.debug_blob.begin(), m.debug_blob.end()));
    CHECK(v->range_count == m.ranges.size());
    CHECK(v->pad_count == m.return_pads.size());
    CHECK(v->unwind_count == m.unwind_rows.size());

    // Every range record, field by field (the file order is (depth, start)).
    auto got = rd.ranges(v->index);
    REQUIRE(got.ok());
    std::vector<RangeRecord> want = m.ranges;
    std::sort(want.begin(), want.end(), [](const RangeRecord& a, const RangeRecord& b) {
      return a.depth != b.depth ? a.depth < b.depth : a.start < b.start;
    });
    REQUIRE(got->size() == want.size());
    for (size_t i = 0; i < want.size(); i++) {
      const RangeRecord& g = got.value()[i];
      CHECK(g.start == want[i].start);
      CHECK(g.length == want[i].length);
      CHECK(g.depth == want[i].depth);
      CHECK(g.function == want[i].function);
      CHECK(g.file == want[i].file);
      CHECK(g.line == want[i].line);
      CHECK(g.column == want[i].column);
      CHECK(g.call_file == want[i].call_file);
      CHECK(g.call_line == want[i].call_line);
      CHECK(g.call_column == want[i].call_column);
    }
    // All return pads, in address order, each with its full chain.
    auto pads = rd.return_pads(v->index);
    REQUIRE(pads.ok());
    std::vector<ReturnPadRecord> want_pads = m.return_pads;
    std::sort(want_pads.begin(), want_pads.end(),
              [](const ReturnPadRecord& a, const ReturnPadRecord& b) { return a.addr < b.addr; });
    REQUIRE(pads->size() == want_pads.size());
    for (size_t i = 0; i < want_pads.size(); i++) {
      CHECK(pads.value()[i].addr == want_pads[i].addr);
      std::vector<FrameView> fv;
      for (const FrameRecord& f : pads.value()[i].frames) fv.push_back({f.function, f.file, f.line, f.column});
      check_frames(fv, want_pads[i].frames);
    }
    for (uint64_t addr : probe_addresses(m)) {
      auto chain = rd.lookup(v->index, addr);
      REQUIRE(chain.ok());
      INFO("module " << m.name << " addr 0x" << std::hex << addr);
      check_frames(chain.value(), naive_chain(m, addr));
      auto pad = rd.return_pad(v->index, addr);
      REQUIRE(pad.ok());
      auto it = std::find_if(m.return_pads.begin(), m.return_pads.end(),
                             [&](const ReturnPadRecord& p) { return p.addr == addr; });
      check_frames(pad.value(), it == m.return_pads.end() ? std::vector<FrameRecord>{} : it->frames);
      auto ur = rd.unwind_row(v->index, addr);
      REQUIRE(ur.ok());
      const UnwindRowRecord* best = nullptr;  // independent answer: linear scan
      for (const UnwindRowRecord& r : m.unwind_rows)
        if (r.pc <= addr && (best == nullptr || r.pc > best->pc)) best = &r;
      REQUIRE(ur->found == (best != nullptr));
      if (best != nullptr) check_row(ur->row, *best);
    }
  }
}

template <class T>
void shuffle(std::vector<T>& v, std::mt19937& rng) {
  std::shuffle(v.begin(), v.end(), rng);
}

std::string message_of(const BundleContents& c) {
  auto w = write_bundle(c);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == SPROV_ERR_BUNDLE);
  return w.error().message;
}

std::string open_message(const std::vector<uint8_t>& b) {
  auto rd = BundleReader::open(b.data(), b.size());
  REQUIRE_FALSE(rd.ok());
  CHECK(rd.error().code == SPROV_ERR_BUNDLE);
  return rd.error().message;
}

void put64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; i++) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get64(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[off + i];
  return v;
}

/// Offset of the module table (section type 1) from the section table.
size_t modules_offset(const std::vector<uint8_t>& b) {
  const uint32_t nsec = b[12];
  for (uint32_t i = 0; i < nsec; i++)
    if (b[32 + i * 24] == 1) return static_cast<size_t>(get64(b, 32 + i * 24 + 8));
  FAIL("no module section");
  return 0;
}

/// Opens `b` and exercises every query; returns whether open succeeded.
bool exercise(const uint8_t* data, size_t len, const std::vector<uint64_t>& addrs) {
  auto rd = BundleReader::open(data, len);
  if (!rd) return false;
  for (const ModuleView& v : rd->modules()) {
    (void)rd->ranges(v.index);
    for (uint64_t a : addrs) {
      (void)rd->lookup(v.index, a);
      (void)rd->return_pad(v.index, a);
      (void)rd->unwind_row(v.index, a);
      (void)rd->from_symtab(v.index, a);
      (void)rd->symbol(v.index, a);
    }
  }
  return true;
}

}  // namespace

TEST_CASE("bundle format: round trip of several modules, record by record against the input", "[bundle][format]") {
  const uint32_t version = GENERATE(2u, 3u, 4u, 5u, 6u, 7u, 8u);  // formats 2 to 7 are still read
  INFO("format " << version);
  const BundleContents c = sample_contents();
  auto bytes = write_bundle(c, version);
  REQUIRE(bytes.ok());
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  REQUIRE(rd.ok());
  check_against_input(rd.value(), c);

  // The hand-written chains, spelled out (outermost first; outer positions are call sites).
  const ModuleView* a = rd->find_module(IdKind::kElfBuildId, c.modules[0].id.bytes);
  REQUIRE(a != nullptr);
  auto chain = rd->lookup(a->index, 0x1055);
  REQUIRE(chain.ok());
  check_frames(chain.value(), {{"main", "main.c", 12, 7}, {"_ZL5inl_av", "inl.h", 31, 11}, {"_ZL5inl_bv", "inl2.h", 40, 9}});
  chain = rd->lookup(a->index, 0x1150);  // gap between main and foo
  REQUIRE(chain.ok());
  CHECK(chain->empty());
  CHECK(rd->find_module(IdKind::kMachoUuid, c.modules[0].id.bytes) == nullptr);  // same bytes, other kind
  std::vector<uint8_t> shorter(c.modules[0].id.bytes.begin(), c.modules[0].id.bytes.end() - 1);
  CHECK(rd->find_module(IdKind::kElfBuildId, shorter) == nullptr);
  CHECK_FALSE(rd->lookup(rd->modules().size(), 0).ok());

  // The same bytes through a file mapping, and after a move.
  char path[] = "/tmp/stackprov-bundle-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes->data(), bytes->size()) == static_cast<ssize_t>(bytes->size()));
  close(fd);
  auto fr = BundleReader::open_file(path);
  unlink(path);
  REQUIRE(fr.ok());
  BundleReader moved = std::move(fr.value());
  check_against_input(moved, c);
  CHECK_FALSE(BundleReader::open_file("/nonexistent/bundle").ok());
}

TEST_CASE("bundle format: lookups from several threads share one lazily built index", "[bundle][format]") {
  const BundleContents c = sample_contents();
  auto bytes = write_bundle(c);
  REQUIRE(bytes.ok());
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  REQUIRE(rd.ok());
  const ModuleContents& g = c.modules[3];
  const ModuleView* v = rd->find_module(g.id.kind, g.id.bytes);
  REQUIRE(v != nullptr);
  std::vector<uint64_t> addrs = probe_addresses(g);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (uint64_t a : addrs) {
        auto ch = rd->lookup(v->index, a);
        if (!ch.ok() || ch->size() != naive_chain(g, a).size()) mismatches[static_cast<size_t>(t)]++;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("bundle format: equal contents in any order give identical bytes", "[bundle][format]") {
  const BundleContents c = sample_contents();
  auto first = write_bundle(c);
  REQUIRE(first.ok());
  auto again = write_bundle(c);
  REQUIRE(again.ok());
  CHECK(first.value() == again.value());
  std::mt19937 rng(20261125);
  for (int i = 0; i < 20; i++) {
    BundleContents s = c;
    shuffle(s.modules, rng);
    for (ModuleContents& m : s.modules) {
      shuffle(m.ranges, rng);
      shuffle(m.return_pads, rng);
      shuffle(m.unwind_rows, rng);
    }
    auto w = write_bundle(s);
    REQUIRE(w.ok());
    CHECK(w.value() == first.value());
  }
  // Different contents give different bytes (one line number changed).
  BundleContents d = c;
  d.modules[0].ranges[0].line++;
  auto wd = write_bundle(d);
  REQUIRE(wd.ok());
  CHECK(wd.value() != first.value());
  CHECK(stackprov::evidence::digest_string(stackprov::evidence::sha256(wd.value())) !=
        stackprov::evidence::digest_string(stackprov::evidence::sha256(first.value())));
}

TEST_CASE("bundle format: a string table beyond the compression ratio is stored and round-trips", "[bundle][format]") {
  BundleContents c;
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, {1, 2, 3}};
  m.name = "ratio.so";
  m.ranges = {rr(0x1000, 0x10, 0, std::string(kMaxStringBytes, 'x'), "f.c", 1, 1)};  // compresses > 64x
  c.modules.push_back(m);
  const uint32_t version = GENERATE(3u, 4u);
  INFO("format " << version);
  auto w = write_bundle(c, version);
  REQUIRE(w.ok());
  // Stored, not compressed: format 3 byte for byte; format 4 as one literal run, each literal
  // coded in one bit at least (within the ratio).
  CHECK(w->size() > (version == 3 ? kMaxStringBytes : kMaxStringBytes / 8));
  CHECK(w->size() < (version == 3 ? kMaxStringBytes + 4096 : kMaxStringBytes / 8 + 4096));
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  check_against_input(rd.value(), c);
}

TEST_CASE("bundle format: a bundle's identity is sha256 (FIPS 180-2 test vector)", "[bundle][format]") {
  const uint8_t abc[] = {'a', 'b', 'c'};
  CHECK(stackprov::evidence::digest_string(stackprov::evidence::sha256(abc, 3)) ==
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("bundle format: an empty bundle round-trips", "[bundle][format]") {
  auto w = write_bundle({});
  REQUIRE(w.ok());
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  CHECK(rd->modules().empty());
}

// The bytes past the section table are cut and corrupted at one offset in every 5, the offset within
// each 5 rotating (5k + k mod 5: every alignment of a field is hit), under ASan (the sanitize stage) and
// for the formats before the current one, whose readers do not change: every offset of four formats cost
// 94 s under ASan on the CI machine (the current format's 53 s) and 67 s in its Release build. The
// Release build (make test) tries every offset of the current format; fuzz_bundle runs under ASan.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsanBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsanBuild = true;
#else
constexpr bool kAsanBuild = false;
#endif
#else
constexpr bool kAsanBuild = false;
#endif

TEST_CASE("bundle format: every truncation and single-byte corruption gives an error or a valid reader",
          "[bundle][format][hostile]") {
  const uint32_t version = GENERATE(2u, 3u, 4u, 5u, 6u, 7u, 8u);  // formats 2 to 7 are still read
  INFO("format " << version);
  BundleContents c = sample_contents();
  c.modules.resize(3);  // the hand-written modules: a small file, every offset is tried
  c.modules.push_back(generated_module(5, 6));
  if (version >= 5)  // format 5's symbol names (the section is left out of older formats); format 6
    for (ModuleContents& m : c.modules)  // codes the range's own name, an edit of it or a string
      for (const RangeRecord& r : m.ranges)
        if (r.depth == 0)
          m.symbols.push_back({r.start, r.length, r.start - (r.start & 1), (r.start & 2) ? r.function : r.function + "@V"});
  auto w = write_bundle(c, version);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  std::vector<uint64_t> addrs;
  for (const ModuleContents& m : c.modules)
    for (uint64_t a : probe_addresses(m)) addrs.push_back(a);

  const size_t stride = kAsanBuild || version < kFormatVersion ? 5 : 1;
  // The k-th offset tried past `from`: every one (stride 1) or 5k + k mod 5.
  const auto nth = [&](size_t from, size_t k) { return from + k * stride + k % stride; };
  // Truncations: the header's size no longer matches; then the same lengths with the header
  // patched to claim them, so the section table and module checks are what must catch it.
  for (size_t k = 0, len = 0; len < good.size(); len = nth(0, ++k)) {
    CHECK_FALSE(BundleReader::open(good.data(), len).ok());
    if (len >= 32) {
      std::vector<uint8_t> t(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
      put64(t, 16, len);
      CHECK_FALSE(exercise(t.data(), t.size(), addrs));
    }
  }
  // Single-byte corruptions at every offset, three patterns. The header and section table
  // are fully checked: a change there is always an error.
  size_t opened = 0;
  const size_t table_end = 32 + good[12] * 24;
  for (size_t k = 0, off = 0; off < good.size(); off = off + 1 < table_end ? off + 1 : nth(table_end, k++)) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[off] ^= x;
      const bool ok = exercise(b.data(), b.size(), addrs);
      opened += ok;
      // The version byte may turn into another format's: then the file opens and its records
      // (read as the other format) fail on first use, which exercise() has just done.
      const bool other_version = off == 8 && (b[8] >= 2 && b[8] <= 8);
      // An optional section's type turned into another optional type (bit 31 still set) is one this
      // reader does not know: skipped by design (format 5's symbol names; the lookups answer without).
      const size_t entry = off >= 32 && off < table_end ? (off - 32) / 24 : 0;
      const bool other_optional = off >= 32 && off < table_end && (off - 32) % 24 < 4 &&
                                  (good[32 + entry * 24 + 3] & 0x80) != 0 && (b[32 + entry * 24 + 3] & 0x80) != 0;
      if (off < table_end && !other_version && !other_optional) {
        INFO("offset " << off << " xor " << int(x));
        CHECK_FALSE(ok);
      }
    }
  }
  CHECK(opened > 0);  // string bytes, line numbers and the like are not structural
}

TEST_CASE("bundle format: declared counts and offsets beyond the file are rejected by value", "[bundle][format][hostile]") {
  auto w = write_bundle(sample_contents());
  REQUIRE(w.ok());
  const std::vector<uint8_t> good = w.value();
  {
    std::vector<uint8_t> b = good;
    b[12] = 0xff, b[13] = 0xff, b[14] = 0xff, b[15] = 0xff;
    CHECK_THAT(open_message(b), Catch::Contains("section count 4294967295"));
  }
  {
    std::vector<uint8_t> b = good;
    put64(b, 32 + 16, 0x7fffffffffffffffull);  // first section's length
    CHECK_THAT(open_message(b), Catch::Contains("9223372036854775807"));
  }
  const size_t mods = modules_offset(good);
  {
    std::vector<uint8_t> b = good;
    put64(b, mods + 288, 0xffffffffffffull);  // module 0's range count
    CHECK_THAT(open_message(b), Catch::Contains("281474976710655"));
  }
  {
    std::vector<uint8_t> b = good;
    put64(b, mods + 144 + 8, UINT64_MAX);  // module 0's string bytes (overflow of first + count)
    CHECK_THAT(open_message(b), Catch::Contains("18446744073709551615"));
  }
  {
    std::vector<uint8_t> b = good;
    put64(b, mods + 312, uint64_t{1} << 29);  // module 0's decompressed string bytes: 512 MiB from a few bytes
    CHECK_THAT(open_message(b), Catch::Contains("536870912") && Catch::Contains("ratio"));
  }
  {
    std::vector<uint8_t> b = good;
    b[mods + 1] = 65;  // id length
    CHECK_THAT(open_message(b), Catch::Contains("id length 65"));
  }
  {
    std::vector<uint8_t> b = good;
    b[mods + 5 * 320 + 1] = 15;  // module 5 is the Mach-O one (sorted by kind): its UUID has 16 bytes
    CHECK_THAT(open_message(b), Catch::Contains("id length 15 is wrong for id kind 3"));
  }
  {
    std::vector<uint8_t> b = good;
    b[8] = 1;
    CHECK_THAT(open_message(b), Catch::Contains("version 1"));
  }
}

TEST_CASE("bundle format: the writer rejects invalid records naming the value", "[bundle][format]") {
  const BundleContents base = sample_contents();
  {
    BundleContents c = base;
    c.modules[0].ranges.push_back(rr(0x1030, 0x20, 0, "other", "o.c", 1, 1));
    const std::string msg = message_of(c);
    CHECK_THAT(msg, Catch::Contains("0x1000") && Catch::Contains("0x1030") && Catch::Contains("overlap"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges.push_back(rr(0x1100, 0x10, 1, "orphan", "o.c", 1, 1));
    CHECK_THAT(message_of(c), Catch::Contains("0x1100") && Catch::Contains("not inside"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges[0].depth = 200;
    CHECK_THAT(message_of(c), Catch::Contains("depth 200"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges[0].length = 0;
    CHECK_THAT(message_of(c), Catch::Contains("length 0"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges.push_back(rr(UINT64_MAX - 4, 0x10, 0, "wrap", "w.c", 1, 1));
    CHECK_THAT(message_of(c), Catch::Contains("0xfffffffffffffffb") && Catch::Contains("wraps"));
  }
  {
    BundleContents c = base;
    c.modules[0].id.bytes.resize(65, 1);
    CHECK_THAT(message_of(c), Catch::Contains("65 bytes"));
  }
  {
    BundleContents c = base;
    c.modules[1].id.bytes.resize(16);  // PDB identity is GUID (16) + age (4)
    CHECK_THAT(message_of(c), Catch::Contains("16 bytes"));
  }
  {
    BundleContents c = base;
    c.modules.push_back(c.modules[2]);
    CHECK_THAT(message_of(c), Catch::Contains("3:3333") && Catch::Contains("twice"));
  }
  {
    BundleContents c = base;
    c.modules[0].return_pads.push_back({0x1205, {{"x", "y", 1, 1}}});
    CHECK_THAT(message_of(c), Catch::Contains("0x1205"));
  }
  {
    BundleContents c = base;  // v2 index entries hold 32-bit offsets from the module's lowest address
    c.modules[0].unwind_rows.push_back(row(0x1000 + (uint64_t{1} << 32), UnwindRowRecord::kNoInfo, 0, 0, 0));
    CHECK_THAT(message_of(c), Catch::Contains("0x100001000") && Catch::Contains("4 GiB"));
  }
  {
    BundleContents c = base;
    c.modules[0].unwind_rows[1].nsaved = 13;
    CHECK_THAT(message_of(c), Catch::Contains("13 registers"));
  }
  {
    BundleContents c = base;
    c.modules[0].unwind_rows[1].kind = 9;
    CHECK_THAT(message_of(c), Catch::Contains("kind 9"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges[0].function = std::string("a\0b", 3);
    CHECK_THAT(message_of(c), Catch::Contains("NUL"));
  }
  {
    BundleContents c = base;
    c.modules[0].ranges[0].function.assign(kMaxStringBytes + 1, 'x');
    CHECK_THAT(message_of(c), Catch::Contains(std::to_string(kMaxStringBytes + 1)));
  }
}

namespace {

/// Little-endian byte builder for the hand encoding below.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Bytes& u16(uint16_t v) { return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8)); }
  Bytes& u32(uint32_t v) { return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16)); }
  Bytes& u64(uint64_t v) { return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32)); }
  Bytes& fill(size_t n, uint8_t v) {
    b.insert(b.end(), n, v);
    return *this;
  }
  Bytes& str(const char* s) {
    b.insert(b.end(), s, s + std::strlen(s) + 1);
    return *this;
  }
  Bytes& pad8() { return fill((8 - b.size() % 8) % 8, 0); }
};

}  // namespace

TEST_CASE("bundle format: the writer's bytes equal a hand encoding of doc/bundles.md", "[bundle][format]") {
  BundleContents c;
  ModuleContents y;  // given first: the writer sorts it after x (kind 3 > kind 1)
  y.id = {IdKind::kMachoUuid, std::vector<uint8_t>(16, 0x01)};
  y.name = "y";
  y.debug_blob = {9, 8, 7};
  c.modules.push_back(y);
  ModuleContents x;
  x.id = {IdKind::kElfBuildId, {0xaa, 0xbb}};
  x.name = "x";
  x.sha256_debug.fill(0x22);
  x.ranges = {rr(0x104, 4, 1, "g", "b.h", 5, 6, "a.c", 7, 8), rr(0x100, 0x10, 0, "f", "a.c", 3, 4)};
  x.return_pads = {{0x108, {{"f", "a.c", 7, 8}, {"g", "b.h", 5, 6}}}};
  x.unwind_rows = {row(0x100, UnwindRowRecord::kCfaReg, 7, 8, -1, {{6, -2}})};
  x.unwind_rows[0].signal_frame = true;
  c.modules.push_back(x);

  // Sections, each per doc/bundles.md "Layout". Strings of x by reference count, then bytes:
  // a.c (2 references), "" (f's call file), b.h, f, g: 13 bytes without a 4-byte repeat, so
  // the LZ stream is one literal run: token 13 << 4, the 13 bytes. The pad is implicit.
  Bytes strings;
  strings.str("x").u8(0xd0).str("a.c").str("").str("b.h").str("f").str("g");  // x: 2 + 14 bytes
  strings.str("y").u8(0x00);                                                  // y: 2 + 1
  Bytes stroffs;
  stroffs.u32(0).u32(4).u32(5).u32(9).u32(11);
  Bytes findex;
  findex.u32(0).u32(0);  // one group at base + 0, data offset 0
  Bytes fdata;
  fdata.u8(2);  // two depth lists, each: (count 1 << 1 | continues 0), bytes, records
  fdata.u8(2).u8(5).u8(0xc7).u8(0x10).u8(3).u8(0).u8(4);  // f: fn|file|col, line +3; len 16; f, a.c, col 4
  // g: fn|file|col|call, line escape; (len 4 << 1 | gap); gap 4; g; b.h; sleb 5; col 6;
  // call ext: file|col, call-line delta 7 + 31 << 2; call file a.c; call column 8.
  fdata.u8(2).u8(10).u8(0xef).u8(9).u8(4).u8(4).u8(2).u8(5).u8(6).u8(0x9b).u8(0).u8(8);
  Bytes pindex;
  pindex.u32(8).u32(0);
  Bytes pdata;
  pdata.u8(0);  // delta 0, implicit: its chain is lookup(0x107)
  Bytes rindex;
  rindex.u32(0).u32(0);
  Bytes rdata;  // delta 0; mask cfa_reg|cfa_off|ra_off|saved|head|packed; head kind 1 | signal;
  rdata.u8(0).u8(0x7b).u8(0x09).u8(7).u8(8).u8(0xff).u8(0x01).u8(0x61);  // 7, 8, -1, keep 0 add 1, (6, -2)
  Bytes blobs;
  blobs.u8(9).u8(8).u8(7);
  Bytes modules;
  modules.u8(1).u8(2).u16(0).u32(1).u8(0xaa).u8(0xbb).fill(62, 0).fill(32, 0).fill(32, 0x22).u64(0x100);
  modules.u64(0).u64(16).u64(0).u64(5).u64(0).u64(1).u64(0).u64(20).u64(0).u64(1).u64(0).u64(1);
  modules.u64(0).u64(1).u64(0).u64(8).u64(0).u64(0).u64(2).u64(1).u64(1).u64(13);
  modules.u8(3).u8(16).u16(0).u32(1).fill(16, 0x01).fill(48, 0).fill(64, 0).u64(0);
  modules.u64(16).u64(3).u64(5).u64(0).u64(1).u64(0).u64(20).u64(0).u64(1).u64(0).u64(1).u64(0);
  modules.u64(1).u64(0).u64(8).u64(0).u64(0).u64(3).u64(0).u64(0).u64(0).u64(0);
  REQUIRE(modules.b.size() == 2 * 320);

  const std::vector<uint8_t>* secs[] = {&modules.b, &strings.b, &stroffs.b, &findex.b, &fdata.b,
                                        &pindex.b,  &pdata.b,   &rindex.b,  &rdata.b,  &blobs.b};
  constexpr uint32_t kSecs = 10;
  Bytes file;
  file.fill(8, 0);
  std::memcpy(file.b.data(), "SPRVBNDL", 8);
  file.u32(2).u32(kSecs).u64(0 /* size, patched */).u32(0).u32(0);
  uint64_t off = 32 + kSecs * 24;
  std::vector<uint64_t> offs;
  for (uint32_t t = 1; t <= kSecs; t++) {
    off = (off + 7) / 8 * 8;
    offs.push_back(off);
    file.u32(t).u32(0).u64(off).u64(secs[t - 1]->size());
    off += secs[t - 1]->size();
  }
  for (uint32_t t = 1; t <= kSecs; t++) {
    file.pad8();
    REQUIRE(file.b.size() == offs[t - 1]);
    file.b.insert(file.b.end(), secs[t - 1]->begin(), secs[t - 1]->end());
  }
  file.pad8();
  put64(file.b, 16, file.b.size());

  auto w = write_bundle(c, 2);  // format 2's hand encoding: the reader still reads it
  REQUIRE(w.ok());
  REQUIRE(w->size() == file.b.size());
  for (size_t i = 0; i < file.b.size(); i++) {
    INFO("byte " << i);
    REQUIRE(int(w.value()[i]) == int(file.b[i]));
  }
  auto rd = BundleReader::open(file.b.data(), file.b.size());
  REQUIRE(rd.ok());
  check_against_input(rd.value(), c);
}

namespace {

/// A module with symbol-table ranges (RangeRecord::from_symtab) around DWARF ones.
BundleContents symtab_contents() {
  ModuleContents m;
  m.id.bytes = {0x5e, 0x11, 0xab, 0x1e};
  m.name = "symtab.so";
  RangeRecord a = rr(0x1000, 0x10, 0, "_init", "", 0, 0);
  RangeRecord b = rr(0x1010, 0x10, 0, "_start", "", 0, 0);
  RangeRecord d = rr(0x1050, 0x8, 0, "deregister_tm_clones", "crtstuff.c", 0, 0);
  a.from_symtab = b.from_symtab = d.from_symtab = true;
  m.ranges = {a, b, rr(0x1020, 0x20, 0, "main", "/s/m.c", 3, 1), rr(0x1028, 0x8, 1, "inl", "/s/i.h", 7, 2, "/s/m.c", 4, 5),
              d};
  m.unwind_rows = {row(0x1000, UnwindRowRecord::kCfaReg, 7, 8, -1)};
  BundleContents c;
  c.modules.push_back(std::move(m));
  return c;
}

/// Index in the section table of the entry with `type`, or -1.
int section_entry(const std::vector<uint8_t>& b, uint32_t type) {
  for (uint32_t i = 0; i < b[12]; i++) {
    const size_t e = 32 + i * 24;
    const uint32_t t = b[e] | b[e + 1] << 8 | b[e + 2] << 16 | static_cast<uint32_t>(b[e + 3]) << 24;
    if (t == type) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("bundle format: symbol-table ranges round-trip through the optional section 0x80000001",
          "[bundle][format]") {
  const BundleContents c = symtab_contents();
  auto w = write_bundle(c);
  REQUIRE(w.ok());
  const std::vector<uint8_t>& b = w.value();
  auto rd = BundleReader::open(b.data(), b.size());
  REQUIRE(rd.ok());
  // Bytes of 0x1000..0x101f (two records, merged into one interval) and 0x1050..0x1057.
  for (uint64_t a : {0x1000ull, 0x100full, 0x1010ull, 0x101full, 0x1050ull, 0x1057ull}) CHECK(rd->from_symtab(0, a));
  for (uint64_t a : {0xfffull, 0x1020ull, 0x1028ull, 0x104full, 0x1058ull, 0x100000000ull}) CHECK_FALSE(rd->from_symtab(0, a));
  CHECK_FALSE(rd->from_symtab(1, 0x1000));  // no such module
  auto chain = rd->lookup(0, 0x1014);
  REQUIRE(chain.ok());
  REQUIRE(chain->size() == 1);
  CHECK((*chain)[0].function == "_start");
  CHECK((*chain)[0].file.empty());
  CHECK((*chain)[0].line == 0);
  auto ranges = rd->ranges(0);
  REQUIRE(ranges.ok());
  REQUIRE(ranges->size() == 5);
  for (const RangeRecord& r : *ranges) {
    INFO(r.function);
    CHECK(r.from_symtab == (r.function != "main" && r.function != "inl"));
  }
  // Hand encoding (doc/bundles.md): the section after the required ones, in module order a head
  // {u32 module, u32 n} then n intervals {u32 start - base, u32 length}; base 0x1000.
  const int ix = section_entry(b, 0x80000001u);
  REQUIRE(ix == static_cast<int>(b[12]) - 1);
  const size_t off = static_cast<size_t>(get64(b, 32 + ix * 24 + 8)), len = static_cast<size_t>(get64(b, 32 + ix * 24 + 16));
  const std::vector<uint8_t> want = {0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0x50, 0, 0, 0, 8, 0, 0, 0};
  CHECK(std::vector<uint8_t>(b.begin() + static_cast<std::ptrdiff_t>(off),
                             b.begin() + static_cast<std::ptrdiff_t>(off + len)) == want);
  // Deterministic: shuffled input, same bytes.
  std::mt19937 rng(7);
  for (int i = 0; i < 10; i++) {
    BundleContents s = c;
    shuffle(s.modules[0].ranges, rng);
    auto w2 = write_bundle(s);
    REQUIRE(w2.ok());
    CHECK(w2.value() == b);
  }
  // Without symbol-table ranges there is no such section (a bundle of DWARF ranges only is as before).
  BundleContents plain = c;
  for (RangeRecord& r : plain.modules[0].ranges) r.from_symtab = false;
  auto wp = write_bundle(plain);
  REQUIRE(wp.ok());
  CHECK(section_entry(wp.value(), 0x80000001u) == -1);
  CHECK(wp.value().size() < b.size());
  // A reader that does not know the section (here: its type changed to another optional one)
  // skips it: same lookups, no symbol-table provenance.
  std::vector<uint8_t> old = b;
  old[32 + ix * 24] = 0x7f;  // 0x8000007f: no reader knows it
  auto ro = BundleReader::open(old.data(), old.size());
  REQUIRE(ro.ok());
  CHECK_FALSE(ro->from_symtab(0, 0x1014));
  auto oc = ro->lookup(0, 0x1014);
  REQUIRE(oc.ok());
  REQUIRE(oc->size() == 1);
  CHECK((*oc)[0].function == "_start");
}

TEST_CASE("bundle format: symbol-table ranges: invalid input and hostile sections are rejected by value",
          "[bundle][format][hostile]") {
  {
    BundleContents c = symtab_contents();
    c.modules[0].ranges[3].from_symtab = true;  // depth 1
    CHECK_THAT(message_of(c), Catch::Contains("0x1028") && Catch::Contains("depth 1"));
  }
  {
    BundleContents c = symtab_contents();
    c.modules[0].ranges[2].from_symtab = true;  // main holds an inlined record
    CHECK_THAT(message_of(c), Catch::Contains("0x1020") && Catch::Contains("inlined records inside"));
  }
  auto w = write_bundle(symtab_contents());
  REQUIRE(w.ok());
  const std::vector<uint8_t>& good = w.value();
  const int ix = section_entry(good, 0x80000001u);
  REQUIRE(ix >= 0);
  const size_t off = static_cast<size_t>(get64(good, 32 + ix * 24 + 8));
  auto patched = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[off + at] = v;
    return open_message(b);
  };
  CHECK_THAT(patched(0, 1), Catch::Contains("module index 1"));            // only one module
  CHECK_THAT(patched(4, 0), Catch::Contains("0 intervals"));
  CHECK_THAT(patched(4, 3), Catch::Contains("3 intervals"));                // beyond the section
  CHECK_THAT(patched(12, 0), Catch::Contains("interval 0"));                // length 0
  CHECK_THAT(patched(16, 0x1f), Catch::Contains("interval 1"));             // inside the previous one
  CHECK_THAT(patched(16, 0x20), Catch::Contains("interval 1"));             // touching: not merged
  {
    std::vector<uint8_t> b = good;  // 0xffffffff + 8 is beyond 4 GiB
    for (int k = 0; k < 4; k++) b[off + 16 + k] = 0xff;
    CHECK_THAT(open_message(b), Catch::Contains("beyond 4 GiB"));
  }
  {
    std::vector<uint8_t> b = good;  // a second section of the same type
    const size_t e = 32 + ix * 24;
    const size_t e0 = 32 + (ix - 1) * 24;
    for (int k = 0; k < 4; k++) b[e0 + k] = b[e + k];
    CHECK_THAT(open_message(b), Catch::Contains("twice") || Catch::Contains("missing"));
  }
  // Every single-byte corruption: an error or a valid reader, never a crash (ASan/UBSan builds).
  std::vector<uint64_t> addrs;
  for (uint64_t a = 0xff0; a < 0x1070; a++) addrs.push_back(a);
  for (size_t o = 0; o < good.size(); o++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[o] ^= x;
      (void)exercise(b.data(), b.size(), addrs);
    }
}

TEST_CASE("bundle format: string offsets must follow one another (no shared or mid-string offsets)",
          "[bundle][format][hostile]") {
  // review of reader.cpp: offsets needed only to lie in the table, so a million offsets naming one
  // 1 MiB string made the first lookup measure it a million times (hours of strlen). The writer
  // lays strings one after another (doc/bundles.md); the reader now requires exactly that.
  // (Format 3 stores no offsets: they are the NULs' positions.)
  auto w = write_bundle(sample_contents(), 2);
  REQUIRE(w.ok());
  const std::vector<uint8_t> good = w.value();
  const int ix = section_entry(good, 3);  // string offsets: one u32 per string
  REQUIRE(ix >= 0);
  size_t at = 0;
  for (int k = 0; k < 8; k++) at |= size_t{good[32 + ix * 24 + 8 + k]} << (8 * k);
  const uint32_t off1 = good[at + 4] | good[at + 5] << 8 | good[at + 6] << 16 | uint32_t{good[at + 7]} << 24;
  REQUIRE(off1 > 1);
  auto first_lookup = [](const std::vector<uint8_t>& b) -> std::string {
    auto rd = BundleReader::open(b.data(), b.size());
    if (!rd.ok()) return "open: " + rd.error().message;
    auto r = rd->ranges(0);
    return r.ok() ? "ok" : r.error().message;
  };
  CHECK(first_lookup(good) == "ok");
  for (uint32_t bad : {uint32_t{0}, off1 - 1}) {  // string 1 at string 0's offset; inside string 0
    INFO("string 1 at offset " << bad);
    std::vector<uint8_t> b = good;
    for (int k = 0; k < 4; k++) b[at + 4 + k] = static_cast<uint8_t>(bad >> (8 * k));
    CHECK_THAT(first_lookup(b), Catch::Contains("string 1 at offset " + std::to_string(bad) + " does not start after"));
  }
}

TEST_CASE("bundle format: ranges() refuses to copy out more names than the bundle's budget",
          "[bundle][format][hostile]") {
  // review of reader.cpp: a record costs a few bytes and names strings of up to 1 MiB, so a bundle of
  // kilobytes could make ranges() ask for terabytes (std::bad_alloc out of a Result function).
  // 1,300 records naming one 1 MiB function: 1.36 GB of names from a bundle of ~1 MiB (the string
  // is stored uncompressed), over the budget of 1 GiB + 64 x its size. Lookups, which copy one
  // chain, still answer.
  ModuleContents m;
  m.id.bytes = {0xb1, 0x9b, 0x0d, 0x9e};
  m.name = "huge-names.so";
  const std::string fn(kMaxStringBytes, 'f');
  for (uint64_t i = 0; i < 1300; i++) m.ranges.push_back(rr(0x1000 + 0x10 * i, 0x10, 0, fn, "a.c", 1, 1));
  BundleContents c;
  c.modules.push_back(std::move(m));
  auto w = write_bundle(std::move(c));  // no copy of the 1.4 GB of names
  REQUIRE(w.ok());
  REQUIRE(w->size() < (2u << 20));
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  auto all = rd->ranges(0);
  REQUIRE_FALSE(all.ok());
  CHECK_THAT(all.error().message, Catch::Contains("1300 range records name " +
                                                  std::to_string(1300 * (kMaxStringBytes + 3)) + " bytes"));
  auto one = rd->lookup(0, 0x1000 + 0x10 * 77);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK(one.value()[0].function.size() == kMaxStringBytes);
}

TEST_CASE("bundle format: a committed format-2 bundle reads as before and equals its format-3 to 8 rewrites",
          "[bundle][format]") {
  // tests/data/bundle/small.bundle was written by the format-2 writer before format 3 existed (a
  // signed bundle in a store or trace stays as it is): its records, read back and written again in
  // formats 3 and 4, must give the same answers everywhere.
  const std::string path = std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/small.bundle";
  auto old = BundleReader::open_file(path);
  REQUIRE(old.ok());
  REQUIRE(old->data()[8] == 2);
  BundleContents c;
  for (const ModuleView& v : old->modules()) {
    ModuleContents m;
    m.id = {v.id_kind, std::vector<uint8_t>(v.id.begin(), v.id.end())};
    m.name = std::string(v.name);
    m.sha256_file = v.sha256_file;
    m.sha256_debug = v.sha256_debug;
    m.ranges = old->ranges(v.index).value();
    m.return_pads = old->return_pads(v.index).value();
    m.unwind_rows = old->unwind_rows(v.index).value();
    m.debug_blob.assign(v.debug_blob.begin(), v.debug_blob.end());
    REQUIRE_FALSE(m.ranges.empty());
    c.modules.push_back(std::move(m));
  }
  for (uint32_t version : {3u, 4u, 5u, 6u, 7u, 8u}) {
    INFO("format " << version);
    auto w = write_bundle(c, version);
    REQUIRE(w.ok());
    REQUIRE(w.value()[8] == version);
    auto rd = BundleReader::open(w->data(), w->size());
    REQUIRE(rd.ok());
    check_against_input(rd.value(), c);
  }
  auto cur = write_bundle(c);
  REQUIRE(cur.ok());
  CHECK(cur.value()[8] == kFormatVersion);
  // And format 2 written today is the committed file's bytes (the format-2 writer is unchanged).
  auto v2 = write_bundle(c, 2);
  REQUIRE(v2.ok());
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(v2.value() == file);
}

TEST_CASE("bundle format: committed format-3 and format-4 bundles read as the format-2 one and are what the writers write",
          "[bundle][format]") {
  // tests/data/bundle/small-v3.bundle and small-v4.bundle hold small.bundle's records, written by the
  // format-3 writer before format 4 existed and by the format-4 writer when it landed. Old bundles
  // stay as they are in stores and traces (their signatures are over the bytes): they must read
  // to the same records, and the writers must still write those bytes (determinism across versions).
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
    c.modules.push_back(std::move(m));  // without the debug blob, which these two files do not embed
  }
  for (uint32_t version : {3u, 4u}) {
    INFO("format " << version);
    const std::string path = dir + "small-v" + std::to_string(version) + ".bundle";
    auto rd = BundleReader::open_file(path);
    REQUIRE(rd.ok());
    REQUIRE(rd->data()[8] == version);
    check_against_input(rd.value(), c);
    auto w = write_bundle(c, version);
    REQUIRE(w.ok());
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(w.value() == file);
  }
}

TEST_CASE("bundle format: the pdb-lines module flag (ranges from a PDB) round-trips in format 4 only",
          "[bundle][format]") {
  ModuleContents m = generated_module(7, 3);
  m.id.kind = IdKind::kPdbGuidAge;
  m.id.bytes.assign(20, 0x5a);
  m.pdb_lines = true;
  BundleContents c;
  c.modules.push_back(m);
  auto w = write_bundle(c);
  REQUIRE(w.ok());
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  REQUIRE(rd->modules().size() == 1);
  CHECK(rd->modules()[0].pdb_lines);
  CHECK(rd->modules()[0].id_kind == IdKind::kPdbGuidAge);
  // Formats 2 and 3 have no module flags: the writer refuses, naming the format.
  for (uint32_t version : {2u, 3u}) {
    auto old = write_bundle(c, version);
    REQUIRE_FALSE(old.ok());
    CHECK(old.error().message.find("format 4") != std::string::npos);
  }
  // Without the flag the module reads as before (flags 0).
  c.modules[0].pdb_lines = false;
  auto plain = write_bundle(c);
  REQUIRE(plain.ok());
  auto rp = BundleReader::open(plain->data(), plain->size());
  REQUIRE(rp.ok());
  CHECK_FALSE(rp->modules()[0].pdb_lines);
  // An unknown flag bit is refused by value. The module table is section type 1; its first
  // record's flags are the u16 at offset 2 of the record.
  std::vector<uint8_t> bad = w.value();
  const uint32_t nsec = static_cast<uint32_t>(bad[12] | bad[13] << 8 | bad[14] << 16 | bad[15] << 24);
  size_t mod_at = 0;
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t* e = bad.data() + 32 + 24 * i;
    if ((e[0] | e[1] << 8 | e[2] << 16 | static_cast<uint32_t>(e[3]) << 24) == 1) {
      mod_at = 0;
      for (int k = 7; k >= 0; k--) mod_at = mod_at << 8 | e[8 + k];
    }
  }
  REQUIRE(mod_at != 0);
  REQUIRE(bad[mod_at + 2] == 1);
  bad[mod_at + 2] = 3;
  auto rb = BundleReader::open(bad.data(), bad.size());
  REQUIRE_FALSE(rb.ok());
  CHECK(rb.error().message.find("module 0 has flags 0x3") != std::string::npos);
}

TEST_CASE("bundle format: the committed PE+PDB bundle reads with its identity kind and pdb-lines flag",
          "[bundle][format]") {
  // tests/data/bundle/pe-pdb.bundle: `stackprov bundle build` of tests/unit/pdb/fixtures/pdb_cpp.cpp
  // (clang-14 -O2 -gcodeview -gcolumn-info, lld-link-14 /debug); also a seed of fuzz_bundle_file.
  const std::string path = std::string(STACKPROV_TEST_SOURCE_DIR) + "/tests/data/bundle/pe-pdb.bundle";
  auto rd = BundleReader::open_file(path);
  REQUIRE(rd.ok());
  REQUIRE(rd->modules().size() == 1);
  const ModuleView& m = rd->modules()[0];
  CHECK(m.id_kind == IdKind::kPdbGuidAge);
  CHECK(m.id.size() == 20);
  CHECK(m.pdb_lines);
  CHECK(m.range_count > 0);
  CHECK(m.unwind_count > 0);
  REQUIRE(rd->check_unwind_rows(0).ok());
  auto ranges = rd->ranges(0);
  REQUIRE(ranges.ok());
  bool inlined = false;
  for (const RangeRecord& r : ranges.value()) inlined = inlined || r.depth > 0;
  CHECK(inlined);
}

TEST_CASE("bundle format: a pe-code-id module (8 bytes) round-trips; other lengths and kind 5 are refused",
          "[bundle][format]") {
  ModuleContents m = generated_module(5, 2);
  m.id.kind = IdKind::kPeCodeId;
  m.id.bytes = {0x2b, 0x4e, 0xf1, 0x63, 0x00, 0x10, 0x36, 0x00};  // 63F14E2B, 0x361000: wine's ntdll
  BundleContents c;
  c.modules.push_back(m);
  auto w = write_bundle(c);
  REQUIRE(w.ok());
  auto rd = BundleReader::open(w->data(), w->size());
  REQUIRE(rd.ok());
  REQUIRE(rd->modules().size() == 1);
  CHECK(rd->modules()[0].id_kind == IdKind::kPeCodeId);
  CHECK(rd->find_module(IdKind::kPeCodeId, m.id.bytes) != nullptr);
  CHECK(rd->find_module(IdKind::kElfBuildId, m.id.bytes) == nullptr);  // same bytes, another kind
  CHECK(std::string(stackprov::id_kind_name(IdKind::kPeCodeId)) == "pe-code-id");
  CHECK(std::string(stackprov::platform_of(IdKind::kPeCodeId)) == "windows");
  CHECK(stackprov::id_kind_from_name("pe-code-id") == IdKind::kPeCodeId);
  BundleContents bad = c;
  bad.modules[0].id.bytes.push_back(0);
  CHECK_THAT(message_of(bad), Catch::Contains("wrong size"));
  bad = c;
  bad.modules[0].id.kind = static_cast<IdKind>(5);
  CHECK_THAT(message_of(bad), Catch::Contains("kind 5"));
}
