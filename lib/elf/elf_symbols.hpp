// SPDX-License-Identifier: Apache-2.0
// ELF's symbol features reached from a neutral object image: .symtab/.dynsym, PLT stubs, llvm's
// symbol choice, MiniDebugInfo and the STT_FILE names of local functions. Empty for another format.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "elf/llvm_symtab.hpp"
#include "elf/plt.hpp"
#include "elf/symtab.hpp"
#include "object/object_image.hpp"

namespace stackprov::elf {

/// SymbolTable::load of `obj`'s ELF image; an empty table for another format.
Result<SymbolTable> load_symbols(const object::ObjectImage& obj, SymbolTable::Kind kind);
/// PltTable::load of `obj`'s ELF image; an empty table for another format.
PltTable load_plt(const object::ObjectImage& obj);
/// LlvmSymbolTable::load of `obj`'s ELF image; an empty table for another format.
LlvmSymbolTable load_llvm_symbols(const object::ObjectImage& obj);

/// .gnu_debugdata (MiniDebugInfo): the xz-compressed ELF image holding a stripped file's .symtab,
/// named "<path>[.gnu_debugdata]"; null when there is none or it does not decompress (at most
/// 256 MiB) or parse.
std::shared_ptr<const object::ObjectImage> open_minidebuginfo(const object::ObjectImage& obj);

/// A local function symbol of .symtab and the name of the STT_FILE symbol preceding it in table
/// order (llvm-symbolizer prints it as the FileName of a symbol-table answer). Names point into
/// the image.
struct LocalFileSymbol {
  uint64_t addr;
  std::string_view name, file;
};
/// The local function symbols of `obj`'s .symtab that follow an STT_FILE symbol, in table order;
/// empty for another format.
std::vector<LocalFileSymbol> local_file_symbols(const object::ObjectImage& obj);

}  // namespace stackprov::elf
