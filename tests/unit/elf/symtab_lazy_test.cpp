// SPDX-License-Identifier: Apache-2.0
// SymbolTable's scanning lookup (used before the sorted table is built) agrees with the sorted lookup.
#include <elf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
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
