// SPDX-License-Identifier: Apache-2.0
// The module-source chain (issue 32: "acquire_module as ordinary tested code"): which source a
// snapshot module's data comes from -- its file, its bundle offline, the bundle instead of a file
// that is missing or another build -- and what fails, naming the module. Real files (coreutils'
// env and true, copied), a real bundle store built through the C ABI; the identities are the ones
// readelf -n prints.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "pipeline/module_source.hpp"
#include "stackprov/symbol_bundle.h"

using namespace stackprov;
namespace fs = std::filesystem;

namespace {

std::string readelf_build_id(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("readelf -n '" + path + "'").c_str(), "r"), pclose);
  REQUIRE(p);
  std::array<char, 512> line;
  while (fgets(line.data(), line.size(), p.get())) {
    std::string l(line.data());
    const size_t at = l.find("Build ID: ");
    if (at != std::string::npos) return l.substr(at + 10, l.find_first_of("\r\n", at) - at - 10);
  }
  return "";
}

struct Fixture {
  std::string dir;
  std::string lib;    // the module's file (a copy of env)
  std::string store;  // a bundle store holding env's bundle
  ModuleId id;        // env's build-id, as readelf says
  Fixture() {
    char tmpl[] = "/tmp/sprov-modsrc-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    lib = dir + "/libmod.so";
    fs::copy_file("/usr/bin/env", lib);
    id = ModuleId::from_hex(readelf_build_id("/usr/bin/env"));
    REQUIRE(id.len == 20);
    store = dir + "/store";
    sprov_bundle_store* bs = nullptr;
    REQUIRE(sprov_bundle_store_open(store.c_str(), SPROV_BUNDLE_STORE_CREATE, &bs) == 0);
    const char* paths[] = {lib.c_str()};
    void* bytes = nullptr;
    size_t len = 0;
    char digest[80];
    REQUIRE(sprov_bundle_build(paths, 1, nullptr, &bytes, &len, digest, sizeof digest) == 0);
    REQUIRE(sprov_bundle_store_put(bs, bytes, len, digest, sizeof digest) == 0);
    sprov_free(bytes);
    sprov_bundle_store_free(bs);
  }
  ~Fixture() { fs::remove_all(dir); }
  memory::SnapshotModule module() const {
    memory::SnapshotModule m;
    m.path = lib;
    m.start = 0x400000;
    m.end = 0x410000;
    m.build_id = id;
    return m;
  }
};

struct Chain {
  Context context;
  ModuleCache<unwind::LoadedModule> cache{16};
  std::atomic<uint64_t> loaded{0};
  pipeline::ModuleSources src;
  explicit Chain(ContextConfig cfg) : context(std::move(cfg)), src{context, context.config(), cache, loaded} {}
  Result<std::shared_ptr<unwind::LoadedModule>> acquire(const memory::SnapshotModule& m) {
    return pipeline::acquire_module(src, nullptr, m, "");
  }
};

ContextConfig with_store(const Fixture& f, bool offline) {
  ContextConfig c;
  c.has_bundle_store = true;
  c.bundle_store = f.store;
  c.offline = offline;
  return c;
}

}  // namespace

TEST_CASE("the file whose identity is the snapshot's is used, once", "[pipeline]") {
  Fixture f;
  Chain c{ContextConfig{}};
  auto a = c.acquire(f.module());
  REQUIRE(a.ok());
  CHECK(a.value()->has_elf());
  CHECK(a.value()->bundle() == nullptr);
  CHECK(a.value()->object()->id() == f.id);
  auto again = c.acquire(f.module());
  REQUIRE(again.ok());
  CHECK(again.value() == a.value());  // cached: loaded once
  CHECK(c.loaded == 1);
}

TEST_CASE("offline, the bundle is the module and the file is never opened", "[pipeline]") {
  Fixture f;
  Chain c{with_store(f, true)};
  auto a = c.acquire(f.module());
  REQUIRE(a.ok());
  CHECK_FALSE(a.value()->has_elf());
  REQUIRE(a.value()->bundle() != nullptr);
  CHECK(a.value()->bundle()->digest.rfind("sha256:", 0) == 0);
  // Without an identity there is nothing to look a bundle up by.
  memory::SnapshotModule anon = f.module();
  anon.build_id = ModuleId{};
  auto e = c.acquire(anon);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("has no build-id in the snapshot") != std::string::npos);
}

TEST_CASE("a missing file gives way to the bundle, or fails naming the path", "[pipeline]") {
  Fixture f;
  fs::remove(f.lib);
  Chain with{with_store(f, false)};
  auto a = with.acquire(f.module());
  REQUIRE(a.ok());
  CHECK(a.value()->bundle() != nullptr);
  Chain without{ContextConfig{}};
  auto e = without.acquire(f.module());
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == -ENOENT);
  CHECK(e.error().message.find(f.lib) != std::string::npos);
}

TEST_CASE("another build at the path is never used: the bundle of the snapshot's identity instead", "[pipeline]") {
  Fixture f;
  fs::remove(f.lib);
  fs::copy_file("/usr/bin/true", f.lib);  // another file, another build-id
  const std::string other = readelf_build_id("/usr/bin/true");
  REQUIRE(other != f.id.hex());
  Chain with{with_store(f, false)};
  auto a = with.acquire(f.module());
  REQUIRE(a.ok());
  CHECK(a.value()->bundle() != nullptr);
  CHECK_FALSE(a.value()->has_elf());
  Chain without{ContextConfig{}};
  auto e = without.acquire(f.module());
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  CHECK(e.error().message.find(other) != std::string::npos);
  CHECK(e.error().message.find(f.id.hex()) != std::string::npos);
}
