// SPDX-License-Identifier: Apache-2.0
// Bundles of PE+PDB (pipeline::build_bundle, doc/windows.md "Bundles of PE images") on the fixtures:
// the identity and the procedures' names against llvm-pdbutil-14, another build's PDB refused naming
// both keys, and truncated or corrupted PDBs giving named errors (or a bundle that reads), never a crash.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "lib/pdbutil_dump.hpp"
#include "pe/pe_object.hpp"
#include "pipeline/bundle_build.hpp"

using namespace stackprov;
using stackprov::test::parse_pdbutil_dump;
using stackprov::test::PdbutilDump;
namespace fs = std::filesystem;

namespace {

const std::string kBundleFixtures = STACKPROV_PDB_FIXTURES;

std::string read_bundle_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct BundleTempDir {
  fs::path path;
  BundleTempDir() {
    char tmpl[] = "/tmp/stackprov-pdbbundle-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~BundleTempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Fixture `fx`'s image copied into `t` with its RSDS path (the fixture's own PDB, which find_pdb
/// would try after the one beside the image) made to name nothing: the last letter of the PDB's
/// directory changed; the GUID+age stay. Only the PDB the test puts beside the image can serve.
void copy_image(const BundleTempDir& t, const std::string& fx) {
  std::string exe = read_bundle_text(kBundleFixtures + "/" + fx + ".exe");
  const std::string tail = "/" + fx + ".pdb";
  const std::string rsds = fs::path(kBundleFixtures).filename().string() + tail;
  const size_t at = exe.find(rsds);
  REQUIRE(at != std::string::npos);
  exe[at + rsds.size() - tail.size() - 1] ^= 0x20;  // "pdb-fixtures" -> "pdb-fixtureS"
  std::ofstream f(t.path / (fx + ".exe"), std::ios::binary);
  f.write(exe.data(), static_cast<std::streamsize>(exe.size()));
}

Result<std::vector<uint8_t>> bundle_of(const std::string& exe) {
  pipeline::BundleBuildInput in;
  in.paths = {exe};
  return pipeline::build_bundle(in);
}

/// The symbol-server key of a pdb-guid-age identity (GUID Data1-3 little-endian, Data4 as stored, age).
std::string key_of(std::span<const uint8_t> id) {
  REQUIRE(id.size() == 20);
  char buf[64];
  auto le = [&](size_t at, size_t n) {
    uint32_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | id[at + i];
    return v;
  };
  std::snprintf(buf, sizeof buf, "%08X%04X%04X", le(0, 4), le(4, 2), le(6, 2));
  std::string s = buf;
  for (size_t i = 8; i < 16; i++) {
    std::snprintf(buf, sizeof buf, "%02X", id[i]);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "%X", le(16, 4));
  return s + buf;
}

}  // namespace

TEST_CASE("a PE+PDB bundle: pdbutil's identity, and every procedure named as its public or itself", "[pdb][bundle]") {
  for (const char* fx : {"pdb_c", "pdb_cpp"}) {
    INFO(fx);
    const PdbutilDump want = parse_pdbutil_dump(read_bundle_text(kBundleFixtures + "/" + fx + ".pdbutil.txt"));
    auto bytes = bundle_of(kBundleFixtures + "/" + fx + ".exe");
    REQUIRE(bytes.ok());
    auto rd = bundle::BundleReader::open(bytes->data(), bytes->size());
    REQUIRE(rd.ok());
    REQUIRE(rd->modules().size() == 1);
    const bundle::ModuleView& m = rd->modules()[0];
    CHECK(m.id_kind == IdKind::kPdbGuidAge);
    CHECK(key_of(m.id) == want.key);
    CHECK(m.pdb_lines);
    auto pe = pe::PeObject::open(kBundleFixtures + "/" + fx + ".exe");
    REQUIRE(pe.ok());
    size_t checked = 0;
    for (const auto& p : want.procs) {
      if (p.code_size == 0 || p.segment == 0 || p.segment > pe.value()->sections().size()) continue;
      const uint64_t addr = pe.value()->image_base() + pe.value()->sections()[p.segment - 1].rva + p.code_offset;
      std::string name = p.name;  // llvm names the physical frame by the public starting there, if any
      for (const auto& pub : want.publics)
        if (pub.segment == p.segment && pub.offset == p.code_offset) name = pub.name;
      auto chain = rd->lookup(0, addr);
      REQUIRE(chain.ok());
      REQUIRE(!chain->empty());
      CHECK(chain.value()[0].function == name);
      checked++;
    }
    CHECK(checked >= 3);
  }
}

TEST_CASE("a PE+PDB bundle: another build's PDB beside the image is refused, naming both keys", "[pdb][bundle]") {
  const PdbutilDump c = parse_pdbutil_dump(read_bundle_text(kBundleFixtures + "/pdb_c.pdbutil.txt"));
  const PdbutilDump cpp = parse_pdbutil_dump(read_bundle_text(kBundleFixtures + "/pdb_cpp.pdbutil.txt"));
  BundleTempDir t;
  copy_image(t, "pdb_c");
  fs::copy_file(kBundleFixtures + "/pdb_cpp.pdb", t.path / "pdb_c.pdb");
  auto b = bundle_of((t.path / "pdb_c.exe").string());
  REQUIRE(!b.ok());
  CHECK(b.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  CHECK_THAT(b.error().message, Catch::Contains(c.key) && Catch::Contains(cpp.key));
}

TEST_CASE("a PE+PDB bundle of a truncated or corrupted PDB: a named error or a bundle that reads", "[pdb][bundle][hostile]") {
  const std::string pdb = read_bundle_text(kBundleFixtures + "/pdb_cpp.pdb");
  BundleTempDir t;
  copy_image(t, "pdb_cpp");
  const std::string exe = (t.path / "pdb_cpp.exe").string();
  size_t errors = 0, bundles = 0;
  auto attempt = [&](const std::string& bytes) {
    {
      std::ofstream f(t.path / "pdb_cpp.pdb", std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto b = bundle_of(exe);
    if (!b.ok()) {
      const int c = b.error().code;
      CHECK((c == SPROV_ERR_BAD_FORMAT || c == SPROV_ERR_TRUNCATED || c == SPROV_ERR_LIMIT ||
             c == SPROV_ERR_NOT_FOUND || c == SPROV_ERR_BUILD_ID_MISMATCH));
      CHECK_THAT(b.error().message, Catch::Contains("pdb_cpp.pdb"));
      errors++;
      return;
    }
    bundles++;
    auto rd = bundle::BundleReader::open(b->data(), b->size());
    REQUIRE(rd.ok());
    REQUIRE(rd->ranges(0).ok());
  };
  for (size_t len = 0; len < pdb.size(); len += 1021) attempt(pdb.substr(0, len));
  std::mt19937 rng(33);
  for (int i = 0; i < 300; i++) {
    std::string bad = pdb;
    bad[4096 + rng() % (bad.size() - 4096)] ^= static_cast<char>(1 + rng() % 255);
    attempt(bad);
  }
  attempt(pdb);
  CHECK(errors > 0);   // the truncations at least
  CHECK(bundles > 1);  // the whole file, and corruptions of bytes no lookup reads
}
