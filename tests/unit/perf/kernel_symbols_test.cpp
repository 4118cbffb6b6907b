// SPDX-License-Identifier: Apache-2.0
// Unit tests for lib/perf/kernel_symbols: kallsyms read with perf's rules, kernel notes, the build-id check.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "perf/kernel_symbols.hpp"

using namespace stackprov;
using namespace stackprov::perf;

namespace {

// Each expectation below is the rule of perf 6.1 tools/perf/util/symbol.c named beside it.
const char* const kKallsyms =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 T _text\n"
    "ffffffff81000000 T srso_alias_untrain_ret\n"  // 0 leading underscores: kept over _stext/_text
    "ffffffff81000100 t local_fn\n"
    "ffffffff81000100 W weak_fn\n"                  // the last of a group gets the length: kept
    "ffffffff81000200 T __SyS_thing\n"
    "ffffffff81000200 T SyS_thing\n"
    "ffffffff81000300 r some_rodata\n"             // r: not T/W/D/B, ignored
    "ffffffff81000400 T $x\n"                       // '$' names dropped
    "ffffffff81000500 T last_core_fn\n"
    "ffffffffc0200000 t mod_fn\t[ext4]\n"
    "ffffffffc0200040 t mod_fn2\t[ext4]\n";

}  // namespace

TEST_CASE("kallsyms: symbols, aliases and ends as perf chooses them") {
  KernelSymbols k = KernelSymbols::parse(kKallsyms);
  CHECK(k.text_address() == 0xffffffff81000000ull);
  // symbols__fixup_end runs before symbols__fixup_duplicate: only the last symbol listed at an
  // address has a length, and choose_best_symbol prefers a symbol with a length.
  const auto* s = k.find(0xffffffff81000010ull);
  REQUIRE(s != nullptr);
  CHECK(s->name == "srso_alias_untrain_ret");
  CHECK(s->module == "[kernel.kallsyms]");
  CHECK(s->start == 0xffffffff81000000ull);
  CHECK(s->end == 0xffffffff81000100ull);
  s = k.find(0xffffffff81000100ull);
  REQUIRE(s != nullptr);
  CHECK(s->name == "weak_fn");
  s = k.find(0xffffffff81000250ull);
  REQUIRE(s != nullptr);
  CHECK(s->name == "SyS_thing");
  CHECK(s->end == 0xffffffff81000500ull);  // r and $ symbols are not symbols: the next is last_core_fn
  // The last kernel symbol before a module one ends at the next page + 4096.
  s = k.find(0xffffffff81001fffull);
  REQUIRE(s != nullptr);
  CHECK(s->name == "last_core_fn");
  CHECK(s->end == 0xffffffff81002000ull);
  CHECK(k.find(0xffffffff81002000ull) == nullptr);
  s = k.find(0xffffffffc0200044ull);
  REQUIRE(s != nullptr);
  CHECK(s->name == "mod_fn2");
  CHECK(s->module == "[ext4]");
  // The last symbol of all: roundup(start, 4096) + 4096.
  CHECK(s->end == 0xffffffffc0202000ull);
  CHECK(k.find(0xffffffff80ffffffull) == nullptr);
}

TEST_CASE("kallsyms: a listing with hidden addresses (kptr_restrict) has no symbols") {
  KernelSymbols k = KernelSymbols::parse("0000000000000000 T _text\n0000000000000000 t foo\n");
  CHECK(k.size() == 0);
  CHECK(k.nonzero_lines() == 0);
}

TEST_CASE("kernel notes: the GNU build-id note among others") {
  // Two notes (struct elf_note, 4-byte aligned): "Xen" type 6, then "GNU" NT_GNU_BUILD_ID (3).
  std::string n;
  auto u32 = [&](uint32_t v) { n.append(reinterpret_cast<const char*>(&v), 4); };
  u32(4), u32(4), u32(6), n.append("Xen\0", 4), u32(0x01020304);
  u32(4), u32(20), u32(3), n.append("GNU\0", 4);
  for (int i = 0; i < 20; i++) n.push_back(static_cast<char>(0xa0 + i));
  ModuleId id = kernel_build_id_from_notes(n);
  CHECK(id.hex() == "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
  CHECK(kernel_build_id_from_notes(std::string(12, '\0')).empty());
}

TEST_CASE("kernel namer: names only the recording's kernel") {
  char notes[] = "/tmp/sprov-kn-notes-XXXXXX";
  char syms[] = "/tmp/sprov-kn-syms-XXXXXX";
  const int nf = mkstemp(notes), sf = mkstemp(syms);
  REQUIRE(nf >= 0);
  REQUIRE(sf >= 0);
  std::string n;
  auto u32 = [&](uint32_t v) { n.append(reinterpret_cast<const char*>(&v), 4); };
  u32(4), u32(20), u32(3), n.append("GNU\0", 4);
  for (int i = 0; i < 20; i++) n.push_back(static_cast<char>(i + 1));
  FILE* f = fdopen(nf, "wb");
  fwrite(n.data(), 1, n.size(), f);
  fclose(f);
  f = fdopen(sf, "w");
  // Booted 0x200000 higher than when recorded (KASLR): addresses are relocated by `_text`.
  fputs("ffffffff81200000 T _text\nffffffff81200000 T start_kernel\nffffffff81201000 T do_work\n", f);
  fclose(f);
  const ModuleId running = kernel_build_id_from_notes(n);

  KernelNamer same(running, 0xffffffff81000000ull, notes, syms);
  CHECK(same.naming() == KernelNaming::kNamed);
  uint64_t start = 0;
  const auto* s = same.find(0xffffffff81001010ull, &start);
  REQUIRE(s != nullptr);
  CHECK(s->name == "do_work");
  CHECK(start == 0xffffffff81001000ull);  // in the recording's addresses
  CHECK(same.note().find("relocated") != std::string::npos);

  ModuleId other = running;
  other.bytes[0] ^= 0xff;
  KernelNamer mismatch(other, 0, notes, syms);
  CHECK(mismatch.naming() == KernelNaming::kMismatch);
  CHECK(mismatch.find(0xffffffff81201010ull, &start) == nullptr);
  CHECK(mismatch.note().find(other.hex()) != std::string::npos);
  CHECK(mismatch.note().find(running.hex()) != std::string::npos);

  KernelNamer unchecked(ModuleId{}, 0, notes, syms);
  CHECK(unchecked.naming() == KernelNaming::kUnchecked);
  CHECK(unchecked.find(0xffffffff81201010ull, &start) != nullptr);

  KernelNamer unreadable(running, 0, "/nonexistent/notes", syms);
  CHECK(unreadable.naming() == KernelNaming::kUnavailable);
  CHECK(unreadable.find(0xffffffff81201010ull, &start) == nullptr);
  remove(notes);
  remove(syms);
}

TEST_CASE("kernel namer: the core kernel's text from perf's build-id cache copy, only at the recording's _text") {
  // A running kernel (notes), its kallsyms (the listing of now) and perf's build-id cache with a
  // copy of the listing whose names differ from it, so that each answer says which one was read.
  char notes[] = "/tmp/sprov-kc-notes-XXXXXX";
  char syms[] = "/tmp/sprov-kc-syms-XXXXXX";
  char dir[] = "/tmp/sprov-kc-cache-XXXXXX";
  const int nf = mkstemp(notes), sf = mkstemp(syms);
  REQUIRE(nf >= 0);
  REQUIRE(sf >= 0);
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string n;
  auto u32 = [&](uint32_t v) { n.append(reinterpret_cast<const char*>(&v), 4); };
  u32(4), u32(20), u32(3), n.append("GNU\0", 4);
  for (int i = 0; i < 20; i++) n.push_back(static_cast<char>(0x40 + i));
  FILE* f = fdopen(nf, "wb");
  fwrite(n.data(), 1, n.size(), f);
  fclose(f);
  f = fdopen(sf, "w");
  fputs("ffffffff81000000 T _text\nffffffff81000100 T live_fn\nffffffff81000800 T _etext\n"
        "ffffffffc0200000 t live_mod_fn\t[ext4]\n", f);
  fclose(f);
  const ModuleId running = kernel_build_id_from_notes(n);
  const std::string kdir = std::string(dir) + "/[kernel.kallsyms]";
  const std::string idir = kdir + "/" + running.hex();
  REQUIRE(mkdir(kdir.c_str(), 0700) == 0);
  REQUIRE(mkdir(idir.c_str(), 0700) == 0);
  const std::string copy = idir + "/kallsyms";
  auto write_copy = [&](const char* text) {
    FILE* c = fopen(copy.c_str(), "w");
    REQUIRE(c != nullptr);
    fputs(text, c);
    fclose(c);
  };
  write_copy("ffffffff81000000 T _text\nffffffff81000100 T copied_fn\nffffffff81000180 t copied_fn2\n"
             "ffffffff81000800 T _etext\nffffffffc0200000 t stale_mod_fn\t[ext4]\n");
  uint64_t start = 0;
  {
    KernelNamer k(running, 0xffffffff81000000ull, notes, syms, dir);
    const auto* s = k.find(0xffffffff81000140ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "copied_fn");  // [_text, _etext): the copy, which ends the symbol at copied_fn2
    CHECK(start == 0xffffffff81000100ull);
    CHECK(k.note().find(copy) != std::string::npos);
    s = k.find(0xffffffffc0200010ull, &start);  // a module address: the listing of now
    REQUIRE(s != nullptr);
    CHECK(s->name == "live_mod_fn");
  }
  {
    // The copy was written at another _text (another boot's KASLR slide): not used.
    KernelNamer k(running, 0xffffffff81200000ull, notes, syms, dir);
    const auto* s = k.find(0xffffffff81200140ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "live_fn");
    CHECK(k.note().find(copy) == std::string::npos);
  }
  {
    // No copy directory, or a copy without _etext: the listing of now.
    KernelNamer none(running, 0xffffffff81000000ull, notes, syms, "");
    const auto* s = none.find(0xffffffff81000140ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "live_fn");
    write_copy("ffffffff81000000 T _text\nffffffff81000100 T copied_fn\n");
    KernelNamer no_etext(running, 0xffffffff81000000ull, notes, syms, dir);
    s = no_etext.find(0xffffffff81000140ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "live_fn");
  }
  {
    // Another build recorded, no copy of its listing in the cache: nothing is named.
    ModuleId other = running;
    other.bytes[0] ^= 0xff;
    KernelNamer k(other, 0xffffffff81000000ull, notes, syms, dir);
    CHECK(k.naming() == KernelNaming::kMismatch);
    CHECK(k.find(0xffffffff81000140ull, &start) == nullptr);
  }
  {
    // Another build recorded, and the cache holds that build's copy (perf record saved it where the
    // recording was made): named from the copy alone, as perf script names it, modules included; never
    // from the running kernel's listing. A copy at another _text names nothing (no relocation is known).
    ModuleId other = running;
    other.bytes[0] ^= 0xff;
    const std::string odir = kdir + "/" + other.hex();
    const std::string ocopy = odir + "/kallsyms";
    REQUIRE(mkdir(odir.c_str(), 0700) == 0);
    FILE* c = fopen(ocopy.c_str(), "w");
    REQUIRE(c != nullptr);
    fputs("ffffffff81000000 T _text\nffffffff81000100 T other_fn\nffffffff81000800 T _etext\n"
          "ffffffffc0300000 t other_mod_fn\t[xfs]\n", c);
    fclose(c);
    KernelNamer k(other, 0xffffffff81000000ull, notes, syms, dir);
    CHECK(k.naming() == KernelNaming::kCached);
    const auto* s = k.find(0xffffffff81000140ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "other_fn");
    CHECK(start == 0xffffffff81000100ull);
    s = k.find(0xffffffffc0300010ull, &start);
    REQUIRE(s != nullptr);
    CHECK(s->name == "other_mod_fn");
    CHECK(s->module == "[xfs]");
    CHECK(k.find(0xffffffffc0200010ull, &start) == nullptr);  // the running kernel's module: not this build's
    CHECK(k.note().find(ocopy) != std::string::npos);
    CHECK(k.note().find(other.hex()) != std::string::npos);

    KernelNamer moved(other, 0xffffffff81200000ull, notes, syms, dir);
    CHECK(moved.find(0xffffffff81200140ull, &start) == nullptr);
    CHECK(moved.naming() == KernelNaming::kMismatch);
    CHECK(moved.note().find("has _text at 0xffffffff81000000, the recording's is 0xffffffff81200000") !=
          std::string::npos);
    remove(ocopy.c_str());
    rmdir(odir.c_str());
  }
  remove(copy.c_str());
  rmdir(idir.c_str());
  rmdir(kdir.c_str());
  rmdir(dir);
  remove(notes);
  remove(syms);
}

TEST_CASE("kernel core listing: window lookups equal the whole listing's parse") {
  // A listing with what perf's rules choose among: groups at one address (before and after
  // _text), weak/global/local types, ignored types, '$' names, the entry trampoline, gaps, then
  // module lines after _etext. Oracle: KernelSymbols::parse of the whole listing (perf 6.1's
  // rules, checked above and against perf script by integration_perf).
  std::string t = "ffffffff80ffff00 T before_text\nffffffff81000000 T srso_alias_untrain_ret\n"
                  "ffffffff81000000 T _stext\nffffffff81000000 T _text\n";
  uint64_t a = 0xffffffff81000000ull;
  const char* types = "TtWwDdBbrR";
  uint32_t x = 12345;
  auto rnd = [&] { return x = x * 1103515245u + 12345u, (x >> 16) & 0x7fff; };
  char line[128];
  for (int i = 0; i < 3000; i++) {
    a += (rnd() % 4 == 0) ? 0 : 16 * (1 + rnd() % 8);  // a quarter share the previous address
    const int r = static_cast<int>(rnd() % 40);
    const char* name = r == 0 ? "$x" : r == 1 ? "__entry_SYSCALL_64_trampoline" : nullptr;
    if (name != nullptr) snprintf(line, sizeof line, "%016llx T %s\n", static_cast<unsigned long long>(a), name);
    else
      snprintf(line, sizeof line, "%016llx %c %.*sfn_%d\n", static_cast<unsigned long long>(a), types[rnd() % 10],
               static_cast<int>(rnd() % 3), "___", i);
    t += line;
  }
  const uint64_t etext = a + 0x100;
  snprintf(line, sizeof line, "%016llx T _etext\n", static_cast<unsigned long long>(etext));
  t += line;
  t += "ffffffffc0200000 t mod_fn\t[ext4]\n";
  auto core = CoreListing::open(t);
  REQUIRE(core != nullptr);
  CHECK(core->text_address() == 0xffffffff81000000ull);
  CHECK(core->etext_address() == etext);
  const KernelSymbols whole = KernelSymbols::parse(t);
  size_t compared = 0, named = 0;
  for (uint64_t q = 0xffffffff81000000ull; q < etext; q += 5) {
    const KernelSymbols::Symbol* w = core->find(q);
    const KernelSymbols::Symbol* p = whole.find(q);
    REQUIRE((w == nullptr) == (p == nullptr));
    if (w != nullptr) {
      INFO("address " << std::hex << q);
      CHECK(w->name == p->name);
      CHECK(w->start == p->start);
      CHECK(w->end == p->end);
      CHECK(w->module == p->module);
      named++;
    }
    compared++;
    if (compared > 20000) break;
  }
  CHECK(named > 1000);
  CHECK(core->find(etext) == nullptr);        // outside [_text, _etext)
  CHECK(core->find(0xffffffffc0200000ull) == nullptr);
  CHECK(CoreListing::open("ffffffff81000000 T _text\n") == nullptr);  // no _etext
  // Out of order around the address: refused (the caller reads the whole listing).
  auto bad = CoreListing::open("ffffffff81000000 T _text\nffffffff81000200 T b\nffffffff81000100 T a\n"
                               "ffffffff81000300 T _etext\n");
  REQUIRE(bad != nullptr);
  CHECK(bad->find(0xffffffff81000250ull) == nullptr);
}
