// SPDX-License-Identifier: Apache-2.0
// LlvmSymbolTable against llvm-symbolizer-14 on every byte of hand-written symbol layouts (aliases, sizes, nesting, labels, STT_FILE).
#include <catch2/catch.hpp>
#include <sstream>

#include "elf/elf_image.hpp"
#include "elf/llvm_symtab.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

/// Symbol layouts where llvm-symbolizer-14's choice differs from a "best alias" rule:
/// equal-size aliases in either table order (the last one wins), larger size over binding,
/// zero-sized symbols reaching the next symbol, a small symbol nested in a large one
/// (no walk back to the enclosing one), STT_OBJECT in .text, STT_FILE for local symbols.
const char* kAsm = R"(
  .file "first.c"
  .text
  .type loc_a,@function
  .type loc_b,@function
loc_a:
loc_b:
  .fill 32,1,0x90
  .size loc_a, 32
  .size loc_b, 32
  .globl glob_first
  .type glob_first,@function
  .weak weak_second
  .type weak_second,@function
glob_first:
weak_second:
  .fill 32,1,0x90
  .size glob_first, 32
  .size weak_second, 32
  .globl big_weak
  .weak big_weak
  .type big_weak,@function
  .globl small_global
  .type small_global,@function
small_global:
big_weak:
  .fill 64,1,0x90
  .size small_global, 16
  .size big_weak, 48
  .globl outer
  .type outer,@function
outer:
  .fill 16,1,0x90
  .type inner,@function
inner:
  .fill 8,1,0x90
  .size inner, 8
  .fill 40,1,0x90
  .size outer, 64
  .globl label_only
label_only:
  .fill 24,1,0x90
  .globl an_object
  .type an_object,@object
an_object:
  .fill 16,1,0x90
  .size an_object, 16
  .fill 16,1,0x90
  .file "second.c"
  .type loc_c,@function
loc_c:
  .fill 16,1,0x90
  .size loc_c, 16
  .type zero_func,@function
zero_func:
  .fill 24,1,0x90
)";

/// llvm-symbolizer-14's outermost FunctionName and FileName for each address ("??" / "").
std::vector<std::pair<std::string, std::string>> llvm_names(const std::string& obj, uint64_t lo, uint64_t hi) {
  const std::string in = obj + ".addrs";
  std::string text;
  for (uint64_t a = lo; a < hi; a++) {
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx\n", static_cast<unsigned long long>(a));
    text += buf;
  }
  write_file(in, text);
  const auto r = run("llvm-symbolizer-14 --no-demangle --output-style=GNU --obj='" + obj + "' < '" + in + "'");
  std::istringstream s(r.out);
  std::vector<std::pair<std::string, std::string>> out;
  std::string fn, loc;
  while (std::getline(s, fn) && std::getline(s, loc)) {
    if (fn.empty()) {  // blank separator lines between answers
      fn = loc;
      if (!std::getline(s, loc)) break;
    }
    out.emplace_back(fn, loc.substr(0, loc.rfind(':')));
  }
  return out;
}

}  // namespace

TEST_CASE("LlvmSymbolTable names every byte as llvm-symbolizer-14 does", "[elf][symtab][llvm]") {
  REQUIRE(have_tool("llvm-symbolizer-14"));
  TempDir dir;
  const std::string s = dir.file("layout.s");
  write_file(s, kAsm);
  {
    const std::string so = dir.file("layout.so");
    REQUIRE(run("cc -shared -nostdlib -o '" + so + "' '" + s + "' 2>&1").status == 0);
    auto img = ElfImage::open(so);
    REQUIRE(img.ok());
    const LlvmSymbolTable tab = LlvmSymbolTable::load(**img);
    REQUIRE_FALSE(tab.empty());
    CHECK_FALSE(tab.from_dynsym());
    auto text = (*img)->section(".text");
    REQUIRE(text);
    // From 16 bytes before .text (other sections' symbols) to 16 past its end.
    const uint64_t lo = text->addr - 16, hi = text->addr + text->size + 16;
    const auto want = llvm_names(so, lo, hi);
    REQUIRE(want.size() == hi - lo);
    size_t named = 0, files = 0;
    for (uint64_t a = lo; a < hi; a++) {
      const LlvmSymbol* sym = tab.lookup(a);
      const std::string name = sym ? std::string(sym->name) : "??";
      const std::string file = sym ? std::string(tab.file_of(*sym)) : "";
      INFO("address 0x" << std::hex << a);
      CHECK(name == want[a - lo].first);
      // GNU style prints "??" for an unknown file, else the STT_FILE name.
      CHECK((file.empty() ? std::string("??") : file) == want[a - lo].second);
      named += sym != nullptr;
      files += !file.empty();
    }
    CHECK(named > 200);
    CHECK(files > 32);
    // The layouts where llvm's choice is not "the best alias" (doc/symbols.md).
    CHECK(std::string(tab.lookup(text->addr + 40)->name) == "weak_second");  // last of equal sizes
    CHECK(std::string(tab.lookup(text->addr + 8)->name) == "loc_b");
  }
}

TEST_CASE("LlvmSymbolTable uses .dynsym only without .symtab, as llvm-symbolizer-14", "[elf][symtab][llvm]") {
  REQUIRE(have_tool("llvm-symbolizer-14"));
  TempDir dir;
  const std::string s = dir.file("layout.s");
  write_file(s, kAsm);
  const std::string so = dir.file("layout.so"), stripped = dir.file("stripped.so");
  REQUIRE(run("cc -shared -nostdlib -o '" + so + "' '" + s + "' 2>&1").status == 0);
  REQUIRE(run("strip -o '" + stripped + "' '" + so + "' 2>&1").status == 0);
  auto img = ElfImage::open(stripped);
  REQUIRE(img.ok());
  const LlvmSymbolTable tab = LlvmSymbolTable::load(**img);
  CHECK(tab.from_dynsym());
  auto text = (*img)->section(".text");
  REQUIRE(text);
  const auto want = llvm_names(stripped, text->addr, text->addr + text->size);
  REQUIRE(want.size() == text->size);
  for (uint64_t a = text->addr; a < text->addr + text->size; a++) {
    const LlvmSymbol* sym = tab.lookup(a);
    INFO("address 0x" << std::hex << a);
    CHECK((sym ? std::string(sym->name) : "??") == want[a - text->addr].first);
  }
}
