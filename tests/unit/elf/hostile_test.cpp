// SPDX-License-Identifier: Apache-2.0
// Hostile ELF input: truncated, mutated and garbage files give errors naming the path, never a crash.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"
#include "elf_test_util.hpp"

using namespace stackprov;
using namespace stackprov::elf;
using namespace stackprov::elf::testing;

namespace {

const char* kSource = R"(
#include <stdio.h>
__attribute__((noinline)) int f1(int x) { return x * 5; }
int main(int argc, char** argv) { printf("%d\n", f1(argc)); return 0; }
)";

/// Touches everything an ElfImage offers; returns the number of readable sections.
size_t exercise(const ElfImage& img) {
  size_t readable = 0;
  for (size_t i = 0; i < img.section_count(); i++) {
    auto s = img.section_at_or_error(i);
    if (s.ok()) {
      readable++;
      if (s->data != nullptr && s->size > 0) {
        // The bytes must be addressable: sum them.
        volatile uint8_t sum = 0;
        for (size_t k = 0; k < s->size; k += 97) sum = static_cast<uint8_t>(sum + s->data[k]);
      }
    } else {
      CHECK(s.error().message.find(img.path()) != std::string::npos);
    }
  }
  (void)img.eh_frame_hdr();
  (void)img.debuglink();
  (void)img.exec_range();
  (void)img.load_bias(0x7f0000000000, 0x1000);
  for (auto kind : {SymbolTable::Kind::kSymtab, SymbolTable::Kind::kDynsym}) {
    auto t = SymbolTable::load(img, kind);
    if (t.ok()) {
      for (const Symbol& s : t->symbols()) (void)t->lookup(s.addr + s.size / 2);
    } else {
      CHECK(t.error().message.find(img.path()) != std::string::npos);
    }
  }
  return readable;
}

struct SectionPos {
  uint64_t off = 0, size = 0;
};

SectionPos find_section(const std::string& path, const std::string& name) {
  for (const auto& s : readelf_sections(path)) {
    if (s.name == name) return SectionPos{s.off, s.size};
  }
  return {};
}

}  // namespace

TEST_CASE("Garbage files give errors that name the path", "[elf][hostile]") {
  TempDir dir;
  const std::string empty = dir.file("empty");
  write_file(empty, "");
  const std::string text = dir.file("text");
  write_file(text, "this is not an ELF file at all, just some text\n");
  const std::string magic_only = dir.file("magic");
  write_file(magic_only, std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(9, '\0'));
  for (const auto& p : {empty, text, magic_only, dir.path(), dir.file("does-not-exist")}) {
    INFO(p);
    auto img = ElfImage::open(p);
    REQUIRE_FALSE(img.ok());
    CHECK(img.error().message.find(p) != std::string::npos);
    auto id = read_build_id(p);
    if (p != dir.path()) {
      REQUIRE_FALSE(id.ok());
      CHECK(id.error().message.find(p) != std::string::npos);
    }
  }
  auto mem = ElfImage::from_bytes({1, 2, 3}, "[tiny]");
  REQUIRE_FALSE(mem.ok());
  CHECK(mem.error().message.find("[tiny]") != std::string::npos);
}

TEST_CASE("Truncated ELF files never crash", "[elf][hostile]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSource, "-g -O1 -Wl,--build-id=sha1 -Wl,--compress-debug-sections=zlib", exe));
  const auto bytes = read_file(exe);
  REQUIRE(bytes.size() > 4096);
  std::vector<size_t> cuts = {0, 1, 4, 15, 16, 20, 52, 63, 64, 65, 100, 0x200, 0x400, 0x1000};
  for (size_t k = 1; k < 24; k++) cuts.push_back(bytes.size() * k / 24);
  cuts.push_back(bytes.size() - 1);
  int failed = 0;
  for (size_t cut : cuts) {
    const std::string p = dir.file("cut_" + std::to_string(cut));
    write_bytes(p, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    INFO("cut at " << cut);
    auto img = ElfImage::open(p);
    if (!img.ok()) {
      failed++;
      CHECK(img.error().message.find(p) != std::string::npos);
      CHECK(img.error().code != 0);
    } else {
      exercise(**img);
    }
    auto id = read_build_id(p);
    if (!id.ok()) CHECK(id.error().message.find(p) != std::string::npos);
  }
  // Section headers sit at the end of the file: every real cut loses them.
  CHECK(failed >= static_cast<int>(cuts.size()) - 2);
}

TEST_CASE("Randomly mutated ELF images never crash", "[elf][hostile]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSource, "-g -O1 -Wl,--build-id=sha1 -Wl,--compress-debug-sections=zstd", exe));
  const auto bytes = read_file(exe);
  std::mt19937_64 rng(0x5eed);
  const Elf64_Ehdr* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  const uint64_t shoff = eh->e_shoff;
  int opened = 0;
  for (int round = 0; round < 400; round++) {
    auto m = bytes;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; k++) {
      // Aim at the places parsers trust: ELF header, phdrs, section headers, anywhere.
      uint64_t pos;
      switch (rng() % 4) {
        case 0: pos = rng() % 64; break;
        case 1: pos = 64 + rng() % 0x300; break;
        case 2: pos = shoff + rng() % (m.size() - shoff); break;
        default: pos = rng() % m.size(); break;
      }
      m[pos] = static_cast<uint8_t>(rng());
    }
    auto img = ElfImage::from_bytes(std::move(m), "mutant-" + std::to_string(round));
    if (img.ok()) {
      opened++;
      exercise(**img);
    } else {
      CHECK(img.error().message.find("mutant-" + std::to_string(round)) != std::string::npos);
    }
  }
  CHECK(opened > 0);
}

TEST_CASE("Header fields pointing outside the file", "[elf][hostile]") {
  TempDir dir;
  const std::string exe = dir.file("prog");
  REQUIRE(compile_c(dir, kSource, "-O1 -Wl,--build-id=sha1", exe));
  const auto bytes = read_file(exe);
  auto patched = [&](auto fn) {
    auto m = bytes;
    fn(reinterpret_cast<Elf64_Ehdr*>(m.data()), m);
    const std::string p = dir.file("patched");
    write_bytes(p, m);
    return p;
  };
  const std::string bad_shoff = patched([](Elf64_Ehdr* e, auto&) { e->e_shoff = ~uint64_t{0} - 8; });
  const std::string bad_phoff = patched([](Elf64_Ehdr* e, auto&) { e->e_phoff = uint64_t{1} << 40; });
  const std::string many_sh = patched([](Elf64_Ehdr* e, auto&) { e->e_shnum = 0xfff0; });
  for (const auto& p : {bad_shoff, bad_phoff, many_sh}) {
    auto img = ElfImage::open(p);
    if (img.ok()) {
      exercise(**img);
    } else {
      CHECK(img.error().message.find(p) != std::string::npos);
    }
    (void)read_build_id(p);
  }
  // A section whose offset runs past the end: an error naming path and section.
  const auto sec = find_section(exe, ".dynsym");
  REQUIRE(sec.size > 0);
  auto m = bytes;
  const auto* e = reinterpret_cast<const Elf64_Ehdr*>(m.data());
  for (size_t i = 0; i < e->e_shnum; i++) {
    auto* sh = reinterpret_cast<Elf64_Shdr*>(m.data() + e->e_shoff + i * sizeof(Elf64_Shdr));
    if (sh->sh_type == SHT_DYNSYM) sh->sh_size = uint64_t{1} << 50;
  }
  auto img = ElfImage::from_bytes(m, "huge-dynsym");
  REQUIRE(img.ok());
  auto s = (*img)->section_or_error(".dynsym");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == SPROV_ERR_ELF);
  CHECK(s.error().message.find("huge-dynsym") != std::string::npos);
  CHECK(s.error().message.find(".dynsym") != std::string::npos);
  auto t = SymbolTable::load(**img, SymbolTable::Kind::kDynsym);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find(".dynsym") != std::string::npos);
}

TEST_CASE("Corrupt compressed sections give decompression errors", "[elf][hostile][compress]") {
  TempDir dir;
  for (const char* kind : {"zlib", "zstd", "zlib-gnu"}) {
    INFO(kind);
    const std::string exe = dir.file(std::string("prog_") + kind);
    REQUIRE(compile_c(dir, kSource, std::string("-g -O1 -Wl,--compress-debug-sections=") + kind, exe));
    const bool gnu = std::string(kind) == "zlib-gnu";
    const std::string file_name = gnu ? ".zdebug_info" : ".debug_info";
    const auto pos = find_section(exe, file_name);
    REQUIRE(pos.size > 40);
    const auto bytes = read_file(exe);

    // 1. Damaged payload.
    auto m = bytes;
    const uint64_t header = gnu ? 12 : 24;
    for (uint64_t k = header + 2; k < pos.size; k += 3) m[pos.off + k] ^= 0x5a;
    const std::string p = dir.file(std::string("bad_") + kind);
    write_bytes(p, m);
    auto img = ElfImage::open(p);
    REQUIRE(img.ok());
    auto s = (*img)->section_or_error(".debug_info");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == SPROV_ERR_DECOMPRESS);
    CHECK(s.error().message.find(p) != std::string::npos);
    CHECK(s.error().message.find(file_name) != std::string::npos);
    CHECK_FALSE((*img)->section(".debug_info"));
    // Asking twice gives the same cached error.
    auto s2 = (*img)->section_or_error(".debug_info");
    REQUIRE_FALSE(s2.ok());
    CHECK(s2.error().message == s.error().message);

    // 2. A declared size above the cap: a limit error, no allocation.
    m = bytes;
    if (gnu) {
      for (int k = 0; k < 8; k++) m[pos.off + 4 + k] = k < 2 ? 0 : 0xff;  // big-endian size
    } else {
      const uint64_t huge = uint64_t{1} << 40;
      std::memcpy(&m[pos.off + 8], &huge, 8);  // Elf64_Chdr.ch_size
    }
    auto big = ElfImage::from_bytes(m, std::string("big_") + kind);
    REQUIRE(big.ok());
    auto b = (*big)->section_or_error(".debug_info");
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().code == SPROV_ERR_LIMIT);
    CHECK(b.error().message.find(std::string("big_") + kind) != std::string::npos);

    // 3. A declared size one byte short: the stream is longer than declared.
    m = bytes;
    if (!gnu) {
      uint64_t sz;
      std::memcpy(&sz, &m[pos.off + 8], 8);
      sz -= 1;
      std::memcpy(&m[pos.off + 8], &sz, 8);
      auto shortimg = ElfImage::from_bytes(m, "short");
      REQUIRE(shortimg.ok());
      auto sh = (*shortimg)->section_or_error(".debug_info");
      REQUIRE_FALSE(sh.ok());
      CHECK(sh.error().code == SPROV_ERR_DECOMPRESS);
    }
  }
}

TEST_CASE("A FIFO named as a module (by a core, a perf record, a link map) is refused at once", "[elf][hostile]") {
  // review: open(O_RDONLY) of a FIFO blocks until a writer comes, so a core naming one hung the capture.
  TempDir dir;
  const std::string fifo = dir.file("module.so");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto img = ElfImage::open(fifo);
  REQUIRE_FALSE(img.ok());
  CHECK_THAT(img.error().message, Catch::Contains(fifo) && Catch::Contains("not a regular file"));
  auto id = read_build_id(fifo);
  REQUIRE_FALSE(id.ok());
  CHECK_THAT(id.error().message, Catch::Contains(fifo));

  // Not even a non-blocking open: a writer waiting on the FIFO would be let through by any reader's
  // open (as a device's driver would run its open). With O_PATH it stays blocked until we open it.
  const std::string marker = dir.file("writer-opened");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int w = ::open(fifo.c_str(), O_WRONLY);  // blocks until a reader opens
    if (w >= 0) {
      const int m = ::open(marker.c_str(), O_WRONLY | O_CREAT, 0600);
      if (m >= 0) close(m);
    }
    _exit(0);
  }
  usleep(100 * 1000);  // the writer is (very likely) in open() by now; if not, the check below passes anyway
  CHECK_FALSE(ElfImage::open(fifo).ok());
  CHECK_FALSE(read_build_id(fifo).ok());
  usleep(200 * 1000);
  CHECK_FALSE(file_exists(marker));  // the writer is still waiting: no open of ours reached the FIFO
  const int r = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // release it
  int status = 0;
  waitpid(child, &status, 0);
  if (r >= 0) close(r);
  CHECK(file_exists(marker));
}

TEST_CASE("Section headers aliasing one compressed blob are held to the file's decompression budget",
          "[elf][hostile][compress]") {
  // review of elf_image.cpp: each compressed section is within its own ratio cap, but 80 headers
  // naming one ~150 KB zlib blob of 16 MiB each would hold 1.3 GB for a ~160 KB file. The sum is
  // held to 1 GiB + 64 x the file's size: the first sections inflate, the rest fail naming it.
  constexpr size_t kOut = 16u << 20, kHeaders = 80;
  std::vector<uint8_t> plain(kOut, 0);  // a byte of noise every 128: ~100:1, under the 1000x ratio cap
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < kOut; i += 128) x ^= x << 13, x ^= x >> 17, x ^= x << 5, plain[i] = static_cast<uint8_t>(x);
  uLongf zlen = compressBound(kOut);
  std::vector<uint8_t> z(zlen);
  REQUIRE(compress2(z.data(), &zlen, plain.data(), kOut, 9) == Z_OK);
  z.resize(zlen);
  const std::string shstr = std::string("\0.debug_x\0.shstrtab\0", 20);
  std::vector<uint8_t> f(64, 0);
  auto put = [&f](size_t at, uint64_t v, int n) {
    for (int i = 0; i < n; i++) f[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  const size_t blob = 64, str = blob + 24 + z.size(), shoff = (str + shstr.size() + 7) & ~size_t{7};
  const size_t nsh = kHeaders + 2;
  f.resize(shoff + nsh * 64, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::memcpy(f.data(), ident, sizeof ident);
  put(16, ET_DYN, 2), put(18, EM_X86_64, 2), put(20, 1, 4), put(40, shoff, 8), put(52, 64, 2);
  put(58, 64, 2), put(60, nsh, 2), put(62, nsh - 1, 2);
  put(blob, ELFCOMPRESS_ZLIB, 4), put(blob + 8, kOut, 8), put(blob + 16, 1, 8);  // Elf64_Chdr
  std::memcpy(&f[blob + 24], z.data(), z.size());
  std::memcpy(&f[str], shstr.data(), shstr.size());
  for (size_t i = 1; i <= kHeaders; i++) {
    const size_t h = shoff + i * 64;
    put(h, 1, 4), put(h + 4, SHT_PROGBITS, 4), put(h + 8, SHF_COMPRESSED, 8);
    put(h + 24, blob, 8), put(h + 32, 24 + z.size(), 8), put(h + 48, 1, 8);
  }
  const size_t h = shoff + (nsh - 1) * 64;
  put(h, 10, 4), put(h + 4, SHT_STRTAB, 4), put(h + 24, str, 8), put(h + 32, shstr.size(), 8), put(h + 48, 1, 8);
  auto img = ElfImage::from_bytes(f, "aliased.elf");
  REQUIRE(img.ok());
  size_t inflated = 0, refused = 0;
  std::string message;
  for (size_t i = 1; i <= kHeaders; i++) {
    auto s = (*img)->section_at_or_error(i);
    if (s.ok()) {
      REQUIRE(s->size == kOut);
      inflated++;
    } else {
      CHECK(s.error().code == SPROV_ERR_LIMIT);
      message = s.error().message;
      refused++;
    }
  }
  const uint64_t budget = (uint64_t{1} << 30) + 64 * f.size();
  CHECK(inflated == budget / kOut);
  CHECK(refused == kHeaders - budget / kOut);
  CHECK_THAT(message, Catch::Contains("aliased.elf") && Catch::Contains(std::to_string(budget)));
}
