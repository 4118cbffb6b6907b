// SPDX-License-Identifier: Apache-2.0
// The symbol table as llvm-symbolizer-14 sees a module (SymbolizableObjectFile): which symbol names an address.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "elf/elf_image.hpp"
#include "object/object_image.hpp"

namespace stackprov::elf {

/// One symbol after llvm-symbolizer-14's filtering and same-address collapse.
struct LlvmSymbol {
  uint64_t addr = 0;  ///< st_value (bit 0 cleared for ARM/MIPS STT_FUNC; + sh_addr in ET_REL)
  uint64_t size = 0;  ///< st_size; 0 means "up to the next symbol"
  std::string_view name;    ///< raw name from the table's string table (no version added)
  uint32_t local_index = 0; ///< index in the ELF table when STB_LOCAL, else 0
  uint32_t order = 0;       ///< position in the table as read (the sort's tie-break; fills padding)
};

/// The symbols of one module exactly as llvm-symbolizer-14 uses them to name
/// the physical function (doc/symbols.md, "llvm-symbolizer-14 compatible"):
///
/// * the module's `.symtab` (first SHT_SYMTAB); only when it has no entries,
///   its `.dynsym` — never a separate debug file, never MiniDebugInfo;
/// * defined (section index in 1..SHN_LORESERVE-1, or SHN_XINDEX) symbols of
///   type NOTYPE, FUNC, OBJECT or GNU_IFUNC, of any size and binding, except
///   entry 0 and the format-specific ones (AArch64 `$d`/`$x`, ARM `$a`/`$d`/`$t`
///   and empty names, RISC-V empty names); STT_FILE symbols are remembered
///   with their index for the file name of local symbols;
/// * stably sorted by (address, size); of several symbols at one address the
///   last one wins: the largest size, then the highest table index;
/// * an address is named by the closest symbol at or below it, when that
///   symbol's size is 0 or covers it (no walk back to an enclosing symbol).
///
/// Immutable after load(); lookups are thread-safe. Names point into the
/// image's bytes: keep the ElfImage alive as long as the table.
class LlvmSymbolTable {
 public:
  /// Builds the table of `image`. Names outside the string table or tables
  /// with a bad sh_link give an empty table (llvm-symbolizer then names
  /// nothing from the symbol table either).
  static LlvmSymbolTable load(const ElfImage& image);
  /// The table of another format's symbols as llvm-symbolizer-14 reads them
  /// (object::ObjectImage::symbolizer_symbols: its filter and sizes), under the same
  /// sort, same-address choice and lookup. Names point into the image.
  static LlvmSymbolTable from_symbols(const std::vector<object::Symbol>& syms);

  /// getNameFromSymbolTable: the symbol naming `a`, or nullptr.
  const LlvmSymbol* lookup(uint64_t a) const;

  /// The STT_FILE name preceding local symbol `s` in its table ("" for
  /// global symbols or when there is none).
  std::string_view file_of(const LlvmSymbol& s) const;

  bool empty() const { return syms_.empty(); }
  size_t size() const { return syms_.size(); }
  /// True when the names come from `.dynsym` (the module has no `.symtab`).
  bool from_dynsym() const { return from_dynsym_; }
  const std::vector<LlvmSymbol>& symbols() const { return syms_; }

 private:
  /// llvm::stable_sort by (address, size), then of each run of one address the last element.
  void sort_and_collapse();
  std::vector<LlvmSymbol> syms_;
  std::vector<std::pair<uint32_t, std::string_view>> files_;  // (index, name), index order
  bool from_dynsym_ = false;
};

}  // namespace stackprov::elf
