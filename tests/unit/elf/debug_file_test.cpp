// SPDX-License-Identifier: Apache-2.0
// find_debug_file on objcopy-made debug files: build-id path, debuglink places, CRC and build-id mismatches.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "elf/debug_file.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

const char* kSourceA = "int helper(int x){return x+1;}\nint main(void){return helper(41)-42;}\n";
const char* kSourceB = "int other(int x){return x*2;}\nint main(void){return other(21)-42;}\n";

struct Fixture {
  TempDir dir;
  std::string exe, dbg, stripped, id;
  Fixture() {
    exe = dir.file("prog");
    REQUIRE(compile_c(dir, kSourceA, "-g -O1 -Wl,--build-id=sha1", exe));
    dbg = dir.file("prog.debug");
    REQUIRE(run("objcopy --only-keep-debug '" + exe + "' '" + dbg + "'").status == 0);
    stripped = dir.file("prog.stripped");
    REQUIRE(run("objcopy --strip-debug '" + exe + "' '" + stripped + "'").status == 0);
    id = readelf_build_id(exe);
    REQUIRE(id.size() == 40);
  }
  std::string build_id_path(const std::string& root) const {
    return root + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  }
};

}  // namespace

TEST_CASE("Debug file found through the build-id path", "[elf][debug_file]") {
  Fixture fx;
  const std::string root = fx.dir.file("debugroot");
  const std::string target = fx.build_id_path(root);
  REQUIRE(run("mkdir -p \"$(dirname '" + target + "')\" && cp '" + fx.dbg + "' '" + target + "'").status == 0);
  auto img = ElfImage::open(fx.stripped);
  REQUIRE(img.ok());
  REQUIRE_FALSE((*img)->section(".debug_info"));
  DebugFileOptions opts;
  opts.debug_dirs = {fx.dir.file("empty"), root};
  auto found = find_debug_file(**img, opts);
  REQUIRE(found.ok());
  CHECK((*found)->path() == target);
  CHECK((*found)->build_id().hex() == fx.id);
  CHECK((*found)->section(".debug_info"));
  // With a sysroot prefix.
  DebugFileOptions sys;
  sys.sysroot = fx.dir.path();
  sys.debug_dirs = {"/debugroot"};
  auto via_sysroot = find_debug_file(**img, sys);
  REQUIRE(via_sysroot.ok());
  CHECK((*via_sysroot)->build_id().hex() == fx.id);
}

TEST_CASE("Debug file found through .gnu_debuglink in each place", "[elf][debug_file]") {
  Fixture fx;
  // The link is made next to the debug file so objcopy computes the CRC.
  const std::string linked = fx.dir.file("linked");
  REQUIRE(run("cd '" + fx.dir.path() + "' && objcopy --add-gnu-debuglink=prog.debug prog.stripped linked").status == 0);
  DebugFileOptions opts;
  opts.debug_dirs = {fx.dir.file("dbgdir")};

  SECTION("next to the binary") {
    auto img = ElfImage::open(linked);
    REQUIRE(img.ok());
    auto found = find_debug_file(**img, opts);
    REQUIRE(found.ok());
    CHECK((*found)->path() == fx.dbg);
  }
  SECTION("next to a binary opened by a bare relative name") {
    char cwd[4096];
    REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
    REQUIRE(chdir(fx.dir.path().c_str()) == 0);
    auto img = ElfImage::open("linked");
    auto found = img.ok() ? find_debug_file(**img, opts) : Result<std::shared_ptr<ElfImage>>(img.error());
    REQUIRE(chdir(cwd) == 0);
    REQUIRE(found.ok());
    CHECK((*found)->build_id().hex() == fx.id);
  }
  SECTION("in the binary's .debug/ directory") {
    const std::string sub = fx.dir.file("bin");
    REQUIRE(run("mkdir -p '" + sub + "/.debug' && cp '" + linked + "' '" + sub + "/prog' && cp '" + fx.dbg + "' '" + sub + "/.debug/prog.debug'").status == 0);
    auto img = ElfImage::open(sub + "/prog");
    REQUIRE(img.ok());
    auto found = find_debug_file(**img, opts);
    REQUIRE(found.ok());
    CHECK((*found)->path() == sub + "/.debug/prog.debug");
  }
  SECTION("under <debug_dir>/<binary's dir>/") {
    const std::string sub = fx.dir.file("bin2");
    const std::string mirror = opts.debug_dirs[0] + sub;
    REQUIRE(run("mkdir -p '" + sub + "' '" + mirror + "' && cp '" + linked + "' '" + sub + "/prog' && cp '" + fx.dbg + "' '" + mirror + "/prog.debug'").status == 0);
    auto img = ElfImage::open(sub + "/prog");
    REQUIRE(img.ok());
    auto found = find_debug_file(**img, opts);
    REQUIRE(found.ok());
    CHECK((*found)->path() == mirror + "/prog.debug");
  }
  SECTION("a CRC mismatch is rejected") {
    // Changing one byte of the debug file keeps it a valid ELF but changes its CRC.
    REQUIRE(run("printf 'X' >> '" + fx.dbg + "'").status == 0);
    auto img = ElfImage::open(linked);
    REQUIRE(img.ok());
    auto found = find_debug_file(**img, opts);
    REQUIRE_FALSE(found.ok());
    CHECK(found.error().code == SPROV_ERR_DEBUGLINK_CRC);
    CHECK(found.error().message.find(fx.dbg) != std::string::npos);
  }
}

TEST_CASE("A debug file with another build-id is a mismatch naming both ids", "[elf][debug_file]") {
  Fixture fx;
  const std::string other = fx.dir.file("other");
  REQUIRE(compile_c(fx.dir, kSourceB, "-g -O1 -Wl,--build-id=sha1", other));
  const std::string other_dbg = fx.dir.file("other.debug");
  REQUIRE(run("objcopy --only-keep-debug '" + other + "' '" + other_dbg + "'").status == 0);
  const std::string other_id = readelf_build_id(other);
  REQUIRE(other_id != fx.id);
  const std::string root = fx.dir.file("debugroot");
  const std::string target = fx.build_id_path(root);
  REQUIRE(run("mkdir -p \"$(dirname '" + target + "')\" && cp '" + other_dbg + "' '" + target + "'").status == 0);
  auto img = ElfImage::open(fx.stripped);
  REQUIRE(img.ok());
  DebugFileOptions opts;
  opts.debug_dirs = {root};
  auto found = find_debug_file(**img, opts);
  REQUIRE_FALSE(found.ok());
  CHECK(found.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  CHECK(found.error().message.find(fx.id) != std::string::npos);
  CHECK(found.error().message.find(other_id) != std::string::npos);
}

TEST_CASE("Nothing to find is SPROV_ERR_NOT_FOUND naming the places searched", "[elf][debug_file]") {
  Fixture fx;
  auto img = ElfImage::open(fx.stripped);
  REQUIRE(img.ok());
  DebugFileOptions opts;
  opts.debug_dirs = {fx.dir.file("nowhere")};
  auto found = find_debug_file(**img, opts);
  REQUIRE_FALSE(found.ok());
  CHECK(found.error().code == SPROV_ERR_NOT_FOUND);
  CHECK(found.error().message.find(fx.build_id_path(fx.dir.file("nowhere"))) != std::string::npos);
}

TEST_CASE("looked_at lists every place in search order with what was there", "[elf][debug_file]") {
  using Outcome = object::DebugFileCandidate::Outcome;
  Fixture fx;
  const std::string other = fx.dir.file("other");
  REQUIRE(compile_c(fx.dir, kSourceB, "-g -O1 -Wl,--build-id=sha1", other));
  const std::string other_id = readelf_build_id(other);
  const std::string root = fx.dir.file("debugroot");
  const std::string wrong = fx.build_id_path(root);
  REQUIRE(run("mkdir -p \"$(dirname '" + wrong + "')\" && objcopy --only-keep-debug '" + other + "' '" + wrong + "'")
              .status == 0);
  const std::string linked = fx.dir.file("linked");
  REQUIRE(run("cd '" + fx.dir.path() + "' && objcopy --add-gnu-debuglink=prog.debug prog.stripped linked").status == 0);
  auto img = ElfImage::open(linked);
  REQUIRE(img.ok());
  DebugFileOptions opts;
  opts.debug_dirs = {fx.dir.file("empty"), root};

  SECTION("the debuglink file next to the binary is used after the build-id paths") {
    std::vector<object::DebugFileCandidate> seen;
    auto found = find_debug_file(**img, opts, &seen);
    REQUIRE(found.ok());
    REQUIRE(seen.size() == 3);
    CHECK(seen[0].rule == "build-id");
    CHECK(seen[0].path == fx.build_id_path(fx.dir.file("empty")));
    CHECK(seen[0].outcome == Outcome::kMissing);
    CHECK(seen[1].path == wrong);
    CHECK(seen[1].outcome == Outcome::kIdentityMismatch);
    CHECK(seen[1].reason.find(other_id) != std::string::npos);
    CHECK(seen[1].reason.find(fx.id) != std::string::npos);
    CHECK(seen[2].rule == "debuglink");
    CHECK(seen[2].path == fx.dbg);
    CHECK(seen[2].outcome == Outcome::kUsed);
  }
  SECTION("a debuglink file with another CRC, then the places that are missing") {
    REQUIRE(run("printf 'X' >> '" + fx.dbg + "'").status == 0);
    std::vector<object::DebugFileCandidate> seen;
    auto found = find_debug_file(**img, opts, &seen);
    REQUIRE_FALSE(found.ok());
    // Two build-id paths, then the binary's dir, its .debug/ and each <debug_dir>/<binary's dir>/.
    REQUIRE(seen.size() == 6);
    CHECK(seen[2].path == fx.dbg);
    CHECK(seen[2].outcome == Outcome::kCrcMismatch);
    CHECK(seen[3].path == fx.dir.path() + "/.debug/prog.debug");
    CHECK(seen[3].outcome == Outcome::kMissing);
    CHECK(seen[4].path == fx.dir.file("empty") + fx.dir.path() + "/prog.debug");
    CHECK(seen[5].outcome == Outcome::kMissing);
  }
  SECTION("nothing is gathered without looked_at") {
    auto found = find_debug_file(**img, opts);
    CHECK(found.ok());
  }
}
