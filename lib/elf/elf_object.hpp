// SPDX-License-Identifier: Apache-2.0
// ELF behind the neutral object image (lib/object): ElfObject wraps an ElfImage; kElfFormat is its
// registry entry (lib/object/formats.cpp).
#pragma once

#include <memory>
#include <optional>

#include "core/once.hpp"
#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"
#include "object/object_image.hpp"

namespace stackprov::elf {

class ElfObject final : public object::ObjectImage {
 public:
  explicit ElfObject(std::shared_ptr<ElfImage> image) : image_(std::move(image)) {}

  /// `image` as an object image: the same ElfObject for one ElfImage while either lives (the
  /// resolvers key their per-module state by the object image), null for null. Thread-safe.
  static std::shared_ptr<ElfObject> of(const std::shared_ptr<ElfImage>& image);
  /// The ELF image behind `obj`, null for another format: the one downcast from the neutral image
  /// to ELF, for the ELF-only features reached from it (symbol tables, PLT, MiniDebugInfo,
  /// elf_symbols.hpp).
  static const std::shared_ptr<ElfImage>* image_of(const object::ObjectImage& obj);

  /// The ELF image, for the ELF-only features (cores, memory images, PLT, debug links).
  const std::shared_ptr<ElfImage>& elf() const { return image_; }

  std::string_view format_name() const override { return "elf"; }
  const std::string& path() const override { return image_->path(); }
  const ModuleId& id() const override { return image_->build_id(); }
  Arch arch() const override { return image_->arch(); }
  bool big_endian() const override { return image_->big_endian(); }
  std::optional<object::SectionRef> section(std::string_view name) const override;
  /// .symtab's symbol covering `addr`, else .dynsym's (elf::SymbolTable's rule, doc/symbols.md).
  std::optional<object::Symbol> symbol_at(uint64_t addr) const override;
  /// .symtab's sorted symbols, else .dynsym's.
  std::vector<object::Symbol> symbols() const override;
  /// From the PT_LOAD segments' file contents.
  bool read_code(uint64_t vaddr, void* buf, size_t len) const override;
  uint64_t load_bias(uint64_t map_start, uint64_t map_offset) const override {
    return image_->load_bias(map_start, map_offset, true);
  }
  /// eh_frame (with .eh_frame_hdr, found through PT_GNU_EH_FRAME) and debug_frame, when present.
  std::vector<object::UnwindTable> unwind_tables() const override;
  uint8_t addr_size() const override { return image_->is_64bit() ? 8 : 4; }
  std::span<const uint8_t> file_bytes() const override { return {image_->file_data(), image_->file_size()}; }
  const FileIdentity* file_identity() const override { return image_->file_identity(); }
  /// The PT_LOAD segments.
  std::vector<object::Segment> loaded_segments() const override;
  /// SHT_PROGBITS sections with SHF_EXECINSTR.
  std::vector<object::CodeSection> code_sections() const override;
  bool has_section_table() const override { return image_->section_count() > 1; }
  bool file_changed() const override { return image_->file_changed(); }
  const std::string& target_root() const override { return image_->target_root(); }
  /// elf::find_debug_file (debug_file.hpp).
  Result<std::shared_ptr<const object::ObjectImage>> find_debug_file(
      const object::DebugFileOptions& opts,
      std::vector<object::DebugFileCandidate>* looked_at = nullptr) const override;
  /// .gnu_debugaltlink: file name, NUL, build-id.
  Result<std::optional<object::SupplementaryLink>> supplementary_link() const override;

 private:
  void load_symbols() const;
  std::shared_ptr<ElfImage> image_;
  mutable OnceFlag symbols_once_;
  mutable std::optional<SymbolTable> symtab_, dynsym_;
};

/// Copies `len` bytes at link-time `vaddr` from `image`'s PT_LOAD file contents; false outside them.
bool read_loaded_bytes(const ElfImage& image, uint64_t vaddr, void* buf, size_t len);

/// The registry entry: sniffs "\x7fELF".
extern const object::Format kElfFormat;

}  // namespace stackprov::elf
