// SPDX-License-Identifier: Apache-2.0
// The PDB reader against llvm-pdbutil-14 (GUID, age, modules, procedures, publics) on PDBs built by the tests,
// and finding a PE's PDB (beside the image, debug directories, symbol-store layout, GUID+age mismatch).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>

#include "lib/pdbutil_dump.hpp"
#include "pdb/pdb_file.hpp"
#include "pdb/pdb_find.hpp"
#include "pe/pe_object.hpp"

using namespace stackprov;
using namespace stackprov::test;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = STACKPROV_PDB_FIXTURES;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// A fresh directory under the build's temporary area (removed by the caller's scope).
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/stackprov-pdb-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

pdb::PdbWanted wanted_of(const pe::PeObject& pe) {
  pdb::PdbWanted w;
  w.image_path = pe.path();
  w.rsds_path = pe.codeview()->pdb_path;
  w.id = pe.id();
  return w;
}

}  // namespace

TEST_CASE("PDB identity, modules, procedures and publics equal llvm-pdbutil-14's", "[pdb]") {
  for (const char* fx : {"pdb_c", "pdb_cpp"}) {
    INFO(fx);
    const PdbutilDump want = parse_pdbutil_dump(read_text(kFixtures + "/" + fx + ".pdbutil.txt"));
    REQUIRE(!want.key.empty());
    auto f = pdb::PdbFile::open(kFixtures + "/" + fx + ".pdb");
    REQUIRE(f.ok());
    pdb::PdbFile& p = *f.value();
    CHECK(pdb::guid_age_key(p.id()) == want.key);
    CHECK(p.age() == want.age);
    // The PE's RSDS record names the same GUID+age, and both key functions agree.
    auto pe = pe::PeObject::open(kFixtures + "/" + fx + ".exe");
    REQUIRE(pe.ok());
    CHECK(pe::symbol_server_key(pe.value()->id()) == want.key);
    CHECK(pe.value()->id() == p.id());

    REQUIRE(p.modules().size() == want.modules.size());
    for (size_t i = 0; i < want.modules.size(); i++) {
      CHECK(p.modules()[i].name == want.modules[i].name);
      CHECK(p.modules()[i].obj_name == want.modules[i].obj);
      CHECK(p.modules()[i].stream == want.modules[i].stream);
    }

    std::vector<std::tuple<uint32_t, uint32_t, std::string, uint32_t, uint32_t, uint32_t, uint32_t>> got_procs,
        want_procs;
    for (const PdbutilProc& w : want.procs)
      want_procs.emplace_back(w.module, w.offset, w.name, w.end, w.segment, w.code_offset, w.code_size);
    for (size_t m = 0; m < p.modules().size(); m++) {
      auto procs = p.procs(m);
      REQUIRE(procs.ok());
      for (const pdb::Proc& pr : procs.value())
        got_procs.emplace_back(static_cast<uint32_t>(m), pr.record, pr.name, pr.end, pr.segment, pr.code_offset,
                               pr.code_size);
    }
    CHECK(!want_procs.empty());
    CHECK(got_procs == want_procs);

    auto pubs = p.publics();
    REQUIRE(pubs.ok());
    std::set<std::tuple<std::string, uint32_t, uint32_t, bool>> got_pubs, want_pubs;
    for (const PdbutilPublic& w : want.publics) want_pubs.emplace(w.name, w.segment, w.offset, w.function);
    for (const pdb::Public& pu : pubs.value()) got_pubs.emplace(pu.name, pu.segment, pu.offset, (pu.flags & 2) != 0);
    CHECK(!want_pubs.empty());
    CHECK(got_pubs == want_pubs);
    // The address map is sorted by section and offset (the lookup's binary search relies on it).
    CHECK(std::is_sorted(pubs.value().begin(), pubs.value().end(), [](const pdb::Public& a, const pdb::Public& b) {
      return std::tie(a.segment, a.offset) < std::tie(b.segment, b.offset);
    }));
  }
}

TEST_CASE("a PE's PDB is found beside the image, in a debug directory and in a symbol-store layout", "[pdb]") {
  auto pe = pe::PeObject::open(kFixtures + "/pdb_c.exe");
  REQUIRE(pe.ok());
  const std::string key = pe::symbol_server_key(pe.value()->id());
  pdb::PdbWanted want = wanted_of(*pe.value());
  object::DebugFileOptions none;
  none.debug_dirs.clear();

  SECTION("beside the image (the RSDS path's base name in the image's directory)") {
    TempDir t;
    fs::copy_file(kFixtures + "/pdb_c.exe", t.path / "moved.exe");
    fs::copy_file(kFixtures + "/pdb_c.pdb", t.path / "pdb_c.pdb");
    want.image_path = (t.path / "moved.exe").string();
    want.rsds_path = "C:\\build\\out\\pdb_c.pdb";  // a Windows path: its base name is used
    std::vector<object::DebugFileCandidate> looked;
    auto f = pdb::find_pdb(want, none, &looked);
    REQUIRE(f.ok());
    CHECK(f.value()->path() == (t.path / "pdb_c.pdb").string());
    REQUIRE(looked.size() == 1);
    CHECK(looked[0].rule == "beside-image");
  }
  SECTION("the symbol-store layout DIR/NAME.pdb/KEY/NAME.pdb") {
    TempDir t;
    fs::create_directories(t.path / "img");
    fs::create_directories(t.path / "store" / "pdb_c.pdb" / key);
    fs::copy_file(kFixtures + "/pdb_c.exe", t.path / "img" / "pdb_c.exe");
    fs::copy_file(kFixtures + "/pdb_c.pdb", t.path / "store" / "pdb_c.pdb" / key / "pdb_c.pdb");
    want.image_path = (t.path / "img" / "pdb_c.exe").string();
    want.rsds_path = (t.path / "nowhere" / "pdb_c.pdb").string();
    object::DebugFileOptions opts;
    opts.debug_dirs = {(t.path / "store").string()};
    std::vector<object::DebugFileCandidate> looked;
    auto f = pdb::find_pdb(want, opts, &looked);
    REQUIRE(f.ok());
    CHECK(f.value()->path() == (t.path / "store" / "pdb_c.pdb" / key / "pdb_c.pdb").string());
    REQUIRE(looked.size() == 4);  // beside, RSDS path, DIR/NAME.pdb, the store
    CHECK(looked[3].rule == "symbol-store");
    CHECK(looked[3].outcome == object::DebugFileCandidate::Outcome::kUsed);
    // Without the directory: not found, naming the places searched.
    auto nf = pdb::find_pdb(want, none);
    REQUIRE(!nf.ok());
    CHECK(nf.error().code == SPROV_ERR_NOT_FOUND);
    CHECK_THAT(nf.error().message, Catch::Contains(key) && Catch::Contains("searched"));
  }
  SECTION("a PDB with another GUID+age is refused, naming both keys") {
    TempDir t;
    fs::copy_file(kFixtures + "/pdb_c.exe", t.path / "pdb_c.exe");
    fs::copy_file(kFixtures + "/pdb_cpp.pdb", t.path / "pdb_c.pdb");  // the other fixture's PDB
    auto other = pdb::PdbFile::open(kFixtures + "/pdb_cpp.pdb");
    REQUIRE(other.ok());
    const std::string other_key = pdb::guid_age_key(other.value()->id());
    REQUIRE(other_key != key);
    want.image_path = (t.path / "pdb_c.exe").string();
    want.rsds_path = "pdb_c.pdb";
    auto f = pdb::find_pdb(want, none);
    REQUIRE(!f.ok());
    CHECK(f.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
    CHECK_THAT(f.error().message, Catch::Contains(key) && Catch::Contains(other_key));
  }
}
