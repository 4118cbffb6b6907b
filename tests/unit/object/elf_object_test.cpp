// SPDX-License-Identifier: Apache-2.0
// ElfObject against binutils (issue 32): the registry opens this test's own executable as ELF, and
// its identity, sections, symbols and code bytes are what readelf, nm and objdump say.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "elf/elf_object.hpp"
#include "object/object_image.hpp"

using namespace stackprov;

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(p);
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p.get())) > 0;) out.append(buf.data(), n);
  return out;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

extern "C" __attribute__((noinline, used)) int sprov_object_test_marker(int x) { return x * 3 + 1; }

}  // namespace

TEST_CASE("the registry opens an ELF file as ElfObject; readelf and nm agree with it", "[object][elf]") {
  const std::string exe = self_path();
  auto img = object::open(exe);
  REQUIRE(img.ok());
  const object::ObjectImage& o = *img.value();
  CHECK(o.format_name() == "elf");
  REQUIRE(dynamic_cast<const elf::ElfObject*>(&o) != nullptr);
  CHECK(o.arch() == Arch::kX86_64);
  CHECK(o.id().kind == IdKind::kElfBuildId);
  // readelf -n: "Build ID: <hex>"
  const std::string notes = run("readelf -n '" + exe + "'");
  const size_t at = notes.find("Build ID: ");
  REQUIRE(at != std::string::npos);
  CHECK(notes.substr(at + 10, o.id().hex().size()) == o.id().hex());
  // readelf -S: .eh_frame's size
  const std::string sections = run("readelf -SW '" + exe + "' | awk '$2 == \".eh_frame\" { print $6 }'");
  auto eh = o.section(".eh_frame");
  REQUIRE(eh);
  CHECK(std::stoull(sections, nullptr, 16) == eh->size);
  // nm: the marker function's address; symbol_at names it from inside.
  const std::string nm = run("nm '" + exe + "' | awk '$3 == \"sprov_object_test_marker\" { print $1 }'");
  REQUIRE_FALSE(nm.empty());
  const uint64_t addr = std::stoull(nm, nullptr, 16);
  auto s = o.symbol_at(addr + 1);
  REQUIRE(s);
  CHECK(s->name == "sprov_object_test_marker");
  CHECK(s->addr == addr);
  // objdump: the function's first code bytes.
  const std::string dump = run("objdump -d --start-address=0x" + nm.substr(0, nm.find('\n')) + " --stop-address=0x" +
                               [&] { char b[32]; std::snprintf(b, sizeof b, "%llx", (unsigned long long)addr + 1); return std::string(b); }() +
                               " '" + exe + "' | awk -F'\\t' '/^ +[0-9a-f]+:/ { print $2 }'");
  uint8_t byte = 0;
  REQUIRE(o.read_code(addr, &byte, 1));
  char hex[3];
  std::snprintf(hex, sizeof hex, "%02x", byte);
  CHECK(dump.substr(0, 2) == hex);
  // Unwind tables: eh_frame with its header, as the unwinder reads them.
  const auto tables = o.unwind_tables();
  REQUIRE_FALSE(tables.empty());
  CHECK(tables[0].kind == "eh_frame");
  CHECK(tables[0].data.size == eh->size);
  CHECK(tables[0].aux.size > 0);
  CHECK(sprov_object_test_marker(1) == 4);
}
