// SPDX-License-Identifier: Apache-2.0
// Mapped files of a core without NT_FILE (qemu-user cores), from the dynamic linker's r_debug/link_map.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "elf/core_file.hpp"

namespace stackprov::elf {

/// What the link_map walk needs of a file a guest path names (opened on the
/// host, under the sysroot): its program headers and the file bytes of its
/// PT_DYNAMIC (for a read-only .dynamic the core did not dump, as on mips).
struct LinkMapFile {
  std::vector<ProgramHeader> phdrs;
  std::vector<uint8_t> dynamic;
};
using OpenLinkMapFile = std::function<std::optional<LinkMapFile>(const std::string& path)>;

/// Reconstructs what NT_FILE would list: the main program `exe_path` (its load
/// bias from AT_PHDR and its PT_PHDR; 0 without PT_PHDR, a static non-PIE
/// program) and every object on the dynamic linker's link_map list (r_debug
/// from the program's DT_DEBUG, or DT_MIPS_RLD_MAP / DT_MIPS_RLD_MAP_REL on
/// mips; struct r_debug and struct link_map from glibc elf/link.h), read from
/// the core's memory. One entry per PT_LOAD with file bytes, page-rounded
/// (4 KiB), offsets in bytes. Bounded (512 objects, cycles stop the walk).
///
/// Why: qemu-user's elf_core_dump (linux-user/elfload.c) writes only
/// NT_PRSTATUS, NT_PRPSINFO and NT_AUXV, and does not dump read-only
/// executable mappings that start with an ELF header, so module program
/// headers must come from the files (`open_file`) as gdb's solib-svr4 does.
std::vector<CoreMappedFile> mapped_files_from_link_map(const CoreFile& core, const std::string& exe_path,
                                                       const OpenLinkMapFile& open_file);

}  // namespace stackprov::elf
