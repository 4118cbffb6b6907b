// SPDX-License-Identifier: Apache-2.0
// The bundle C ABI (symbol_bundle.h): chains in the documented order from known records, hostile bytes, errors naming values, the store.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bundle/format.hpp"
#include "stackprov/stackprov.h"

using namespace stackprov;

namespace {

std::string bundle_temp_dir() {
  char tmpl[] = "/tmp/sprov-capi-bundle-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

/// One module (build-id 20 x 0xab): outer [0x1000, 0x1020) at a.c:3:1 with `inl` inlined
/// at [0x1008, 0x1010) from a.c:10:5, itself at b.h:20:7; one unwind row at 0x1000.
std::vector<uint8_t> known_bundle() {
  bundle::BundleContents c;
  bundle::ModuleContents m;
  m.id = {bundle::IdKind::kElfBuildId, std::vector<uint8_t>(20, 0xab)};
  m.name = "known.so";
  bundle::RangeRecord outer;
  outer.start = 0x1000;
  outer.length = 0x20;
  outer.function = "outer";
  outer.file = "a.c";
  outer.line = 3;
  outer.column = 1;
  bundle::RangeRecord inl;
  inl.start = 0x1008;
  inl.length = 8;
  inl.depth = 1;
  inl.function = "inl";
  inl.file = "b.h";
  inl.line = 20;
  inl.column = 7;
  inl.call_file = "a.c";
  inl.call_line = 10;
  inl.call_column = 5;
  m.ranges = {outer, inl};
  bundle::UnwindRowRecord row;
  row.pc = 0x1000;
  row.kind = bundle::UnwindRowRecord::kCfaReg;
  row.cfa_reg = 7;  // RSP
  row.cfa_off = 16;
  row.ra_kind = bundle::UnwindRowRecord::kRaAtCfa;
  row.ra_reg = 16;  // RIP
  row.ra_off = -1;  // words
  m.unwind_rows = {row};
  c.modules.push_back(std::move(m));
  auto bytes = bundle::write_bundle(c);
  REQUIRE(bytes);
  return bytes.value();
}

}  // namespace

TEST_CASE("bundle C ABI: inline chain innermost first, unwind row text, module info", "[capi-bundle]") {
  const auto bytes = known_bundle();
  sprov_bundle* b = nullptr;
  REQUIRE(sprov_bundle_open_buf(bytes.data(), bytes.size(), &b) == 0);
  REQUIRE(sprov_bundle_module_count(b) == 1);
  SPROV_OPTS(sprov_bundle_module, m);
  REQUIRE(sprov_bundle_module_info(b, 0, &m) == 0);
  std::string ab;
  for (int i = 0; i < 20; ++i) ab += "ab";
  CHECK(std::string(m.id_hex) == ab);
  CHECK(m.id_kind == SPROV_BUNDLE_ID_ELF_BUILD_ID);
  CHECK(m.id_len == 20);
  CHECK(std::string(m.name) == "known.so");
  CHECK(m.range_count == 2);
  CHECK(m.unwind_row_count == 1);

  sprov_bundle_chain* ch = nullptr;
  REQUIRE(sprov_bundle_lookup(b, 0, 0x100a, &ch) == 0);
  REQUIRE(ch->count == 2);
  CHECK(std::string(ch->frames[0].function) == "inl");  // innermost: the address's own position
  CHECK(std::string(ch->frames[0].file) == "b.h");
  CHECK(ch->frames[0].line == 20);
  CHECK(ch->frames[0].column == 7);
  CHECK(std::string(ch->frames[1].function) == "outer");  // outermost: the call site of inl
  CHECK(std::string(ch->frames[1].file) == "a.c");
  CHECK(ch->frames[1].line == 10);
  CHECK(ch->frames[1].column == 5);
  sprov_free(ch);
  REQUIRE(sprov_bundle_lookup(b, 0, 0x1000, &ch) == 0);
  REQUIRE(ch->count == 1);
  CHECK(ch->frames[0].line == 3);
  sprov_free(ch);
  REQUIRE(sprov_bundle_lookup(b, 0, 0x2000, &ch) == 0);
  CHECK(ch->count == 0);
  sprov_free(ch);

  char* text = nullptr;
  REQUIRE(sprov_bundle_unwind_row_text(b, 0, 0x1004, &text, nullptr) == 0);
  CHECK(std::string(text) == "CFA=RSP+16: RIP=[CFA-8]");
  sprov_free(text);
  REQUIRE(sprov_bundle_unwind_row_text(b, 0, 0x10, &text, nullptr) == 0);
  CHECK(std::string(text) == "none");
  sprov_free(text);

  // Errors name the values.
  CHECK(sprov_bundle_module_info(b, 5, &m) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("module index 5") != std::string::npos);
  size_t idx = 0;
  CHECK(sprov_bundle_find_module(b, SPROV_BUNDLE_ID_ELF_BUILD_ID, "zz", &idx) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("'zz'") != std::string::npos);
  CHECK(sprov_bundle_find_module(b, SPROV_BUNDLE_ID_ELF_BUILD_ID, "0102", &idx) == SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find("0102") != std::string::npos);
  void* ex = nullptr;
  size_t ex_len = 0;
  CHECK(sprov_bundle_export(b, 7, nullptr, &ex, &ex_len) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("format 7") != std::string::npos);
  const size_t bad_module = 3;
  CHECK(sprov_bundle_export(b, SPROV_BUNDLE_EXPORT_SYMBFILE, &bad_module, &ex, &ex_len) == SPROV_ERR_INVALID_ARG);
  REQUIRE(sprov_bundle_export(b, SPROV_BUNDLE_EXPORT_SYMBFILE, nullptr, &ex, &ex_len) == 0);
  CHECK(ex_len > 8);
  CHECK(std::memcmp(ex, "symbfile", 8) == 0);  // the symbfile magic (symb-proto)
  sprov_free(ex);
  CHECK(sprov_bundle_find_module(b, 9, "0102", &idx) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("id kind 9") != std::string::npos);
  sprov_bundle_free(b);
}

TEST_CASE("bundle C ABI: every truncation and byte flip of a bundle is an error or a valid bundle, never a crash",
          "[capi-bundle]") {
  const auto bytes = known_bundle();
  for (size_t n = 0; n < bytes.size(); ++n) {
    sprov_bundle* b = nullptr;
    const int rc = sprov_bundle_open_buf(bytes.data(), n, &b);
    CHECK(rc == SPROV_ERR_BUNDLE);
    sprov_bundle_free(b);
  }
  size_t opened = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto v = bytes;
    v[i] ^= 0x5a;
    sprov_bundle* b = nullptr;
    if (sprov_bundle_open_buf(v.data(), v.size(), &b) != 0) continue;
    ++opened;
    sprov_bundle_chain* ch = nullptr;
    for (uint64_t a : {0x1000ull, 0x100aull, 0x101full})
      if (sprov_bundle_lookup(b, 0, a, &ch) == 0) sprov_free(ch);
    char* t = nullptr;
    if (sprov_bundle_unwind_row_text(b, 0, 0x1004, &t, nullptr) == 0) sprov_free(t);
    sprov_bundle_free(b);
  }
  INFO(opened << " of " << bytes.size() << " flipped copies opened");
  CHECK(opened < bytes.size());
}

TEST_CASE("bundle C ABI: put_blob stores by content only, promote indexes", "[capi-bundle]") {
  const std::string dir = bundle_temp_dir() + "/store";
  sprov_bundle_store* s = nullptr;
  REQUIRE(sprov_bundle_store_open(dir.c_str(), SPROV_BUNDLE_STORE_CREATE, &s) == 0);
  const auto bytes = known_bundle();
  char digest[SPROV_DIGEST_STRLEN], found[SPROV_DIGEST_STRLEN];
  REQUIRE(sprov_bundle_store_put_blob(s, bytes.data(), bytes.size(), digest, sizeof digest) == 0);
  std::string ab;
  for (int i = 0; i < 20; ++i) ab += "ab";
  CHECK(sprov_bundle_store_find(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, ab.c_str(), found, sizeof found) == SPROV_ERR_NOT_FOUND);
  sprov_bundle* b = nullptr;
  REQUIRE(sprov_bundle_open_digest(s, digest, &b) == 0);  // found by its digest
  sprov_bundle_free(b);
  char* report = nullptr;
  size_t errors = 99;
  REQUIRE(sprov_bundle_store_fsck(s, &report, nullptr, &errors) == 0);
  CHECK(errors == 0);
  CHECK(std::string(report) ==
        "checked 1 blobs, 1 modules, 0 id entries, 0 sidecars; 1 modules stored by content only (not indexed)\n");
  sprov_free(report);
  REQUIRE(sprov_bundle_store_promote(s, digest) == 0);
  REQUIRE(sprov_bundle_store_find(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, ab.c_str(), found, sizeof found) == 0);
  CHECK(std::string(found) == digest);
  const std::string ghost = "sha256:" + std::string(64, '0');
  CHECK(sprov_bundle_store_promote(s, ghost.c_str()) == SPROV_ERR_NOT_FOUND);
  sprov_bundle_store_free(s);
}

TEST_CASE("bundle C ABI: store put/find/blob/sidecars/fsck", "[capi-bundle]") {
  const std::string dir = bundle_temp_dir() + "/store";
  sprov_bundle_store* s = nullptr;
  CHECK(sprov_bundle_store_open(dir.c_str(), 0, &s) == SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find(dir) != std::string::npos);
  REQUIRE(sprov_bundle_store_open(dir.c_str(), SPROV_BUNDLE_STORE_CREATE, &s) == 0);
  const auto bytes = known_bundle();
  char digest[SPROV_DIGEST_STRLEN];
  REQUIRE(sprov_bundle_store_put(s, bytes.data(), bytes.size(), digest, sizeof digest) == 0);
  char* path = nullptr;
  REQUIRE(sprov_bundle_store_blob_path(s, digest, &path, nullptr) == 0);
  // sha256sum(1): the independent content address.
  FILE* p = popen(("sha256sum '" + std::string(path) + "'").c_str(), "r");
  REQUIRE(p);
  char buf[256] = {};
  REQUIRE(fgets(buf, sizeof buf, p));
  pclose(p);
  CHECK(std::string(digest) == "sha256:" + std::string(buf, 64));
  char found[SPROV_DIGEST_STRLEN];
  std::string upper, ab;
  for (int i = 0; i < 20; ++i) ab += "ab";
  for (int i = 0; i < 20; ++i) upper += "AB";
  REQUIRE(sprov_bundle_store_find(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, upper.c_str(), found, sizeof found) == 0);
  CHECK(std::string(found) == digest);
  CHECK(sprov_bundle_store_find(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, "0102", found, sizeof found) == SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find("0102") != std::string::npos);
  char small[8];
  CHECK(sprov_bundle_store_find(s, SPROV_BUNDLE_ID_ELF_BUILD_ID, upper.c_str(), small, sizeof small) ==
        SPROV_ERR_BUFFER_TOO_SMALL);
  sprov_bundle* b = nullptr;
  REQUIRE(sprov_bundle_open_digest(s, digest, &b) == 0);
  sprov_bundle_free(b);
  const std::string ghost = "sha256:" + std::string(64, '0');
  CHECK(sprov_bundle_open_digest(s, ghost.c_str(), &b) == SPROV_ERR_NOT_FOUND);
  CHECK(sprov_bundle_open_digest(s, "sha256:xyz", &b) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("sha256:xyz") != std::string::npos);
  char* sc = nullptr;
  CHECK(sprov_bundle_store_sidecar_path(s, digest, "dsse.json", &sc, nullptr) == SPROV_ERR_NOT_FOUND);
  CHECK(std::string(sprov_last_error_message()).find("'dsse.json'") != std::string::npos);
  REQUIRE(sprov_bundle_store_put_sidecar(s, digest, "notes", "hello", 5) == 0);
  REQUIRE(sprov_bundle_store_sidecar_path(s, digest, "notes", &sc, nullptr) == 0);
  sprov_free(sc);

  char* report = nullptr;
  size_t errors = 99;
  REQUIRE(sprov_bundle_store_fsck(s, &report, nullptr, &errors) == 0);
  CHECK(errors == 0);
  CHECK(std::string(report) == "checked 1 blobs, 1 modules, 1 id entries, 1 sidecars\n");
  sprov_free(report);
  // A flipped byte in the blob: one error line naming it.
  REQUIRE(chmod(path, 0644) == 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(40);
    char c = 0;
    f.read(&c, 1);
    c ^= 1;
    f.seekp(40);
    f.write(&c, 1);
  }
  REQUIRE(sprov_bundle_store_fsck(s, &report, nullptr, &errors) == 0);
  // Two findings: the blob, and the id entry naming a blob that no longer (validly) holds it.
  CHECK(errors == 2);
  CHECK(std::string(report).rfind("error " + std::string(path) + ": content hashes to", 0) == 0);
  CHECK(std::string(report).find("error " + dir + "/ids/linux/elf-build-id/" + ab + ": names " + digest) !=
        std::string::npos);
  sprov_free(report);
  sprov_free(path);
  sprov_bundle_store_free(s);
}

// Attack 4 (doc/hardening.md): another user truncates a bundle file the library has mapped. The
// old reader died of SIGBUS at the next lookup; now the lookup is an error naming the bundle.
TEST_CASE("bundle C ABI: a bundle file truncated after open gives an error, not SIGBUS", "[capi-bundle]") {
  bundle::BundleContents c;
  bundle::ModuleContents m;
  m.id = {bundle::IdKind::kElfBuildId, std::vector<uint8_t>(20, 0x5e)};
  m.name = "big.so";
  for (int i = 0; i < 12000; ++i) {  // records over many pages (format 3: ~100 KB, format 8: ~45 KB)
    bundle::RangeRecord r;
    r.start = 0x1000 + 0x40 * static_cast<uint64_t>(i);
    r.length = 0x40;
    r.function = "function_number_" + std::to_string(i);
    r.file = "file_" + std::to_string(i % 97) + ".c";
    r.line = static_cast<uint32_t>(i + 1);
    m.ranges.push_back(r);
  }
  c.modules.push_back(std::move(m));
  auto bytes = bundle::write_bundle(c);
  REQUIRE(bytes);
  REQUIRE(bytes.value().size() > 8 * 4096);  // the lookup's records lie far past the 4 KiB left below
  const std::string path = bundle_temp_dir() + "/big.sbundle";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.value().data()), static_cast<std::streamsize>(bytes.value().size()));
  sprov_bundle* b = nullptr;
  REQUIRE(sprov_bundle_open_file(path.c_str(), &b) == 0);
  REQUIRE(truncate(path.c_str(), 4096) == 0);
  sprov_bundle_chain* chain = nullptr;
  const int rc = sprov_bundle_lookup(b, 0, 0x1000 + 0x40 * 5000 + 4, &chain);
  CHECK(rc == SPROV_ERR_IO);
  CHECK(std::string(sprov_last_error_message()).find("was truncated while mapped") != std::string::npos);
  sprov_free(chain);
  sprov_bundle_free(b);
  // The same lookup on the whole file names the record written above (the independent answer).
  REQUIRE(sprov_bundle_open_buf(bytes.value().data(), bytes.value().size(), &b) == 0);
  REQUIRE(sprov_bundle_lookup(b, 0, 0x1000 + 0x40 * 5000 + 4, &chain) == 0);
  REQUIRE(chain->count == 1);
  CHECK(std::string(chain->frames[0].function) == "function_number_5000");
  sprov_free(chain);
  sprov_bundle_free(b);
}
