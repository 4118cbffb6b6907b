// SPDX-License-Identifier: Apache-2.0
// A plug-in format through the unwinder (issue 32): a toy module file with its own unwind table
// kind, registered with one call each, is opened by the module-source chain (object::open), its
// table made a source once, and a snapshot through it unwinds by the public C ABI to the frames
// the hand-built stack says, each named by its method and the module's Mach-O-style identity.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "stackprov/stackprov.h"
#include "stackprov/symbol_bundle.h"
#include "tests/unit/object/toy_format.hpp"
#include "tests/unit/object/toy_rows.hpp"

using namespace stackprov;

namespace {

// toy_main [0x1000, 0x1020): cfa = rsp + 16; toy_leaf [0x1020, 0x1030): cfa = rsp + 8.
const std::vector<uint8_t> kUuid = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
                                    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

std::string write_toy() {
  const auto bytes = toy::build(Arch::kX86_64, kUuid, {{0x1000, 0x20, "toy_main"}, {0x1020, 0x10, "toy_leaf"}},
                                {{0x1000, 16}, {0x1020, 8}}, 0x1000, std::vector<uint8_t>(0x30, 0x90));
  char name[] = "/tmp/sprov-toy-XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  return name;
}

struct Frame {
  uint64_t pc, sp;
  int method;
  int32_t id_kind;
};

constexpr uint64_t kBias = 0x400000, kSp = 0x7ff000;

/// The snapshot the toy rows describe: the module at kBias with identity `id`; toy_leaf's return
/// address at [rsp] (into toy_main + 0x10), then toy_main's frame of 16 bytes whose
/// return-address slot holds 0: the end of the stack; rip in toy_leaf, rbp 0 (no frame-pointer
/// chain to fall back on).
sprov_snapshot* toy_snapshot(const std::string& path, const std::vector<uint8_t>& id) {
  sprov_snapshot* snap = nullptr;
  REQUIRE(sprov_snapshot_new(SPROV_ARCH_X86_64, SPROV_ENDIAN_LITTLE, &snap) == 0);
  sprov_module_info mi{};
  mi.sz = sizeof mi;
  mi.start = kBias + 0x1000;
  mi.end = kBias + 0x1030;
  mi.load_bias = kBias;
  mi.path = path.c_str();
  mi.id_kind = SPROV_ID_MACHO_UUID;
  mi.id = id.data();
  mi.id_len = static_cast<uint32_t>(id.size());
  REQUIRE(sprov_snapshot_add_module(snap, &mi) == 0);
  const uint64_t stack[4] = {kBias + 0x1010, 0x1111, 0, 0x2222};
  REQUIRE(sprov_snapshot_add_memory(snap, kSp, stack, sizeof stack) == 0);
  REQUIRE(sprov_snapshot_set_reg(snap, 16, kBias + 0x1024) == 0);  // rip
  REQUIRE(sprov_snapshot_set_reg(snap, 7, kSp) == 0);              // rsp
  REQUIRE(sprov_snapshot_set_reg(snap, 6, 0) == 0);                // rbp
  return snap;
}

}  // namespace

TEST_CASE("a toy-format module unwinds through its own table kind", "[object][unwind]") {
  object::register_format(&toy::kToyFormat);
  unwind::register_table_kind(&toy::kRowsKind);
  const std::string path = write_toy();
  sprov_snapshot* snap = toy_snapshot(path, kUuid);

  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(nullptr, &ctx) == 0);
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &st) == 0);
  std::vector<Frame> got;
  for (size_t i = 0; i < sprov_stack_frame_count(st); i++) {
    sprov_frame f{};
    f.sz = sizeof f;
    REQUIRE(sprov_stack_frame(st, i, &f) == 0);
    got.push_back({f.pc, f.sp, f.method, f.id_kind});
  }
  INFO("stop " << sprov_stop_reason_name(sprov_stack_stop_reason(st)));
  REQUIRE(got.size() == 2);
  CHECK(got[0].pc == kBias + 0x1024);
  CHECK(got[0].method == SPROV_METHOD_CONTEXT);
  CHECK(got[1].pc == kBias + 0x1010);
  CHECK(got[1].sp == kSp + 8);
  CHECK(got[1].method == SPROV_METHOD_UNWIND_TABLE);
  CHECK(sprov_method_rung(got[1].method) == SPROV_RUNG_TABLE);
  CHECK(std::string(sprov_method_name(got[1].method)) == "unwind_table");
  CHECK(got[0].id_kind == SPROV_ID_MACHO_UUID);
  CHECK(sprov_stack_stop_reason(st) == SPROV_STOP_END_OF_STACK);
  // Named by the toy's own symbol table (frame 1 at its return address - 1).
  sprov_symbolizer* sym = nullptr;
  REQUIRE(sprov_symbolizer_new(ctx, nullptr, &sym) == 0);
  const char* names[] = {"toy_leaf", "toy_main"};
  const uint64_t offsets[] = {0x4, 0x10};
  for (size_t i = 0; i < 2; i++) {
    sprov_symbol s{};
    s.sz = sizeof s;
    REQUIRE(sprov_symbolizer_frame(sym, st, i, &s) == 0);
    REQUIRE(s.name != nullptr);
    CHECK(std::string(s.name) == names[i]);
    CHECK(s.offset == offsets[i]);
    CHECK(s.resolver == SPROV_RESOLVER_SYMTAB);
    CHECK(std::string(s.source_path) == path);
  }
  sprov_symbolizer_free(sym);
  sprov_stack_free(st);

  // The same module file with another identity than the snapshot's is not used (never by path).
  std::vector<uint8_t> wrong = kUuid;
  wrong[0] ^= 1;
  sprov_snapshot* other = toy_snapshot(path, wrong);
  REQUIRE(sprov_unwinder_unwind(uw, other, &st) == 0);
  CHECK(sprov_stack_frame_count(st) == 1);
  CHECK(sprov_stack_stop_reason(st) != SPROV_STOP_END_OF_STACK);
  sprov_stack_free(st);
  sprov_snapshot_free(other);

  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  sprov_snapshot_free(snap);
  unlink(path.c_str());
}

TEST_CASE("a toy-format module goes into a bundle and resolves offline from it alone", "[object][bundle]") {
  object::register_format(&toy::kToyFormat);
  unwind::register_table_kind(&toy::kRowsKind);
  const std::string path = write_toy();
  char dir_tmpl[] = "/tmp/sprov-toy-store-XXXXXX";
  REQUIRE(mkdtemp(dir_tmpl) != nullptr);
  const std::string store = std::string(dir_tmpl) + "/store";

  // The bundle: built from the file by the public C ABI, stored (and indexed by its identity).
  const char* paths[] = {path.c_str()};
  void* bytes = nullptr;
  size_t len = 0;
  char digest[80];
  REQUIRE(sprov_bundle_build(paths, 1, nullptr, &bytes, &len, digest, sizeof digest) == 0);
  sprov_bundle_store* bs = nullptr;
  REQUIRE(sprov_bundle_store_open(store.c_str(), SPROV_BUNDLE_STORE_CREATE, &bs) == 0);
  REQUIRE(sprov_bundle_store_put(bs, bytes, len, digest, sizeof digest) == 0);
  sprov_bundle_store_free(bs);
  sprov_bundle* b = nullptr;
  REQUIRE(sprov_bundle_open_buf(bytes, len, &b) == 0);
  sprov_free(bytes);
  REQUIRE(sprov_bundle_module_count(b) == 1);
  sprov_bundle_module bm{};
  bm.sz = sizeof bm;
  REQUIRE(sprov_bundle_module_info(b, 0, &bm) == 0);
  CHECK(bm.id_kind == SPROV_BUNDLE_ID_MACHO_UUID);
  CHECK(std::string(bm.id_hex) == "1032547698badcfe0123456789abcdef");
  CHECK(bm.range_count == 2);       // toy_main, toy_leaf
  CHECK(bm.unwind_row_count == 3);  // 0x1000 cfa+16, 0x1020 cfa+8, 0x1030 no info
  sprov_bundle_free(b);
  unlink(path.c_str());  // from here on the module file is gone: only the bundle knows it

  sprov_snapshot* snap = toy_snapshot(path, kUuid);

  sprov_context_opts co{};
  co.sz = sizeof co;
  co.bundle_store = store.c_str();
  co.flags = SPROV_CTX_OFFLINE;
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(&co, &ctx) == 0);
  sprov_unwinder* uw = nullptr;
  REQUIRE(sprov_unwinder_new(ctx, nullptr, &uw) == 0);
  sprov_stack* st = nullptr;
  REQUIRE(sprov_unwinder_unwind(uw, snap, &st) == 0);
  REQUIRE(sprov_stack_frame_count(st) == 2);
  CHECK(sprov_stack_stop_reason(st) == SPROV_STOP_END_OF_STACK);
  sprov_frame f{};
  f.sz = sizeof f;
  REQUIRE(sprov_stack_frame(st, 1, &f) == 0);
  CHECK(f.pc == kBias + 0x1010);
  CHECK(f.sp == kSp + 8);
  CHECK(f.method == SPROV_METHOD_CFI_BUNDLE);  // the toy's rows, carried by the bundle

  sprov_symbolizer* sym = nullptr;
  REQUIRE(sprov_symbolizer_new(ctx, nullptr, &sym) == 0);
  const char* names[] = {"toy_leaf", "toy_main"};
  for (size_t i = 0; i < 2; i++) {
    sprov_symbol_info si{};
    si.sz = sizeof si;
    REQUIRE(sprov_symbolizer_frame_ex(sym, st, i, 0, &si) == 0);
    INFO("frame " << i << " resolver " << (si.resolver_name ? si.resolver_name : "(null)"));
    REQUIRE(si.name != nullptr);
    CHECK(std::string(si.name) == names[i]);
    CHECK(si.resolver == SPROV_RESOLVER_BUNDLE);
    CHECK(std::string(si.bundle_digest) == digest);
  }
  sprov_symbolizer_free(sym);
  sprov_stack_free(st);
  sprov_unwinder_free(uw);
  sprov_context_free(ctx);
  sprov_snapshot_free(snap);
  std::filesystem::remove_all(dir_tmpl);
}
