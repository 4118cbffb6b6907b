// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a Go binary's pclntab (GoPclntab::load, lookup with inline chains, function_range,
// sp_delta, func_flags), in an ELF the target builds around the fuzzed tables, or a whole fuzzed ELF.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_sections.hpp"
#include "symbolize/gopclntab.hpp"

using namespace stackprov;

namespace {

// Flags (meta byte 0).
constexpr uint8_t kRenamed = 1;     // the table in ".data.rel.ro" of a binary with .note.go.buildid (magic search)
constexpr uint8_t kNoSections = 2;  // no section headers: the PT_LOAD segments are searched
constexpr uint8_t kBigEndian = 4;   // ELFDATA2MSB (the table's words are read big-endian)
constexpr uint8_t kRawElf = 8;      // section 1 is a whole ELF file, used as it is

struct Blob {
  const char* name;
  uint64_t vaddr;
  dwarf::SectionBytes bytes;
};

class Writer {
 public:
  explicit Writer(bool be) : be_(be) {}
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; i++) out.push_back(static_cast<uint8_t>(v >> (8 * (be_ ? n - 1 - i : i))));
  }
  void bytes(const uint8_t* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  }
  void pad_to(size_t n) { out.resize(n, 0); }
  std::vector<uint8_t> out;

 private:
  bool be_;
};

// An ELF64 executable with one PT_LOAD per blob and, unless kNoSections, one section per blob plus
// .shstrtab (and an empty .note.go.buildid when kRenamed).
std::vector<uint8_t> build_elf(const std::vector<Blob>& blobs, uint8_t flags) {
  const bool be = flags & kBigEndian, sections = !(flags & kNoSections);
  std::string shstr(1, '\0');
  std::vector<uint32_t> name_off;
  for (const Blob& b : blobs) {
    name_off.push_back(static_cast<uint32_t>(shstr.size()));
    shstr += b.name;
    shstr.push_back('\0');
  }
  const uint32_t note_name = static_cast<uint32_t>(shstr.size());
  shstr += ".note.go.buildid";
  shstr.push_back('\0');
  const uint32_t shstr_name = static_cast<uint32_t>(shstr.size());
  shstr += ".shstrtab";
  shstr.push_back('\0');

  const size_t nph = blobs.size(), phoff = 64, data_off = phoff + nph * 56;
  std::vector<size_t> offs;
  size_t at = data_off;
  for (const Blob& b : blobs) {
    offs.push_back(at);
    at += (b.bytes.size + 7) & ~size_t(7);
  }
  const size_t shstr_off = at;
  at += (shstr.size() + 7) & ~size_t(7);
  const bool note = sections && (flags & kRenamed);
  const size_t nsh = sections ? 1 + blobs.size() + (note ? 1 : 0) + 1 : 0;
  const size_t shoff = sections ? at : 0;

  Writer w(be);
  const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, static_cast<uint8_t>(be ? 2 : 1), 1, 0};
  w.bytes(ident, 16);
  w.put(2, 2);                                  // e_type ET_EXEC
  w.put(be ? 21 : 62, 2);                       // e_machine: EM_PPC64 (big-endian) or EM_X86_64
  w.put(1, 4);                                  // e_version
  w.put(0x401000, 8);                           // e_entry
  w.put(phoff, 8);
  w.put(shoff, 8);
  w.put(0, 4);                                  // e_flags
  w.put(64, 2), w.put(56, 2), w.put(nph, 2);    // e_ehsize, e_phentsize, e_phnum
  w.put(64, 2), w.put(nsh, 2), w.put(nsh ? nsh - 1 : 0, 2);  // e_shentsize, e_shnum, e_shstrndx
  for (size_t i = 0; i < blobs.size(); i++) {
    w.put(1, 4), w.put(4, 4);                   // PT_LOAD, PF_R
    w.put(offs[i], 8), w.put(blobs[i].vaddr, 8), w.put(blobs[i].vaddr, 8);
    w.put(blobs[i].bytes.size, 8), w.put(blobs[i].bytes.size, 8), w.put(8, 8);
  }
  for (size_t i = 0; i < blobs.size(); i++) {
    w.pad_to(offs[i]);
    w.bytes(blobs[i].bytes.data, blobs[i].bytes.size);
  }
  w.pad_to(shstr_off);
  w.bytes(reinterpret_cast<const uint8_t*>(shstr.data()), shstr.size());
  if (!sections) return std::move(w.out);
  w.pad_to(shoff);
  auto shdr = [&w](uint32_t name, uint32_t type, uint64_t addr, uint64_t off, uint64_t size) {
    w.put(name, 4), w.put(type, 4), w.put(addr ? 2 : 0, 8);  // SHF_ALLOC for loaded sections
    w.put(addr, 8), w.put(off, 8), w.put(size, 8);
    w.put(0, 4), w.put(0, 4), w.put(1, 8), w.put(0, 8);
  };
  shdr(0, 0, 0, 0, 0);
  for (size_t i = 0; i < blobs.size(); i++) shdr(name_off[i], 1, blobs[i].vaddr, offs[i], blobs[i].bytes.size);
  if (note) shdr(note_name, 7, 0, shstr_off, 0);
  shdr(shstr_name, 3, 0, shstr_off, shstr.size());
  return std::move(w.out);
}

}  // namespace

// Input sections (tests/fuzz/make_seeds.cpp --go): meta (u8 flags at 0; u64 vaddrs of the pclntab,
// .noptrdata and .rodata at 8, 16, 24; u64 probe pcs from 32), the pclntab, .noptrdata (where
// runtime.moduledata is found), .rodata (go:func.*, the inline trees).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dwarf::SectionBytes s[4];
  fuzz::split_sections(data, size, s, 4);
  const uint8_t flags = s[0].size ? s[0].data[0] : 0;
  std::vector<uint8_t> elf;
  if (flags & kRawElf) {
    if (s[1].size) elf.assign(s[1].data, s[1].data + s[1].size);
  } else {
    const std::vector<Blob> blobs = {
        {(flags & kRenamed) ? ".data.rel.ro" : ".gopclntab", fuzz::word_at(s[0].data, s[0].size, 8), s[1]},
        {".noptrdata", fuzz::word_at(s[0].data, s[0].size, 16), s[2]},
        {".rodata", fuzz::word_at(s[0].data, s[0].size, 24), s[3]},
    };
    elf = build_elf(blobs, flags);
  }
  auto img = object::from_bytes(std::move(elf), "fuzz-go");
  if (!img.ok()) return 0;
  auto t = symbolize::GoPclntab::load(std::move(img).value());
  if (!t) return 0;
  // Probe pcs: the meta's, and offsets from the text start.
  std::vector<uint64_t> pcs;
  for (size_t i = 32; i < s[0].size && pcs.size() < 256; i += 8) pcs.push_back(fuzz::word_at(s[0].data, s[0].size, i));
  for (uint64_t off : {0, 1, 0x10, 0x100, 0x1000, 0x10000}) pcs.push_back(t->text_start() + off);
  std::vector<symbolize::GoFrame> frames;
  size_t text = 0;
  for (size_t i = 0; i < pcs.size(); i++) {
    const uint64_t pc = pcs[i];
    uint64_t entry = 0, end = 0;
    const bool covered = t->function_range(pc, &entry, &end);
    if (covered && (pc < entry || pc >= end)) __builtin_trap();  // a range that does not hold pc
    const bool found = t->lookup(pc, &frames);
    if (found != covered) __builtin_trap();                     // lookup and function_range disagree
    if (found && (frames.empty() || frames.size() > 65)) __builtin_trap();
    for (const auto& f : frames) {
      if (f.entry != entry) __builtin_trap();
      text += f.function.size() + f.file.size();
    }
    (void)t->sp_delta(pc);
    (void)t->func_flags(pc);
    // The next pcs: the functions around this one.
    if (covered && pcs.size() < 512) {
      pcs.push_back(end);
      if (entry > 0) pcs.push_back(entry - 1);
    }
  }
  volatile size_t sink = text;
  (void)sink;
  return 0;
}
