// SPDX-License-Identifier: Apache-2.0
// Symbol-table resolver chain (.symtab of the module or its debug file, then .dynsym) with demangling and provenance.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "elf/elf_symbols.hpp"
#include "object/object_image.hpp"

namespace stackprov::symbolize {

/// Values equal enum sprov_resolver.
enum class Resolver : uint8_t { kNone = 0, kSymtab = 1, kDynsym = 2 };

struct SymbolInfo {
  std::string_view name;     ///< demangled (or raw)
  std::string_view linkage;  ///< raw symbol
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  Resolver resolver = Resolver::kNone;
  std::string_view source;   ///< path of the file whose table answered
};

/// Resolves link-time addresses of modules to function symbols. Order: PLT
/// entries (`sym@plt`, elf::PltTable), `.symtab` of the module, `.symtab` of
/// its separate debug file (ObjectImage::find_debug_file: build-id or debuglink, identity checked),
/// `.dynsym` (ELF's tables, elf_symbols.hpp; none for another format). One instance per thread; returned
/// string_views stay valid until the Symbolizer is destroyed.
class Symbolizer {
 public:
  Symbolizer(bool demangle, object::DebugFileOptions debug_opts)
      : demangle_(demangle), debug_opts_(std::move(debug_opts)) {}

  /// False when no table covers `addr` (not an error).
  bool lookup(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, SymbolInfo* out);

 private:
  struct ModuleSyms {
    std::shared_ptr<const object::ObjectImage> image;
    std::shared_ptr<const object::ObjectImage> debug;
    elf::SymbolTable symtab;
    std::string symtab_source;
    std::string_view image_path;  ///< image->path(), read once
    elf::SymbolTable dynsym;
    elf::PltTable plt;
    bool plt_loaded = false;
  };
  ModuleSyms& module_syms(const std::shared_ptr<const object::ObjectImage>& image);
  std::string_view display_name(std::string_view linkage);

  bool demangle_;
  object::DebugFileOptions debug_opts_;
  std::unordered_map<const object::ObjectImage*, std::unique_ptr<ModuleSyms>> modules_;
  std::unordered_map<std::string_view, std::string_view> demangled_;
  std::unordered_set<std::string> strings_;
};

}  // namespace stackprov::symbolize
