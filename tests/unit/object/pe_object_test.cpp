// SPDX-License-Identifier: Apache-2.0
// PeObject against LLVM's COFF tools (issue 33): PE32+ images the test links with clang-14 and
// lld-link-14 (with a PDB, with DWARF in long-named sections, without a debug directory) open through
// the registry as "pe", and their identity, sections and directories are what llvm-readobj-14 and
// llvm-pdbutil-14 say; truncated and corrupted images give errors, never a crash. A mingw image
// (x86_64-w64-mingw32-gcc) has COFF symbols and an export: its function symbols and exports are
// llvm-readobj-14's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <regex>
#include <string>

#include "object/object_image.hpp"
#include "pe/pe_object.hpp"

using namespace stackprov;

namespace {

std::string run_peer(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  REQUIRE(p);
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p.get())) > 0;) out.append(buf.data(), n);
  return out;
}

void need(const char* tool) {
  INFO(tool << " is needed (make deps installs it)");
  REQUIRE(std::system((std::string("command -v ") + tool + " >/dev/null").c_str()) == 0);
}

/// A directory with x.exe (+ x.pdb: CodeView), xd.exe (DWARF: long section names) and xn.exe (no
/// debug directory), linked without a C runtime (doc/windows.md "Fixtures"); m.exe (mingw gcc,
/// -nostdlib: COFF symbols with long names, a static function, an export) and ms.exe (m.exe
/// stripped of every symbol: the export alone).
struct Fixtures {
  std::string dir;
  Fixtures() {
    for (const char* t : {"clang-14", "lld-link-14", "llvm-readobj-14", "llvm-pdbutil-14", "x86_64-w64-mingw32-gcc",
                          "x86_64-w64-mingw32-strip"})
      need(t);
    char tmpl[] = "/tmp/stackprov-pe-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    std::ofstream(dir + "/x.c") << "static int __attribute__((noinline)) leaf(int x) { return x * 3 + 1; }\n"
                                   "static inline int mid(int x) { return leaf(x) + leaf(x + 1); }\n"
                                   "int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += mid(i); return s; }\n"
                                   "int mainCRTStartup(void) { return work(10); }\n";
    std::ofstream(dir + "/m.c") << "int __attribute__((noinline)) a_long_function_name(int x) { return x * 3 + 1; }\n"
                                   "static int __attribute__((noinline)) helper(int x) { return a_long_function_name(x) + 2; }\n"
                                   "__declspec(dllexport) int exported_fn(int x) { return helper(x); }\n"
                                   "int entry(void) { return exported_fn(5); }\n";
    const std::string cc = "cd '" + dir + "' && clang-14 --target=x86_64-pc-windows-msvc -O2 -g ";
    const std::string ld = " && lld-link-14 /entry:mainCRTStartup /subsystem:console /nodefaultlib ";
    for (const std::string& cmd :
         {cc + "-gcodeview -c x.c -o x.obj" + ld + "/debug /pdb:x.pdb x.obj /out:x.exe",
          cc + "-gdwarf -c x.c -o xd.obj" + ld + "/debug:dwarf xd.obj /out:xd.exe",
          cc + "-c x.c -o xn.obj" + ld + "xn.obj /out:xn.exe",
          "cd '" + dir + "' && x86_64-w64-mingw32-gcc -O2 -nostdlib -Wl,-e,entry -o m.exe m.c && "
          "x86_64-w64-mingw32-strip --strip-all -o ms.exe m.exe"}) {
      INFO(cmd);
      REQUIRE(std::system((cmd + " >/dev/null 2>&1").c_str()) == 0);
    }
  }
  ~Fixtures() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
};

Fixtures& fixtures() {
  static Fixtures f;
  return f;
}

/// llvm-readobj-14's "Key: value" under a block, as text.
std::string field(const std::string& text, const std::string& key, size_t from = 0) {
  const size_t at = text.find("  " + key + ": ", from);
  if (at == std::string::npos) return "";
  const size_t v = at + key.size() + 4;
  return text.substr(v, text.find('\n', v) - v);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("PE: the registry opens a PE32+ image; GUID, age and PDB path equal llvm-readobj and llvm-pdbutil",
          "[object][pe]") {
  const std::string exe = fixtures().dir + "/x.exe";
  auto img = object::open(exe);
  REQUIRE(img.ok());
  const object::ObjectImage& o = *img.value();
  CHECK(o.format_name() == "pe");
  const auto* pe = dynamic_cast<const pe::PeObject*>(&o);
  REQUIRE(pe != nullptr);
  CHECK(o.arch() == Arch::kX86_64);
  CHECK(o.addr_size() == 8);
  REQUIRE(o.id().kind == IdKind::kPdbGuidAge);
  REQUIRE(o.id().len == 20);

  // llvm-readobj: "PDBGUID: (DA F4 E6 ...)" -- the bytes as stored -- and "PDBAge: 1".
  const std::string dbg = run_peer("llvm-readobj-14 --coff-debug-directory '" + exe + "'");
  std::string bytes = field(dbg, "PDBGUID");
  std::string ours;
  char b[4];
  for (int i = 0; i < 16; i++) {
    std::snprintf(b, sizeof b, "%s%02X", i ? " " : "", o.id().bytes[i]);
    ours += b;
  }
  CHECK(bytes == "(" + ours + ")");
  const uint32_t age = o.id().bytes[16] | o.id().bytes[17] << 8 | o.id().bytes[18] << 16 | uint32_t{o.id().bytes[19]} << 24;
  CHECK(field(dbg, "PDBAge") == std::to_string(age));
  REQUIRE(pe->codeview());
  CHECK(field(dbg, "PDBFileName") == pe->codeview()->pdb_path);
  CHECK(pe->debug_entries().size() == 1);

  // llvm-pdbutil: "GUID: {4AE6F4DA-3290-251B-4C4C-44205044422E}", "Age: 1" -- the symbol-server key
  // is the GUID's hex digits in that order, then the age in hex.
  const std::string sum = run_peer("llvm-pdbutil-14 dump --summary '" + fixtures().dir + "/x.pdb'");
  std::smatch m;
  REQUIRE(std::regex_search(sum, m, std::regex(R"(GUID: \{([0-9A-F-]+)\})")));
  std::string guid = m[1];
  guid.erase(std::remove(guid.begin(), guid.end(), '-'), guid.end());
  REQUIRE(std::regex_search(sum, m, std::regex(R"(Age: (\d+))")));
  char age_hex[16];
  std::snprintf(age_hex, sizeof age_hex, "%X", static_cast<unsigned>(std::stoul(m[1])));
  CHECK(pe::symbol_server_key(o.id()) == guid + age_hex);
  // LLD's GUIDs end in "LLD PDB." (test-platforms notes): a byte-order slip would move them.
  CHECK(std::string(reinterpret_cast<const char*>(o.id().bytes + 8), 8) == "LLD PDB.");
}

TEST_CASE("PE: sections (long names resolved), image base and directories equal llvm-readobj", "[object][pe]") {
  for (const char* name : {"x.exe", "xd.exe"}) {
    INFO(name);
    const std::string exe = fixtures().dir + "/" + name;
    auto img = pe::PeObject::open(exe);
    REQUIRE(img.ok());
    const pe::PeObject& o = *img.value();
    const std::string secs = run_peer("llvm-readobj-14 --sections '" + exe + "'");
    size_t at = 0, n = 0;
    for (const pe::Section& s : o.sections()) {
      at = secs.find("Section {", at);
      REQUIRE(at != std::string::npos);
      INFO("section " << s.name);
      const std::string nm = field(secs, "Name", at);
      CHECK(nm.substr(0, nm.find(' ')) == s.name);
      CHECK(std::stoul(field(secs, "VirtualSize", at), nullptr, 0) == s.vsize);
      CHECK(std::stoul(field(secs, "VirtualAddress", at), nullptr, 0) == s.rva);
      CHECK(std::stoul(field(secs, "RawDataSize", at), nullptr, 0) == s.raw_size);
      CHECK(std::stoul(field(secs, "PointerToRawData", at), nullptr, 0) == s.raw_offset);
      const size_t ch = secs.find("Characteristics [ (", at);
      REQUIRE(ch != std::string::npos);
      CHECK(std::stoul(secs.substr(ch + 19), nullptr, 16) == s.characteristics);
      at++;
      n++;
    }
    CHECK(n > 2);
    CHECK(secs.find("Section {", at) == std::string::npos);  // no section left over
    const std::string hdr = run_peer("llvm-readobj-14 --file-headers '" + exe + "'");
    CHECK(std::stoull(field(hdr, "ImageBase"), nullptr, 0) == o.image_base());
    CHECK(std::stoul(field(hdr, "ExceptionTableRVA"), nullptr, 0) == o.directory(pe::kDirException).rva);
    CHECK(std::stoul(field(hdr, "ExceptionTableSize"), nullptr, 0) == o.directory(pe::kDirException).size);
    // The unwind table is the exception directory's bytes.
    auto tables = o.unwind_tables();
    REQUIRE(tables.size() == 1);
    CHECK(tables[0].kind == "pdata");
    CHECK(tables[0].data.size == o.directory(pe::kDirException).size);
  }
  // DWARF in a PE is asked for by its standard name, stored under "/4"-style long names.
  auto d = pe::PeObject::open(fixtures().dir + "/xd.exe");
  REQUIRE(d.ok());
  auto info = d.value()->section(".debug_info");
  REQUIRE(info);
  CHECK(info->size > 0);
  CHECK(d.value()->id().kind == IdKind::kPeCodeId);  // /debug:dwarf writes no CodeView record: the code id
}

TEST_CASE("PE: code bytes at image base + RVA equal llvm-objdump's", "[object][pe]") {
  const std::string exe = fixtures().dir + "/x.exe";
  auto img = pe::PeObject::open(exe);
  REQUIRE(img.ok());
  const pe::PeObject& o = *img.value();
  // llvm-objdump -d: "140001000: 56      pushq %rsi": the first instructions' address and bytes.
  const std::string dis = run_peer("llvm-objdump-14 -d '" + exe + "' | grep -E '^ *[0-9a-f]+: ' | head -8");
  uint64_t addr = 0;
  std::vector<uint8_t> want;
  const std::regex line(R"(([0-9a-f]+): ((?:[0-9a-f]{2} )+))");
  for (auto it = std::sregex_iterator(dis.begin(), dis.end(), line);
       it != std::sregex_iterator(); ++it) {
    if (want.empty()) addr = std::stoull((*it)[1], nullptr, 16);
    const std::string hex = (*it)[2];
    for (size_t i = 0; i + 1 < hex.size(); i += 3)
      want.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  REQUIRE(want.size() >= 8);
  std::vector<uint8_t> got(want.size());
  REQUIRE(o.read_code(addr, got.data(), got.size()));
  CHECK(got == want);
  CHECK_FALSE(o.read_code(o.image_base() + o.size_of_image() + 0x1000, got.data(), 1));
  auto code = o.code_sections();
  REQUIRE(code.size() == 1);
  CHECK(code[0].addr <= addr);
  CHECK(addr < code[0].end);
}

TEST_CASE("PE: an image without a debug directory is identified by its code id", "[object][pe]") {
  auto img = pe::PeObject::open(fixtures().dir + "/xn.exe");
  REQUIRE(img.ok());
  CHECK(img.value()->debug_entries().empty());
  CHECK(run_peer("llvm-readobj-14 --coff-debug-directory '" + fixtures().dir + "/xn.exe'").find("DebugEntry") ==
        std::string::npos);
  // The code id: TimeDateStamp (8 uppercase hex digits) and SizeOfImage (hex) as llvm-readobj-14
  // --file-headers prints them ("TimeDateStamp: 1970-01-01 00:00:00 (0x0)", "SizeOfImage: 12288").
  const std::string h = run_peer("llvm-readobj-14 --file-headers '" + fixtures().dir + "/xn.exe'");
  const size_t ts = h.find("TimeDateStamp: "), soi = h.find("SizeOfImage: ");
  REQUIRE(ts != std::string::npos);
  REQUIRE(soi != std::string::npos);
  const size_t open = h.find("(0x", ts);
  REQUIRE(open != std::string::npos);
  const unsigned long stamp = std::stoul(h.substr(open + 3), nullptr, 16);
  const unsigned long size = std::stoul(h.substr(soi + 13), nullptr, 10);
  char key[32];
  std::snprintf(key, sizeof key, "%08lX%lx", stamp, size);
  const ModuleId& id = img.value()->id();
  CHECK(id.kind == IdKind::kPeCodeId);
  CHECK(id.len == 8);
  CHECK(pe::code_id_key(id) == key);
  CHECK(pe::identity_key(id) == std::string("code-id ") + key);
  CHECK(pe::symbol_server_key(id).empty());  // not a PDB identity
  // A PDB identity has no code id key; the fixture with a PDB keeps its GUID+age.
  auto with_pdb = pe::PeObject::open(fixtures().dir + "/x.exe");
  REQUIRE(with_pdb.ok());
  CHECK(with_pdb.value()->id().kind == IdKind::kPdbGuidAge);
  CHECK(pe::code_id_key(with_pdb.value()->id()).empty());
}

TEST_CASE("PE: every truncation and single-byte corruption of the headers gives an error or a valid image",
          "[object][pe][hostile]") {
  const std::vector<uint8_t> good = read_file(fixtures().dir + "/x.exe");
  REQUIRE(good.size() > 0x400);
  for (size_t len = 0; len < good.size(); len += (len < 0x400 ? 1 : 61)) {
    auto r = pe::PeObject::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)), "t");
    if (r.ok()) (void)r.value()->unwind_tables();
  }
  size_t refused = 0;
  for (size_t off = 0; off < 0x400; off++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[off] ^= x;
      auto r = pe::PeObject::from_bytes(std::move(b), "c");
      if (!r.ok()) {
        refused++;
        CHECK_FALSE(r.error().message.empty());
        continue;
      }
      const pe::PeObject& o = *r.value();
      (void)o.unwind_tables();
      (void)o.section(".text");
      (void)o.code_sections();
      uint8_t byte;
      (void)o.read_code(o.image_base() + 0x1000, &byte, 1);
    }
  CHECK(refused > 0);
  // Named errors: the signature and the machine.
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  auto r = pe::PeObject::from_bytes(b, "t");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("no MZ header"));
  b = good;
  const uint32_t lfanew = b[0x3c] | b[0x3d] << 8;
  b[lfanew + 4] = 0x4c;  // i386 0x14c
  b[lfanew + 5] = 0x01;
  r = pe::PeObject::from_bytes(b, "t");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("machine type not supported") && Catch::Contains("0x14c"));
}

namespace {

/// llvm-readobj-14 --symbols of a COFF image: one record per symbol (auxiliary records are not).
struct ReadobjSymbol {
  std::string name, section;
  uint32_t value = 0;
  int complex_type = 0, storage_class = 0, aux = 0;
};

std::vector<ReadobjSymbol> readobj_symbols(const std::string& exe) {
  const std::string text = run_peer("llvm-readobj-14 --symbols '" + exe + "'");
  std::vector<ReadobjSymbol> out;
  size_t at = 0;
  while ((at = text.find("\n  Symbol {\n", at)) != std::string::npos) {
    at += 12;
    ReadobjSymbol r;
    r.name = field(text, "  Name", at);
    r.value = static_cast<uint32_t>(std::stoul(field(text, "  Value", at)));
    const std::string sec = field(text, "  Section", at);
    r.section = sec.substr(0, sec.rfind(" ("));
    auto paren = [](const std::string& v) { return std::stoi(v.substr(v.rfind("(0x") + 3), nullptr, 16); };
    r.complex_type = paren(field(text, "  ComplexType", at));
    r.storage_class = paren(field(text, "  StorageClass", at));
    r.aux = std::stoi(field(text, "  AuxSymbolCount", at));
    out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("PE: a mingw image's COFF symbols, function symbols and exports equal llvm-readobj's", "[object][pe]") {
  const std::string exe = fixtures().dir + "/m.exe";
  auto img = pe::PeObject::open(exe);
  REQUIRE(img.ok());
  const pe::PeObject& o = *img.value();
  const std::vector<ReadobjSymbol> ref = readobj_symbols(exe);
  REQUIRE(ref.size() > 20);
  // Every record, in table order: long names through the string table, aux records skipped.
  const std::vector<pe::CoffSymbol>& all = o.coff_symbols();
  REQUIRE(all.size() == ref.size());
  for (size_t i = 0; i < ref.size(); i++) {
    INFO(i << " " << ref[i].name);
    CHECK(all[i].name == ref[i].name);
    CHECK(all[i].value == ref[i].value);
    CHECK(all[i].storage_class == ref[i].storage_class);
    CHECK(all[i].aux_count == ref[i].aux);
    CHECK((all[i].type >> 4) == ref[i].complex_type);
    CHECK(all[i].name.data()[all[i].name.size()] == '\0');
  }
  // Function symbols: EXTERNAL or STATIC symbols of .text that are not section definitions; one
  // name per address, each reaching to the next.
  const auto text = o.section(".text");
  REQUIRE(text);
  std::map<uint64_t, std::set<std::string>> want;
  for (const ReadobjSymbol& r : ref)
    if (r.section == ".text" && (r.storage_class == 2 || r.storage_class == 3) &&
        !(r.storage_class == 3 && r.aux > 0 && r.complex_type != 2))
      want[text->addr + r.value].insert(r.name);
  const std::vector<object::Symbol> syms = o.symbols();
  REQUIRE(syms.size() == want.size());
  size_t k = 0;
  for (const auto& [addr, names] : want) {
    INFO(std::hex << addr);
    CHECK(syms[k].addr == addr);
    CHECK(names.count(std::string(syms[k].name)) == 1);
    const uint64_t end = k + 1 < syms.size() ? syms[k + 1].addr : syms[k].addr + syms[k].size;
    CHECK(syms[k].addr + syms[k].size == end);
    auto hit = o.symbol_at(addr + syms[k].size - 1);
    REQUIRE(hit);
    CHECK(hit->name == syms[k].name);
    k++;
  }
  // The function type wins over the linker's labels at one address.
  auto a = o.symbol_at(want.begin()->first);
  REQUIRE(a);
  CHECK(a->name == "a_long_function_name");
  for (const char* f : {"helper", "exported_fn", "entry"}) {
    bool found = false;
    for (const object::Symbol& s : syms) found |= s.name == f;
    CHECK(found);
  }
  // Exports: llvm-readobj-14 --coff-exports.
  const std::string ex = run_peer("llvm-readobj-14 --coff-exports '" + exe + "'");
  REQUIRE(o.exports().size() == 1);
  CHECK(o.exports()[0].name == field(ex, "Name"));
  CHECK("0x" + [&] { char b[16]; std::snprintf(b, sizeof b, "%X", o.exports()[0].rva); return std::string(b); }() ==
        field(ex, "RVA"));
  CHECK(std::to_string(o.exports()[0].ordinal) == field(ex, "Ordinal"));

  // Stripped of every symbol: the export names code, for us and (size 0) for llvm's view.
  auto s = pe::PeObject::open(fixtures().dir + "/ms.exe");
  REQUIRE(s.ok());
  CHECK(s.value()->coff_symbols().empty());
  const std::vector<object::Symbol> es = s.value()->symbols();
  REQUIRE(es.size() == 1);
  CHECK(es[0].name == "exported_fn");
  CHECK(es[0].addr == o.image_base() + o.exports()[0].rva);
  const std::vector<object::Symbol> ls = s.value()->symbolizer_symbols();
  REQUIRE(ls.size() == 1);
  CHECK(ls[0].size == 0);
}

TEST_CASE("PE: corrupted COFF symbol and string tables and export directories give no crash", "[object][pe][hostile]") {
  const std::vector<uint8_t> good = read_file(fixtures().dir + "/m.exe");
  auto g = pe::PeObject::from_bytes(good, "m");
  REQUIRE(g.ok());
  const uint32_t lfanew = good[0x3c] | good[0x3d] << 8;
  const uint32_t symoff = good[lfanew + 12] | good[lfanew + 13] << 8 | good[lfanew + 14] << 16 | good[lfanew + 15] << 24;
  REQUIRE(symoff > 0);
  REQUIRE(symoff < good.size());
  auto exercise = [](const pe::PeObject& o) {
    for (const pe::CoffSymbol& c : o.coff_symbols()) CHECK(c.name.data()[c.name.size()] == '\0');
    const std::vector<object::Symbol> syms = o.symbols();
    for (size_t i = 0; i < syms.size(); i++) {
      CHECK(syms[i].size > 0);
      if (i > 0) CHECK(syms[i - 1].addr + syms[i - 1].size <= syms[i].addr);
      (void)o.symbol_at(syms[i].addr);
    }
    for (const object::Symbol& s : o.symbolizer_symbols()) (void)s.name.size();
    for (const pe::Export& e : o.exports()) CHECK((e.name.data() == nullptr || e.name.data()[e.name.size()] == 0));
  };
  // Every byte of the symbol table and string table (and the export directory through the
  // section bytes before them), three flips each; then every truncation of the tables.
  const size_t from = good.size() > symoff + 0x1000 ? good.size() - 0x1000 : 0x200;
  for (size_t off = std::min<size_t>(from, symoff); off < good.size(); off++)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[off] ^= x;
      auto r = pe::PeObject::from_bytes(std::move(b), "c");
      if (r.ok()) exercise(*r.value());
    }
  for (size_t len = symoff; len <= good.size(); len += 7) {
    auto r = pe::PeObject::from_bytes(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)), "t");
    if (r.ok()) exercise(*r.value());
  }
  // A symbol count past the end of the file: no symbols rather than reads beyond it.
  std::vector<uint8_t> b = good;
  b[lfanew + 16] = b[lfanew + 17] = b[lfanew + 18] = 0xff;
  auto r = pe::PeObject::from_bytes(b, "n");
  if (r.ok()) CHECK(r.value()->coff_symbols().empty());
}
