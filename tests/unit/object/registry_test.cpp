// SPDX-License-Identifier: Apache-2.0
// The object-format registry (issue 32): sniffing picks the format, a format registered with one
// call is opened like a built-in one, unknown bytes are refused naming them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "object/object_image.hpp"
#include "tests/unit/object/toy_format.hpp"

using namespace stackprov;

namespace {

std::vector<uint8_t> toy_bytes() {
  const std::vector<uint8_t> id = {0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18,
                                   0x29, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90};
  return toy::build(Arch::kX86_64, id, {{0x1000, 0x20, "toy_main"}, {0x1020, 0x10, "toy_leaf"}},
                    {{0x1000, 16}, {0x1020, 8}}, 0x1000, std::vector<uint8_t>(0x30, 0xcc));
}

std::string temp_file(const std::vector<uint8_t>& bytes) {
  char name[] = "/tmp/sprov-object-XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  return name;
}

}  // namespace

TEST_CASE("a format registered with one call is sniffed and opened from bytes and from a file", "[object]") {
  object::register_format(&toy::kToyFormat);
  object::register_format(&toy::kToyFormat);  // twice: kept once
  size_t toys = 0;
  for (const object::Format* f : object::formats()) toys += f == &toy::kToyFormat;
  REQUIRE(toys == 1);
  REQUIRE(object::formats().front()->name == "elf");  // the built-in list first

  auto img = object::from_bytes(toy_bytes(), "mem.toy");
  REQUIRE(img.ok());
  const object::ObjectImage& o = *img.value();
  CHECK(o.format_name() == "toy");
  CHECK(o.path() == "mem.toy");
  CHECK(o.arch() == Arch::kX86_64);
  CHECK(o.id().kind == IdKind::kMachoUuid);
  CHECK(o.id().hex() == "a1b2c3d4e5f60718293a4b5c6d7e8f90");
  auto s = o.symbol_at(0x1025);
  REQUIRE(s);
  CHECK(s->name == "toy_leaf");
  CHECK(s->addr == 0x1020);
  CHECK_FALSE(o.symbol_at(0x1030));
  const auto tables = o.unwind_tables();
  REQUIRE(tables.size() == 1);
  CHECK(tables[0].kind == "toy_rows");
  CHECK(tables[0].data.size == 16);
  uint8_t code[4] = {};
  CHECK(o.read_code(0x102c, code, 4));
  CHECK(code[3] == 0xcc);
  CHECK_FALSE(o.read_code(0x102e, code, 4));  // past the code

  const std::string path = temp_file(toy_bytes());
  auto from_file = object::open(path);
  REQUIRE(from_file.ok());
  CHECK(from_file.value()->format_name() == "toy");
  CHECK(from_file.value()->id() == o.id());
  unlink(path.c_str());
}

TEST_CASE("bytes of no registered format go to ELF's parser, whose error names them as before", "[object]") {
  std::vector<uint8_t> junk = {'M', 'Z', 0x90, 0x00, 1, 2, 3, 4, 5, 6};
  junk.resize(128);  // past the ELF header's size: the magic is what is wrong
  auto r = object::from_bytes(junk, "junk.bin");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_ELF);
  CHECK(r.error().message.find("junk.bin") != std::string::npos);
  const std::string path = temp_file(junk);
  auto e = object::open(path);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == path + ": not an ELF file (bad magic)");
  unlink(path.c_str());
  auto missing = object::open("/nonexistent/dir/lib.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == -ENOENT);
  CHECK(missing.error().message == "/nonexistent/dir/lib.so: open: No such file or directory");
}

TEST_CASE("a damaged toy image fails in its parser with the offset, not past its end", "[object]") {
  object::register_format(&toy::kToyFormat);
  const std::vector<uint8_t> good = toy_bytes();
  for (size_t n = 8; n < good.size(); n++) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    auto r = object::from_bytes(cut, "cut.toy");
    INFO("length " << n);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("offset") != std::string::npos);
  }
}
