// SPDX-License-Identifier: Apache-2.0
// ELF symbol tables (.symtab/.dynsym): sorted, alias-resolved address lookup bounded by st_size.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "elf/elf_image.hpp"

namespace stackprov::elf {

struct Symbol {
  uint64_t addr = 0;  ///< st_value (link-time)
  uint64_t size = 0;  ///< st_size
  std::string_view name;  ///< raw (mangled) name; points into the image's string table
  uint8_t type = 0;   ///< STT_FUNC, STT_GNU_IFUNC, ...
  uint8_t bind = 0;   ///< STB_GLOBAL, STB_WEAK, STB_LOCAL
  uint64_t section_end = UINT64_MAX;  ///< sh_addr + sh_size of its section (bounds a zero-sized symbol)
};

/// Function symbols of one table, sorted by address with aliases collapsed by
/// one deterministic rule (documented in doc/symbols.md). Logically immutable;
/// lookups are thread-safe. Holds a reference to the image's bytes: keep the
/// ElfImage alive as long as the table.
///
/// The sorted table is built lazily: the first lookups (a few dozen distinct
/// addresses, all a `stackprov stack` run needs) are answered by scanning the
/// kept symbols, with exactly the result the sorted table gives; size() and
/// symbols() build it at once.
class SymbolTable {
 public:
  enum class Kind : uint8_t { kSymtab, kDynsym };

  SymbolTable();
  SymbolTable(SymbolTable&&) noexcept;
  SymbolTable& operator=(SymbolTable&&) noexcept;
  ~SymbolTable();

  /// Builds from `.symtab` (kind kSymtab) or `.dynsym` (kDynsym) of `image`.
  /// An absent table gives an empty SymbolTable, not an error. Malformed tables
  /// (bad sh_link, out-of-range names) give an error naming section and index.
  static Result<SymbolTable> load(const ElfImage& image, Kind kind);

  /// The symbol with addr <= a < addr + size; when no sized symbol covers
  /// `a`, the closest zero-sized symbol at or below `a` in the same section
  /// with no other symbol between (a label such as ld.so's `_start`, as gdb,
  /// perf and elfutils extend it). nullptr when none.
  const Symbol* lookup(uint64_t a) const;

  /// lookup() by a scan of the kept symbols, never building the sorted table
  /// (same answer as lookup(); for tests and few lookups). The pointer stays
  /// valid as long as the table.
  const Symbol* lookup_linear(uint64_t a) const;

  /// The address of a kept symbol named `name`, or named `name@@VERSION` (a default version, which
  /// gdb also installs under the plain name), among all kept symbols (no alias is collapsed), as
  /// gdb's lookup_minimal_symbol picks among its minimal symbols of one name: the global or weak
  /// one at the highest address (gdb's hash chain holds them last address first), else the first
  /// local one. `*global` says which. False when none. The first calls scan the table; later ones
  /// (a bundle build asks once per call site) are answered from a name index built once, in time
  /// linear in the table's names.
  bool find_by_name(std::string_view name, uint64_t* addr, bool* global) const;

  /// The names of the kept symbols at address `addr` (as stored: `name@VERSION` included), in table
  /// order (no alias is collapsed). Appended to `out`. Scans, then uses the index find_by_name builds.
  void names_at(uint64_t addr, std::vector<std::string_view>* out) const;

  /// True when the table holds no symbol (cheap: does not build the sorted table).
  bool empty() const;
  size_t size() const { return sorted().size(); }
  Kind kind() const { return kind_; }
  const std::vector<Symbol>& symbols() const { return sorted(); }

 private:
  struct Lazy;
  const std::vector<Symbol>& sorted() const;
  const Symbol* lookup_sorted(uint64_t a) const;

  std::unique_ptr<Lazy> lazy_;
  Kind kind_ = Kind::kSymtab;
};

}  // namespace stackprov::elf
