// SPDX-License-Identifier: Apache-2.0
// Mach-O images behind the neutral object image (issue 34): our own checked reader of 64-bit Mach-O
// files and fat (universal) files -- load commands, LC_UUID, segments and sections, nlist symbols,
// the export trie, LC_FUNCTION_STARTS -- and the dSYM lookup by UUID; kMachoFormat is its registry
// entry (lib/object/formats.cpp). doc/macos.md says why this is not LIEF.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "object/object_image.hpp"

// Format: Apple's <mach-o/loader.h>, <mach-o/nlist.h>, <mach-o/fat.h> (xnu EXTERNAL_HEADERS/mach-o,
// cctools include/mach-o) for the structures and constants below; the export trie as dyld's
// MachOLoaded::trieWalk and LLVM's MachOObjectFile::exports read it.
//
// Error convention: every failure is SPROV_ERR_BAD_FORMAT (malformed), SPROV_ERR_TRUNCATED (a
// structure reaching past the bytes it lives in), SPROV_ERR_LIMIT (a count past the limits below),
// SPROV_ERR_NOT_FOUND (no slice of the asked architecture or UUID), SPROV_ERR_BUILD_ID_MISMATCH (a
// dSYM of another UUID), or the negative errno of an open; messages name the file, the offending
// load command or entry by index, and the value. Nothing throws but std::bad_alloc.
// Thread-safety: a MachoObject is immutable after open; its methods may run concurrently.

namespace stackprov::macho {

inline constexpr uint32_t kMhMagic64 = 0xfeedfacf;  ///< MH_MAGIC_64, as read little-endian
inline constexpr uint32_t kMhMagic32 = 0xfeedface;  ///< MH_MAGIC (32-bit: not supported)
inline constexpr uint32_t kFatMagic = 0xcafebabe;   ///< FAT_MAGIC, as read big-endian
inline constexpr uint32_t kFatMagic64 = 0xcafebabf; ///< FAT_MAGIC_64
inline constexpr uint32_t kCpuTypeX86_64 = 0x01000007;  ///< CPU_TYPE_X86 | CPU_ARCH_ABI64
inline constexpr uint32_t kCpuTypeArm64 = 0x0100000c;   ///< CPU_TYPE_ARM | CPU_ARCH_ABI64
inline constexpr uint32_t kMhDsym = 0xa;                ///< MH_DSYM: a dSYM's DWARF file
inline constexpr uint32_t kMhObject = 0x1;              ///< MH_OBJECT: a relocatable object (.o)

// Load commands (loader.h).
inline constexpr uint32_t kLcSymtab = 0x2;
inline constexpr uint32_t kLcSegment = 0x1;  ///< 32-bit: refused in a 64-bit file
inline constexpr uint32_t kLcSegment64 = 0x19;
inline constexpr uint32_t kLcUuid = 0x1b;
inline constexpr uint32_t kLcDyldInfo = 0x22;
inline constexpr uint32_t kLcDyldInfoOnly = 0x80000022;
inline constexpr uint32_t kLcFunctionStarts = 0x26;
inline constexpr uint32_t kLcDyldExportsTrie = 0x80000033;

// nlist n_type bits (nlist.h).
inline constexpr uint8_t kNStab = 0xe0;
inline constexpr uint8_t kNType = 0x0e;
inline constexpr uint8_t kNSect = 0x0e;
inline constexpr uint8_t kNExt = 0x01;

// Section flags (loader.h).
inline constexpr uint32_t kSectionTypeMask = 0xff;
inline constexpr uint32_t kSZerofill = 0x1, kSGbZerofill = 0xc, kSThreadLocalZerofill = 0x12;
inline constexpr uint32_t kSAttrPureInstructions = 0x80000000;
inline constexpr uint32_t kSAttrSomeInstructions = 0x400;

/// Limits on what a hostile file may declare (no real image comes close).
inline constexpr uint32_t kMaxFatArchs = 32;  ///< also keeps Java class files (0xcafebabe, version >= 45) out
inline constexpr uint32_t kMaxLoadCommands = 65536;
inline constexpr uint32_t kMaxSections = 65536;
inline constexpr uint32_t kMaxExportDepth = 128;     ///< nested trie nodes
inline constexpr size_t kMaxExportName = 4096;       ///< bytes of one exported name
inline constexpr uint64_t kMaxExportNameBytes = 64u << 20;  ///< bytes of all names spelled while walking a trie

/// One architecture's image in a file: a fat file's slice, or a thin file's whole (offset 0).
struct Slice {
  uint32_t cputype = 0, cpusubtype = 0;
  uint64_t offset = 0, size = 0;
  uint32_t align = 0;  ///< log2, from the fat header (0 for a thin file)
  Arch arch = Arch::kUnknown;
};

/// The slices of a file's bytes: a thin 64-bit Mach-O gives one slice {0, size}; a fat file each
/// fat_arch (FAT_MAGIC or FAT_MAGIC_64) checked: at most kMaxFatArchs, each inside the file, after
/// the header, not overlapping another. The slices' own headers are not read here. `name` is for
/// messages.
Result<std::vector<Slice>> read_slices(std::span<const uint8_t> bytes, const std::string& name);
/// The same for the file at `path` (read through the root-aware open).
Result<std::vector<Slice>> list_slices(const std::string& path);

/// A segment (LC_SEGMENT_64), its offsets relative to the slice.
struct Segment {
  std::string name;
  uint64_t vmaddr = 0, vmsize = 0, fileoff = 0, filesize = 0;
  uint32_t maxprot = 0, initprot = 0, nsects = 0, flags = 0;
};

/// A section (section_64), its offset relative to the slice (0: no bytes in the file, as a dSYM's
/// copies of the image's sections).
struct Section {
  std::string segname, sectname;
  uint64_t addr = 0, size = 0;
  uint32_t offset = 0, align = 0, reloff = 0, nreloc = 0, flags = 0;
  /// Whether the section's bytes are in the file: not zero-fill, size and offset not 0, and its
  /// segment has file bytes (a dSYM keeps the image's segments and sections without their bytes).
  bool has_bytes = false;
  bool is_code() const { return (flags & (kSAttrPureInstructions | kSAttrSomeInstructions)) != 0; }
};

/// A load command as found: its cmd, cmdsize and offset in the slice.
struct LoadCommand {
  uint32_t cmd = 0, size = 0;
  uint64_t offset = 0;
};

/// An nlist_64 entry other than a STABS one (n_type & N_STAB == 0), its name as stored (with the
/// leading underscore of C names).
struct NlistSymbol {
  std::string_view name;
  uint8_t type = 0, sect = 0;
  uint16_t desc = 0;
  uint64_t value = 0;
};

/// STABS types of the debug map a linker writes for -g objects (nlist.h / stab.h).
inline constexpr uint8_t kNSo = 0x64, kNOso = 0x66, kNFun = 0x24, kNStsym = 0x26;

/// A symbol of the debug map: a function (an N_FUN pair: its start, then its size in an N_FUN
/// without a name) or static data (N_STSYM, size 0), its name as stored, its link-time address.
struct DebugMapSymbol {
  std::string_view name;
  uint64_t addr = 0, size = 0;
  bool function = false;
};

/// One N_OSO object file of the debug map (the path and the mtime the linker saw) and the symbols
/// that follow it up to the unit's end (an N_SO without a name) or the next N_OSO, in file order
/// (what `dsymutil --dump-debug-map` lists: filename, timestamp, sym, binAddr, size). N_GSYM
/// (global data, whose address is the symbol table's) is not kept.
struct DebugMapObject {
  std::string_view path;
  uint64_t mtime = 0;
  std::vector<DebugMapSymbol> symbols;
};

/// An export-trie entry: the name as stored, the flags, and (not for re-exports) the address at
/// link time (the trie stores it relative to the image's base, the __TEXT segment's vmaddr).
struct ExportSymbol {
  std::string_view name;
  uint64_t flags = 0;
  uint64_t addr = 0;
  bool reexport = false;
};

/// The UUID as "XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX" (uppercase, as dwarfdump and macOS print it);
/// "" for an id that is not kMachoUuid.
std::string uuid_string(const ModuleId& id);
/// The inverse: the kMachoUuid identity of a UUID written 8-4-4-4-12 or as 32 hex digits, any
/// case. SPROV_ERR_INVALID_ARG naming the text and the form otherwise.
Result<ModuleId> uuid_from_string(std::string_view text);

/// The LC_UUID of the 64-bit Mach-O image whose header and load commands start `b` (a slice, or
/// the header as a live process maps it), by a walk of the load commands with every size checked;
/// empty when it has none or the header or commands are malformed (MachoObject::open says how).
ModuleId uuid_of_header(std::span<const uint8_t> b);

/// How a slice of a fat file is chosen: by architecture, by UUID, or (both empty) the host's
/// architecture's slice, else the first one.
struct SliceChoice {
  std::optional<Arch> arch;
  ModuleId uuid;
};

class MachoObject final : public object::ObjectImage {
 public:
  /// Opens and checks `path` (through the root-aware open, mapped read-only and guarded); for a fat
  /// file, the slice `choice` names (object::open: the host's architecture, else the first slice).
  static Result<std::shared_ptr<MachoObject>> open(const std::string& path, const SliceChoice& choice = {});
  /// The same for bytes held in memory (copied in).
  static Result<std::shared_ptr<MachoObject>> from_bytes(std::vector<uint8_t> bytes, std::string name,
                                                         const SliceChoice& choice = {});
  ~MachoObject() override;

  std::string_view format_name() const override { return "macho"; }
  const std::string& path() const override { return path_; }
  /// LC_UUID as kMachoUuid; empty when the image has none.
  const ModuleId& id() const override { return id_; }
  Arch arch() const override { return slice_.arch; }
  bool big_endian() const override { return false; }
  /// "SEGMENT,section" ("__TEXT,__unwind_info"); DWARF's standard names (".debug_info") answer
  /// the __DWARF segment's sections ("__debug_info", names cut at 16 bytes as the format stores
  /// them: ".debug_str_offsets" is "__debug_str_offs"). Nullopt for a section without file bytes.
  std::optional<object::SectionRef> section(std::string_view name) const override;
  /// The function symbols (below) by address: the one whose [addr, addr + size) holds `addr`.
  std::optional<object::Symbol> symbol_at(uint64_t addr) const override;
  /// Function symbols: defined nlist symbols (N_SECT, no STABS) in code sections, and the export
  /// trie's regular entries in code sections at addresses no nlist symbol names (a stripped image
  /// keeps only the nlist symbols something refers to; its exports stay in the trie). Names without the
  /// leading underscore Mach-O adds to C names (llvm-symbolizer prints "main" for "_main"; a C++
  /// "__Z..." becomes the "_Z..." the demangler takes). A symbol reaches to the next symbol, the
  /// next LC_FUNCTION_STARTS entry or its section's end, whichever comes first. One symbol per
  /// address: an external nlist symbol before a local one, then the first in the table, then an export.
  std::vector<object::Symbol> symbols() const override { return functions_; }
  /// The file-backed contents of the segments at link-time addresses.
  bool read_code(uint64_t vaddr, void* buf, size_t len) const override;
  /// For a mapping at `map_start` of the file's bytes from `map_offset` (an offset in the file
  /// opened: for a fat file, the slice's offset plus the segment's). An offset below the slice's
  /// (0 for a module list's load address, which is the mach header's) means the slice's start.
  uint64_t load_bias(uint64_t map_start, uint64_t map_offset) const override;
  /// "compact_unwind" (__TEXT,__unwind_info, aux __TEXT,__eh_frame) then "eh_frame"
  /// (__TEXT,__eh_frame, the FDEs of DWARF-mode functions), each when present.
  std::vector<object::UnwindTable> unwind_tables() const override;
  /// The slice's bytes (a fat file's other slices are other modules).
  std::span<const uint8_t> file_bytes() const override { return {data_, size_}; }
  const FileIdentity* file_identity() const override { return identity_.known() ? &identity_ : nullptr; }
  /// Segments with file bytes, offsets relative to the slice.
  std::vector<object::Segment> loaded_segments() const override;
  /// Sections with S_ATTR_PURE_INSTRUCTIONS or S_ATTR_SOME_INSTRUCTIONS.
  std::vector<object::CodeSection> code_sections() const override;
  bool file_changed() const override;
  const std::string& target_root() const override { return target_root_; }
  /// The dSYM beside the image, DIR/NAME.dSYM/Contents/Resources/DWARF/NAME, else in each of
  /// opts.debug_dirs (the dSYM search path: D/NAME.dSYM/..., under the target's root or the
  /// sysroot): the first one's slice whose UUID is this image's. A dSYM there of another build
  /// is passed over (the next place is tried); when none matches, SPROV_ERR_BUILD_ID_MISMATCH
  /// naming both UUIDs of the first such dSYM, or SPROV_ERR_NOT_FOUND naming the places
  /// searched (or the image has no UUID).
  Result<std::shared_ptr<const object::ObjectImage>> find_debug_file(
      const object::DebugFileOptions& opts, std::vector<object::DebugFileCandidate>* looked_at = nullptr) const override;

  /// The debug map's functions (N_FUN entries inside a code section), by address; an entry of size
  /// 0 (ld64.lld's first function of each arm64 object) reaches to the next entry or its section's
  /// end; an entry overlapping an earlier one is left out.
  std::vector<object::DebugMapRange> debug_map_ranges() const override;
  std::string debug_map_object_path(uint32_t object) const override;
  /// The N_OSO object `object`: an absolute path under the target's root (under_root_of), a relative
  /// one against the image's directory where relative names stay in its root (ld64 writes
  /// absolute ones); an archive member ("lib.a(member.o)") is not read (SPROV_ERR_NOT_FOUND
  /// saying so). Checked: an MH_OBJECT (SPROV_ERR_BAD_FORMAT otherwise), a slice of the image's
  /// architecture, and, when the map records one (ld64.lld writes 0), its mtime equal to the
  /// map's: another build is SPROV_ERR_BUILD_ID_MISMATCH naming both values (dsymutil warns and
  /// skips it). Each map symbol's address is the object's defined nlist symbol of that name (an
  /// external one first).
  Result<object::DebugMapObjectFile> open_debug_map_object(uint32_t object) const override;

  // ---- Mach-O-specific
  const Slice& slice() const { return slice_; }
  /// Every slice of the file this image was opened from (one for a thin file).
  const std::vector<Slice>& slices() const { return slices_; }
  uint32_t filetype() const { return filetype_; }
  uint32_t header_flags() const { return flags_; }
  const std::vector<LoadCommand>& load_commands() const { return commands_; }
  const std::vector<Segment>& segments() const { return segments_; }
  const std::vector<Section>& sections() const { return sections_; }
  const std::vector<NlistSymbol>& nlist_symbols() const { return nlist_; }
  /// The debug map (empty without one, e.g. an image whose STABS were stripped or a dSYM). A
  /// malformed STABS entry (its name outside the string table) leaves it empty and says why in
  /// debug_map_error(): the image's own symbols do not depend on it.
  const std::vector<DebugMapObject>& debug_map() const { return debug_map_; }
  const std::string& debug_map_error() const { return debug_map_error_; }
  const std::vector<ExportSymbol>& exports() const { return exports_; }
  /// LC_FUNCTION_STARTS decoded: link-time addresses, ascending, each inside __TEXT.
  const std::vector<uint64_t>& function_starts() const { return function_starts_; }
  /// The __TEXT segment's vmaddr (the image's base: the export trie's and function starts' origin).
  uint64_t text_vmaddr() const { return text_vmaddr_; }
  /// A section by segment and section name (each as stored, at most 16 bytes).
  const Section* find_section(std::string_view segname, std::string_view sectname) const;

 private:
  MachoObject() = default;
  Status select_slice(const SliceChoice& choice);
  Status parse();
  Status parse_segment(const LoadCommand& lc, uint32_t index);
  Status parse_symtab(const uint8_t* lc, uint32_t index);
  Status parse_exports(uint64_t off, uint64_t size, uint32_t index);
  Status parse_function_starts(uint64_t off, uint64_t size, uint32_t index);
  void build_functions();

  std::string path_, target_root_;
  const uint8_t* file_ = nullptr;  // the whole file
  size_t file_size_ = 0;
  const uint8_t* data_ = nullptr;  // the slice
  size_t size_ = 0;
  void* map_ = nullptr;
  std::vector<uint8_t> owned_;
  FileIdentity identity_;
  ModuleId id_;
  Slice slice_;
  std::vector<Slice> slices_;
  uint32_t filetype_ = 0, flags_ = 0;
  uint64_t text_vmaddr_ = 0, text_end_ = 0;
  std::vector<LoadCommand> commands_;
  std::vector<Segment> segments_;
  std::vector<Section> sections_;
  std::vector<NlistSymbol> nlist_;
  std::vector<DebugMapObject> debug_map_;
  std::string debug_map_error_;
  std::vector<ExportSymbol> exports_;
  std::deque<std::string> export_names_;  // stable storage for exports_' names
  std::vector<uint64_t> function_starts_;
  std::vector<object::Symbol> functions_;
};

/// The registry entry: sniffs MH_MAGIC_64, or a fat header with 1 to kMaxFatArchs slices.
extern const object::Format kMachoFormat;

}  // namespace stackprov::macho
