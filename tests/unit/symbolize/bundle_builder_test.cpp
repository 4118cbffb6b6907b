// SPDX-License-Identifier: Apache-2.0
// Bundle builder: a local symbol only the separate debug file's .symtab has (as glibc's __restore_rt) becomes a symbol-table range, vs readelf -s and llvm-symbolizer-14 --obj=<debug file>.
#include <catch2/catch.hpp>

#include <cstdint>
#include <regex>
#include <sstream>
#include <string>

#include "../elf/elf_test_util.hpp"
#include "symbolize/bundle_builder.hpp"

using namespace stackprov;
using namespace stackprov::elf::testing;

namespace {

// A local function without DWARF in a section of its own, shaped like glibc's __restore_rt
// (mov $15,%rax; syscall: 9 bytes, no .size, no .cfi, no .loc), beside C code that has DWARF.
const char* kSource =
    "__asm__(\".section .text.tramp,\\\"ax\\\",@progbits\\n\"\n"
    "        \".type tramp_restore, @function\\n\"\n"
    "        \"tramp_restore:\\n\"\n"
    "        \"  mov $15, %rax\\n\"\n"
    "        \"  syscall\\n\"\n"
    "        \"  nop\\n\"\n"
    "        \".previous\\n\");\n"
    "__attribute__((noinline)) int helper(int x) { return x * 3 + 1; }\n"
    "int main(int argc, char** argv) { (void)argv; return helper(argc) - 4; }\n";
constexpr uint64_t kTrampBytes = 10;  // mov (7) + syscall (2) + nop (1)

/// readelf -sW `path`: the value of symbol `name` of type FUNC and binding `bind`; 0 when absent.
uint64_t readelf_symbol(const std::string& path, const std::string& name, const std::string& bind) {
  std::istringstream in(run("readelf -sW '" + path + "' 2>/dev/null").out);
  std::string line;
  // "   290: 000000000003c050     0 FUNC    LOCAL  DEFAULT   16 __restore_rt"
  static const std::regex kSym(R"(^\s*\d+:\s+([0-9a-f]+)\s+\d+\s+FUNC\s+(\S+)\s+\S+\s+\S+\s+(\S+)$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kSym) && m[3] == name && m[2] == bind) return std::stoull(m[1], nullptr, 16);
  }
  return 0;
}

/// llvm-symbolizer-14 --functions=linkage --obj=`path` `addr`: {function, "file:line:column"}.
std::pair<std::string, std::string> llvm_symbolize(const std::string& path, uint64_t addr) {
  std::ostringstream a;
  a << "0x" << std::hex << addr;
  std::istringstream in(run("llvm-symbolizer-14 --functions=linkage --obj='" + path + "' " + a.str()).out);
  std::string fn, loc;
  std::getline(in, fn);
  std::getline(in, loc);
  return {fn, loc};
}

}  // namespace

TEST_CASE("A symbol only the debug file's .symtab has becomes a symbol-table range", "[symbolize][bundle-builder]") {
  for (const char* tool : {"cc", "objcopy", "strip", "readelf", "llvm-symbolizer-14"}) {
    INFO("needs " << tool);
    REQUIRE(have_tool(tool));
  }
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSource, "-g -O2 -Wl,--build-id=sha1", exe));
  const std::string dbg = dir.file("prog.debug"), stripped = dir.file("prog.stripped");
  REQUIRE(run("objcopy --only-keep-debug '" + exe + "' '" + dbg + "'").status == 0);
  REQUIRE(run("strip --strip-all -o '" + stripped + "' '" + exe + "'").status == 0);
  REQUIRE(run("cd '" + dir.path() + "' && objcopy --add-gnu-debuglink=prog.debug prog.stripped").status == 0);

  // Oracle: readelf -s. The debug file's .symtab has the local function; the stripped module
  // has no .symtab and its .dynsym does not name it.
  const uint64_t tramp = readelf_symbol(dbg, "tramp_restore", "LOCAL");
  REQUIRE(tramp != 0);
  CHECK(readelf_symbol(stripped, "tramp_restore", "LOCAL") == 0);
  CHECK(run("readelf -SW '" + stripped + "' | grep -c ' \\.symtab '").out.substr(0, 1) == "0");
  // Oracle: llvm-symbolizer-14. On the module it names nothing there (the debug file's
  // DWARF does not describe these bytes and llvm reads the module's symbol tables only); on the
  // debug file itself it names the symbol, with no line.
  const auto on_module = llvm_symbolize(stripped, tramp);
  CHECK(on_module.first == "??");
  std::vector<std::pair<std::string, std::string>> want;
  for (uint64_t a = tramp; a < tramp + kTrampBytes; ++a) want.push_back(llvm_symbolize(dbg, a));
  REQUIRE(want[0].first == "tramp_restore");
  REQUIRE(want[0].second.size() > 4);
  REQUIRE(want[0].second.compare(want[0].second.size() - 4, 4, ":0:0") == 0);  // no line

  symbolize::BundleBuildOptions opts;
  symbolize::BundleBuildReport rep;
  auto mc = symbolize::build_module_contents(stripped, opts, &rep);
  REQUIRE(mc.ok());
  CHECK(rep.debug_file == dbg);  // its DWARF describes helper and main
  CHECK(rep.debug_symtab_bytes >= kTrampBytes);
  for (uint64_t a = tramp; a < tramp + kTrampBytes; ++a) {
    INFO("address 0x" << std::hex << a);
    const bundle::RangeRecord* hit = nullptr;
    for (const bundle::RangeRecord& r : mc->ranges)
      if (r.depth == 0 && r.start <= a && a - r.start < r.length) hit = &r;
    REQUIRE(hit != nullptr);
    CHECK(hit->from_symtab);
    const auto& [fn, loc] = want[a - tramp];
    CHECK(hit->function == fn);
    // llvm prints "FILE:0:0" (the STT_FILE before a local symbol) or "??:0:0" (file "").
    CHECK((hit->file.empty() ? std::string("??") : hit->file) + ":0:0" == loc);
    CHECK(hit->line == 0);
    CHECK(hit->column == 0);
  }
  // The byte before is not the trampoline's (the symbol starts at its address).
  for (const bundle::RangeRecord& r : mc->ranges)
    if (r.start <= tramp - 1 && tramp - 1 - r.start < r.length) CHECK(r.function != "tramp_restore");
}
