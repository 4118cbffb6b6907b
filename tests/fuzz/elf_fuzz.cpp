// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: ElfImage::from_bytes, every section read (with decompression), both symbol tables, llvm-14's table, PLT stubs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "elf/elf_image.hpp"
#include "elf/llvm_symtab.hpp"
#include "elf/plt.hpp"
#include "elf/symtab.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stackprov::elf;
  auto img = ElfImage::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!img.ok()) return 0;
  const ElfImage& e = **img;
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
  return 0;
}
