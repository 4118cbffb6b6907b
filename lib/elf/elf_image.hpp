// SPDX-License-Identifier: Apache-2.0
// ELF object files (via libelf): identity, program headers, sections (decompressed), unwind tables, debuglink.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::object {
class ObjectImage;
}

namespace stackprov::elf {

class ElfObject;

struct ProgramHeader {
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint64_t align = 0;
};

/// A section's bytes. `data` stays valid as long as the ElfImage lives;
/// compressed sections (SHF_COMPRESSED zlib/zstd, .zdebug_*) are returned
/// decompressed (decompressed once, kept by the image). SHT_NOBITS sections
/// have data == nullptr and size == 0 (their sh_size is not file bytes).
/// A `.zdebug_x` section is found under its canonical name `.debug_x`.
struct Section {
  std::string_view name;
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t addr = 0;    ///< sh_addr (link-time)
  uint64_t offset = 0;  ///< sh_offset in the file
  uint32_t type = 0;
  uint64_t flags = 0;   ///< sh_flags; SHF_COMPRESSED is cleared once decompressed
  uint32_t link = 0;    ///< sh_link
  uint32_t info = 0;    ///< sh_info
  uint64_t entsize = 0; ///< sh_entsize
  uint64_t addralign = 0;  ///< sh_addralign
  uint32_t index = 0;   ///< section header index (0 for sections synthesised from phdrs)
  uint64_t file_size = 0;  ///< bytes in the file (compressed size; 0 for SHT_NOBITS)
};

struct Debuglink {
  std::string file;
  uint32_t crc = 0;
};

/// One ELF file or in-memory image (the vDSO). Immutable after open();
/// thread-safe for concurrent readers (lazy work is guarded internally).
class ElfImage {
 public:
  /// Opens and maps `path`. Errors name the path and what was wrong.
  static Result<std::shared_ptr<ElfImage>> open(const std::string& path);
  /// Parses an image held in memory (copied), e.g. the vDSO read from a target.
  static Result<std::shared_ptr<ElfImage>> from_bytes(std::vector<uint8_t> bytes, std::string name);

  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  const std::string& path() const;
  /// Whether the file shrank while mapped (another user truncated it): the bytes past its new
  /// end read as zeros, so what was read from them is not the file's (core/mapped_file.hpp).
  bool file_changed() const;
  /// The root of the process whose file this is ("/proc/PID/root", when it was opened through
  /// another process's root that is not ours), else "": the paths it names (debug links, debug
  /// directories, dwz files) are looked up under that root (core/open_file.hpp under_root_of).
  const std::string& target_root() const;
  /// The file open() mapped; null for an image from_bytes().
  const FileIdentity* file_identity() const;
  Arch arch() const;           ///< from e_machine (EM_X86_64, EM_AARCH64, EM_MIPS)
  bool is_64bit() const;
  bool big_endian() const;
  uint16_t elf_type() const;   ///< ET_EXEC, ET_DYN, ...
  /// Whether this is a program a process execs, not a library it loads: ET_EXEC, or an ET_DYN
  /// PIE — DF_1_PIE in DT_FLAGS_1 (what ld -pie sets, static-pie too), or, from linkers that
  /// do not set it, a PT_INTERP without a DT_SONAME. PT_INTERP alone is not enough: glibc's
  /// libc.so.6 has one (it runs as a program) and a DT_SONAME; the dynamic loader has neither.
  bool is_program() const;
  const ModuleId& build_id() const;  ///< empty when there is no NT_GNU_BUILD_ID note
  const std::vector<ProgramHeader>& program_headers() const;

  /// Section by exact name (".eh_frame", ".debug_frame", ".symtab", ...).
  /// Compressed sections are decompressed; an error decompressing gives nullopt
  /// (and is logged through last_error of the image).
  std::optional<Section> section(std::string_view name) const;
  /// Result-returning variant that says why a section is unavailable.
  Result<Section> section_or_error(std::string_view name) const;

  /// `.eh_frame_hdr` located through PT_GNU_EH_FRAME (falls back to the section).
  std::optional<Section> eh_frame_hdr() const;

  std::optional<Debuglink> debuglink() const;

  /// Runtime minus link-time address for a mapping of this file that starts at
  /// `map_start` with file offset `map_offset` (from /proc/PID/maps or NT_FILE).
  /// Works for ET_EXEC (bias 0), PIE and shared objects.
  /// `executable`: the mapping is executable (r-x). When several PT_LOADs start in the
  /// mapping's file page (e.g. libcom_err.so.2: R at 0x3000 and RW at 0x3c68), the one with
  /// PF_X is taken for an executable mapping, else the first; a non-executable mapping there is
  /// ambiguous without more of the address space (module lists use executable mappings only).
  uint64_t load_bias(uint64_t map_start, uint64_t map_offset, bool executable = false) const;

  /// Link-time address range of executable PT_LOAD segments [min, max).
  std::pair<uint64_t, uint64_t> exec_range() const;

  /// Raw file bytes (the mapping), for CRC checks and hashing.
  const uint8_t* file_data() const;
  size_t file_size() const;

  /// e_machine as in the header (EM_*), for architectures Arch does not name.
  uint16_t machine() const;
  /// Number of section headers (including the null section 0).
  size_t section_count() const;
  /// Section by header index (sh_link targets); nullopt for a bad index or a
  /// section whose bytes are unavailable (see section_at_or_error).
  std::optional<Section> section_at(size_t index) const;
  Result<Section> section_at_or_error(size_t index) const;
  /// sh_type / sh_flags / name of a section header without touching its bytes
  /// (0 / 0 / empty for a bad index).
  uint32_t section_type(size_t index) const;
  uint64_t section_flags(size_t index) const;
  std::string_view section_name(size_t index) const;
  /// [sh_addr, sh_addr + sh_size) of a section header, also for SHT_NOBITS,
  /// without touching its bytes ({0, 0} for a bad index).
  std::pair<uint64_t, uint64_t> section_range(size_t index) const;

  struct Impl;
 private:
  friend class ElfObject;
  explicit ElfImage(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  /// This image's one ElfObject while it lives (ElfObject::of).
  mutable std::mutex object_mu_;
  mutable std::weak_ptr<ElfObject> object_;
};

/// Reads only the GNU build-id of a file (fast path for module maps; does not
/// keep the file open). Empty ModuleId when the file has none.
Result<ModuleId> read_build_id(const std::string& path);

/// GNU debuglink CRC32 (the zlib/IEEE polynomial) over a whole file.
Result<uint32_t> file_crc32(const std::string& path);

/// While an ImageReuseScope lives on a thread, ElfImage::open on that thread returns the image
/// the scope already holds for the same file (same path, device, inode, size and mtime) instead
/// of mapping and parsing it again, and keeps each image it opens until the scope ends: one
/// open per module file per live capture (its module list and the walk while the target is
/// stopped both need the module files). Scopes nest; the innermost one is used. Not copyable.
class ImageReuseScope {
 public:
  ImageReuseScope();
  ~ImageReuseScope();
  ImageReuseScope(const ImageReuseScope&) = delete;
  ImageReuseScope& operator=(const ImageReuseScope&) = delete;

 private:
  friend class ElfImage;
  struct Entry;
  std::vector<Entry> entries_;
  ImageReuseScope* outer_ = nullptr;
};

}  // namespace stackprov::elf
