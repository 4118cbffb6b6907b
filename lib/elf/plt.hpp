// SPDX-License-Identifier: Apache-2.0
// PLT stubs as `sym@plt` symbols, computed from .plt/.plt.sec/.plt.got code and the PLT/GOT relocations (as objdump and perf name them).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "elf/elf_image.hpp"
#include "elf/symtab.hpp"

namespace stackprov::elf {

/// Synthetic symbols for the PLT entries of one image: `name@plt`, where name
/// is the `.dynsym` symbol of the relocation (R_*_JUMP_SLOT in `.rela.plt`,
/// R_*_GLOB_DAT in `.rela.dyn` for `.plt.got`) of the GOT slot the entry
/// jumps through; `*ABS*+0xADDEND@plt` for R_X86_64_IRELATIVE (objdump's
/// spelling). The GOT slot is decoded from each entry's code, so lazy
/// (`.plt`), `-z now` (`.plt.got`) and IBT (`.plt.sec`, endbr64/bnd) layouts
/// are all covered. x86_64 (`jmp *disp32(%rip)`) and AArch64
/// (`adrp x16; ldr x17, [x16, #off]`, 16- and 24-byte BTI/PAC entries); other machines give an
/// empty table.
/// Immutable after load(); lookups are thread-safe.
class PltTable {
 public:
  static PltTable load(const ElfImage& image);

  PltTable() = default;
  // syms_ holds string_views into names_: a copy would point into the source's strings.
  PltTable(const PltTable&) = delete;
  PltTable& operator=(const PltTable&) = delete;
  PltTable(PltTable&&) = default;
  PltTable& operator=(PltTable&&) = default;

  /// The PLT entry containing `a` (addr <= a < addr + size), or nullptr.
  const Symbol* lookup(uint64_t a) const;

  bool empty() const { return syms_.empty(); }
  const std::vector<Symbol>& symbols() const { return syms_; }

 private:
  std::deque<std::string> names_;  // storage of the synthetic names (stable addresses)
  std::vector<Symbol> syms_;       // sorted by address, non-overlapping
};

}  // namespace stackprov::elf
