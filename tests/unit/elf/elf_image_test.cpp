// SPDX-License-Identifier: Apache-2.0
// ElfImage against readelf/objcopy on freshly built fixtures: identity, phdrs, sections, decompression, bias.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/uio.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "elf/core_file.hpp"
#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"
#include "memory/module_list.hpp"
#include "memory/snapshot.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

const char* kImageFixtureSource = R"(
#include <stdio.h>
static int table[64];
__attribute__((noinline)) int leaf(int x) { return table[x & 63] + x * 3; }
__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }
int main(int argc, char** argv) { printf("%d\n", middle(argc)); return 0; }
)";

struct Variant {
  const char* name;
  const char* flags;
  uint16_t type;
};

const Variant kVariants[] = {
    {"pie", "-g -O1 -fPIE -pie -Wl,--build-id=sha1", ET_DYN},
    {"nopie", "-g -O1 -fno-pie -no-pie -Wl,--build-id=sha1", ET_EXEC},
    {"static", "-g -O1 -static -Wl,--build-id=sha1", ET_EXEC},
    {"zlib", "-g -O1 -Wl,--build-id=sha1 -Wl,--compress-debug-sections=zlib", ET_DYN},
    {"zstd", "-g -O1 -Wl,--build-id=sha1 -Wl,--compress-debug-sections=zstd", ET_DYN},
    {"zlibgnu", "-g -O1 -Wl,--build-id=sha1 -Wl,--compress-debug-sections=zlib-gnu", ET_DYN},
    {"md5", "-g -O0 -Wl,--build-id=md5", ET_DYN},
};

uint32_t phdr_type(const std::string& t) {
  static const std::map<std::string, uint32_t> kTypes = {
      {"LOAD", PT_LOAD},       {"DYNAMIC", PT_DYNAMIC},          {"INTERP", PT_INTERP},
      {"NOTE", PT_NOTE},       {"PHDR", PT_PHDR},                {"TLS", PT_TLS},
      {"GNU_EH_FRAME", 0x6474e550u}, {"GNU_STACK", 0x6474e551u}, {"GNU_RELRO", 0x6474e552u},
      {"GNU_PROPERTY", 0x6474e553u}};
  auto it = kTypes.find(t);
  return it == kTypes.end() ? 0xffffffffu : it->second;
}

std::string phdr_flags(uint32_t f) {
  std::string s;
  if (f & PF_R) s += 'R';
  if (f & PF_W) s += 'W';
  if (f & PF_X) s += 'E';
  return s;
}

}  // namespace

TEST_CASE("ElfImage matches readelf on built fixtures", "[elf][image]") {
  TempDir dir;
  for (const Variant& v : kVariants) {
    const std::string exe = dir.file(std::string("fx_") + v.name);
    // cc is installed by make deps (build-essential): a variant that does not build fails.
    INFO("building fixture variant " << v.name << " with cc " << v.flags);
    REQUIRE(compile_c(dir, kImageFixtureSource, v.flags, exe));
    {
      INFO("variant " << v.name);
      auto img_or = ElfImage::open(exe);
      REQUIRE(img_or.ok());
      const ElfImage& img = **img_or;
      CHECK(img.arch() == Arch::kX86_64);
      CHECK(img.is_64bit());
      CHECK_FALSE(img.big_endian());
      CHECK(img.elf_type() == v.type);
      CHECK(img.machine() == EM_X86_64);

      // Identity: the NT_GNU_BUILD_ID note as printed by readelf -n.
      const std::string want_id = readelf_build_id(exe);
      REQUIRE_FALSE(want_id.empty());
      CHECK(img.build_id().hex() == want_id);
      auto fast = read_build_id(exe);
      REQUIRE(fast.ok());
      CHECK(fast->hex() == want_id);

      // Program headers, in order, as printed by readelf -lW.
      const auto want_ph = readelf_phdrs(exe);
      REQUIRE(want_ph.size() == img.program_headers().size());
      for (size_t i = 0; i < want_ph.size(); i++) {
        const ProgramHeader& got = img.program_headers()[i];
        INFO("phdr " << i << " " << want_ph[i].type);
        CHECK(got.type == phdr_type(want_ph[i].type));
        CHECK(got.offset == want_ph[i].offset);
        CHECK(got.vaddr == want_ph[i].vaddr);
        CHECK(got.filesz == want_ph[i].filesz);
        CHECK(got.memsz == want_ph[i].memsz);
        CHECK(got.align == want_ph[i].align);
        CHECK(phdr_flags(got.flags) == want_ph[i].flags);
      }

      // exec_range: the executable PT_LOADs per readelf.
      uint64_t lo = UINT64_MAX, hi = 0;
      for (const auto& p : want_ph) {
        if (p.type == "LOAD" && p.flags.find('E') != std::string::npos) {
          lo = std::min(lo, p.vaddr);
          hi = std::max(hi, p.vaddr + p.memsz);
        }
      }
      CHECK(img.exec_range() == std::make_pair(lo, hi));

      // Sections: addresses, offsets and sizes of uncompressed ones match
      // readelf -S; compressed ones match the objcopy-decompressed copy, byte for byte.
      const std::string plain = exe + ".plain";
      REQUIRE(run("objcopy --decompress-debug-sections '" + exe + "' '" + plain + "'").status == 0);
      const auto raw_secs = readelf_sections(exe);
      const auto plain_secs = readelf_sections(plain);
      REQUIRE(raw_secs.size() + 1 == img.section_count());
      std::map<std::string, ReadelfSection> plain_by_name;
      for (const auto& s : plain_secs) plain_by_name[s.name] = s;
      size_t compressed_seen = 0;
      for (const auto& rs : raw_secs) {
        INFO("section " << rs.name);
        const bool zdebug = rs.name.rfind(".zdebug", 0) == 0;
        const std::string canonical = zdebug ? ".debug" + rs.name.substr(7) : rs.name;
        auto sec = img.section_or_error(canonical);
        REQUIRE(sec.ok());
        CHECK(sec->addr == rs.addr);
        CHECK(sec->offset == rs.off);
        if (rs.type == "NOBITS") {
          CHECK(sec->data == nullptr);
          CHECK(sec->size == 0);
          continue;
        }
        const bool compressed = zdebug || rs.flags.find('C') != std::string::npos;
        if (!compressed) {
          CHECK(sec->size == rs.size);
          CHECK(sec->data == img.file_data() + rs.off);
          continue;
        }
        compressed_seen++;
        CHECK(sec->file_size == rs.size);
        CHECK((sec->flags & SHF_COMPRESSED) == 0);
        REQUIRE(plain_by_name.count(canonical) == 1);
        CHECK(sec->size == plain_by_name[canonical].size);
        const std::string dump = dir.file("dump.bin");
        REQUIRE(run("objcopy --dump-section '" + canonical + "=" + dump + "' '" + plain + "' '" +
                    plain + ".tmp'").status == 0);
        const auto want = read_file(dump);
        REQUIRE(want.size() == sec->size);
        CHECK(std::memcmp(want.data(), sec->data, want.size()) == 0);
        // The second request returns the cached bytes.
        auto again = img.section(canonical);
        REQUIRE(again);
        CHECK(again->data == sec->data);
      }
      const std::string vn = v.name;
      if (vn == "zlib" || vn == "zstd" || vn == "zlibgnu") CHECK(compressed_seen >= 3);

      // .eh_frame_hdr through PT_GNU_EH_FRAME is the section readelf lists.
      auto hdr = img.eh_frame_hdr();
      bool want_hdr = false;
      for (const auto& rs : raw_secs) {
        if (rs.name != ".eh_frame_hdr") continue;
        want_hdr = true;
        REQUIRE(hdr);
        CHECK(hdr->addr == rs.addr);
        CHECK(hdr->size == rs.size);
        CHECK(hdr->offset == rs.off);
      }
      CHECK(hdr.has_value() == want_hdr);  // static glibc links have none
      CHECK_FALSE(img.section(".no_such_section"));
      auto missing = img.section_or_error(".no_such_section");
      REQUIRE_FALSE(missing.ok());
      CHECK(missing.error().code == SPROV_ERR_NO_SECTION);
    }
  }
}

TEST_CASE("read_build_id matches readelf on system files", "[elf][build_id]") {
  const char* files[] = {"/usr/bin/ls", "/usr/bin/cmake", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                         "/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libelf.so.1"};
  int checked = 0;
  for (const char* f : files) {
    if (!file_exists(f)) continue;
    INFO(f);
    const std::string want = readelf_build_id(f);
    auto fast = read_build_id(f);
    REQUIRE(fast.ok());
    CHECK(fast->hex() == want);
    auto img = ElfImage::open(f);
    REQUIRE(img.ok());
    CHECK((*img)->build_id().hex() == want);
    checked++;
  }
  CHECK(checked >= 3);
}

TEST_CASE("Cross-architecture images: MIPS32 big-endian and AArch64", "[elf][arch]") {
  // clang-14 and lld-14 are installed by make deps: their absence fails the test by name.
  INFO("needs clang-14 and lld-14 (make deps)");
  REQUIRE(have_tool("clang-14"));
  REQUIRE((have_tool("ld.lld-14") || have_tool("ld.lld")));
  TempDir dir;
  struct Target {
    const char* triple;
    Arch arch;
    bool is64;
    bool big;
    uint16_t machine;
  };
  const Target targets[] = {{"mips-linux-gnu", Arch::kMips32, false, true, EM_MIPS},
                            {"mipsel-linux-gnu", Arch::kMips32, false, false, EM_MIPS},
                            {"aarch64-linux-gnu", Arch::kArm64, true, false, EM_AARCH64}};
  for (const Target& t : targets) {
    INFO(t.triple);
    const std::string so = dir.file(std::string(t.triple) + ".so");
    const std::string flags = std::string("-target ") + t.triple +
                              " -fuse-ld=lld -nostdlib -shared -fPIC -O1 -Wl,--build-id=sha1";
    REQUIRE(compile_c(dir, "int f(int x){return x*7;} int g(int y){return f(y)+1;}\n", flags, so, "clang-14"));
    auto img = ElfImage::open(so);
    REQUIRE(img.ok());
    CHECK((*img)->arch() == t.arch);
    CHECK((*img)->is_64bit() == t.is64);
    CHECK((*img)->big_endian() == t.big);
    CHECK((*img)->machine() == t.machine);
    CHECK((*img)->build_id().hex() == readelf_build_id(so));
    auto fast = read_build_id(so);
    REQUIRE(fast.ok());
    CHECK(fast->hex() == readelf_build_id(so));
    const auto want_ph = readelf_phdrs(so);
    REQUIRE(want_ph.size() == (*img)->program_headers().size());
    for (size_t i = 0; i < want_ph.size(); i++) {
      CHECK((*img)->program_headers()[i].vaddr == want_ph[i].vaddr);
      CHECK((*img)->program_headers()[i].filesz == want_ph[i].filesz);
    }
    for (const auto& rs : readelf_sections(so)) {
      auto sec = (*img)->section_or_error(rs.name);
      REQUIRE(sec.ok());
      CHECK(sec->addr == rs.addr);
      if (rs.type != "NOBITS") CHECK(sec->size == rs.size);
    }
    // The same bytes through from_bytes (the vDSO path) give the same answers.
    auto mem = ElfImage::from_bytes(read_file(so), "[mem]");
    REQUIRE(mem.ok());
    CHECK((*mem)->build_id() == (*img)->build_id());
    CHECK((*mem)->path() == "[mem]");
  }
}

namespace {

struct Loaded {
  std::string path;
  uint64_t bias;
};

int collect(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::vector<Loaded>*>(data);
  out->push_back(Loaded{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr});
  return 0;
}

}  // namespace

TEST_CASE("load_bias equals the dynamic loader's bias for every mapping", "[elf][bias]") {
  std::vector<Loaded> loaded;
  dl_iterate_phdr(collect, &loaded);
  // /proc/self/maps: start-end perms offset dev inode path
  std::ifstream maps("/proc/self/maps");
  struct Map {
    uint64_t start, offset;
    std::string path;
    bool exec;
  };
  std::vector<Map> rows;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream f(line);
    std::string range, perms, off, dev, inode, path;
    f >> range >> perms >> off >> dev >> inode >> path;
    if (path.empty() || path[0] != '/') continue;
    rows.push_back(Map{std::stoull(range.substr(0, range.find('-')), nullptr, 16),
                       std::stoull(off, nullptr, 16), path, perms.find('x') != std::string::npos});
  }
  char self[4096] = {};
  REQUIRE(readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  int checked_objects = 0, ambiguous = 0;
  for (const Loaded& l : loaded) {
    std::string path = l.path.empty() ? std::string(self) : l.path;
    char real[4096];
    if (realpath(path.c_str(), real) == nullptr) continue;
    auto img = ElfImage::open(real);
    if (!img.ok()) continue;
    int mappings = 0;
    for (const Map& m : rows) {
      char mreal[4096];
      if (realpath(m.path.c_str(), mreal) == nullptr || std::string(mreal) != real) continue;
      // A non-executable mapping whose file page starts two PT_LOADs (libcom_err.so.2: R at
      // 0x3000 and RW at 0x3c68, both in page 0x3000) cannot be told apart by its offset;
      // module lists use executable mappings only, where PF_X decides.
      int starting = 0;
      for (const auto& ph : (*img)->program_headers())
        if (ph.type == PT_LOAD && (ph.offset & ~uint64_t{4095}) == m.offset) starting++;
      if (!m.exec && starting > 1) {
        ambiguous++;
        continue;
      }
      INFO(real << " mapping at 0x" << std::hex << m.start << " offset 0x" << m.offset);
      CHECK((*img)->load_bias(m.start, m.offset, m.exec) == l.bias);
      mappings++;
    }
    if (mappings > 0) checked_objects++;
  }
  CHECK(checked_objects >= 2);  // the test executable (PIE) and libc at least
  (void)ambiguous;  // counted for the debugger; libcom_err.so.2 contributes one when loaded
}

TEST_CASE("ET_EXEC has bias 0", "[elf][bias]") {
  TempDir dir;
  const std::string exe = dir.file("nopie");
  REQUIRE(compile_c(dir, kImageFixtureSource, "-O1 -fno-pie -no-pie", exe));
  auto img = ElfImage::open(exe);
  REQUIRE(img.ok());
  CHECK((*img)->load_bias(0x400000, 0) == 0);
  CHECK((*img)->load_bias(0x401000, 0x1000) == 0);
}

TEST_CASE("is_program agrees with readelf's file type: executables and PIEs, not libraries or ld.so",
          "[elf][program]") {
  // readelf -h names an ET_DYN with DF_1_PIE "Position-Independent Executable file" (binutils
  // readelf.c get_file_type), any other ET_DYN "Shared object file". libc.so.6 is the case that
  // PT_INTERP alone gets wrong: it has one (it runs, printing its version) and is a library.
  TempDir dir;
  const std::string lib_source = "int lib_fn(int x) { return x * 3; }\n";
  struct Built {
    const char* name;
    const char* flags;
    const std::string* source;
  };
  const std::string exe_source = kImageFixtureSource;
  const Built built[] = {{"pie", "-O1 -fPIE -pie", &exe_source},
                         {"nopie", "-O1 -fno-pie -no-pie", &exe_source},
                         {"staticpie", "-O1 -fPIE -static-pie", &exe_source},
                         {"lib.so", "-O1 -fPIC -shared", &lib_source},
                         {"libsoname.so", "-O1 -fPIC -shared -Wl,-soname,libsoname.so.1", &lib_source}};
  std::vector<std::string> files;
  for (const Built& b : built) {
    INFO("cc " << b.flags);
    REQUIRE(compile_c(dir, *b.source, b.flags, dir.file(b.name)));
    files.push_back(dir.file(b.name));
  }
  for (const char* f : {"/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh",
                        "/usr/bin/python3.11"})
    if (file_exists(f)) files.push_back(f);
  int programs = 0, libraries = 0;
  for (const std::string& f : files) {
    std::istringstream in(run("readelf -h '" + f + "'").out);
    std::string line, type;
    while (std::getline(in, line))
      if (line.find("Type:") != std::string::npos) type = line.substr(line.find_first_not_of(' ', line.find("Type:") + 5));
    const bool want = type.find("EXEC (") != std::string::npos || type.find("Position-Independent") != std::string::npos;
    auto img = ElfImage::open(f);
    REQUIRE(img.ok());
    INFO(f << ": readelf says " << type);
    CHECK((*img)->is_program() == want);
    (want ? programs : libraries)++;
  }
  CHECK(programs >= 4);   // pie, nopie, staticpie, dash
  CHECK(libraries >= 4);  // the two built libraries, ld.so, libc.so.6
}

TEST_CASE("debuglink and file_crc32 match objcopy and an independent CRC", "[elf][debuglink]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kImageFixtureSource, "-g -O1 -Wl,--build-id=sha1", exe));
  const std::string dbg = dir.file("prog.dbg");
  REQUIRE(run("objcopy --only-keep-debug '" + exe + "' '" + dbg + "'").status == 0);
  const std::string linked = dir.file("prog.linked");
  REQUIRE(run("cd '" + dir.path() + "' && objcopy --strip-debug --add-gnu-debuglink=prog.dbg prog prog.linked").status == 0);
  // zlib.crc32 of the file, computed by Python, is the independent answer.
  const auto py = run("python3 -c \"import zlib,sys;print(zlib.crc32(open(sys.argv[1],'rb').read()))\" '" + dbg + "'");
  REQUIRE(py.status == 0);
  const uint32_t want_crc = static_cast<uint32_t>(std::stoul(py.out));
  auto crc = file_crc32(dbg);
  REQUIRE(crc.ok());
  CHECK(*crc == want_crc);
  auto img = ElfImage::open(linked);
  REQUIRE(img.ok());
  auto link = (*img)->debuglink();
  REQUIRE(link);
  CHECK(link->file == "prog.dbg");
  CHECK(link->crc == want_crc);
  auto plain = ElfImage::open(exe);
  REQUIRE(plain.ok());
  CHECK_FALSE((*plain)->debuglink());
  // The debug-only file keeps the build-id (as a note section).
  auto dimg = ElfImage::open(dbg);
  REQUIRE(dimg.ok());
  CHECK((*dimg)->build_id().hex() == readelf_build_id(exe));
  auto dfast = read_build_id(dbg);
  REQUIRE(dfast.ok());
  CHECK(dfast->hex() == readelf_build_id(exe));
}

TEST_CASE("ImageReuseScope: one image per file while the scope lives, a new one for a changed file", "[elf][reuse]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kImageFixtureSource, "-O1", exe));
  auto outside_a = ElfImage::open(exe);
  auto outside_b = ElfImage::open(exe);
  REQUIRE(outside_a.ok());
  REQUIRE(outside_b.ok());
  CHECK(outside_a.value() != outside_b.value());  // no scope: each open maps and parses
  std::shared_ptr<ElfImage> first;
  {
    ImageReuseScope scope;
    auto a = ElfImage::open(exe);
    auto b = ElfImage::open(exe);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a.value() == b.value());
    first = a.value();
    {
      ImageReuseScope inner;  // the innermost scope is used: it holds nothing yet
      auto c = ElfImage::open(exe);
      REQUIRE(c.ok());
      CHECK(c.value() != first);
    }
    // Another file at the same path (a new inode): opened afresh, with its own build-id.
    const std::string other = dir.file("other");
    REQUIRE(compile_c(dir, "int main(void) { return 7; }\n", "-O2 -Wl,--build-id=sha1", other));
    REQUIRE(std::rename(other.c_str(), exe.c_str()) == 0);
    auto d = ElfImage::open(exe);
    REQUIRE(d.ok());
    CHECK(d.value() != first);
    CHECK(d.value()->build_id() != first->build_id());
  }
  auto after = ElfImage::open(exe);
  REQUIRE(after.ok());
  CHECK(after.value() != first);
}

namespace {

struct LoadedPhdrs {
  std::string path;
  uint64_t bias;
  std::vector<ElfW(Phdr)> phdrs;
};

int collect_phdrs(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::vector<LoadedPhdrs>*>(data);
  out->push_back(LoadedPhdrs{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr,
                             std::vector<ElfW(Phdr)>(info->dlpi_phdr, info->dlpi_phdr + info->dlpi_phnum)});
  return 0;
}

// This process's memory, read as another process's would be (process_vm_readv: no fault on a hole).
bool read_self(uint64_t addr, void* buf, size_t len) {
  struct iovec local{buf, len}, remote{reinterpret_cast<void*>(addr), len};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

}  // namespace

// An ELF image rebuilt from a process's memory (a module whose file is gone or replaced, read
// without CAP_SYS_ADMIN): its read-only segments at their file offsets and no section headers.
// Oracles: readelf -S of the file (the linker's section headers: .eh_frame, .dynsym, .dynstr),
// readelf -n (the build-id) and dlsym (the dynamic linker's address of an exported function).
TEST_CASE("An image rebuilt from memory finds .eh_frame and .dynsym as the file's section headers place them",
          "[elf][memory-image]") {
  TempDir dir;
  const std::string src =
      "__attribute__((noinline)) int fx_exported(int x) { return x * 3 + 1; }\n"
      "static __attribute__((noinline)) int fx_hidden(int x) { return x - 1; }\n"
      "int fx_entry(int x) { return fx_hidden(fx_exported(x)); }\n";
  // DT_GNU_HASH, DT_HASH, both; one read-only-and-code segment (no separate code).
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"gnuhash", "-Wl,--hash-style=gnu"},
      {"sysvhash", "-Wl,--hash-style=sysv"},
      {"both", "-Wl,--hash-style=both"},
      {"noseparate", "-Wl,-z,noseparate-code -Wl,--hash-style=gnu"}};
  std::vector<void*> handles;
  for (const auto& [name, flags] : variants) {
    const std::string lib = dir.file("libfx_" + name + ".so");
    INFO("cc " << flags);
    REQUIRE(compile_c(dir, src, "-shared -fPIC -O2 -g -Wl,--build-id=sha1 " + flags, lib));
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != nullptr);
    handles.push_back(h);
  }
  std::vector<LoadedPhdrs> loaded;
  dl_iterate_phdr(collect_phdrs, &loaded);
  char self[4096] = {};
  REQUIRE(readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  int checked = 0, named = 0;
  for (const LoadedPhdrs& l : loaded) {
    const std::string path = l.path.empty() ? std::string(self) : l.path;
    if (path.empty() || path[0] != '/' || !file_exists(path)) continue;  // the vDSO
    const ElfW(Phdr)* first = nullptr;
    for (const auto& p : l.phdrs)
      if (p.p_type == PT_LOAD && (first == nullptr || p.p_offset < first->p_offset)) first = &p;
    REQUIRE(first != nullptr);
    const uint64_t start = l.bias + first->p_vaddr - first->p_offset;
    INFO(path << " header at 0x" << std::hex << start);
    auto bytes = rebuild_image(start, read_self, 256u << 20);
    REQUIRE(bytes.ok());
    std::map<std::string, ReadelfSection> want;
    for (const ReadelfSection& s : readelf_sections(path)) want[s.name] = s;
    auto file = ElfImage::open(path);
    REQUIRE(file.ok());
    auto check_tables = [&](const ElfImage& m) {
      CHECK(m.section_count() > 0);
      CHECK(m.build_id().hex() == readelf_build_id(path));
      for (const char* name : {".eh_frame", ".dynsym", ".dynstr"}) {
        INFO(name);
        REQUIRE(want.count(name) == 1);
        auto got = m.section(name);
        REQUIRE(got.has_value());
        CHECK(got->addr == want[name].addr);
        CHECK(got->size == want[name].size);
        // The bytes are the file's: the section as mapped is the section as linked.
        auto fs = file.value()->section(name);
        REQUIRE(fs.has_value());
        CHECK(std::memcmp(got->data, fs->data, std::min(got->size, fs->size)) == 0);
      }
    };
    // What a capture keeps of it (memory_image_regions: the segments holding the tables, not the
    // code of a separate-code layout), read back strictly from a snapshot: the same tables; a
    // segment the snapshot lacks keeps no file bytes (its code is not served as zeros).
    // A module whose table-holding read-only segments are over the capture's bound
    // (kMaxMemoryImageKept: an instrumented test binary's can be) is refused by name, as a capture
    // refuses it.
    // The read-only segments that hold a table, by readelf's file offsets (the ELF header, the
    // notes, .eh_frame(_hdr), .dynsym/.dynstr, the hash tables): not the code segment.
    uint64_t table_bytes = 0;
    for (const auto& p : l.phdrs) {
      if (p.p_type != PT_LOAD || (p.p_flags & PF_W) != 0) continue;
      bool holds = p.p_offset == 0;
      for (const auto& [name, s] : want)
        if (name == ".eh_frame" || name == ".eh_frame_hdr" || name == ".dynsym" || name == ".dynstr" ||
            name == ".gnu.hash" || name == ".hash" || name.rfind(".note", 0) == 0)
          holds = holds || (s.off < p.p_offset + p.p_filesz && p.p_offset < s.off + std::max<uint64_t>(s.size, 1));
      if (holds) table_bytes += p.p_filesz;
    }
    if (auto regions = memory::memory_image_regions(bytes.value(), l.bias);
        !regions.ok() && table_bytes > memory::kMaxMemoryImageKept) {
      INFO(regions.error().message);
      CHECK(regions.error().code == SPROV_ERR_LIMIT);
    } else {
      REQUIRE(regions.ok());
      memory::Snapshot snap;
      uint64_t kept = 0;
      for (const memory::MemoryRegion& r : regions.value()) {
        REQUIRE(snap.add_memory(r.addr, r.bytes.data(), r.bytes.size()).ok());
        kept += r.bytes.size();
      }
      CHECK(kept <= bytes.value().size());
      memory::SnapshotReader rd(snap);
      auto again = rebuild_image(start, [&rd](uint64_t a, void* b, size_t n) { return rd.read(a, b, n); }, 256u << 20);
      REQUIRE(again.ok());
      auto img2 = ElfImage::from_bytes(std::move(again).value(), path + " (snapshot)");
      REQUIRE(img2.ok());
      check_tables(*img2.value());
      for (const auto& ph : img2.value()->program_headers()) {
        if (ph.type != PT_LOAD || ph.filesz == 0) continue;
        bool in_snap = false;
        for (const memory::MemoryRegion& r : regions.value()) in_snap = in_snap || r.addr == l.bias + ph.vaddr;
        INFO("segment at 0x" << std::hex << ph.vaddr);
        CHECK(in_snap);  // only segments the snapshot holds keep file bytes
      }
    }
    auto img = ElfImage::from_bytes(std::move(bytes).value(), path + " (memory)");
    REQUIRE(img.ok());
    const ElfImage& m = *img.value();
    check_tables(m);
    // .dynsym's code symbols, as the file's own table lists them.
    auto from_mem = SymbolTable::load(m, SymbolTable::Kind::kDynsym);
    auto file_img = ElfImage::open(path);  // outlives its table, which points into it
    REQUIRE(file_img.ok());
    auto from_file = SymbolTable::load(*file_img.value(), SymbolTable::Kind::kDynsym);
    REQUIRE(from_mem.ok());
    REQUIRE(from_file.ok());
    const auto& a = from_mem.value().symbols();
    const auto& b = from_file.value().symbols();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); i++) {
      CHECK(a[i].addr == b[i].addr);
      CHECK(a[i].name == b[i].name);
    }
    checked++;
    for (void* h : handles) {
      void* fx = dlsym(h, "fx_exported");
      Dl_info info{};
      if (fx == nullptr || dladdr(fx, &info) == 0 || info.dli_fname == nullptr || path != info.dli_fname) continue;
      const Symbol* s = from_mem.value().lookup(reinterpret_cast<uint64_t>(fx) - l.bias);
      REQUIRE(s != nullptr);
      CHECK(s->name == "fx_exported");
      CHECK(s->addr == reinterpret_cast<uint64_t>(fx) - l.bias);
      named++;
    }
  }
  CHECK(checked >= 6);  // the test executable, libc, the four libraries
  CHECK(named == 4);
  for (void* h : handles) dlclose(h);
}
