// SPDX-License-Identifier: Apache-2.0
// Bundle builder: one ELF module's identity and DWARF address ranges (with inline depth) as lib/bundle records.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "arch/call_sites.hpp"
#include "bundle/format.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "object/object_image.hpp"

namespace stackprov::symbolize {

struct BundleBuildOptions {
  /// Module name stored in the bundle; empty = the file's basename (no host path).
  std::string name;
  /// Where the separate debug file is searched (build-id path, debuglink).
  object::DebugFileOptions debug;
  /// Upper bound on the bytes of executable sections scanned (hostile/huge input).
  size_t max_text_bytes = size_t{1} << 30;
  /// Called after every MiB of executable bytes scanned with the fraction of them done (0..1),
  /// so that a large module shows progress within itself; may be empty.
  std::function<void(double)> progress;
};

/// What the builder did (for the CLI and tests).
struct BundleBuildReport {
  std::string debug_file;     ///< the file whose DWARF was used ("" without DWARF)
  size_t text_bytes = 0;      ///< bytes of SHF_EXECINSTR sections scanned
  size_t dwarf_bytes = 0;     ///< of those, addresses DWARF describes
  size_t symtab_bytes = 0;    ///< of those, addresses only the symbol tables name (llvm-symbolizer-14's answer)
  size_t debug_symtab_bytes = 0;  ///< of those, addresses only the separate debug file's .symtab names
  size_t calls = 0;           ///< call instructions found in DWARF-described code (= return pads)
  size_t undecoded = 0;       ///< x86-64: bytes the length decoder could not decode (skipped one by one)
  size_t call_sites = 0;      ///< call-site records kept for the tail-call search (doc/bundles.md "Call sites")
  size_t call_functions = 0;  ///< function records kept for it
};

/// A call instruction found by decode_calls(): [addr, addr + length); its return pad is
/// addr + length (+ 4 more on MIPS: the delay slot).
using CallSite = arch::CallSite;

/// Call instructions in `n` bytes of code at link-time address `addr`, decoded linearly
/// from the first byte by the arch's decoder (arch::Ops<Traits>::for_each_call): x86-64 by
/// instruction length (arch/x86_64/insn_length.hpp: legacy/REX/VEX/EVEX encodings; E8 rel32,
/// FF /2 and FF /3), arm64 (BL, BLR, BLRAA/BLRAB/BLRAAZ/BLRABZ) and mips32 (JAL, JALR,
/// BGEZAL/BLTZAL incl. BAL) by 4-byte word; none for an arch without traits. `undecoded`
/// counts x86-64 bytes that are no valid instruction start (skipped one at a time).
std::vector<CallSite> decode_calls(Arch arch, bool big_endian, const uint8_t* code, size_t n, uint64_t addr,
                                   size_t* undecoded = nullptr);

/// Builds the bundle contents of the ELF file `path`: identity = its GNU build-id
/// (required), name, sha256 of the file and of the debug file, and the address
/// ranges of every byte of its executable sections that DWARF describes, with the
/// inline chain exactly as DwarfResolver answers in llvm-symbolizer-14 mode
/// (linkage names, symbol-table name for the physical function), and depth-0 ranges
/// of the bytes only the symbol tables name (llvm-symbolizer-14's symbol name and
/// its "??:0:0" or "<STT_FILE name>:0:0": on the module, else on its separate debug
/// file, SymtabPolicy::kModuleThenDebugFile). Addresses are
/// link-time virtual addresses. Return pads: every call instruction (decode_calls) in
/// DWARF-described code, with the inline chain at the call; unwind rows come from
/// unwind::bundle_unwind_rows() (lib/unwind/bundle_rows.hpp), which the caller adds.
/// Symbol names (ModuleContents::symbols, format 5): every byte of the executable sections named by
/// the one naming rule outside llvm-symbolizer mode (symbolize::Symbolizer, as `stack` names frames:
/// PLT stubs, .symtab of the module else of its debug file, .dynsym; doc/symbols.md "The alias rule"),
/// with the symbol's start.
/// Deterministic: the output depends only on the file and its debug file.
Result<bundle::ModuleContents> build_module_contents(const std::string& path, const BundleBuildOptions& opts,
                                                     BundleBuildReport* report = nullptr);

}  // namespace stackprov::symbolize
