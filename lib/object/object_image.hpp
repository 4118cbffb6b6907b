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

/// File contents loaded at link-time addresses: [vaddr, vaddr + file_size) holds the file's bytes
/// [offset, offset + file_size) (ELF PT_LOAD, PE sections, Mach-O segments).
struct Segment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t file_size = 0;
};

/// An executable section as the file's headers give it: link-time range [addr, end) and its bytes
/// (nullopt when unreadable; their size may differ from end - addr for a section the format stores
/// compressed).
struct CodeSection {
  uint64_t addr = 0;
  uint64_t end = 0;
  std::optional<SectionRef> bytes;
};

/// Where separate debug files are searched (build-id paths, debug links; a format's own lookups,
/// such as a dSYM bundle or a PDB path, take what applies to them).
struct DebugFileOptions {
  std::vector<std::string> debug_dirs{"/usr/lib/debug"};
  std::string sysroot;  ///< prefixed to debug dirs and the binary's dir when non-empty
};

/// One place a separate debug file was looked for, and what was there: the answer to "why has
/// this module no DWARF" (`stackprov symbolize --verbose`). Gathered only when a caller asks.
struct DebugFileCandidate {
  enum class Outcome { kUsed, kMissing, kIdentityMismatch, kCrcMismatch, kUnreadable, kSelf };
  std::string rule;    ///< the format's rule that named the path (ELF: "build-id", "debuglink")
  std::string path;
  Outcome outcome = Outcome::kMissing;
  std::string reason;  ///< names the values (both build-ids, both CRCs, the open error); "" for kUsed
};

/// A supplementary debug file that a debug file's DWARF refers to (DWARF 5 section 7.3.6; dwz's
/// .gnu_debugaltlink): its name (absolute, or relative to the referring file's directory) and the
/// identity it must have.
struct SupplementaryLink {
  std::string name;
  ModuleId id;
};

class ObjectImage;

/// A range of an image's code whose DWARF is in an object file the linker read (a Mach-O debug
/// map's N_FUN entry, for an image linked from `-g` objects without a dSYM): [addr, addr + size) at
/// link time is map symbol `symbol` of map object `object` (ObjectImage::open_debug_map_object).
struct DebugMapRange {
  uint64_t addr = 0, size = 0;
  uint32_t object = 0, symbol = 0;
};

/// A debug map's object file, opened and checked, and where each of its map symbols is in it
/// (the same function's address in the object's own address space; kNoAddress when the object
/// defines no symbol of that name).
struct DebugMapObjectFile {
  static constexpr uint64_t kNoAddress = ~uint64_t{0};
  std::shared_ptr<const ObjectImage> image;
  std::vector<uint64_t> symbol_addrs;
};

/// One module file or in-memory image, of any format. Immutable after open; thread-safe for
/// concurrent readers. Implementations: elf::ElfObject (lib/elf), and test formats.
///
/// DWARF sections are asked for by the DWARF standard's names (".debug_info", ".debug_line",
/// ".debug_info.dwo", ...: DWARF 5 section 7 and appendix G), whatever the container calls them:
/// a format that names them otherwise (Mach-O "__DWARF,__debug_info", a PE file's long names
/// through its string table) translates in section(). The other sections are asked for by the
/// format's own names.
///
/// The resolvers look a module's sections, segments and tables up once, when they first see it,
/// and keep the pointers: no virtual call per address.
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
  /// Bytes in an address of the file's class (ELF: 4 for ELFCLASS32, also an x32 file of arch
  /// x86_64); by default the architecture's.
  virtual uint8_t addr_size() const { return arch() == Arch::kMips32 ? 4 : 8; }
  /// Section by the format's name; nullopt when absent or unreadable.
  virtual std::optional<SectionRef> section(std::string_view name) const = 0;
  /// The symbol covering link-time `addr`, if any (the format's own tables: .symtab then .dynsym,
  /// COFF symbols, LC_SYMTAB, ...).
  virtual std::optional<Symbol> symbol_at(uint64_t addr) const = 0;
  /// The function symbols, sorted by address (a bundle's symbol-table ranges).
  virtual std::vector<Symbol> symbols() const = 0;
  /// The symbols llvm-symbolizer-14 names an address of another format than ELF by
  /// (SymbolizableObjectFile: its filter and sizes, size 0 reaching to the next symbol), for the
  /// llvm-compatible naming; sorted or not. By default symbols(). ELF's is elf::LlvmSymbolTable.
  virtual std::vector<Symbol> symbolizer_symbols() const { return symbols(); }
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

  /// The file contents loaded at link-time addresses, in the file's order.
  virtual std::vector<Segment> loaded_segments() const { return {}; }
  /// The executable sections, in the file's header order (empty ones included).
  virtual std::vector<CodeSection> code_sections() const { return {}; }
  /// Whether the file has a section table (an ELF file whose section headers were stripped has
  /// none: its sections are synthesised from the program headers).
  virtual bool has_section_table() const { return true; }
  /// Whether the file shrank while mapped: its bytes past the new end read as zeros, so what was
  /// read from them is not the file's (core/mapped_file.hpp).
  virtual bool file_changed() const { return false; }
  /// The root of the process whose file this is ("/proc/PID/root") when it was opened through
  /// another process's root, else "": paths the file names (debug links, supplementary files,
  /// split units) are looked up under that root (core/open_file.hpp under_root_of).
  virtual const std::string& target_root() const;
  /// The module's separate debug file, found by the format's own rules (ELF: build-id path, then
  /// .gnu_debuglink with its CRC; later a Mach-O dSYM, a PE file's PDB), its identity checked.
  /// SPROV_ERR_NOT_FOUND naming the places searched when there is none (the default: the format
  /// has no separate debug files). `looked_at`, when given, receives every place looked at in
  /// order, with what was found there (nothing is gathered without it).
  virtual Result<std::shared_ptr<const ObjectImage>> find_debug_file(
      const DebugFileOptions& opts, std::vector<DebugFileCandidate>* looked_at = nullptr) const;
  /// The supplementary debug file this file's DWARF refers to (ELF: .gnu_debugaltlink); nullopt
  /// when it names none, an error (its message says what is wrong) for a malformed or
  /// unidentified link.
  virtual Result<std::optional<SupplementaryLink>> supplementary_link() const { return std::optional<SupplementaryLink>{}; }
  /// The image's debug map (Mach-O: the N_OSO objects' functions), sorted by address, disjoint;
  /// empty for a format or an image without one (the default).
  virtual std::vector<DebugMapRange> debug_map_ranges() const { return {}; }
  /// The path of map object `object` as the image names it ("" when there is no such object).
  virtual std::string debug_map_object_path(uint32_t /*object*/) const { return {}; }
  /// Map object `object` opened as the target sees its path and checked (the format's rules);
  /// SPROV_ERR_NOT_FOUND (the default: no debug map), SPROV_ERR_BUILD_ID_MISMATCH (another
  /// build of the object: the values named), or the open's error.
  virtual Result<DebugMapObjectFile> open_debug_map_object(uint32_t object) const;
};

/// A format the registry can open: `sniff` looks at the file's first bytes (at most
/// kSniffBytes; fewer for a short file) and says whether they are this format's.
struct Format {
  std::string_view name;
  bool (*sniff)(std::span<const uint8_t> head);
  Result<std::shared_ptr<ObjectImage>> (*open)(const std::string& path);
  Result<std::shared_ptr<ObjectImage>> (*from_bytes)(std::vector<uint8_t> bytes, std::string name);
  /// For files that hold several images (a fat Mach-O file's slices): the one of architecture
  /// `arch` and, when `id` is not empty, of that identity. nullptr: the format's files hold one.
  Result<std::shared_ptr<ObjectImage>> (*open_matching)(const std::string& path, Arch arch, const ModuleId& id);
};
inline constexpr size_t kSniffBytes = 64;

/// Opens `path` with the first registered format whose sniff accepts its first bytes. A file no
/// format accepts, or one that cannot be opened, goes to the first built-in format (ELF): its
/// parser's error says what it expected, as it always did ("PATH: not an ELF file (bad magic)",
/// "PATH: open: No such file or directory").
Result<std::shared_ptr<ObjectImage>> open(const std::string& path);
/// The image in `path` that a target of architecture `arch` maps (and, when `id` is not empty, of
/// that identity): open(), unless the file's format holds several images (a fat Mach-O file), whose
/// open_matching then picks the slice (a fat file without it: its error names the architectures it
/// has). The caller still checks the image's arch and identity (a one-image file is what it is).
Result<std::shared_ptr<ObjectImage>> open_matching(const std::string& path, Arch arch, const ModuleId& id);
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
