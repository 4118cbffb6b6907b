// SPDX-License-Identifier: Apache-2.0
// Hostile Mach-O input: every truncation and every single-byte corruption of the first KiB of the
// fixtures (thin, fat) and of their export tries and __unwind_info sections give an image/table or a
// named error, never a crash; counts and offsets past the end give errors that name the value.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "macho/compact_unwind.hpp"
#include "macho/macho_bytes.hpp"
#include "macho/macho_object.hpp"

using namespace stackprov;
using namespace stackprov::macho;

namespace {

const std::string kHostileFix = STACKPROV_MACHO_FIXTURES;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Every query an upper layer makes of an accepted image.
void exercise(const MachoObject& o) {
  for (const char* n : {"__TEXT,__text", "__TEXT,__unwind_info", ".debug_info", ".debug_str_offsets", "bad"}) (void)o.section(n);
  bool names_ok = true;  // one CHECK per image, not per symbol (Catch's cost)
  for (const auto& s : o.symbols()) {
    (void)o.symbol_at(s.addr);
    names_ok = names_ok && std::strlen(s.name.data()) == s.name.size();
  }
  CHECK(names_ok);
  for (const auto& t : o.unwind_tables()) {
    auto u = CompactUnwindTable::parse({t.data.data, t.data.size});
    if (u.ok()) (void)u->find(0x1000);
  }
  uint8_t buf[16];
  for (const auto& c : o.code_sections()) (void)o.read_code(c.addr, buf, sizeof buf);
  (void)o.load_bias(0x10000, 0);
}

void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void put32be(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) b[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

/// The offset of the first load command `cmd` in a thin image.
size_t command_at(const std::vector<uint8_t>& b, uint32_t cmd) {
  size_t off = 32;
  for (uint32_t i = 0; i < le32(b.data() + 16); i++) {
    if (le32(b.data() + off) == cmd) return off;
    off += le32(b.data() + off + 4);
  }
  FAIL("no load command 0x" << std::hex << cmd);
  return 0;
}

std::string error_of(std::vector<uint8_t> b) {
  auto r = MachoObject::from_bytes(std::move(b), "t");
  REQUIRE_FALSE(r.ok());
  CHECK_FALSE(r.error().message.empty());
  return r.error().message;
}

}  // namespace

TEST_CASE("Mach-O hostile: a debug-map entry naming outside the string table empties the map, not the image",
          "[macho][hostile]") {
  std::vector<uint8_t> b = read_file(kHostileFix + "/modes_x86_64");
  const size_t c = command_at(b, macho::kLcSymtab);
  const uint32_t symoff = le32(b.data() + c + 8), nsyms = le32(b.data() + c + 12);
  auto good = MachoObject::from_bytes(b, "good");
  REQUIRE(good.ok());
  REQUIRE(good.value()->debug_map().size() >= 4);
  const size_t symbols = good.value()->nlist_symbols().size();
  // The second N_OSO entry's name offset set past the string table.
  size_t oso = 0, hit = 0;
  for (uint32_t i = 0; i < nsyms && hit < 2; i++)
    if (b[symoff + i * 16 + 4] == macho::kNOso) oso = symoff + i * 16, hit++;
  REQUIRE(hit == 2);
  b[oso] = b[oso + 1] = b[oso + 2] = b[oso + 3] = 0xff;
  auto r = MachoObject::from_bytes(std::move(b), "t");
  REQUIRE(r.ok());
  CHECK(r.value()->debug_map().empty());
  CHECK(r.value()->debug_map_error().find("debug map: t: symbol ") == 0);
  CHECK(r.value()->debug_map_error().find("name offset 0xffffffff is outside the string table") != std::string::npos);
  CHECK(r.value()->nlist_symbols().size() == symbols);  // the image's own symbols are all there
}

TEST_CASE("Mach-O hostile: truncations and single-byte corruptions of the headers give an image or a named error",
          "[macho][hostile]") {
  for (const char* name : {"modes_x86_64", "fat", "libmodes_arm64.dylib"}) {
    INFO(name);
    const std::vector<uint8_t> good = read_file(kHostileFix + "/" + name);
    REQUIRE(good.size() > 0x2000);
    size_t refused = 0;
    for (size_t len = 0; len < good.size(); len += (len < 0x400 ? 1 : 251)) {
      auto r = MachoObject::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)), "t");
      if (r.ok()) exercise(*r.value());
      else {
        refused++;
        CHECK_FALSE(r.error().message.empty());
      }
    }
    CHECK(refused > 0x300);
    refused = 0;
    // A fat file's header is its first 8 + 20 x n bytes; the rest up to the first slice is padding.
    const size_t span = std::string(name) == "fat" ? 0x40 : 0x400;
    for (size_t off = 0; off < span; off++)
      for (uint8_t x : {0x01, 0x80, 0xff}) {
        std::vector<uint8_t> b = good;
        b[off] ^= x;
        auto r = MachoObject::from_bytes(std::move(b), "c");
        if (!r.ok()) {
          refused++;
          CHECK_FALSE(r.error().message.empty());
          continue;
        }
        exercise(*r.value());
      }
    CHECK(refused > 0);
  }
}

TEST_CASE("Mach-O hostile: every corruption of an export trie and of LC_FUNCTION_STARTS gives names or a named error",
          "[macho][hostile]") {
  const std::vector<uint8_t> good = read_file(kHostileFix + "/libmodes_arm64.dylib");
  auto o = MachoObject::from_bytes(good, "t");
  REQUIRE(o.ok());
  for (uint32_t cmd : {kLcDyldExportsTrie, kLcFunctionStarts}) {
    INFO("cmd 0x" << std::hex << cmd);
    const size_t lc = command_at(good, cmd);
    const uint32_t off = le32(good.data() + lc + 8), size = le32(good.data() + lc + 12);
    REQUIRE(size > 8);
    size_t refused = 0;
    for (uint32_t i = 0; i < size; i++)
      for (uint8_t x : {0x01, 0x7f, 0x80, 0xff}) {
        std::vector<uint8_t> b = good;
        b[off + i] ^= x;
        auto r = MachoObject::from_bytes(std::move(b), "c");
        if (r.ok()) exercise(*r.value());
        else {
        refused++;
        CHECK_FALSE(r.error().message.empty());
      }
      }
    CHECK(refused > 0);
  }
  // A trie whose child points back at the root: a loop, named.
  std::vector<uint8_t> b = good;
  const size_t lc = command_at(b, kLcDyldExportsTrie);
  const uint32_t off = le32(b.data() + lc + 8);
  // Root: terminal size 0, one child "_" -> node 0.
  b[off] = 0;
  b[off + 1] = 1;
  b[off + 2] = '_';
  b[off + 3] = 0;
  b[off + 4] = 0;
  CHECK_THAT(error_of(b), Catch::Contains("export trie") && Catch::Contains("reached twice"));
}

TEST_CASE("Mach-O hostile: counts and offsets past the end are errors naming the value", "[macho][hostile]") {
  const std::vector<uint8_t> good = read_file(kHostileFix + "/modes_x86_64");
  std::vector<uint8_t> b = good;
  put32(b, 0, 0xfeedface);
  CHECK_THAT(error_of(b), Catch::Contains("32-bit Mach-O"));
  b = good;
  put32(b, 4, 7);  // CPU_TYPE_X86 (32-bit)
  CHECK_THAT(error_of(b), Catch::Contains("CPU type 0x7 not supported"));
  b = good;
  put32(b, 16, 0x7fffffff);  // ncmds
  CHECK_THAT(error_of(b), Catch::Contains("0x7fffffff") || Catch::Contains("2147483647"));
  b = good;
  put32(b, 20, 0xfffffff0);  // sizeofcmds
  CHECK_THAT(error_of(b), Catch::Contains("load commands' size 0xfffffff0"));
  b = good;
  put32(b, 32 + 4, 0x4c);  // the first command's size: not a multiple of 8
  CHECK_THAT(error_of(b), Catch::Contains("load command 0") && Catch::Contains("size 0x4c"));
  b = good;
  const size_t symtab = command_at(b, kLcSymtab);
  put32(b, symtab + 12, 0x10000000);  // nsyms
  CHECK_THAT(error_of(b), Catch::Contains("268435456 symbols"));
  b = good;
  put32(b, symtab + 20, 0xffffff00);  // strsize
  CHECK_THAT(error_of(b), Catch::Contains("string table") && Catch::Contains("0xffffff00"));
  b = good;
  const size_t seg = command_at(b, kLcSegment64);  // __PAGEZERO, then __TEXT
  const size_t text = seg + le32(b.data() + seg + 4);
  put32(b, text + 64, 1000);  // nsects
  CHECK_THAT(error_of(b), Catch::Contains("declares 1000 sections"));
  b = good;
  const size_t starts = command_at(b, kLcFunctionStarts);
  put32(b, starts + 12, 0x7ffffff0);
  CHECK_THAT(error_of(b), Catch::Contains("function starts") && Catch::Contains("0x7ffffff0"));

  // Fat headers. A Java class file shares FAT_MAGIC; its version (>= 45) is past the 32 slices
  // sniffed, so the registry does not take it for Mach-O.
  const uint8_t java[8] = {0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x34};
  CHECK_FALSE(kMachoFormat.sniff(std::span<const uint8_t>(java, sizeof java)));
  const std::vector<uint8_t> fat = read_file(kHostileFix + "/fat");
  CHECK(kMachoFormat.sniff(std::span<const uint8_t>(fat.data(), 64)));
  b = fat;
  put32be(b, 4, 40);
  CHECK_THAT(error_of(b), Catch::Contains("fat header declares 40 architectures"));
  b = fat;
  put32be(b, 8 + 20 + 8, static_cast<uint32_t>(fat.size()));  // the second slice's offset: the file's end
  CHECK_THAT(error_of(b), Catch::Contains("fat architecture 1") && Catch::Contains("outside the file"));
  b = fat;
  put32be(b, 8 + 8, 32);  // the first slice's offset: inside the fat header
  CHECK_THAT(error_of(b), Catch::Contains("fat architecture 0"));
  b = fat;
  put32be(b, 8 + 20 + 8, 4096 + 64);  // the second slice inside the first
  CHECK_THAT(error_of(b), Catch::Contains("overlap"));
}

TEST_CASE("compact unwind hostile: truncations and corruptions of __unwind_info give a table or a named error",
          "[macho][compact-unwind][hostile]") {
  for (const char* name : {"modes_x86_64", "modes_arm64", "big_arm64"}) {
    INFO(name);
    auto o = MachoObject::open(kHostileFix + "/" + name);
    REQUIRE(o.ok());
    auto sec = o.value()->section("__TEXT,__unwind_info");
    REQUIRE(sec);
    const std::vector<uint8_t> good(sec->data, sec->data + sec->size);
    const Arch arch = o.value()->arch();
    const CodeReader code = [&](uint64_t a, void* buf, size_t n) { return o.value()->read_code(a, buf, n); };
    auto use = [&](const CompactUnwindTable& t) {
      bool fine = true;  // one CHECK per table
      for (const SecondLevelPage& p : t.pages())
        for (const PageEntry& e : p.entries) {
          auto f = t.find(e.function_offset);
          fine = fine && f.has_value();
          if (!f) continue;
          auto r = arch == Arch::kX86_64 ? decode_x86_64(f->encoding, o.value()->text_vmaddr() + f->start, code) : decode_arm64(f->encoding);
          fine = fine && (r.ok() ? r->nsaved <= CompactRule::kMaxSaved : !r.error().message.empty());
        }
      CHECK(fine);
    };
    size_t refused = 0;
    for (size_t len = 0; len < good.size(); len += (len < 0x400 ? 1 : 7)) {
      auto t = CompactUnwindTable::parse({good.data(), len});
      if (t.ok()) use(*t);
      else {
        refused++;
        CHECK_FALSE(t.error().message.empty());
      }
    }
    CHECK(refused > 0);
    refused = 0;
    const size_t span = std::min<size_t>(good.size(), 0x400);
    for (size_t off = 0; off < span; off++)
      for (uint8_t x : {0x01, 0x80, 0xff}) {
        std::vector<uint8_t> b = good;
        b[off] ^= x;
        auto t = CompactUnwindTable::parse(b);
        if (t.ok()) use(*t);
        else {
        refused++;
        CHECK_FALSE(t.error().message.empty());
      }
      }
    CHECK(refused > 0);
  }
  // Named errors.
  auto o = MachoObject::open(kHostileFix + "/modes_arm64");
  REQUIRE(o.ok());
  auto sec = o.value()->section("__TEXT,__unwind_info");
  const std::vector<uint8_t> good(sec->data, sec->data + sec->size);
  std::vector<uint8_t> b = good;
  put32(b, 0, 2);
  CHECK_THAT(CompactUnwindTable::parse(b).error().message, Catch::Contains("version 2"));
  b = good;
  put32(b, 24, 0x00ffffff);  // index count
  CHECK(CompactUnwindTable::parse(b).error().code == SPROV_ERR_LIMIT);
  b = good;
  put32(b, 8, 200);  // common encodings
  CHECK_THAT(CompactUnwindTable::parse(b).error().message, Catch::Contains("200 common encodings"));
  b = good;
  put32(b, 20, static_cast<uint32_t>(good.size()) - 4);  // the index past the end
  CHECK(CompactUnwindTable::parse(b).error().code == SPROV_ERR_TRUNCATED);
  b = good;
  const uint32_t page = le32(good.data() + le32(good.data() + 20) + 4);
  put32(b, page, 7);
  CHECK_THAT(CompactUnwindTable::parse(b).error().message, Catch::Contains("kind 7"));
  // A compressed entry whose encoding index is past the common and page encodings.
  b = good;
  REQUIRE(le32(b.data() + page) == kSecondLevelCompressed);
  const uint32_t entries = page + le16(b.data() + page + 4);
  b[entries + 3] = 0xff;
  CHECK_THAT(CompactUnwindTable::parse(b).error().message, Catch::Contains("encoding index 255"));
}

TEST_CASE("compact unwind hostile: every encoding decodes to a bounded rule or a named error", "[macho][compact-unwind][hostile]") {
  // Every mode with pseudo-random fields (and the zero-size code reader: indirect sizes unreadable).
  const CodeReader none = [](uint64_t, void*, size_t) { return false; };
  uint32_t x = 0x12345678;
  size_t ok = 0;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    for (Arch a : {Arch::kX86_64, Arch::kArm64}) {
      auto r = a == Arch::kX86_64 ? decode_x86_64(x, 0x1000, none) : decode_arm64(x);
      if (!r.ok()) {
        CHECK_FALSE(r.error().message.empty());
        continue;
      }
      ok++;
      std::set<uint8_t> regs;
      bool fine = true;
      for (uint8_t k = 0; k < r->nsaved; k++) fine = fine && r->saved[k].offset < 0 && regs.insert(r->saved[k].reg).second;
      if (!fine) FAIL_CHECK("encoding 0x" << std::hex << x << ": a slot at or above the CFA, or a register twice");
    }
  }
  CHECK(ok > 1000);
  // Named: mode 5 on x86_64, an RBP-frame register 7, a permutation past its range.
  CHECK_THAT(decode_x86_64(0x05000000, 0, none).error().message, Catch::Contains("mode 5"));
  CHECK_THAT(decode_x86_64(0x01010007, 0, none).error().message, Catch::Contains("register 0 is 7"));
  CHECK_THAT(decode_x86_64(0x02100000 | (2u << 10) | 30, 0, none).error().message, Catch::Contains("permutation 30"));
  CHECK_THAT(decode_x86_64(0x03100000, 0x1000, none).error().message, Catch::Contains("cannot be read"));
  CHECK_THAT(decode_arm64(0x05000000).error().message, Catch::Contains("mode 5"));
}

TEST_CASE("compact unwind hostile: first-level entries sharing one page cannot multiply the work", "[macho][compact-unwind][hostile]") {
  // 50 first-level entries (100 bytes of functions each) all naming one compressed page of 100
  // entries: each range would accept the page, 5,000 entries from a 1 KiB section.
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; i++) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  const uint32_t n = 50, per = 100;
  const uint32_t common = 28, index = common + 4, page = index + (n + 1) * 12;
  u32(1), u32(common), u32(1), u32(index), u32(0), u32(index), u32(n + 1);  // header
  u32(0x02000000);                                                           // one common encoding
  for (uint32_t i = 0; i <= n; i++) u32(0x1000 + i * per), u32(i < n ? page : 0), u32(page);  // LSDA array empty
  u32(kSecondLevelCompressed);
  b.push_back(12), b.push_back(0), b.push_back(per & 0xff), b.push_back(0);  // entries at +12, 100 of them
  b.push_back(0), b.push_back(0), b.push_back(0), b.push_back(0);            // no page encodings
  for (uint32_t k = 0; k < per; k++) u32(k);                                 // offsets 0..99, encoding 0
  auto t = CompactUnwindTable::parse(b);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message, Catch::Contains("words the section holds"));
  // The same section with one first-level entry is accepted: the check is not a false alarm.
  std::vector<uint8_t> one = b;
  put32(one, 24, 2);
  put32(one, index + 12, 0x1000 + per);
  put32(one, index + 16, 0);
  auto t1 = CompactUnwindTable::parse(one);
  INFO((t1.ok() ? "" : t1.error().message));
  REQUIRE(t1.ok());
  CHECK(t1->pages().size() == 1);
  CHECK(t1->pages()[0].entries.size() == per);
}
