// SPDX-License-Identifier: Apache-2.0
// Raw state documents (memory/raw_state.*, doc/raw-state.md): registers by name, hex and base64
// blocks, and every malformed field refused with an error naming its JSON path and value.
#include <catch2/catch.hpp>

#include <string>

#include "memory/raw_state.hpp"

using namespace stackprov;
using namespace stackprov::memory;

namespace {

std::string doc(const std::string& fields) {
  return R"({"version":1,"arch":"x86_64","registers":{"rip":"0x401000","rsp":"0x7000"})" + fields + "}";
}

/// The document's error code and message (the test fails if it parses).
std::pair<int, std::string> error_of(const std::string& text) {
  auto s = snapshot_from_raw_state(text, "/nonexistent-raw-state-dir");
  REQUIRE_FALSE(s.ok());
  return {s.error().code, s.error().message};
}

}  // namespace

TEST_CASE("raw state: registers by DWARF name, hex and base64 blocks", "[raw_state]") {
  auto s = snapshot_from_raw_state(
      R"({"version":1,"arch":"arm64","tid":9,"pc_is_return_address":true,
          "registers":{"pc":"0x100000340","sp":4096,"fp":"0x2000","lr":"4294968128","x19":"0x13"},
          "memory":[{"address":"0x1000","hex":"0102"},{"address":"0x1002","base64":"AwQ="}]})",
      "");
  REQUIRE(s.ok());
  const Snapshot& snap = s.value();
  CHECK(snap.arch == Arch::kArm64);
  CHECK(snap.tid == 9);
  CHECK((snap.flags & Snapshot::kFlagPcIsReturnAddress) != 0);
  CHECK(snap.regs[32] == 0x100000340);  // pc
  CHECK(snap.regs[31] == 4096);         // sp
  CHECK(snap.regs[29] == 0x2000);       // fp = x29
  CHECK(snap.regs[30] == 4294968128u);  // lr = x30, decimal string
  CHECK(snap.regs[19] == 0x13);
  CHECK_FALSE(snap.has_reg(0));
  SnapshotReader rd(snap);
  uint8_t b[4];
  REQUIRE(rd.read(0x1000, b, 4));  // across the two adjacent blocks
  CHECK((b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 4));
  CHECK_FALSE(rd.read(0x1003, b, 2));
}

TEST_CASE("raw state: malformed documents are refused naming the field and value", "[raw_state]") {
  struct Case {
    std::string text;
    int code;
    std::string says;
  };
  const Case cases[] = {
      {"[]", SPROV_ERR_JSON, "$"},
      {"{", SPROV_ERR_JSON, "raw state"},
      {R"({"arch":"x86_64","registers":{}})", SPROV_ERR_JSON, "$.version"},
      {R"({"version":2,"arch":"x86_64","registers":{}})", SPROV_ERR_JSON, "$.version"},
      {R"({"version":1,"arch":"sparc","registers":{}})", SPROV_ERR_INVALID_ARG, "sparc"},
      {R"({"version":1,"arch":"x86_64","registers":{"xmm0":"0x1"}})", SPROV_ERR_INVALID_ARG, "xmm0"},
      {R"({"version":1,"arch":"x86_64","registers":{"rip":"0x1g"}})", SPROV_ERR_JSON, "'0x1g'"},
      {R"({"version":1,"arch":"x86_64","registers":{"rip":"0x10000000000000000"}})", SPROV_ERR_JSON, "$.registers.rip"},
      {R"({"version":1,"arch":"x86_64","registers":{"rip":-1}})", SPROV_ERR_JSON, "$.registers.rip"},
      {R"({"version":1,"arch":"arm64","registers":{"rip":"0x1"}})", SPROV_ERR_INVALID_ARG, "rip"},
      {doc(R"(,"memory":{})"), SPROV_ERR_JSON, "$.memory"},
      {doc(R"(,"memory":[{"hex":"00"}])"), SPROV_ERR_JSON, "$.memory[0]"},
      {doc(R"(,"memory":[{"address":"0x10","hex":"00","base64":"AA=="}])"), SPROV_ERR_JSON, "exactly one"},
      {doc(R"(,"memory":[{"address":"0x10","hex":"0z"}])"), 0, "$.memory[0]"},
      {doc(R"(,"memory":[{"address":"0x10","base64":"!!"}])"), 0, "$.memory[0]"},
      {doc(R"(,"memory":[{"address":"0x10","hex":"0000"},{"address":"0x11","hex":"00"}])"), 0, "$.memory[1]"},
      {doc(R"(,"memory":[{"address":"0xffffffffffffffff","hex":"0000"}])"), 0, "$.memory[0]"},
      {doc(R"(,"modules":[{"load_address":"0x1000"}])"), SPROV_ERR_JSON, "$.modules[0]"},
      {doc(R"(,"modules":[{"path":"m","load_address":"0x1000"}])"), 0, "$.modules[0]"},
      {doc(R"(,"modules":[{"path":"m"}])"), SPROV_ERR_JSON, "load_address"},
      {doc(R"(,"pid":"x")"), SPROV_ERR_JSON, "$.pid"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto [code, msg] = error_of(c.text);
    INFO(msg);
    if (c.code != 0) CHECK(code == c.code);
    CHECK(msg.find(c.says) != std::string::npos);
  }
}

TEST_CASE("raw state: a module's identity must be the file's", "[raw_state]") {
  // The test binary itself is an ELF file of this architecture with a build-id.
  auto bad = snapshot_from_raw_state(
      doc(R"(,"modules":[{"path":"/proc/self/exe","load_address":"0x555555554000",
                          "identity":{"kind":"elf-build-id","hex":"00112233445566778899aabbccddeeff00112233"}}])"),
      "");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  CHECK(bad.error().message.find("00112233445566778899aabbccddeeff00112233") != std::string::npos);
  auto ok = snapshot_from_raw_state(doc(R"(,"modules":[{"path":"/proc/self/exe","load_address":"0x555555554000"}])"), "");
  REQUIRE(ok.ok());
  REQUIRE(ok.value().modules.size() == 1);
  const SnapshotModule& m = ok.value().modules[0];
  CHECK(m.start <= 0x555555554000);  // the offset-0 segment starts the image
  CHECK(m.end > m.start);
  CHECK_FALSE(m.build_id.empty());
  CHECK(m.build_id.kind == IdKind::kElfBuildId);
}

TEST_CASE("raw state: a module whose file is gone is placed by identity, link_address and size", "[raw_state]") {
  const std::string uuid = R"("identity":{"kind":"macho-uuid","hex":"4c4c44bd55553144a127ae4b9cb6af8c"})";
  const std::string gone = R"("path":"/nonexistent-raw-state-dir/chain","load_address":"0x120000000")";
  // Missing file, with the three: the module as the document says (link-time 0x100000000, slid 0x20000000).
  for (bool offline : {false, true}) {
    auto s = snapshot_from_raw_state(doc(R"(,"modules":[{)" + gone + "," + uuid +
                                         R"(,"link_address":"0x100000000","size":"0x8000"}])"),
                                     "", offline);
    REQUIRE(s.ok());
    REQUIRE(s.value().modules.size() == 1);
    const SnapshotModule& m = s.value().modules[0];
    CHECK(m.start == 0x120000000);
    CHECK(m.end == 0x120008000);
    CHECK(m.load_bias == 0x20000000);
    CHECK(m.build_id.kind == IdKind::kMachoUuid);
    CHECK(m.build_id.hex() == "4c4c44bd55553144a127ae4b9cb6af8c");
  }
  // Without the identity or the placement: errors naming what is missing.
  auto [c1, m1] = error_of(doc(R"(,"modules":[{)" + gone + R"(,"link_address":"0x100000000","size":"0x8000"}])"));
  CHECK(c1 != 0);
  CHECK(m1.find("chain") != std::string::npos);
  auto [c2, m2] = error_of(doc(R"(,"modules":[{)" + gone + "," + uuid + R"(,"size":"0x8000"}])"));
  CHECK(c2 == SPROV_ERR_NOT_FOUND);
  CHECK(m2.find("link_address") != std::string::npos);
  auto [c3, m3] = error_of(doc(R"(,"modules":[{)" + gone + "," + uuid + R"(,"link_address":"0x100000000","size":"0"}])"));
  CHECK(c3 == SPROV_ERR_JSON);
  CHECK(m3.find("$.modules[0].size") != std::string::npos);
  // Offline no file is opened: /proc/self/exe is placed by the document, not read.
  auto off = snapshot_from_raw_state(doc(R"(,"modules":[{"path":"/proc/self/exe","load_address":"0x555555554000",)" + uuid +
                                         R"(,"link_address":"0","size":"0x1000"}])"),
                                     "", true);
  REQUIRE(off.ok());
  CHECK(off.value().modules[0].build_id.kind == IdKind::kMachoUuid);
  CHECK(off.value().modules[0].end == 0x555555555000);
  // With the file there, a link_address that places it elsewhere is refused.
  auto [c4, m4] = error_of(doc(R"(,"modules":[{"path":"/proc/self/exe","load_address":"0x555555554000","link_address":"0x1000"}])"));
  CHECK(c4 == SPROV_ERR_INVALID_ARG);
  CHECK(m4.find("link_address 0x1000") != std::string::npos);
}
