// SPDX-License-Identifier: Apache-2.0
// SymbolTable against nm, llvm-symbolizer and eu-addr2line: contents, lookups, st_size bounds, alias rule.
#include <elf.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

struct NmSym {
  uint64_t addr = 0, size = 0;
  char kind = 0;
  std::string name;
};

/// Defined function symbols (FUNC/IFUNC, not UND) per `readelf -sW`, version suffix removed.
/// `dynamic` reads .dynsym (--dyn-syms), otherwise .symtab (--syms).
std::vector<NmSym> nm_functions(const std::string& path, bool dynamic) {
  std::vector<NmSym> out;
  const auto r = run(std::string("readelf -W ") + (dynamic ? "--dyn-syms" : "--syms") + " '" + path + "'");
  std::istringstream in(r.out);
  std::string line;
  bool want = false;
  while (std::getline(in, line)) {
    if (line.find("Symbol table '") != std::string::npos) {
      want = line.find(dynamic ? "'.dynsym'" : "'.symtab'") != std::string::npos;
      continue;
    }
    if (!want) continue;
    std::istringstream f(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(f >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (num == "Num:" || num.back() != ':' || ndx == "UND") continue;
    if (type != "FUNC" && type != "IFUNC") continue;
    NmSym s;
    s.addr = std::stoull(value, nullptr, 16);
    s.size = size.rfind("0x", 0) == 0 ? std::stoull(size, nullptr, 16) : std::stoull(size);
    s.kind = bind == "GLOBAL" ? 'T' : bind == "WEAK" ? 'W' : 't';
    s.name = name.substr(0, name.find('@'));
    out.push_back(s);
  }
  return out;
}

/// Function names for addresses, one tool invocation (names come first on each answer).
std::vector<std::string> symbolize(const std::string& cmd, const std::vector<uint64_t>& addrs,
                                   size_t lines_per_answer) {
  std::string args;
  for (uint64_t a : addrs) {
    char buf[32];
    snprintf(buf, sizeof buf, " 0x%llx", static_cast<unsigned long long>(a));
    args += buf;
  }
  std::istringstream in(run(cmd + args).out);
  std::vector<std::string> names;
  std::string line;
  size_t k = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (k++ % lines_per_answer == 0) names.push_back(line);
  }
  return names;
}

const char* kSymtabSource = R"(
#include <stdio.h>
__attribute__((noinline, aligned(64))) int alpha(int x) { return x * 3 + 1; }
__attribute__((noinline, aligned(64))) int beta(int x) { return alpha(x) ^ 0x55; }
__attribute__((noinline, aligned(64))) static int gamma_local(int x) { return beta(x) - 7; }
__attribute__((noinline, aligned(64))) int delta(int x) { return gamma_local(x) * gamma_local(x + 1); }
int main(int argc, char** argv) { printf("%d\n", delta(argc)); return 0; }
)";

}  // namespace

TEST_CASE("SymbolTable holds exactly nm's code symbols and lookups match llvm-symbolizer",
          "[elf][symtab]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSymtabSource, "-O1 -fno-inline", exe));  // no -g: names come from .symtab
  auto img = ElfImage::open(exe);
  REQUIRE(img.ok());
  auto tab = SymbolTable::load(**img, SymbolTable::Kind::kSymtab);
  REQUIRE(tab.ok());
  const auto nm = nm_functions(exe, false);
  std::map<uint64_t, std::set<std::string>> by_addr;
  for (const auto& s : nm) by_addr[s.addr].insert(s.name);
  REQUIRE(tab->size() == by_addr.size());
  for (const Symbol& s : tab->symbols()) {
    REQUIRE(by_addr.count(s.addr) == 1);
    CHECK(by_addr[s.addr].count(std::string(s.name)) == 1);
  }
  for (const char* fn : {"alpha", "beta", "gamma_local", "delta", "main"}) {
    bool found = false;
    for (const Symbol& s : tab->symbols()) found |= s.name == fn;
    CHECK(found);
  }

  // Sampled addresses: start, middle and last byte of every sized function.
  std::vector<uint64_t> addrs;
  std::vector<std::string> ours;
  for (const Symbol& s : tab->symbols()) {
    if (s.size == 0) continue;
    for (uint64_t a : {s.addr, s.addr + s.size / 2, s.addr + s.size - 1}) {
      const Symbol* hit = tab->lookup(a);
      REQUIRE(hit != nullptr);
      addrs.push_back(a);
      ours.push_back(std::string(hit->name));
    }
  }
  REQUIRE(have_tool("llvm-symbolizer-14"));
  REQUIRE(have_tool("addr2line"));
  {
    const auto want = symbolize("llvm-symbolizer-14 --functions=linkage --obj='" + exe + "'", addrs, 2);
    REQUIRE(want.size() == ours.size());
    for (size_t i = 0; i < ours.size(); i++) {
      INFO("address 0x" << std::hex << addrs[i]);
      CHECK(ours[i] == want[i]);
    }
  }
  {
    const auto want = symbolize("addr2line -f -e '" + exe + "'", addrs, 2);
    REQUIRE(want.size() == ours.size());
    for (size_t i = 0; i < ours.size(); i++) CHECK(ours[i] == want[i]);
  }
}

TEST_CASE("st_size bounds lookups, zero-sized labels reach the next symbol: as eu-addr2line -S",
          "[elf][symtab]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSymtabSource, "-O1 -fno-inline", exe));
  auto img = ElfImage::open(exe);
  REQUIRE(img.ok());
  auto tab = SymbolTable::load(**img, SymbolTable::Kind::kSymtab);
  REQUIRE(tab.ok());
  const auto nm = nm_functions(exe, false);
  // Probes: just past the end and just before the start of every sized function (padding
  // gaps), and 4 bytes into every zero-sized one (crt code such as deregister_tm_clones).
  std::vector<uint64_t> probes;
  for (const auto& s : nm) {
    if (s.size != 0) {
      probes.push_back(s.addr + s.size);
      probes.push_back(s.addr - 1);
    } else {
      probes.push_back(s.addr + 4);
    }
  }
  REQUIRE(have_tool("eu-addr2line"));
  // elfutils (dwfl_module_addrinfo): "name+0xoff", or "()+0xaddr" when no symbol names it.
  const auto eu = symbolize("eu-addr2line -S -e '" + exe + "'", probes, 2);
  REQUIRE(eu.size() == probes.size());
  int gaps = 0, labels = 0;
  for (size_t i = 0; i < probes.size(); i++) {
    INFO("probe 0x" << std::hex << probes[i] << " eu-addr2line " << eu[i]);
    std::string want = eu[i].substr(0, eu[i].find('+'));
    const Symbol* hit = tab->lookup(probes[i]);
    if (want == "()" || want == "??") {
      CHECK(hit == nullptr);
      gaps++;
    } else {
      REQUIRE(hit != nullptr);
      CHECK(std::string(hit->name) == want);
      labels += hit->size == 0;
    }
  }
  // aligned(64) leaves padding after alpha, beta and gamma_local at least; crt code has labels.
  CHECK(gaps >= 3);
  CHECK(labels >= 2);
  CHECK(tab->lookup(0) == nullptr);
  CHECK(tab->lookup(~uint64_t{0}) == nullptr);
}

TEST_CASE("Alias rule on a hand-written table", "[elf][symtab][alias]") {
  TempDir dir;
  // Three groups of aliases (see doc/symbols.md):
  //  g1: LOCAL sized, WEAK sized, GLOBAL sized (same size)  -> GLOBAL (g1_global)
  //  g2: GLOBAL zero-sized, WEAK sized                       -> sized WEAK (g2_weak)
  //  g3: two WEAK, sizes 8 and 16                            -> larger (g3_big)
  //  g4: two GLOBAL, same size                               -> lower symbol-table index
  //  n1: NOTYPE with .size in .text, n2: NOTYPE without size (a code label: it names the
  //      bytes up to the next symbol or the end of its section, as elfutils, gdb and perf do)
  const std::string asm_src = R"(
  .text
  .type g1_local,@function
  .weak g1_weak
  .type g1_weak,@function
  .globl g1_global
  .type g1_global,@function
g1_local:
g1_weak:
g1_global:
  .fill 32,1,0x90
  .size g1_local, 32
  .size g1_weak, 32
  .size g1_global, 32
  .globl g2_global
  .type g2_global,@function
  .weak g2_weak
  .type g2_weak,@function
g2_global:
g2_weak:
  .fill 32,1,0x90
  .size g2_weak, 32
  .weak g3_small
  .type g3_small,@function
  .weak g3_big
  .type g3_big,@function
g3_small:
g3_big:
  .fill 32,1,0x90
  .size g3_small, 8
  .size g3_big, 16
  .globl g4_first
  .type g4_first,@function
  .globl g4_second
  .type g4_second,@function
g4_first:
g4_second:
  .fill 32,1,0x90
  .size g4_first, 32
  .size g4_second, 32
  .globl n1
n1:
  .fill 32,1,0x90
  .size n1, 32
n2:
  .fill 32,1,0x90
)";
  const std::string s = dir.file("alias.s");
  write_file(s, asm_src);
  const std::string so = dir.file("alias.so");
  REQUIRE(run("cc -shared -nostdlib -o '" + so + "' '" + s + "' 2>&1").status == 0);
  auto img = ElfImage::open(so);
  REQUIRE(img.ok());
  auto tab = SymbolTable::load(**img, SymbolTable::Kind::kSymtab);
  REQUIRE(tab.ok());
  const auto nm = nm_functions(so, false);
  std::map<std::string, uint64_t> addr;
  for (const auto& n : nm) addr[n.name] = n.addr;
  REQUIRE(addr.count("g1_global"));
  auto name_at = [&](uint64_t a) {
    const Symbol* sym = tab->lookup(a);
    return sym ? std::string(sym->name) : std::string("(none)");
  };
  CHECK(name_at(addr["g1_global"]) == "g1_global");
  CHECK(name_at(addr["g2_weak"]) == "g2_weak");
  CHECK(name_at(addr["g2_weak"] + 31) == "g2_weak");
  CHECK(name_at(addr["g3_big"]) == "g3_big");
  CHECK(name_at(addr["g3_big"] + 12) == "g3_big");
  CHECK(name_at(addr["g3_big"] + 16) == "(none)");
  // g4: equal in all but table order; the lower .symtab index (per readelf -s) wins.
  std::map<std::string, int> index;
  {
    std::istringstream in(run("readelf -sW '" + so + "'").out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string num, v, sz, ty, bi, vi, nd, nm_name;
      if (f >> num >> v >> sz >> ty >> bi >> vi >> nd >> nm_name && num != "Num:" &&
          num.back() == ':') {
        index[nm_name] = std::stoi(num);
      }
    }
  }
  REQUIRE(index.count("g4_first"));
  const std::string g4_want = index["g4_first"] < index["g4_second"] ? "g4_first" : "g4_second";
  CHECK(name_at(addr["g4_first"]) == g4_want);
  const uint64_t n1 = addr["g4_first"] + 32;  // laid out right after g4's 32 bytes
  CHECK(name_at(n1 + 5) == "n1");
  CHECK(name_at(n1 + 40) == "n2");  // n2: a label, up to the end of .text
  // eu-addr2line (elfutils' own alias preference: GLOBAL over WEAK over LOCAL,
  // then table order) agrees on the binding-decided groups.
  REQUIRE(have_tool("eu-addr2line"));
  {
    std::vector<uint64_t> q = {addr["g1_global"], addr["g4_first"]};
    const auto eu = symbolize("eu-addr2line -f -e '" + so + "'", q, 2);
    REQUIRE(eu.size() == 2);
    CHECK(eu[0] == "g1_global");
    CHECK(eu[1] == g4_want);
  }
}

TEST_CASE("libc .dynsym: every exported function, aliases as eu-addr2line picks them",
          "[elf][symtab][libc]") {
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  INFO("needs " << libc << " (Debian libc6)");
  REQUIRE(file_exists(libc));
  TempDir dir;
  // A copy without build-id/debuglink so that the tools use the symbol table, not DWARF.
  const std::string copy = dir.file("libc_nodebug.so");
  REQUIRE(run("objcopy -R .note.gnu.build-id -R .gnu_debuglink '" + libc + "' '" + copy + "'").status == 0);
  auto img = ElfImage::open(copy);
  REQUIRE(img.ok());
  auto tab = SymbolTable::load(**img, SymbolTable::Kind::kDynsym);
  REQUIRE(tab.ok());
  CHECK(tab->kind() == SymbolTable::Kind::kDynsym);
  const auto nm = nm_functions(copy, true);
  std::map<uint64_t, std::set<std::string>> by_addr;
  for (const auto& s : nm) by_addr[s.addr].insert(s.name);
  CHECK(tab->size() == by_addr.size());
  std::vector<uint64_t> alias_addrs;
  std::vector<std::string> ours;
  for (const auto& [a, names] : by_addr) {
    const Symbol* s = tab->lookup(a);
    REQUIRE(s != nullptr);
    CHECK(names.count(std::string(s->name)) == 1);
    if (names.size() > 1 && alias_addrs.size() < 200) {
      alias_addrs.push_back(a);
      ours.push_back(std::string(s->name));
    }
  }
  REQUIRE(alias_addrs.size() > 50);
  REQUIRE(have_tool("eu-addr2line"));
  REQUIRE(have_tool("llvm-symbolizer-14"));
  {
    const auto eu = symbolize("eu-addr2line -f -e '" + copy + "'", alias_addrs, 2);
    REQUIRE(eu.size() == ours.size());
    for (size_t i = 0; i < ours.size(); i++) {
      INFO("address 0x" << std::hex << alias_addrs[i]);
      CHECK(ours[i] == eu[i]);
    }
  }
  // Non-aliased addresses inside functions: same names as llvm-symbolizer.
  {
    std::vector<uint64_t> q;
    std::vector<std::string> want_ours;
    for (const Symbol& s : tab->symbols()) {
      if (by_addr[s.addr].size() != 1 || s.size < 4 || q.size() >= 300) continue;
      q.push_back(s.addr + s.size / 2);
      want_ours.push_back(std::string(tab->lookup(s.addr + s.size / 2)->name));
    }
    const auto ll = symbolize("llvm-symbolizer-14 --functions=linkage --obj='" + copy + "'", q, 2);
    REQUIRE(ll.size() == want_ours.size());
    for (size_t i = 0; i < q.size(); i++) CHECK(want_ours[i] == ll[i]);
  }
}

TEST_CASE("Malformed symbol tables give errors naming section and index", "[elf][symtab][hostile]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSymtabSource, "-O1", exe));
  const auto bytes = read_file(exe);
  const auto* e = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  auto shdr = [&](std::vector<uint8_t>& m, size_t i) {
    return reinterpret_cast<Elf64_Shdr*>(m.data() + e->e_shoff + i * sizeof(Elf64_Shdr));
  };
  size_t symtab = 0;
  auto m = bytes;
  for (size_t i = 0; i < e->e_shnum; i++) {
    if (shdr(m, i)->sh_type == SHT_SYMTAB) symtab = i;
  }
  REQUIRE(symtab != 0);
  // Bad sh_link.
  m = bytes;
  shdr(m, symtab)->sh_link = 999;
  auto img = ElfImage::from_bytes(m, "badlink");
  REQUIRE(img.ok());
  auto t = SymbolTable::load(**img, SymbolTable::Kind::kSymtab);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("badlink") != std::string::npos);
  CHECK(t.error().message.find(".symtab") != std::string::npos);
  CHECK(t.error().message.find("999") != std::string::npos);
  // A function symbol whose name offset lies outside the string table.
  m = bytes;
  const Elf64_Shdr* st = shdr(m, symtab);
  size_t victim = 0;
  for (size_t k = 1; k < st->sh_size / sizeof(Elf64_Sym); k++) {
    auto* sym = reinterpret_cast<Elf64_Sym*>(m.data() + st->sh_offset + k * sizeof(Elf64_Sym));
    if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_shndx != SHN_UNDEF) {
      sym->st_name = 0x7fffffff;
      victim = k;
      break;
    }
  }
  REQUIRE(victim != 0);
  img = ElfImage::from_bytes(m, "badname");
  REQUIRE(img.ok());
  t = SymbolTable::load(**img, SymbolTable::Kind::kSymtab);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("symbol " + std::to_string(victim)) != std::string::npos);
  // No .symtab at all (stripped): an empty table, not an error.
  const std::string stripped = dir.file("stripped");
  REQUIRE(run("strip -o '" + stripped + "' '" + exe + "'").status == 0);
  auto simg = ElfImage::open(stripped);
  REQUIRE(simg.ok());
  auto empty = SymbolTable::load(**simg, SymbolTable::Kind::kSymtab);
  REQUIRE(empty.ok());
  CHECK(empty->size() == 0);
  CHECK(empty->lookup(0x1000) == nullptr);
}

TEST_CASE("find_by_name: libc .dynsym, the global at the highest address of each name (gdb's choice)",
          "[elf][symtab][libc][tailcall]") {
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  INFO("needs " << libc << " (Debian libc6)");
  REQUIRE(file_exists(libc));
  auto img = ElfImage::open(libc);
  REQUIRE(img.ok());
  auto tab = SymbolTable::load(**img, SymbolTable::Kind::kDynsym);
  REQUIRE(tab.ok());
  // readelf prints every version of a .dynsym name (name@V, name@@V): gdb's minimal symbols are
  // the plain names, and its lookup_minimal_symbol finds the last one of its hash chain first.
  std::map<std::string, uint64_t> want;
  std::map<std::string, int> versions;
  for (const auto& s : nm_functions(libc, true)) {
    if (s.kind == 't') continue;
    versions[s.name]++;
    if (!want.count(s.name) || s.addr > want[s.name]) want[s.name] = s.addr;
  }
  REQUIRE(want.size() > 1000);
  size_t several = 0;
  for (const auto& [name, addr] : want) {
    uint64_t got = 0;
    bool global = false;
    INFO(name);
    REQUIRE(tab->find_by_name(name, &got, &global));
    CHECK(global);
    CHECK(got == addr);
    several += versions[name] > 1;
  }
  CHECK(several > 10);  // e.g. pthread_kill@GLIBC_2.2.5 (__pthread_kill_esrch) over pthread_kill@@GLIBC_2.34
  uint64_t got = 0;
  bool global = false;
  CHECK_FALSE(tab->find_by_name("no_such_function_in_libc", &got, &global));
  CHECK_FALSE(tab->find_by_name("", &got, &global));
}
