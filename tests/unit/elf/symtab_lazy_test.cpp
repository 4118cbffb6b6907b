// SPDX-License-Identifier: Apache-2.0
// SymbolTable's scanning lookup (used before the sorted table is built) agrees with the sorted lookup.
#include <elf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "elf/debug_file.hpp"
#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

bool same(const Symbol* a, const Symbol* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return a->addr == b->addr && a->size == b->size && a->name == b->name && a->type == b->type &&
         a->bind == b->bind;
}

/// Every function start, end-1, the bytes around each symbol and random
/// addresses: lookup_linear, a fresh table's lazy lookup and the sorted lookup agree.
void check_agree(const ElfImage& image, SymbolTable::Kind kind) {
  auto sorted = SymbolTable::load(image, kind);
  REQUIRE(sorted.ok());
  auto lazy = SymbolTable::load(image, kind);
  REQUIRE(lazy.ok());
  const auto& syms = sorted->symbols();  // builds the sorted table
  if (syms.empty()) return;
  std::vector<uint64_t> addrs;
  uint64_t max_size = 0;
  for (const Symbol& s : syms) {
    addrs.push_back(s.addr);
    addrs.push_back(s.addr - 1);
    if (s.size != 0) {
      addrs.push_back(s.addr + s.size - 1);
      addrs.push_back(s.addr + s.size);
    }
    max_size = std::max(max_size, s.size);
  }
  std::mt19937_64 rng(42);
  const uint64_t lo = syms.front().addr > 64 ? syms.front().addr - 64 : 0;
  const uint64_t hi = syms.back().addr + max_size + 64;
  std::uniform_int_distribution<uint64_t> dist(lo, hi);
  for (int i = 0; i < 4000; i++) addrs.push_back(dist(rng));
  std::shuffle(addrs.begin(), addrs.end(), rng);
  // lookup_linear scans every symbol: over all of a big table's addresses that is quadratic (45 s of
  // unit_elf under ASan with this binary's and libc's debug file's tables). It is checked at ~6,000 of
  // them, the random ones among them (shuffled); the sorted and the lazy lookup at every address.
  const size_t linear_every = std::max<size_t>(1, addrs.size() / 6000);
  size_t hits = 0;
  for (size_t i = 0; i < addrs.size(); i++) {
    const uint64_t a = addrs[i];
    const Symbol* want = sorted->lookup(a);
    hits += want != nullptr;
    // Catch's INFO and REQUIRE cost a message stream each per address (most of this test's time under
    // ASan): the comparisons are plain, a disagreement fails naming its address.
    const bool linear_ok = i % linear_every != 0 || same(sorted->lookup_linear(a), want);
    const bool lazy_ok = same(lazy->lookup(a), want);  // scans first, then builds its sorted table
    if (!linear_ok || !lazy_ok) {
      INFO(image.path() << " address 0x" << std::hex << a);
      CHECK(linear_ok);
      REQUIRE(lazy_ok);
    }
  }
  CHECK(hits > 0);
  CHECK(lazy->size() == sorted->size());
}

}  // namespace

TEST_CASE("Scanning lookup agrees with the sorted lookup: libc's debug file, libc, this binary",
          "[elf][symtab][lazy]") {
  auto self = ElfImage::open("/proc/self/exe");
  REQUIRE(self.ok());
  check_agree(**self, SymbolTable::Kind::kSymtab);
  check_agree(**self, SymbolTable::Kind::kDynsym);

  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  INFO("needs " << libc << " (Debian libc6)");
  REQUIRE(file_exists(libc));
  auto img = ElfImage::open(libc);
  REQUIRE(img.ok());
  check_agree(**img, SymbolTable::Kind::kSymtab);
  check_agree(**img, SymbolTable::Kind::kDynsym);
  auto dbg = find_debug_file(**img, DebugFileOptions{});
  INFO("needs the debug file of " << libc << " (libc6-dbg, make deps)");
  REQUIRE(dbg.ok());
  auto tab = SymbolTable::load(**dbg, SymbolTable::Kind::kSymtab);
  REQUIRE(tab.ok());
  CHECK(tab->size() > 1000);
  check_agree(**dbg, SymbolTable::Kind::kSymtab);
}

namespace {

/// What readelf says a table's kept symbols are, in table order: FUNC/IFUNC, and NOTYPE in an
/// executable section (not a `$` mapping symbol), defined, named; raw names (`name@@VERSION` kept).
struct ReadelfSym {
  uint64_t addr = 0;
  bool global = false;
  std::string name;
};
std::vector<ReadelfSym> readelf_kept(const std::string& path) {
  std::set<unsigned> exec;
  {
    const auto r = run("readelf -SW '" + path + "'");
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      // "  [16] .text  PROGBITS  0000000000026700 026700 158c1d 00  AX  0   0 64"
      const size_t open = line.find('['), close = line.find(']');
      if (open == std::string::npos || close == std::string::npos || line.find("Nr]") != std::string::npos) continue;
      std::istringstream f(line.substr(close + 1));
      std::string name, type, addr, off, size, es, flags;
      if (!(f >> name >> type >> addr >> off >> size >> es >> flags)) continue;
      if (flags.find('X') != std::string::npos) exec.insert(std::stoul(line.substr(open + 1, close - open - 1)));
    }
  }
  std::vector<ReadelfSym> out;
  const auto r = run("readelf -sW --syms '" + path + "'");
  std::istringstream in(r.out);
  std::string line;
  bool want = false;
  while (std::getline(in, line)) {
    if (line.find("Symbol table '") != std::string::npos) {
      want = line.find("'.symtab'") != std::string::npos;
      continue;
    }
    std::istringstream f(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!want || !(f >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (num.back() != ':' || ndx == "UND" || ndx == "ABS" || ndx == "COM") continue;
    const bool code = type == "FUNC" || type == "IFUNC";
    if (!code && !(type == "NOTYPE" && exec.count(std::stoul(ndx)) && name[0] != '$')) continue;
    out.push_back(ReadelfSym{std::stoull(value, nullptr, 16), bind != "LOCAL", name});
  }
  return out;
}

}  // namespace

TEST_CASE("find_by_name and names_at: the scan and the index answer as readelf's table says (libc's debug file)",
          "[elf][symtab][libc][tailcall]") {
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  INFO("needs " << libc << " (Debian libc6) and its debug file (libc6-dbg, make deps)");
  auto img = ElfImage::open(libc);
  REQUIRE(img.ok());
  auto dbg = find_debug_file(**img, DebugFileOptions{});
  REQUIRE(dbg.ok());
  const auto syms = readelf_kept((*dbg)->path());
  REQUIRE(syms.size() > 1000);
  // gdb's lookup_minimal_symbol among the symbols one name answers to (itself, and a name that
  // "@@VERSION" follows): the global or weak one at the highest address, else the first local one.
  struct Want {
    uint64_t addr = 0;
    bool global = false;
    int locals = 0, globals = 0;
  };
  std::map<std::string, Want> want;
  std::map<uint64_t, std::vector<std::string>> at;
  for (const ReadelfSym& s : syms) {
    std::vector<std::string> keys{s.name};
    for (size_t p = s.name.find("@@"); p != std::string::npos; p = s.name.find("@@", p + 1))
      if (p > 0) keys.push_back(s.name.substr(0, p));
    for (const std::string& k : keys) {
      auto [it, fresh] = want.try_emplace(k);
      Want& w = it->second;
      if (fresh || (s.global && (!w.global || s.addr > w.addr))) {
        w.addr = s.addr;
        w.global = s.global;
      }
      (s.global ? w.globals : w.locals)++;
    }
    at[s.addr].push_back(s.name);
  }
  size_t several_locals = 0, mixed = 0, versioned = 0;
  for (const auto& [k, w] : want) {
    several_locals += w.locals > 1 && w.globals == 0;
    mixed += w.locals > 0 && w.globals > 0;
  }
  for (const ReadelfSym& s : syms) versioned += s.name.find("@@") != std::string::npos;
  CHECK(several_locals > 10);  // e.g. static helpers of one name in several files
  CHECK(mixed > 0);
  CHECK(versioned > 10);
  auto check_all = [&](const SymbolTable& tab) {
    for (const auto& [k, w] : want) {
      uint64_t a = 0;
      bool g = false;
      INFO(k);
      REQUIRE(tab.find_by_name(k, &a, &g));
      CHECK(a == w.addr);
      CHECK(g == w.global);
    }
    uint64_t a = 0;
    bool g = false;
    CHECK_FALSE(tab.find_by_name("no_such_function_in_libc", &a, &g));
    CHECK_FALSE(tab.find_by_name("memcpy@", &a, &g));  // "@" alone is not a default version
    for (const auto& [addr, names] : at) {
      std::vector<std::string_view> got;
      tab.names_at(addr, &got);
      INFO(std::hex << addr);
      CHECK(std::vector<std::string>(got.begin(), got.end()) == names);
    }
  };
  // A fresh table answers its first calls by scanning, then from its index: both paths, each against
  // every name and address readelf lists.
  auto scan = SymbolTable::load(**dbg, SymbolTable::Kind::kSymtab);
  REQUIRE(scan.ok());
  size_t n = 0;
  for (const auto& [k, w] : want) {
    if (++n > 6) break;
    uint64_t a = 0;
    bool g = false;
    REQUIRE(scan->find_by_name(k, &a, &g));
    CHECK(a == w.addr);
    CHECK(g == w.global);
  }
  check_all(*scan);
}
