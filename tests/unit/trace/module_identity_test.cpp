// SPDX-License-Identifier: Apache-2.0
// A trace frame's module identity has a kind, and the trace pipeline joins frames to bundles by it
// (issue 32): a Mach-O UUID frame finds the bundle module of that UUID, never an ELF build-id of
// the same bytes, and an old trace's frame (no kind) is an ELF build-id.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "bundle/format.hpp"
#include "evidence/encoding.hpp"
#include "pipeline/trace.hpp"
#include "symbolize/bundle_store.hpp"
#include "trace/trace.hpp"

using namespace stackprov;

TEST_CASE("frame_module_id: the kind column names the identity's kind; none is an ELF build-id", "[trace]") {
  trace::Frame f;
  f.module_build_id = "00112233445566778899aabbccddeeff";
  ModuleId id = trace::frame_module_id(f);
  CHECK(id.kind == IdKind::kElfBuildId);  // a frame of a trace written before the kind was stored
  CHECK(id.len == 16);
  CHECK(id.hex() == f.module_build_id);
  f.module_id_kind = "macho-uuid";
  id = trace::frame_module_id(f);
  CHECK(id.kind == IdKind::kMachoUuid);
  CHECK(id.hex() == f.module_build_id);
  f.module_id_kind = "pdb-guid-age";
  f.module_build_id = "43e4ebb6038d8c074c4c44205044422e01000000";
  CHECK(trace::frame_module_id(f).kind == IdKind::kPdbGuidAge);
  f.module_id_kind = "pe-code-id";
  f.module_build_id = "2b4ef16300103600";  // TimeDateStamp 63F14E2B, SizeOfImage 0x361000 (LE)
  CHECK(trace::frame_module_id(f).kind == IdKind::kPeCodeId);
  CHECK(trace::frame_module_id(f).len == 8);
  f.module_id_kind = "coff-timestamp";  // no such kind: no identity, not an ELF one
  CHECK(trace::frame_module_id(f).empty());
  f.module_id_kind = "none";
  CHECK(trace::frame_module_id(f).empty());
  f.module_id_kind = "macho-uuid";
  f.module_build_id = "0g";  // not hex
  CHECK(trace::frame_module_id(f).empty());
  CHECK(id_kind_from_name("elf-build-id") == IdKind::kElfBuildId);
  CHECK_FALSE(id_kind_from_name("unknown").has_value());
}

TEST_CASE("find_bundle joins by the identity's kind and bytes", "[trace]") {
  char tmpl[] = "/tmp/sprov-trace-ids-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  auto store = symbolize::BundleStore::open(std::string(tmpl) + "/store", true);
  REQUIRE(store.ok());
  bundle::BundleContents c;
  bundle::ModuleContents m;
  m.id = {IdKind::kMachoUuid, std::vector<uint8_t>(16, 0x5a)};
  m.name = "libtoy.dylib";
  c.modules.push_back(m);
  auto bytes = bundle::write_bundle(c);
  REQUIRE(bytes.ok());
  auto put = store.value().put(bytes.value(), symbolize::BundleStore::Index::kModules);
  REQUIRE(put.ok());
  // The independent answer: the store's digest is the sha256 of the bundle's bytes.
  const std::string want = evidence::digest_string(evidence::sha256(bytes.value().data(), bytes.value().size()));
  CHECK(put.value() == want);

  trace::Frame f;
  for (int i = 0; i < 16; i++) f.module_build_id += "5a";
  f.module_id_kind = "macho-uuid";
  auto found = pipeline::find_bundle(store.value(), trace::frame_module_id(f));
  REQUIRE(found.has_value());
  CHECK(*found == want);
  f.module_id_kind.clear();  // the same bytes as an ELF build-id: another module
  CHECK_FALSE(pipeline::find_bundle(store.value(), trace::frame_module_id(f)).has_value());
  f.module_id_kind = "pdb-guid-age";
  CHECK_FALSE(pipeline::find_bundle(store.value(), trace::frame_module_id(f)).has_value());
  std::filesystem::remove_all(tmpl);
}
