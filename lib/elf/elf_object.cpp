// SPDX-License-Identifier: Apache-2.0
// ElfObject: an ElfImage as an object::ObjectImage, and ELF's registry entry.
#include "elf/elf_object.hpp"

#include <elf.h>

#include <cstring>

namespace stackprov::elf {

namespace {

object::SectionRef ref_of(const Section& s) { return object::SectionRef{s.name, s.data, s.size, s.addr}; }

bool sniff_elf(std::span<const uint8_t> head) {
  return head.size() >= SELFMAG && std::memcmp(head.data(), ELFMAG, SELFMAG) == 0;
}

Result<std::shared_ptr<object::ObjectImage>> open_elf(const std::string& path) {
  auto img = ElfImage::open(path);
  if (!img.ok()) return std::move(img).error();
  return std::shared_ptr<object::ObjectImage>(std::make_shared<ElfObject>(std::move(img).value()));
}

Result<std::shared_ptr<object::ObjectImage>> elf_from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto img = ElfImage::from_bytes(std::move(bytes), std::move(name));
  if (!img.ok()) return std::move(img).error();
  return std::shared_ptr<object::ObjectImage>(std::make_shared<ElfObject>(std::move(img).value()));
}

}  // namespace

const object::Format kElfFormat{"elf", sniff_elf, open_elf, elf_from_bytes};

bool read_loaded_bytes(const ElfImage& image, uint64_t vaddr, void* buf, size_t len) {
  for (const auto& ph : image.program_headers()) {
    if (ph.type != PT_LOAD) continue;
    if (vaddr < ph.vaddr || vaddr - ph.vaddr >= ph.filesz || len > ph.filesz - (vaddr - ph.vaddr)) continue;
    const uint64_t off = ph.offset + (vaddr - ph.vaddr);
    if (off > image.file_size() || len > image.file_size() - off) return false;
    std::memcpy(buf, image.file_data() + off, len);
    return true;
  }
  return false;
}

std::optional<object::SectionRef> ElfObject::section(std::string_view name) const {
  auto s = image_->section(name);
  if (!s) return std::nullopt;
  return ref_of(*s);
}

void ElfObject::load_symbols() const {
  call_once(symbols_once_, [&] {
    // A malformed table is as good as none here: the symbolizer's own steps report it.
    if (auto t = SymbolTable::load(*image_, SymbolTable::Kind::kSymtab); t.ok()) symtab_ = std::move(t).value();
    if (auto t = SymbolTable::load(*image_, SymbolTable::Kind::kDynsym); t.ok()) dynsym_ = std::move(t).value();
  });
}

std::vector<object::Symbol> ElfObject::symbols() const {
  load_symbols();
  std::vector<object::Symbol> out;
  for (const std::optional<SymbolTable>* t : {&symtab_, &dynsym_}) {
    if (!t->has_value() || (*t)->empty()) continue;
    for (const Symbol& s : (*t)->symbols()) out.push_back(object::Symbol{s.addr, s.size, s.name});
    break;
  }
  return out;
}

std::optional<object::Symbol> ElfObject::symbol_at(uint64_t addr) const {
  load_symbols();
  for (const std::optional<SymbolTable>* t : {&symtab_, &dynsym_}) {
    if (!t->has_value()) continue;
    if (const Symbol* s = (*t)->lookup(addr)) return object::Symbol{s->addr, s->size, s->name};
  }
  return std::nullopt;
}

bool ElfObject::read_code(uint64_t vaddr, void* buf, size_t len) const {
  return read_loaded_bytes(*image_, vaddr, buf, len);
}

std::vector<object::UnwindTable> ElfObject::unwind_tables() const {
  std::vector<object::UnwindTable> out;
  if (auto eh = image_->section(".eh_frame"); eh && eh->data != nullptr) {
    object::UnwindTable t{"eh_frame", ref_of(*eh), {}};
    if (auto hdr = image_->eh_frame_hdr()) t.aux = ref_of(*hdr);
    out.push_back(t);
  }
  if (auto df = image_->section(".debug_frame"); df && df->data != nullptr)
    out.push_back(object::UnwindTable{"debug_frame", ref_of(*df), {}});
  return out;
}

}  // namespace stackprov::elf
