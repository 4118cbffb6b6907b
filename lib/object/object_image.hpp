// SPDX-License-Identifier: Apache-2.0
// The format-neutral object image (issue 32): what every layer above the object formats asks of a
// module file -- identity, architecture, sections by name, symbols, code bytes, unwind tables --
// and the registry that sniffs a file's format and opens it with the right parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::object {

/// A section's bytes, found by the format's own name for it (".eh_frame", ".pdata",
/// "__TEXT,__unwind_info"). `data` lives as long as the image.
struct SectionRef {
  std::string_view name;
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t addr = 0;  ///< link-time address of the first byte (0 for a section not loaded)
};

/// A symbol covering an address: [addr, addr + size) at link time.
struct Symbol {
  uint64_t addr = 0;
  uint64_t size = 0;
  std::string_view name;  ///< the format's (linkage) name; NUL-terminated, lives as long as the image
};

/// An unwind table a module carries, named by its kind ("eh_frame", "debug_frame", "pdata",
/// "compact_unwind", ...): the unwind layer maps a kind to the source that reads it
/// (unwind/unwind_source.hpp), once per module. `aux` is a second section the kind needs
/// (.eh_frame_hdr for eh_frame, .xdata for pdata), empty when none.
struct UnwindTable {
  std::string_view kind;
  SectionRef data;
  SectionRef aux;
};

/// One module file or in-memory image, of any format. Immutable after open; thread-safe for
/// concurrent readers. Implementations: elf::ElfObject (lib/elf), and test formats.
class ObjectImage {
 public:
  virtual ~ObjectImage();

  /// The format's registry name ("elf", ...).
  virtual std::string_view format_name() const = 0;
  /// The path opened, or the name given to an image from bytes.
  virtual const std::string& path() const = 0;
  /// The module's identity (ELF build-id, PDB GUID+age, Mach-O UUID); empty when it has none.
  virtual const ModuleId& id() const = 0;
  virtual Arch arch() const = 0;
  virtual bool big_endian() const = 0;
  /// Section by the format's name; nullopt when absent or unreadable.
  virtual std::optional<SectionRef> section(std::string_view name) const = 0;
  /// The symbol covering link-time `addr`, if any (the format's own tables: .symtab then .dynsym,
  /// COFF symbols, LC_SYMTAB, ...).
  virtual std::optional<Symbol> symbol_at(uint64_t addr) const = 0;
  /// The function symbols, sorted by address (a bundle's symbol-table ranges).
  virtual std::vector<Symbol> symbols() const = 0;
  /// Copies `len` bytes of the file's loaded contents at link-time `vaddr`; false outside them.
  virtual bool read_code(uint64_t vaddr, void* buf, size_t len) const = 0;
  /// Runtime minus link-time address for a mapping of this file at `map_start` with file offset
  /// `map_offset` (executable mapping).
  virtual uint64_t load_bias(uint64_t map_start, uint64_t map_offset) const = 0;
  /// The unwind tables the file carries, most trusted first.
  virtual std::vector<UnwindTable> unwind_tables() const = 0;
  /// The whole file's bytes (for hashing and CRCs).
  virtual std::span<const uint8_t> file_bytes() const = 0;
  /// The file opened (fstat of the descriptor read), so that a caller can check it is the file
  /// it keyed a cache entry by; null for an image from bytes.
  virtual const FileIdentity* file_identity() const = 0;
};

/// A format the registry can open: `sniff` looks at the file's first bytes (at most
/// kSniffBytes; fewer for a short file) and says whether they are this format's.
struct Format {
  std::string_view name;
  bool (*sniff)(std::span<const uint8_t> head);
  Result<std::shared_ptr<ObjectImage>> (*open)(const std::string& path);
  Result<std::shared_ptr<ObjectImage>> (*from_bytes)(std::vector<uint8_t> bytes, std::string name);
};
inline constexpr size_t kSniffBytes = 64;

/// Opens `path` with the first registered format whose sniff accepts its first bytes. A file no
/// format accepts, or one that cannot be opened, goes to the first built-in format (ELF): its
/// parser's error says what it expected, as it always did ("PATH: not an ELF file (bad magic)",
/// "PATH: open: No such file or directory").
Result<std::shared_ptr<ObjectImage>> open(const std::string& path);
/// The same for an image held in memory (copied), e.g. a vDSO read from a target.
Result<std::shared_ptr<ObjectImage>> from_bytes(std::vector<uint8_t> bytes, std::string name);
/// The format whose sniff accepts `head`, or nullptr.
const Format* sniff(std::span<const uint8_t> head);
/// The format of the file at `path` by its first bytes (read through the root-aware open, nothing
/// parsed or mapped), or nullptr when no format accepts them or the file cannot be read.
const Format* sniff_path(const std::string& path);

/// Adds a format after the built-in ones (lib/object/formats.cpp). For plug-ins and tests; a
/// format registered twice is kept once. Thread-safe.
void register_format(const Format* f);
/// The registered formats, built-in first.
std::vector<const Format*> formats();

}  // namespace stackprov::object
