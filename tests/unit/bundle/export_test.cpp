// SPDX-License-Identifier: Apache-2.0
// Bundle export: return_pads() against the input, symbfile bytes against a hand encoding of the protobuf wire format, symbol_index.json against doc/symbol-index.md.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bundle/export.hpp"
#include "bundle/format.hpp"

using namespace stackprov::bundle;

namespace {

BundleContents sample() {
  ModuleContents m;
  m.id = {IdKind::kElfBuildId, {0xab, 0xcd}};
  m.name = std::string("m");  // (assigning a literal trips GCC 12 -Wrestrict, PR 105329)
  m.ranges = {RangeRecord{0x1000, 0x10, 0, "f", "a.c", 3, 4, "", 0, 0},
              RangeRecord{0x1004, 4, 1, "g", "b.h", 7, 8, "a.c", 5, 6}};
  m.return_pads = {ReturnPadRecord{0x100b, {{"f", "a.c", 5, 6}, {"g", "b.h", 7, 9}}},
                   ReturnPadRecord{0x1009, {{"f", "a.c", 3, 4}}}};
  BundleContents c;
  c.modules.push_back(std::move(m));
  return c;
}

}  // namespace

TEST_CASE("bundle export: return_pads() gives every pad in address order with its chain", "[bundle][export]") {
  auto bytes = write_bundle(sample());
  REQUIRE(bytes.ok());
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  REQUIRE(rd.ok());
  auto pads = rd->return_pads(0);
  REQUIRE(pads.ok());
  REQUIRE(pads->size() == 2);
  CHECK(pads.value()[0].addr == 0x1009);
  REQUIRE(pads.value()[0].frames.size() == 1);
  CHECK(pads.value()[0].frames[0].function == "f");
  CHECK(pads.value()[0].frames[0].line == 3);
  CHECK(pads.value()[1].addr == 0x100b);
  REQUIRE(pads.value()[1].frames.size() == 2);
  CHECK(pads.value()[1].frames[1].function == "g");
  CHECK(pads.value()[1].frames[1].file == "b.h");
  CHECK(pads.value()[1].frames[1].line == 7);
  CHECK(pads.value()[1].frames[1].column == 9);
  CHECK(!rd->return_pads(1).ok());
}

TEST_CASE("bundle export: symbfile bytes equal a hand encoding of symbfile.proto", "[bundle][export]") {
  auto bytes = write_bundle(sample());
  REQUIRE(bytes.ok());
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  REQUIRE(rd.ok());
  auto got = export_symbfile(rd.value(), 0);
  REQUIRE(got.ok());
  // Encoded by hand from https://protobuf.dev/programming-guides/encoding/ (tag = field << 3 | wire
  // type; sint64 zigzag; packed repeated) and the field numbers of lib/bundle/symbfile.proto.
  const std::vector<uint8_t> want = {
      's', 'y', 'm', 'b', 'f', 'i', 'l', 'e',
      0x00, 0x01,                                                   // Header: 0 bytes
      0x10, 0x04,                                                   // StringTableV1: 16 bytes
      0x0a, 3, 'a', '.', 'c', 0x0a, 3, 'b', '.', 'h', 0x0a, 1, 'f', 0x0a, 1, 'g',
      0x11, 0x02,                                                   // RangeV1: 17 bytes
      0x60, 0x80, 0x20,                                             //   setElfVA (12) 0x1000
      0x10, 0x10,                                                   //   length (2) 16
      0x48, 2, 0x50, 0,                                             //   funcRef (9) "f", fileRef (10) "a.c"
      0x42, 6, 0x0a, 1, 0, 0x12, 1, 3,                              //   lineTable (8): offset [0], line [3]
      0x16, 0x02,                                                   // RangeV1: 22 bytes
      0x08, 0x08,                                                   //   deltaElfVA (1) +4 (zigzag 8)
      0x10, 4, 0x48, 3, 0x50, 1,                                    //   length 4, "g", "b.h"
      0x28, 5, 0x58, 0, 0x38, 1,                                    //   callLine 5, callFileRef "a.c", depth 1
      0x42, 6, 0x0a, 1, 0, 0x12, 1, 7,                              //   lineTable: offset [0], line [7]
      0x0b, 0x03,                                                   // ReturnPadV1 0x1009: 11 bytes
      0x08, 0x08,                                                   //   deltaElfVA +4: 0x1008 = 0x1009 - 1
      0x12, 1, 2, 0x1a, 1, 0, 0x22, 1, 3,                           //   func ["f"], file ["a.c"], line [3]
      0x0e, 0x03,                                                   // ReturnPadV1 0x100b: 14 bytes
      0x08, 0x04,                                                   //   deltaElfVA +2: 0x100a
      0x12, 2, 2, 3, 0x1a, 2, 0, 1, 0x22, 2, 5, 7,                  //   outermost first: f a.c:5, g b.h:7
  };
  CHECK(got.value() == want);
}

TEST_CASE("bundle export: symbol_index.json follows doc/symbol-index.md", "[bundle][export]") {
  auto bytes = write_bundle(sample());
  REQUIRE(bytes.ok());
  auto rd = BundleReader::open(bytes->data(), bytes->size());
  REQUIRE(rd.ok());
  SymbolIndexOptions opts;
  opts.bundle_id = "sha256:00";
  auto got = export_symbol_index_json(rd.value(), opts);
  REQUIRE(got.ok());
  const std::string zeros(64, '0');
  const std::string want =
      "{\"format\":\"stackprov-symbol-index\",\"version\":1,\"bundle\":\"sha256:00\",\"modules\":[\n"
      "{\"id_kind\":\"elf-build-id\",\"id\":\"abcd\",\"name\":\"m\",\"sha256_file\":\"" + zeros +
      "\",\"sha256_debug\":\"" + zeros + "\",\n"
      " \"ranges\":[\n"
      "  {\"start\":\"0x1000\",\"length\":16,\"depth\":0,\"function\":\"f\",\"file\":\"a.c\",\"line\":3,\"column\":4},\n"
      "  {\"start\":\"0x1004\",\"length\":4,\"depth\":1,\"function\":\"g\",\"file\":\"b.h\",\"line\":7,\"column\":8,"
      "\"call_file\":\"a.c\",\"call_line\":5,\"call_column\":6}],\n"
      " \"return_pads\":[\n"
      "  {\"addr\":\"0x1009\",\"frames\":[{\"function\":\"f\",\"file\":\"a.c\",\"line\":3,\"column\":4}]},\n"
      "  {\"addr\":\"0x100b\",\"frames\":[{\"function\":\"f\",\"file\":\"a.c\",\"line\":5,\"column\":6},"
      "{\"function\":\"g\",\"file\":\"b.h\",\"line\":7,\"column\":9}]}]}\n"
      "]}\n";
  CHECK(got.value() == want);
  opts.module = 1;
  CHECK(!export_symbol_index_json(rd.value(), opts).ok());
}
