// SPDX-License-Identifier: Apache-2.0
// ElfObject: an ElfImage as an object::ObjectImage, and ELF's registry entry.
#include "elf/elf_object.hpp"

#include <elf.h>

#include <cstring>

#include "elf/debug_file.hpp"

namespace stackprov::elf {

namespace {

object::SectionRef ref_of(const Section& s) { return object::SectionRef{s.name, s.data, s.size, s.addr}; }

bool sniff_elf(std::span<const uint8_t> head) {
  return head.size() >= SELFMAG && std::memcmp(head.data(), ELFMAG, SELFMAG) == 0;
}

Result<std::shared_ptr<object::ObjectImage>> open_elf(const std::string& path) {
  auto img = ElfImage::open(path);
  if (!img.ok()) return std::move(img).error();
  return std::shared_ptr<object::ObjectImage>(ElfObject::of(img.value()));
}

Result<std::shared_ptr<object::ObjectImage>> elf_from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto img = ElfImage::from_bytes(std::move(bytes), std::move(name));
  if (!img.ok()) return std::move(img).error();
  return std::shared_ptr<object::ObjectImage>(ElfObject::of(img.value()));
}

}  // namespace

const object::Format kElfFormat{"elf", sniff_elf, open_elf, elf_from_bytes, nullptr};

std::shared_ptr<ElfObject> ElfObject::of(const std::shared_ptr<ElfImage>& image) {
  if (image == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(image->object_mu_);
  std::shared_ptr<ElfObject> o = image->object_.lock();
  if (o == nullptr) {
    o = std::make_shared<ElfObject>(image);
    image->object_ = o;
  }
  return o;
}

const std::shared_ptr<ElfImage>* ElfObject::image_of(const object::ObjectImage& obj) {
  const auto* e = dynamic_cast<const ElfObject*>(&obj);
  return e != nullptr ? &e->image_ : nullptr;
}

std::vector<object::Segment> ElfObject::loaded_segments() const {
  std::vector<object::Segment> out;
  for (const auto& ph : image_->program_headers())
    if (ph.type == PT_LOAD) out.push_back(object::Segment{ph.vaddr, ph.offset, ph.filesz});
  return out;
}

std::vector<object::CodeSection> ElfObject::code_sections() const {
  std::vector<object::CodeSection> out;
  for (size_t i = 1; i < image_->section_count(); ++i) {
    if (image_->section_type(i) != SHT_PROGBITS || (image_->section_flags(i) & SHF_EXECINSTR) == 0) continue;
    const auto [lo, hi] = image_->section_range(i);
    object::CodeSection c{lo, hi, {}};
    if (auto s = image_->section_at(i)) c.bytes = ref_of(*s);
    out.push_back(c);
  }
  return out;
}

Result<std::shared_ptr<const object::ObjectImage>> ElfObject::find_debug_file(
    const object::DebugFileOptions& opts, std::vector<object::DebugFileCandidate>* looked_at) const {
  auto dbg = elf::find_debug_file(*image_, opts, looked_at);
  if (!dbg.ok()) return std::move(dbg).error();
  return std::shared_ptr<const object::ObjectImage>(of(dbg.value()));
}

// dwz: .gnu_debugaltlink = file name NUL build-id.
Result<std::optional<object::SupplementaryLink>> ElfObject::supplementary_link() const {
  auto sec = image_->section(".gnu_debugaltlink");
  if (!sec || sec->data == nullptr || sec->size == 0) return std::optional<object::SupplementaryLink>{};
  const char* p = reinterpret_cast<const char*>(sec->data);
  const size_t nlen = strnlen(p, sec->size);
  // Messages built whole (no make_error): a long path and name are never cut at its buffer.
  if (nlen >= sec->size) return Error{SPROV_ERR_BAD_FORMAT, path() + ": malformed .gnu_debugaltlink"};
  object::SupplementaryLink link{std::string(p, nlen), ModuleId::from_bytes(sec->data + nlen + 1, sec->size - nlen - 1)};
  // The supplementary file must be the one the link names by build-id: a link without one
  // would make any file at the named path (a host file, for a target's module) an input.
  if (link.id.empty())
    return Error{SPROV_ERR_BAD_FORMAT,
                 path() + ": .gnu_debugaltlink names '" + link.name + "' without a build-id: not opened"};
  return std::optional<object::SupplementaryLink>(std::move(link));
}

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
