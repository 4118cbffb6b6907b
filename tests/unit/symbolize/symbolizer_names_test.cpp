// SPDX-License-Identifier: Apache-2.0
// symbolize::Symbolizer (the names of `stack` and `perf-import` frames): PLT stubs vs objdump labels, debug-file labels vs eu-addr2line -S.
#include <catch2/catch.hpp>
#include <regex>
#include <sstream>

#include "../elf/elf_test_util.hpp"
#include "elf/debug_file.hpp"
#include "elf/elf_object.hpp"
#include "symbolize/symbolizer.hpp"

using namespace stackprov;
using namespace stackprov::elf::testing;

namespace {

std::string name_of(symbolize::Symbolizer& s, const std::shared_ptr<const object::ObjectImage>& img, uint64_t a) {
  symbolize::SymbolInfo info;
  return s.lookup(img, a, &info) ? std::string(info.linkage) : std::string("??");
}

std::shared_ptr<const object::ObjectImage> open_image(const std::string& path) {
  INFO("needs " << path);
  REQUIRE(file_exists(path));
  auto img = elf::ElfImage::open(path);
  REQUIRE(img.ok());
  return elf::ElfObject::of(img.value());
}

}  // namespace

TEST_CASE("Symbolizer names every PLT instruction as objdump labels it", "[symbolize][plt]") {
  REQUIRE(have_tool("objdump"));
  symbolize::Symbolizer sym(false, elf::DebugFileOptions{});
  size_t named = 0;
  for (const std::string& path : {std::string("/usr/bin/python3.11"),
                                 std::string("/usr/lib/python3.11/lib-dynload/_asyncio.cpython-311-x86_64-linux-gnu.so")}) {
    auto img = open_image(path);
    const auto r = run("objdump -d -j .plt -j .plt.sec -j .plt.got '" + path + "' 2>/dev/null");
    REQUIRE(r.status == 0);
    std::istringstream in(r.out);
    std::string line, label = "??";
    static const std::regex kLabel(R"(^([0-9a-f]+) <(.*)>:$)"), kInsn(R"(^\s+([0-9a-f]+):\t)");
    size_t insns = 0;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, kLabel)) {
        const std::string l = m[2];
        label = l.size() > 4 && l.compare(l.size() - 4, 4, "@plt") == 0 ? l : "??";
      } else if (std::regex_search(line, m, kInsn)) {
        const uint64_t a = std::stoull(m[1], nullptr, 16);
        INFO(path << " 0x" << std::hex << a);
        CHECK(name_of(sym, img, a) == label);
        named += label != "??";
        insns++;
      }
    }
    CHECK(insns > 10);
  }
  CHECK(named > 1000);
}

TEST_CASE("Symbolizer names ld.so's _start and _dl_start_user from the debug file as eu-addr2line -S",
          "[symbolize][labels]") {
  REQUIRE(have_tool("eu-addr2line"));
  REQUIRE(have_tool("objdump"));
  const std::string ld = "/lib64/ld-linux-x86-64.so.2";
  auto img = open_image(ld);
  symbolize::Symbolizer sym(false, elf::DebugFileOptions{});
  // _start and the instructions after it, up to the next sized function (eu-addr2line's names).
  symbolize::SymbolInfo info;
  uint64_t start = 0;
  // The entry point is _start (e_entry), named only by the debug file's .symtab.
  const auto hdr = run("readelf -h '" + ld + "'");
  std::smatch m;
  REQUIRE(std::regex_search(hdr.out, m, std::regex(R"(Entry point address:\s+0x([0-9a-f]+))")));
  start = std::stoull(m[1], nullptr, 16);
  const auto dis = run("objdump -d --no-show-raw-insn --start-address=0x" + [&] {
    std::ostringstream o;
    o << std::hex << start << " --stop-address=0x" << start + 64;
    return o.str();
  }() + " '" + ld + "'");
  std::vector<uint64_t> addrs;
  std::istringstream in(dis.out);
  std::string line;
  static const std::regex kInsn(R"(^\s+([0-9a-f]+):\t)");
  std::string args;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kInsn)) {
      addrs.push_back(std::stoull(m[1], nullptr, 16));
      args += " 0x" + std::string(m[1]);
    }
  }
  REQUIRE(addrs.size() > 5);
  const auto eu = run("eu-addr2line -S -e '" + ld + "'" + args);
  std::istringstream e(eu.out);
  std::vector<std::string> want;
  while (std::getline(e, line)) {
    want.push_back(line.substr(0, line.find('+')));
    std::getline(e, line);  // file:line
  }
  REQUIRE(want.size() == addrs.size());
  CHECK(want.front() == "_start");
  for (size_t i = 0; i < addrs.size(); i++) {
    INFO("0x" << std::hex << addrs[i]);
    CHECK(name_of(sym, img, addrs[i]) == want[i]);
  }
  REQUIRE(sym.lookup(img, start, &info));
  CHECK(info.resolver == symbolize::Resolver::kSymtab);
  CHECK(std::string(info.source).find("/usr/lib/debug/") == 0);
}
