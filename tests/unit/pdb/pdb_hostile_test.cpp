// SPDX-License-Identifier: Apache-2.0
// Hostile PDBs: truncated and corrupted copies of the fixtures give named errors (or a usable file whose
// lookups stay bounded), never a crash; the streams corrupted are found by a minimal MSF walk in the test.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "pdb/pdb_file.hpp"

using namespace stackprov;

namespace {

const std::string kHostileFixtures = STACKPROV_PDB_FIXTURES;
constexpr uint64_t kBase = 0x140000000;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

uint32_t u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
void put32(std::vector<uint8_t>* b, size_t at, uint32_t v) { std::memcpy(b->data() + at, &v, 4); }

/// The file offset of stream `s`'s first byte, by the MSF layout (llvm-pdbutil's docs, "The MSF File
/// Format"): superblock (block size at 32, directory bytes at 44, block map block at 52), the block
/// map's first entry is the directory's first block; the directory: stream count, sizes, block lists.
/// Fixture directories fit one block.
size_t stream_offset(const std::vector<uint8_t>& b, uint32_t s) {
  const uint32_t bs = u32(b, 32);
  const size_t dir = size_t{u32(b, size_t{u32(b, 52)} * bs)} * bs;
  const uint32_t n = u32(b, dir);
  REQUIRE(s < n);
  size_t at = dir + 4 + 4 * size_t{n};
  for (uint32_t i = 0; i < s; i++) {
    uint32_t size = u32(b, dir + 4 + 4 * i);
    if (size == 0xffffffff) size = 0;
    at += 4 * ((size + bs - 1) / bs);
  }
  return size_t{u32(b, at)} * bs;
}

/// Opening gives a named error of the parser's kinds, or a file whose queries answer or fail by
/// value: every procedure's bytes and the first bytes of every section are looked up.
void exercise(std::vector<uint8_t> bytes) {
  auto r = pdb::PdbFile::from_bytes(std::move(bytes), "hostile.pdb");
  if (!r.ok()) {
    const int c = r.error().code;
    CHECK((c == SPROV_ERR_BAD_FORMAT || c == SPROV_ERR_TRUNCATED || c == SPROV_ERR_LIMIT));
    CHECK_THAT(r.error().message, Catch::StartsWith("hostile.pdb: "));
    return;
  }
  pdb::PdbFile& f = *r.value();
  for (size_t m = 0; m < f.modules().size() && m < 8; m++) {
    auto procs = f.procs(m);
    if (!procs.ok()) {
      CHECK_THAT(procs.error().message, Catch::StartsWith("hostile.pdb: "));
      continue;
    }
    for (const pdb::Proc& p : procs.value()) {
      if (p.segment == 0 || p.segment > f.section_rvas().size()) continue;
      const uint64_t start = kBase + f.section_rvas()[p.segment - 1] + p.code_offset;
      for (uint64_t a = start; a < start + std::min<uint32_t>(p.code_size, 64); a++) (void)f.lookup(a, kBase);
    }
  }
  (void)f.publics();
  for (uint32_t rva : f.section_rvas())
    for (uint64_t a = 0; a < 16; a++) (void)f.lookup(kBase + rva + a, kBase);
}

}  // namespace

TEST_CASE("malformed PDB headers give errors naming the value", "[pdb]") {
  const std::vector<uint8_t> good = read_bytes(kHostileFixtures + "/pdb_c.pdb");
  REQUIRE(pdb::PdbFile::from_bytes(good, "x.pdb").ok());
  auto expect = [](std::vector<uint8_t> b, int code, const char* what) {
    auto r = pdb::PdbFile::from_bytes(std::move(b), "x.pdb");
    REQUIRE(!r.ok());
    CHECK(r.error().code == code);
    CHECK_THAT(r.error().message, Catch::StartsWith("x.pdb: ") && Catch::Contains(what));
  };
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 40), SPROV_ERR_TRUNCATED, "40 bytes are too few");
  auto b = good;
  b[0] = 'm';
  expect(b, SPROV_ERR_BAD_FORMAT, "not a PDB file");
  b = good;
  put32(&b, 32, 3);
  expect(b, SPROV_ERR_BAD_FORMAT, "MSF block size 3 is not");
  expect(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2), SPROV_ERR_TRUNCATED, "MSF declares");
  b = good;
  put32(&b, 52, 0x7fffffff);
  expect(b, SPROV_ERR_BAD_FORMAT, "MSF block map address 2147483647");
  b = good;
  put32(&b, stream_offset(good, 1), 19990604);  // PDB info stream version
  expect(b, SPROV_ERR_BAD_FORMAT, "version 19990604 is older than VC70");
  b = good;
  put32(&b, stream_offset(good, 3), 0);  // DBI version signature
  expect(b, SPROV_ERR_BAD_FORMAT, "DBI version signature 0x0");
  b = good;
  put32(&b, stream_offset(good, 3) + 24, 0x7ffffff0);  // module info substream size
  expect(b, SPROV_ERR_TRUNCATED, "DBI substreams");
}

TEST_CASE("every truncation of a PDB is an error or a bounded file", "[pdb]") {
  for (const char* fx : {"pdb_c", "pdb_cpp"}) {
    const std::vector<uint8_t> good = read_bytes(kHostileFixtures + "/" + fx + ".pdb");
    for (size_t n = 0; n < good.size(); n += 509) exercise(std::vector<uint8_t>(good.begin(), good.begin() + n));
  }
}

TEST_CASE("every stream cut short is an error or a bounded file", "[pdb]") {
  for (const char* fx : {"pdb_c", "pdb_cpp"}) {
    const std::vector<uint8_t> good = read_bytes(kHostileFixtures + "/" + fx + ".pdb");
    const uint32_t bs = u32(good, 32);
    const size_t dir = size_t{u32(good, size_t{u32(good, 52)} * bs)} * bs;
    const uint32_t n = u32(good, dir);
    int errors = 0;
    for (uint32_t s = 1; s < n; s++) {
      const uint32_t size = u32(good, dir + 4 + 4 * s);
      if (size == 0 || size == 0xffffffff) continue;
      for (uint32_t cut : {0u, 1u, 4u, 27u, 63u, size / 3, size / 2, size - 1}) {
        std::vector<uint8_t> b = good;
        put32(&b, dir + 4 + 4 * s, cut);  // fewer bytes than its blocks hold: the stream ends early
        auto r = pdb::PdbFile::from_bytes(b, "hostile.pdb");
        errors += r.ok() ? 0 : 1;
        exercise(std::move(b));
      }
    }
    CHECK(errors > 0);  // the info and DBI streams cut short are named errors
  }
}

TEST_CASE("corrupted PDB streams give errors or bounded answers", "[pdb]") {
  const std::vector<uint8_t> good = read_bytes(kHostileFixtures + "/pdb_cpp.pdb");
  // The directory, the info and DBI streams and every module stream of the fixture: their first KiB.
  const uint32_t bs = u32(good, 32);
  std::vector<size_t> targets = {0, size_t{u32(good, size_t{u32(good, 52)} * bs)} * bs};
  for (uint32_t s = 1; s <= 12; s++) targets.push_back(stream_offset(good, s));
  std::mt19937 rng(33);
  for (int round = 0; round < 3000; round++) {
    std::vector<uint8_t> b = good;
    const size_t base = targets[rng() % targets.size()];
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); k++) {
      const size_t at = base + rng() % 1024;
      if (at < b.size()) b[at] = static_cast<uint8_t>(rng());
    }
    exercise(std::move(b));
  }
}
