// SPDX-License-Identifier: Apache-2.0
// Bundle builder: one ELF module's identity and DWARF address ranges (with inline depth) as lib/bundle records.
#pragma once

#include <cstddef>
#include <string>

#include "bundle/format.hpp"
#include "core/error.hpp"
#include "elf/debug_file.hpp"

namespace stackprov::symbolize {

struct BundleBuildOptions {
  /// Module name stored in the bundle; empty = the file's basename (no host path).
  std::string name;
  /// Where the separate debug file is searched (build-id path, debuglink).
  elf::DebugFileOptions debug;
  /// Upper bound on the bytes of executable sections scanned (hostile/huge input).
  size_t max_text_bytes = size_t{1} << 30;
};

/// What the builder did (for the CLI and tests).
struct BundleBuildReport {
  std::string debug_file;     ///< the file whose DWARF was used ("" without DWARF)
  size_t text_bytes = 0;      ///< bytes of SHF_EXECINSTR sections scanned
  size_t dwarf_bytes = 0;     ///< of those, addresses DWARF describes
};

/// Builds the bundle contents of the ELF file `path`: identity = its GNU build-id
/// (required), name, sha256 of the file and of the debug file, and the address
/// ranges of every byte of its executable sections that DWARF describes, with the
/// inline chain exactly as DwarfResolver answers in llvm-symbolizer-14 mode
/// (linkage names, symbol-table name for the physical function). Addresses are
/// link-time virtual addresses. No return pads; unwind rows come from
/// unwind::bundle_unwind_rows() (lib/unwind/bundle_rows.hpp), which the caller adds.
/// Deterministic: the output depends only on the file and its debug file.
Result<bundle::ModuleContents> build_module_contents(const std::string& path, const BundleBuildOptions& opts,
                                                     BundleBuildReport* report = nullptr);

}  // namespace stackprov::symbolize
