// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: ElfImage::from_bytes, every section read (with decompression), both symbol tables, llvm-14's table,
// PLT stubs; and the same bytes as a process's memory, an image rebuilt from it (elf::rebuild_image), read alike.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "elf/core_file.hpp"
#include "elf/elf_image.hpp"
#include "elf/llvm_symtab.hpp"
#include "elf/plt.hpp"
#include "elf/symtab.hpp"

namespace {

using namespace stackprov::elf;

void read_all(const ElfImage& e) {
  unsigned sum = 0;
  for (size_t i = 0; i < e.section_count(); i++) {
    auto s = e.section_at_or_error(i);
    if (s.ok() && s->data != nullptr && s->size > 0) sum += s->data[0] + s->data[s->size - 1];
  }
  for (const char* name : {".eh_frame", ".debug_info", ".debug_line", ".gnu_debuglink"}) {
    (void)e.section(name);
  }
  (void)e.eh_frame_hdr();
  (void)e.debuglink();
  (void)e.exec_range();
  (void)e.load_bias(0x555555554000, 0);
  for (auto kind : {SymbolTable::Kind::kSymtab, SymbolTable::Kind::kDynsym}) {
    auto t = SymbolTable::load(e, kind);
    if (!t.ok()) continue;
    for (const Symbol& s : t->symbols()) {
      const Symbol* hit = t->lookup(s.addr + s.size / 2);
      if (hit != nullptr) sum += static_cast<unsigned>(hit->name.size());
    }
  }
  const LlvmSymbolTable llvm = LlvmSymbolTable::load(e);
  for (const LlvmSymbol& s : llvm.symbols()) {
    const LlvmSymbol* hit = llvm.lookup(s.addr + s.size / 2);
    if (hit != nullptr) sum += static_cast<unsigned>(hit->name.size() + llvm.file_of(*hit).size());
  }
  const PltTable plt = PltTable::load(e);
  for (const Symbol& s : plt.symbols()) {
    const Symbol* hit = plt.lookup(s.addr + 1);
    if (hit != nullptr) sum += static_cast<unsigned>(hit->name.size());
  }
  volatile unsigned sink = sum;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto img = ElfImage::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
  if (img.ok()) read_all(**img);
  // The bytes as memory at 0x10000: its read-only segments at their file offsets, no section
  // headers (ElfImage synthesises .eh_frame, .dynsym, .dynstr, .dynamic from the program headers).
  constexpr uint64_t kBase = 0x10000;
  auto read = [&](uint64_t addr, void* buf, size_t len) {
    if (addr < kBase || addr - kBase > size || len > size - (addr - kBase)) return false;
    std::memcpy(buf, data + (addr - kBase), len);
    return true;
  };
  auto rebuilt = rebuild_image(kBase, read, 16u << 20);
  if (!rebuilt.ok()) return 0;
  auto mem = ElfImage::from_bytes(std::move(rebuilt).value(), "fuzz (memory)");
  if (mem.ok()) read_all(**mem);
  return 0;
}
