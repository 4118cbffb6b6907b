// SPDX-License-Identifier: Apache-2.0
// PeObject against LLVM's COFF tools (issue 33): PE32+ images the test links with clang-14 and
// lld-link-14 (with a PDB, with DWARF in long-named sections, without a debug directory) open through
// the registry as "pe", and their identity, sections and directories are what llvm-readobj-14 and
// llvm-pdbutil-14 say; truncated and corrupted images give errors, never a crash.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "object/object_image.hpp"
#include "pe/pe_object.hpp"

using namespace stackprov;

namespace {

std::string run(const std::string& cmd) {
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
/// debug directory), linked without a C runtime (doc/windows.md "Fixtures").
struct Fixtures {
  std::string dir;
  Fixtures() {
    for (const char* t : {"clang-14", "lld-link-14", "llvm-readobj-14", "llvm-pdbutil-14"}) need(t);
    char tmpl[] = "/tmp/stackprov-pe-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    std::ofstream(dir + "/x.c") << "static int __attribute__((noinline)) leaf(int x) { return x * 3 + 1; }\n"
                                   "static inline int mid(int x) { return leaf(x) + leaf(x + 1); }\n"
                                   "int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += mid(i); return s; }\n"
                                   "int mainCRTStartup(void) { return work(10); }\n";
    const std::string cc = "cd '" + dir + "' && clang-14 --target=x86_64-pc-windows-msvc -O2 -g ";
    const std::string ld = " && lld-link-14 /entry:mainCRTStartup /subsystem:console /nodefaultlib ";
    for (const std::string& cmd :
         {cc + "-gcodeview -c x.c -o x.obj" + ld + "/debug /pdb:x.pdb x.obj /out:x.exe",
          cc + "-gdwarf -c x.c -o xd.obj" + ld + "/debug:dwarf xd.obj /out:xd.exe",
          cc + "-c x.c -o xn.obj" + ld + "xn.obj /out:xn.exe"}) {
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
  const std::string dbg = run("llvm-readobj-14 --coff-debug-directory '" + exe + "'");
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
  const std::string sum = run("llvm-pdbutil-14 dump --summary '" + fixtures().dir + "/x.pdb'");
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
    const std::string secs = run("llvm-readobj-14 --sections '" + exe + "'");
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
    const std::string hdr = run("llvm-readobj-14 --file-headers '" + exe + "'");
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
  CHECK(d.value()->id().len == 0);  // /debug:dwarf writes no CodeView record
}

TEST_CASE("PE: code bytes at image base + RVA equal llvm-objdump's", "[object][pe]") {
  const std::string exe = fixtures().dir + "/x.exe";
  auto img = pe::PeObject::open(exe);
  REQUIRE(img.ok());
  const pe::PeObject& o = *img.value();
  // llvm-objdump -d: "140001000: 56      pushq %rsi": the first instructions' address and bytes.
  const std::string dis = run("llvm-objdump-14 -d '" + exe + "' | grep -E '^ *[0-9a-f]+: ' | head -8");
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

TEST_CASE("PE: an image without a debug directory has no identity", "[object][pe]") {
  auto img = pe::PeObject::open(fixtures().dir + "/xn.exe");
  REQUIRE(img.ok());
  CHECK(img.value()->id().len == 0);
  CHECK(img.value()->debug_entries().empty());
  CHECK(run("llvm-readobj-14 --coff-debug-directory '" + fixtures().dir + "/xn.exe'").find("DebugEntry") ==
        std::string::npos);
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
