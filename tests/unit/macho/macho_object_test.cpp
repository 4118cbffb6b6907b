// SPDX-License-Identifier: Apache-2.0
// MachoObject against LLVM's Mach-O tools (issue 34): executables, stripped dylibs, a fat file and its
// dSYM, built by tests/unit/macho/fixtures.cmake with clang-16 and ld64.lld-16, open through the
// registry as "macho"; UUIDs, load commands, segments, sections, symbols, export tries, function
// starts and code bytes are what llvm-dwarfdump-16, llvm-objdump-16 and llvm-nm-16 say, and
// `stackprov symbolize --obj` names what llvm-symbolizer-16 names.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>

#include "lib/macho_peers.hpp"
#include "macho/macho_object.hpp"
#include "object/object_image.hpp"
#include "stackprov/stackprov.h"

using namespace stackprov;
using namespace stackprov::test;

namespace {

/// a + b by appending ("literal" + std::string&& trips GCC 12's -Wrestrict false positive, PR 105329).
std::string cat(std::string a, const std::string& b) {
  a += b;
  return a;
}

const std::string kObjectFix = STACKPROV_MACHO_FIXTURES;

void need(const char* tool) {
  INFO(tool << " is needed (make deps installs it)");
  REQUIRE(std::system((std::string("command -v ") + tool + " >/dev/null").c_str()) == 0);
}

void need_tools() {
  for (const char* t : {"llvm-objdump-16", "llvm-nm-16", "llvm-dwarfdump-16", "llvm-symbolizer-16"}) need(t);
}

std::shared_ptr<macho::MachoObject> open_object_fixture(const std::string& name, std::optional<Arch> arch = std::nullopt) {
  macho::SliceChoice c;
  c.arch = arch;
  auto r = macho::MachoObject::open(kObjectFix + "/" + name, c);
  INFO(name << ": " << (r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return r.value();
}

const char* llvm_arch(Arch a) { return a == Arch::kArm64 ? "arm64" : "x86_64"; }

// dsymutil-16 --dump-debug-map's YAML lines (built once: std::regex construction is slow, the more
// so under ASan at -O0).
const std::regex kFilename(R"(- filename:\s+'([^']*)')");
const std::regex kTimestamp(R"(^\s+timestamp:\s+([0-9]+))");
const std::regex kMapSymbol(R"(sym: ([^,]+), objAddr: 0x[0-9A-Fa-f]+, binAddr: 0x([0-9A-Fa-f]+), size: 0x([0-9A-Fa-f]+))");
const std::regex kObjAddr(R"(sym: ([^,]+), objAddr: 0x([0-9A-Fa-f]+), binAddr)");

/// The function names `stackprov symbolize --obj PATH ADDR...` prints: its call,
/// sprov_symbolizer_addr_ex with the CLI's default flags (llvm-symbolizer's output), "??" for none.
std::vector<std::string> symbolize_names(const std::string& path, const std::vector<uint64_t>& addrs) {
  sprov_context_opts copts{};
  copts.sz = sizeof copts;
  sprov_context* ctx = nullptr;
  REQUIRE(sprov_context_new(&copts, &ctx) == 0);
  sprov_symbolizer_opts sopts{};
  sopts.sz = sizeof sopts;
  sprov_symbolizer* sym = nullptr;
  REQUIRE(sprov_symbolizer_new(ctx, &sopts, &sym) == 0);
  std::vector<std::string> out;
  for (uint64_t a : addrs) {
    sprov_symbol_info info{};
    info.sz = sizeof info;
    const int rc = sprov_symbolizer_addr_ex(sym, path.c_str(), a, SPROV_SYMBOLIZE_LLVM_COMPAT, &info);
    INFO(sprov_last_error_message());
    REQUIRE(rc == 0);
    out.push_back(info.name != nullptr && info.name[0] != 0 ? info.name : "??");
  }
  sprov_symbolizer_free(sym);
  sprov_context_free(ctx);
  return out;
}

}  // namespace

TEST_CASE("Mach-O: the registry opens thin and fat files; UUIDs per slice equal llvm-dwarfdump --uuid", "[object][macho]") {
  need_tools();
  for (const char* name : {"modes_x86_64", "modes_arm64", "big_arm64", "libmodes_x86_64.dylib", "libmodes_arm64.dylib"}) {
    INFO(name);
    auto img = object::open(kObjectFix + "/" + name);
    REQUIRE(img.ok());
    CHECK(img.value()->format_name() == "macho");
    const auto uuids = dwarfdump_uuids(run_peer("llvm-dwarfdump-16 --uuid '" + kObjectFix + "/" + name + "'"));
    REQUIRE(uuids.size() == 1);
    CHECK(img.value()->id().kind == IdKind::kMachoUuid);
    CHECK(uuids.begin()->first == llvm_arch(img.value()->arch()));
    CHECK(macho::uuid_string(img.value()->id()) == uuids.begin()->second);
  }
  // The fat file: every slice its own module and UUID; object::open takes the host's slice.
  const auto uuids = dwarfdump_uuids(run_peer("llvm-dwarfdump-16 --uuid '" + kObjectFix + "/fat'"));
  REQUIRE(uuids.size() == 2);
  auto slices = macho::list_slices(kObjectFix + "/fat");
  REQUIRE(slices.ok());
  REQUIRE(slices->size() == 2);
  const std::string uh = run_peer("llvm-objdump-16 --macho --universal-headers '" + kObjectFix + "/fat'");
  for (const macho::Slice& s : *slices) {
    INFO(llvm_arch(s.arch));
    const size_t at = uh.find(std::string("architecture ") + llvm_arch(s.arch));
    REQUIRE(at != std::string::npos);
    CHECK(uh.find(cat("    offset ", std::to_string(s.offset)) + "\n", at) != std::string::npos);
    CHECK(uh.find(cat("    size ", std::to_string(s.size)) + "\n", at) != std::string::npos);
    auto one = open_object_fixture("fat", s.arch);
    CHECK(one->arch() == s.arch);
    CHECK(one->slice().offset == s.offset);
    CHECK(macho::uuid_string(one->id()) == uuids.at(llvm_arch(s.arch)));
    CHECK(one->file_bytes().size() == s.size);
  }
  auto host = object::open(kObjectFix + "/fat");
  REQUIRE(host.ok());
#if defined(__aarch64__)
  CHECK(host.value()->arch() == Arch::kArm64);
#else
  CHECK(host.value()->arch() == Arch::kX86_64);
#endif
  macho::SliceChoice none;
  none.arch = Arch::kMips32;
  auto r = macho::MachoObject::open(kObjectFix + "/fat", none);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_NOT_FOUND);
}

TEST_CASE("Mach-O: load commands, segments and sections equal llvm-objdump --private-headers", "[object][macho]") {
  need_tools();
  for (const char* name : {"modes_x86_64", "modes_arm64", "libmodes_arm64.dylib", "fat.dSYM/Contents/Resources/DWARF/fat"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    const auto lcs = objdump_load_commands(
        run_peer("llvm-objdump-16 --macho --private-headers --arch=" + std::string(llvm_arch(o->arch())) + " '" + kObjectFix + "/" + name + "'"));
    REQUIRE(lcs.size() == o->load_commands().size());
    size_t seg = 0, sec = 0;
    for (size_t i = 0; i < lcs.size(); i++) {
      INFO("load command " << i << " " << lcs[i].fields.at("cmd"));
      CHECK(num(lcs[i].fields.at("cmdsize")) == o->load_commands()[i].size);
      if (lcs[i].fields.at("cmd") == "LC_UUID") CHECK(lcs[i].fields.at("uuid") == macho::uuid_string(o->id()));
      if (lcs[i].fields.at("cmd") != "LC_SEGMENT_64") continue;
      REQUIRE(seg < o->segments().size());
      const macho::Segment& s = o->segments()[seg++];
      CHECK(lcs[i].fields.at("segname") == s.name);
      CHECK(num(lcs[i].fields.at("vmaddr")) == s.vmaddr);
      CHECK(num(lcs[i].fields.at("vmsize")) == s.vmsize);
      CHECK(num(lcs[i].fields.at("fileoff")) == s.fileoff);
      CHECK(num(lcs[i].fields.at("filesize")) == s.filesize);
      CHECK(num(lcs[i].fields.at("nsects")) == s.nsects);
      for (const auto& f : lcs[i].sections) {
        REQUIRE(sec < o->sections().size());
        const macho::Section& x = o->sections()[sec++];
        INFO(x.segname << "," << x.sectname);
        CHECK(f.at("sectname") == x.sectname);
        CHECK(f.at("segname") == x.segname);
        CHECK(num(f.at("addr")) == x.addr);
        CHECK(num(f.at("size")) == x.size);
        CHECK(num(f.at("offset")) == x.offset);
        CHECK(f.at("align").rfind(cat("2^", std::to_string(x.align)) + " ", 0) == 0);
        CHECK((f.at("attributes").find("PURE_INSTRUCTIONS") != std::string::npos) == ((x.flags & macho::kSAttrPureInstructions) != 0));
      }
    }
    CHECK(seg == o->segments().size());
    CHECK(sec == o->sections().size());
  }
  // The dSYM's DWARF is asked for by the DWARF standard's names; the image's __TEXT,__text by its own.
  auto d = open_object_fixture("fat.dSYM/Contents/Resources/DWARF/fat");
  CHECK(d->filetype() == macho::kMhDsym);
  auto info = d->section(".debug_info");
  REQUIRE(info);
  CHECK(info->size == d->find_section("__DWARF", "__debug_info")->size);
  CHECK(d->section(".debug_line"));
  CHECK_FALSE(d->section("__TEXT,__text"));  // a dSYM keeps the section header, not the bytes
  auto o = open_object_fixture("modes_x86_64");
  auto text = o->section("__TEXT,__text");
  REQUIRE(text);
  CHECK(text->addr == o->find_section("__TEXT", "__text")->addr);
  CHECK_FALSE(o->section(".debug_info"));
}

TEST_CASE("Mach-O: nlist symbols equal llvm-nm -n, STABS skipped; function starts equal llvm-objdump --function-starts",
          "[object][macho]") {
  need_tools();
  for (const char* name : {"modes_x86_64", "modes_arm64", "big_arm64"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    const auto nm = nm_symbols(run_peer(std::string("llvm-nm-16 -n '") + kObjectFix + "/" + name + "'"));
    REQUIRE(nm.size() > 400);
    std::multiset<std::pair<uint64_t, std::string>> want, got;
    for (const NmSymbol& s : nm) want.insert({s.defined ? s.addr : 0, s.name});
    for (const macho::NlistSymbol& s : o->nlist_symbols())
      got.insert({(s.type & macho::kNType) == 0 ? 0 : s.value, std::string(s.name)});
    CHECK(got == want);
    // The file has STABS (the debug map, -g): llvm-nm -a lists them, we do not.
    const auto all = nm_symbols(run_peer(std::string("llvm-nm-16 -a '") + kObjectFix + "/" + name + "'"));
    CHECK(all.size() > nm.size());
    // Function symbols: the nlist names in __text without the leading underscore, each reaching to
    // the next function start.
    const auto starts = objdump_function_starts(run_peer(std::string("llvm-objdump-16 --macho --function-starts '") + kObjectFix + "/" + name + "'"));
    CHECK(starts == o->function_starts());
    const auto fns = o->symbols();
    std::set<uint64_t> text_syms;
    for (const NmSymbol& s : nm)
      if (s.type == 'T' || s.type == 't') text_syms.insert(s.addr);
    text_syms.erase(o->text_vmaddr());  // __mh_execute_header: in __TEXT, not in a code section
    REQUIRE(fns.size() == text_syms.size());
    for (size_t i = 0; i < fns.size(); i++) {
      CHECK(text_syms.count(fns[i].addr) == 1);
      auto next = std::upper_bound(starts.begin(), starts.end(), fns[i].addr);
      if (i + 1 < fns.size()) CHECK(fns[i].addr + fns[i].size == std::min(fns[i + 1].addr, next != starts.end() ? *next : UINT64_MAX));
    }
  }
}

TEST_CASE("Mach-O: the debug map (N_OSO objects, N_FUN and N_STSYM symbols) equals dsymutil --dump-debug-map",
          "[object][macho]") {
  need_tools();
  need("dsymutil-16");
  for (const char* name : {"modes_x86_64", "modes_arm64"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    CHECK(o->debug_map_error().empty());
    // dsymutil's YAML: "- filename: 'P'", "timestamp: N", then "- { sym: S, objAddr: A, binAddr: B, size: Z }"
    // per symbol it found in the object (in no particular order).
    const std::string dump = run_peer(std::string("dsymutil-16 --dump-debug-map '") + kObjectFix + "/" + name + "'");
    std::vector<std::pair<std::string, std::multiset<std::tuple<std::string, uint64_t, uint64_t>>>> want;
    std::vector<uint64_t> want_mtime;
    std::istringstream in(dump);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_search(line, m, kFilename)) {
        want.push_back({m[1], {}});
      } else if (std::regex_search(line, m, kTimestamp) && !want.empty()) {
        want_mtime.push_back(std::stoull(m[1]));
      } else if (std::regex_search(line, m, kMapSymbol) &&
                 !want.empty()) {
        want.back().second.insert({m[1], std::stoull(m[2], nullptr, 16), std::stoull(m[3], nullptr, 16)});
      }
    }
    REQUIRE(want.size() >= 4);  // modes.c, fp.c, eh.c, many400.c (dwarf_*.s has no -g: no unit)
    REQUIRE(want_mtime.size() == want.size());
    const auto& got_map = o->debug_map();
    REQUIRE(got_map.size() == want.size());
    size_t functions = 0, data = 0;
    for (size_t i = 0; i < want.size(); i++) {
      INFO(want[i].first);
      CHECK(std::string(got_map[i].path) == want[i].first);
      CHECK(got_map[i].mtime == want_mtime[i]);  // ld64.lld-16 writes 0: equal, but not a strong check
      std::multiset<std::tuple<std::string, uint64_t, uint64_t>> got;
      for (const macho::DebugMapSymbol& d : got_map[i].symbols) {
        got.insert({std::string(d.name), d.addr, d.size});
        (d.function ? functions : data)++;
      }
      // dsymutil keeps one of two entries of a name (arm64's eh.c lists GCC_except_table2 twice,
      // "failed to insert symbol"); the map keeps the file's entries: compare the distinct ones.
      CHECK(std::set(got.begin(), got.end()) == std::set(want[i].second.begin(), want[i].second.end()));
      CHECK(got.size() >= want[i].second.size());
      CHECK(got.size() - want[i].second.size() <= 1);
    }
    CHECK(functions > 400);
    if (std::string(name) == "modes_x86_64") CHECK(data == 2);  // eh.c's GCC_except_table2 and 3 (N_STSYM)
  }
  // A dSYM holds no debug map.
  auto d = open_object_fixture("fat.dSYM/Contents/Resources/DWARF/fat", Arch::kX86_64);
  CHECK(d->debug_map().empty());
}

namespace {

/// The file's bytes.
std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spill(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(f.good());
}

/// The file offsets of the nlist_64 entries of type `type` in a thin 64-bit Mach-O, read here from
/// LC_SYMTAB (symoff, nsyms) by the layout of <mach-o/loader.h> and <mach-o/nlist.h>.
std::vector<size_t> nlist_entries_of_type(const std::vector<uint8_t>& b, uint8_t type) {
  auto u32 = [&](size_t o) { return uint32_t(b.at(o)) | uint32_t(b.at(o + 1)) << 8 | uint32_t(b.at(o + 2)) << 16 | uint32_t(b.at(o + 3)) << 24; };
  const uint32_t ncmds = u32(16);
  size_t at = 32;
  std::vector<size_t> out;
  for (uint32_t i = 0; i < ncmds; i++) {
    if (u32(at) == 0x2) {  // LC_SYMTAB
      const uint32_t symoff = u32(at + 8), nsyms = u32(at + 12);
      for (uint32_t k = 0; k < nsyms; k++)
        if (b.at(symoff + 16u * k + 4) == type) out.push_back(symoff + 16u * k);
    }
    at += u32(at + 4);
  }
  return out;
}

}  // namespace

TEST_CASE("Mach-O: debug map objects open with each function's object address as dsymutil's objAddr; another "
          "build, a missing object and another architecture are refused by name", "[object][macho]") {
  need_tools();
  need("dsymutil-16");
  for (const char* name : {"modes_x86_64", "modes_arm64"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    // dsymutil's objAddr of each (file, sym).
    const std::string dump = run_peer(std::string("dsymutil-16 --dump-debug-map '") + kObjectFix + "/" + name + "'");
    std::map<std::pair<std::string, std::string>, uint64_t> obj_addr;
    std::string file;
    std::istringstream in(dump);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_search(line, m, kFilename)) file = m[1];
      else if (std::regex_search(line, m, kObjAddr))
        obj_addr[{file, m[1]}] = std::stoull(m[2], nullptr, 16);
    }
    const auto ranges = o->debug_map_ranges();
    REQUIRE(ranges.size() > 400);
    std::map<uint32_t, object::DebugMapObjectFile> opened;
    size_t checked = 0;
    for (size_t i = 0; i < ranges.size(); i++) {
      const object::DebugMapRange& r = ranges[i];
      if (i > 0) CHECK(ranges[i - 1].addr + ranges[i - 1].size <= r.addr);
      if (!opened.count(r.object)) {
        auto f = o->open_debug_map_object(r.object);
        INFO((f.ok() ? "" : f.error().message));
        REQUIRE(f.ok());
        CHECK(static_cast<const macho::MachoObject&>(*f->image).filetype() == macho::kMhObject);
        CHECK(f->image->arch() == o->arch());
        opened[r.object] = std::move(f).value();
      }
      const auto& sym = o->debug_map()[r.object].symbols[r.symbol];
      CHECK(sym.addr == r.addr);
      const std::string path(o->debug_map()[r.object].path);
      auto want = obj_addr.find({path, std::string(sym.name)});
      REQUIRE(want != obj_addr.end());
      CHECK(opened[r.object].symbol_addrs.at(r.symbol) == want->second);
      ++checked;
    }
    CHECK(checked == ranges.size());
  }
  // Copies of modes_x86_64 whose map is changed: the first object's mtime, its path.
  char tmpl[] = "/tmp/stackprov-macho-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::vector<uint8_t> orig = slurp(kObjectFix + "/modes_x86_64");
  const auto oso = nlist_entries_of_type(orig, macho::kNOso);
  REQUIRE(oso.size() >= 4);
  auto image = open_object_fixture("modes_x86_64");
  const std::string first(image->debug_map()[0].path);
  struct stat st;
  REQUIRE(stat(first.c_str(), &st) == 0);
  {  // another build: a map mtime that is not the object's
    std::vector<uint8_t> b = orig;
    const uint64_t t = 1234567890;
    for (int k = 0; k < 8; k++) b[oso[0] + 8 + k] = static_cast<uint8_t>(t >> (8 * k));
    spill(dir + "/mtime", b);
    auto x = macho::MachoObject::open(dir + "/mtime");
    REQUIRE(x.ok());
    auto f = x.value()->open_debug_map_object(0);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
    CHECK_THAT(f.error().message, Catch::Contains(first) && Catch::Contains("1234567890") &&
                                      Catch::Contains(std::to_string(st.st_mtim.tv_sec)));
    CHECK(x.value()->open_debug_map_object(1).ok());  // the others are untouched
    // The object's own mtime (stat(2), seconds) in the map, as ld64 writes it: accepted.
    const uint64_t real = static_cast<uint64_t>(st.st_mtim.tv_sec);
    for (int k = 0; k < 8; k++) b[oso[0] + 8 + k] = static_cast<uint8_t>(real >> (8 * k));
    spill(dir + "/mtime-real", b);
    auto y = macho::MachoObject::open(dir + "/mtime-real");
    REQUIRE(y.ok());
    REQUIRE(y.value()->debug_map()[0].mtime == real);
    auto g = y.value()->open_debug_map_object(0);
    INFO((g.ok() ? "" : g.error().message));
    CHECK(g.ok());
  }
  // The path, rewritten in place in the string table (shorter names end at a NUL).
  auto with_path = [&](const std::string& file, const std::string& to) {
    std::vector<uint8_t> b = orig;
    auto at = std::search(b.begin(), b.end(), first.begin(), first.end());
    REQUIRE(at != b.end());
    REQUIRE(to.size() <= first.size());
    std::copy(to.begin(), to.end(), at);
    *(at + static_cast<ptrdiff_t>(to.size())) = 0;
    spill(dir + "/" + file, b);
    auto x = macho::MachoObject::open(dir + "/" + file);
    REQUIRE(x.ok());
    REQUIRE(std::string(x.value()->debug_map()[0].path) == to);
    return x.value()->open_debug_map_object(0);
  };
  const std::string fixdir = first.substr(0, first.rfind('/'));
  auto gone = with_path("gone", fixdir + "/nothere.o");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == -ENOENT);
  CHECK_THAT(gone.error().message, Catch::Contains(fixdir + "/nothere.o"));
  auto arm = with_path("arch", fixdir + "/fp_arm64.o");  // an arm64 object for an x86_64 image
  REQUIRE_FALSE(arm.ok());
  CHECK(arm.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  CHECK_THAT(arm.error().message, Catch::Contains("fp_arm64.o is for arm64, not the image's x86_64"));
  auto exe = with_path("exe", kObjectFix + "/modes_x86_64");  // not an object file (the image itself)
  REQUIRE_FALSE(exe.ok());
  CHECK_THAT(exe.error().message, Catch::Contains("not MH_OBJECT"));
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("Mach-O: a stripped dylib is named by its export trie (LC_DYLD_INFO_ONLY and LC_DYLD_EXPORTS_TRIE)",
          "[object][macho]") {
  need_tools();
  for (const char* name : {"libmodes_x86_64.dylib", "libmodes_arm64.dylib"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    const std::string hdr = run_peer(std::string("llvm-objdump-16 --macho --private-headers '") + kObjectFix + "/" + name + "'");
    CHECK(hdr.find(std::string(o->arch() == Arch::kArm64 ? "LC_DYLD_EXPORTS_TRIE" : "LC_DYLD_INFO_ONLY")) != std::string::npos);
    // llvm-strip keeps only the nlist symbols something refers to (the personality routine).
    CHECK(nm_symbols(run_peer(std::string("llvm-nm-16 '") + kObjectFix + "/" + name + "'")).size() <= 1);
    auto want = objdump_exports(run_peer(std::string("llvm-objdump-16 --macho --exports-trie '") + kObjectFix + "/" + name + "'"));
    REQUIRE(want.size() >= 10);
    std::set<std::pair<uint64_t, std::string>> w, g, gf;
    for (auto& [off, n] : want) w.insert({off, n});
    for (const macho::ExportSymbol& e : o->exports()) g.insert({e.addr - o->text_vmaddr(), std::string(e.name)});
    CHECK(g == w);
    for (const object::Symbol& s : o->symbols()) gf.insert({s.addr - o->text_vmaddr(), cat("_", std::string(s.name))});
    CHECK(gf == w);  // every export is a function here
    // `stackprov symbolize --obj` names each export's first byte by it (llvm-symbolizer-16 reads no
    // export trie: it answers "??" for these, so llvm-objdump's trie listing is the oracle here).
    std::vector<uint64_t> addrs;
    for (auto& [off, n] : want) addrs.push_back(o->text_vmaddr() + off);
    const auto names = symbolize_names(kObjectFix + "/" + name, addrs);
    REQUIRE(names.size() == want.size());
    for (size_t k = 0; k < want.size(); k++) CHECK("_" + names[k] == want[k].second);
  }
}

TEST_CASE("Mach-O: stackprov symbolize --obj's call names every function as llvm-symbolizer-16 does", "[object][macho]") {
  need_tools();
  for (const char* name : {"modes_x86_64", "modes_arm64", "big_arm64"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    // Each function's first byte, its middle and its last byte.
    std::string addrs;
    std::vector<uint64_t> at;
    for (const object::Symbol& s : o->symbols())
      for (uint64_t a : {s.addr, s.addr + s.size / 2, s.addr + s.size - 1}) {
        addrs += ' ';
        addrs += std::to_string(a);
        at.push_back(a);
      }
    const std::string path = kObjectFix + "/" + name;
    // The images' DWARF is in the objects their debug maps name (no dSYM beside them), which
    // llvm-symbolizer-16 does not read: for modes_A its answer with the dSYM dsymutil-16 linked from
    // the same map (the fat file's slice A: an inlined frame's name first where there is one);
    // big_arm64 has no dSYM, and at these addresses no inlined frame (llvm's symbol-table names).
    const bool modes = std::string(name).rfind("modes_", 0) == 0;
    const std::string llvm = run_peer(modes ? "llvm-symbolizer-16 --obj='" + kObjectFix + "/fat' --default-arch=" +
                                                  llvm_arch(o->arch()) + addrs
                                            : "llvm-symbolizer-16 --obj='" + path + "'" + addrs);
    // Blocks of "function\nfile:line:column\n\n": compare the functions.
    auto names = [](const std::string& text) {
      std::vector<std::string> v;
      std::istringstream in(text);
      std::string line;
      bool first = true;
      while (std::getline(in, line)) {
        if (line.empty()) {
          first = true;
          continue;
        }
        if (first) v.push_back(line);
        first = false;
      }
      return v;
    };
    const auto a = symbolize_names(path, at), b = names(llvm);
    REQUIRE(a.size() == at.size());
    CHECK(a == b);
  }
}

TEST_CASE("Mach-O: code bytes at link-time addresses equal llvm-objdump's; load bias from a module list's base",
          "[object][macho]") {
  need_tools();
  for (const char* name : {"modes_x86_64", "modes_arm64"}) {
    INFO(name);
    auto o = open_object_fixture(name);
    const std::string dis = run_peer(std::string("llvm-objdump-16 -d --no-print-imm-hex '") + kObjectFix + "/" + name +
                                     "' | grep -E '^ *[0-9a-f]+: ' | head -12");
    uint64_t addr = 0;
    std::vector<uint8_t> want;
    // x86_64: "100000420: 8d 04 7f  leal ..." (bytes); arm64: "100000428: 0b000408  add ..." (a
    // little-endian word).
    const std::regex line(R"(([0-9a-f]+): ((?:[0-9a-f]{2} )+|[0-9a-f]{8} ))");
    for (auto it = std::sregex_iterator(dis.begin(), dis.end(), line); it != std::sregex_iterator(); ++it) {
      if (want.empty()) addr = std::stoull((*it)[1], nullptr, 16);
      const std::string hex = (*it)[2];
      if (hex.size() == 9 && hex[2] != ' ') {
        const uint32_t w = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
        for (int i = 0; i < 4; i++) want.push_back(static_cast<uint8_t>(w >> (8 * i)));
        continue;
      }
      for (size_t i = 0; i + 1 < hex.size(); i += 3) want.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    }
    REQUIRE(want.size() >= 12);
    std::vector<uint8_t> got(want.size());
    REQUIRE(o->read_code(addr, got.data(), got.size()));
    CHECK(got == want);
    CHECK_FALSE(o->read_code(0x10, got.data(), 1));  // __PAGEZERO has no bytes
    // dyld's image list gives the mach header's address: the bias moves __TEXT's vmaddr there.
    CHECK(o->load_bias(0x7f0000000000, 0) == 0x7f0000000000 - o->text_vmaddr());
    const auto code = o->code_sections();
    REQUIRE(code.size() == 1);
    CHECK(code[0].addr <= addr);
    CHECK(addr < code[0].end);
  }
  // In a fat file, the mapping's offset counts from the file's start.
  auto arm = open_object_fixture("fat", Arch::kArm64);
  CHECK(arm->load_bias(0x200000000, arm->slice().offset) == 0x200000000 - arm->text_vmaddr());
}

TEST_CASE("Mach-O: the dSYM beside a fat file is found per slice by UUID; a dSYM of another UUID is an error naming both",
          "[object][macho]") {
  need_tools();
  for (Arch a : {Arch::kX86_64, Arch::kArm64}) {
    auto o = open_object_fixture("fat", a);
    std::vector<object::DebugFileCandidate> seen;
    auto d = o->find_debug_file({}, &seen);
    INFO((d.ok() ? "" : d.error().message));
    REQUIRE(d.ok());
    CHECK(d.value()->id() == o->id());
    CHECK(d.value()->arch() == a);
    CHECK(d.value()->section(".debug_info"));
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].outcome == object::DebugFileCandidate::Outcome::kUsed);
    CHECK(seen[0].path == kObjectFix + "/fat.dSYM/Contents/Resources/DWARF/fat");
    const auto uuids = dwarfdump_uuids(run_peer("llvm-dwarfdump-16 --uuid '" + seen[0].path + "'"));
    CHECK(macho::uuid_string(d.value()->id()) == uuids.at(llvm_arch(a)));
  }
  // big_arm64 next to the fat file's dSYM under its name: no slice of that dSYM has its UUID.
  char tmpl[] = "/tmp/stackprov-macho-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  REQUIRE(std::system(("mkdir -p '" + dir + "/x.dSYM/Contents/Resources/DWARF' && cp '" + kObjectFix + "/big_arm64' '" + dir +
                       "/x' && cp '" + kObjectFix + "/fat.dSYM/Contents/Resources/DWARF/fat' '" + dir + "/x.dSYM/Contents/Resources/DWARF/x'")
                          .c_str()) == 0);
  auto o = open_object_fixture("big_arm64");
  auto x = macho::MachoObject::open(dir + "/x");
  REQUIRE(x.ok());
  std::vector<object::DebugFileCandidate> seen;
  auto d = x.value()->find_debug_file({}, &seen);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == SPROV_ERR_BUILD_ID_MISMATCH);
  const auto uuids = dwarfdump_uuids(run_peer("llvm-dwarfdump-16 --uuid '" + kObjectFix + "/fat'"));
  CHECK_THAT(d.error().message, Catch::Contains(macho::uuid_string(o->id())) && Catch::Contains(uuids.at("arm64")) &&
                                    Catch::Contains(uuids.at("x86_64")));
  // Beside it (the mismatch), then the default debug directory's /usr/lib/debug/x.dSYM (missing).
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].outcome == object::DebugFileCandidate::Outcome::kIdentityMismatch);
  CHECK((seen[1].rule == "dsym-dir" && seen[1].path == "/usr/lib/debug/x.dSYM/Contents/Resources/DWARF/x" &&
         seen[1].outcome == object::DebugFileCandidate::Outcome::kMissing));
  // The dSYM search path: with the wrong dSYM still beside the image, the right one (big_arm64's
  // own DWARF file stands in for a dSYM: its slice has the UUID) in a debug directory is used.
  REQUIRE(std::system(("mkdir -p '" + dir + "/syms/x.dSYM/Contents/Resources/DWARF' && cp '" + kObjectFix +
                       "/big_arm64' '" + dir + "/syms/x.dSYM/Contents/Resources/DWARF/x'").c_str()) == 0);
  object::DebugFileOptions search;
  search.debug_dirs = {dir + "/empty", dir + "/syms"};
  seen.clear();
  d = x.value()->find_debug_file(search, &seen);
  REQUIRE(d.ok());
  CHECK(d.value()->id() == o->id());
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].outcome == object::DebugFileCandidate::Outcome::kIdentityMismatch);
  CHECK((seen[1].rule == "dsym-dir" && seen[1].outcome == object::DebugFileCandidate::Outcome::kMissing));
  CHECK((seen[2].rule == "dsym-dir" && seen[2].path == dir + "/syms/x.dSYM/Contents/Resources/DWARF/x" &&
         seen[2].outcome == object::DebugFileCandidate::Outcome::kUsed));
  // No dSYM at all: NOT_FOUND naming every place searched.
  REQUIRE(std::system(("rm -rf '" + dir + "/x.dSYM' '" + dir + "/syms'").c_str()) == 0);
  d = x.value()->find_debug_file(search, nullptr);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == SPROV_ERR_NOT_FOUND);
  CHECK_THAT(d.error().message, Catch::Contains(dir + "/x.dSYM/Contents/Resources/DWARF/x") &&
                                    Catch::Contains(dir + "/empty/x.dSYM/Contents/Resources/DWARF/x") &&
                                    Catch::Contains(dir + "/syms/x.dSYM/Contents/Resources/DWARF/x"));
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}
