// SPDX-License-Identifier: Apache-2.0
// PE/COFF images behind the neutral object image (issue 33): our own checked reader of the headers,
// sections (long names through the COFF string table), data directories and the debug directory
// (CodeView RSDS -> PDB GUID + age); kPeFormat is its registry entry (lib/object/formats.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/once.hpp"
#include "object/object_image.hpp"

namespace stackprov::pe {

inline constexpr uint16_t kMachineAmd64 = 0x8664;
inline constexpr uint16_t kMachineArm64 = 0xaa64;
inline constexpr uint32_t kDirExport = 0;     ///< data directory of the export directory (.edata)
inline constexpr uint32_t kDirException = 3;  ///< data directory of .pdata (RUNTIME_FUNCTION entries)
inline constexpr uint32_t kDirDebug = 6;      ///< data directory of the debug directory
inline constexpr uint32_t kDebugTypeCodeView = 2;
inline constexpr uint32_t kScnCode = 0x20;           ///< IMAGE_SCN_CNT_CODE
inline constexpr uint32_t kScnExecute = 0x20000000;  ///< IMAGE_SCN_MEM_EXECUTE
/// COFF symbol storage classes (PE/COFF specification, "Storage Class").
inline constexpr uint8_t kClassExternal = 2;
inline constexpr uint8_t kClassStatic = 3;
inline constexpr uint8_t kClassLabel = 6;
inline constexpr uint8_t kClassFunction = 101;  ///< .bf/.ef records
inline constexpr uint8_t kClassFile = 103;
inline constexpr uint16_t kDtypeFunction = 2;   ///< complex type (Type >> 4) of a function
/// Limits on what a hostile file may declare (PE/COFF allows more, no real image comes close).
inline constexpr uint32_t kMaxSections = 4096;
inline constexpr uint32_t kMaxDebugEntries = 64;
inline constexpr uint32_t kMaxExports = 1u << 16;  ///< export address table entries and names

struct Section {
  std::string name;  ///< long names ("/4") resolved through the COFF string table
  uint32_t rva = 0, vsize = 0;
  uint32_t raw_offset = 0, raw_size = 0;
  uint32_t characteristics = 0;
};

struct DataDirectory {
  uint32_t rva = 0, size = 0;
};

/// One IMAGE_DEBUG_DIRECTORY entry (every entry is kept, not only the first).
struct DebugEntry {
  uint32_t type = 0;
  uint32_t size = 0;
  uint32_t rva = 0;
  uint32_t file_offset = 0;
};

/// One COFF symbol-table record (its auxiliary records skipped; `index` is its position counting
/// them), as the image stores it. `name` is NUL-terminated and lives as long as the image.
struct CoffSymbol {
  std::string_view name;
  uint32_t value = 0;    ///< section-relative for a symbol of a section
  int16_t section = 0;   ///< 1-based section number; 0 undefined, -1 absolute, -2 debug
  uint16_t type = 0;     ///< base type | complex type << 4
  uint8_t storage_class = 0;
  uint8_t aux_count = 0;
  uint32_t index = 0;
  /// A section definition (a STATIC symbol with auxiliary records that is not a function).
  bool section_definition() const {
    return storage_class == kClassStatic && aux_count != 0 && (type >> 4) != kDtypeFunction;
  }
};

/// One export address table entry: its RVA and its name from the name pointer table ("" for an
/// export by ordinal only); `forwarder` when the RVA lies inside the export directory (a
/// "DLL.name" string, not code).
struct Export {
  uint32_t rva = 0;
  uint32_t ordinal = 0;  ///< biased by the directory's ordinal base
  std::string_view name;
  bool forwarder = false;
};

/// A CodeView "RSDS" record: the PDB's GUID (as stored: the first three fields little-endian), its
/// age and the path the linker wrote.
struct CodeView {
  uint8_t guid[16] = {};
  uint32_t age = 0;
  std::string pdb_path;
};

/// The symbol-server key of a PDB identity: the GUID as 32 uppercase hex digits in the usual
/// (Data1-Data2-Data3-Data4) order, then the age in uppercase hex, e.g.
/// 43E4EBB6038D8C074C4C44205044422E1. Empty for an id that is not kPdbGuidAge.
std::string symbol_server_key(const ModuleId& id);
/// The inverse: the kPdbGuidAge identity of a symbol-server key (32 hex digits of GUID, then 1 to
/// 8 of age, any case). SPROV_ERR_INVALID_ARG naming the key and the form otherwise.
Result<ModuleId> pdb_id_from_key(std::string_view key);
/// The code id of an image, the key Windows symbol stores file *images* under (NAME/KEY/NAME):
/// kPeCodeId, TimeDateStamp then SizeOfImage, u32 LE each. The identity of a PE without a CodeView
/// record. Weaker than kPdbGuidAge: a link time (or, for reproducible links, a hash) and a size.
ModuleId code_id(uint32_t timestamp, uint32_t size_of_image);
/// The key of a code id: TimeDateStamp as 8 uppercase hex digits, then SizeOfImage in lowercase hex
/// without leading zeros (5F1A2B3C1a000), as symbol stores write it. Empty for another kind.
std::string code_id_key(const ModuleId& id);
/// The inverse: the kPeCodeId identity of a code id key (8 hex digits of TimeDateStamp, then 1 to 8
/// of SizeOfImage, any case). SPROV_ERR_INVALID_ARG naming the key and the form otherwise.
Result<ModuleId> code_id_from_key(std::string_view key);
/// How notes and messages name a PE identity: the symbol-server key of a PDB GUID+age
/// (4AE6F4DA...1), "code-id KEY" for a code id.
std::string identity_key(const ModuleId& id);
/// The identity of a CodeView record: kPdbGuidAge, the 16 GUID bytes as stored then the age (u32 LE).
ModuleId pdb_id(const CodeView& cv);

class PeObject final : public object::ObjectImage {
 public:
  /// Opens and checks `path` (through the root-aware open, mapped read-only and guarded).
  static Result<std::shared_ptr<PeObject>> open(const std::string& path);
  /// The same for bytes held in memory (copied in).
  static Result<std::shared_ptr<PeObject>> from_bytes(std::vector<uint8_t> bytes, std::string name);
  ~PeObject() override;

  std::string_view format_name() const override { return "pe"; }
  const std::string& path() const override { return path_; }
  /// PDB GUID+age from the first CodeView RSDS debug entry; without one (mingw without --build-id
  /// writes no debug directory; wine's DLLs have none) the code id (code_id: TimeDateStamp +
  /// SizeOfImage).
  const ModuleId& id() const override { return id_; }
  Arch arch() const override { return arch_; }
  bool big_endian() const override { return false; }
  uint8_t addr_size() const override { return pe32plus_ ? 8 : 4; }
  /// A section by its (resolved) name: DWARF's ".debug_info" is found under its long name.
  std::optional<object::SectionRef> section(std::string_view name) const override;
  /// The function symbols: COFF symbols (mingw's images carry them; lld-link's and MSVC's do not)
  /// of a code section with storage class EXTERNAL or STATIC, not section definitions, one per
  /// address (a function type first, then EXTERNAL, then table order), each reaching to the next
  /// or its section's end; without COFF symbols the named exports of code sections the same way.
  /// Read on first use.
  std::optional<object::Symbol> symbol_at(uint64_t addr) const override;
  std::vector<object::Symbol> symbols() const override;
  /// llvm-symbolizer-14's view (SymbolizableObjectFile over COFFObjectFile): every COFF symbol of
  /// a section but FILE records and section definitions (labels and data too), sized as
  /// computeSymbolSizes does (to the next symbol value of its section, the last to the section's
  /// end); without any COFF symbol record the exports, each of size 0 (llvm-14 sizes them so).
  std::vector<object::Symbol> symbolizer_symbols() const override;
  /// Link-time addresses are image base + RVA (what DWARF in a PE and llvm-symbolizer use).
  bool read_code(uint64_t vaddr, void* buf, size_t len) const override;
  /// For an image loaded at `map_start` whose first mapped byte is RVA `map_offset` (0 for a
  /// module base, as minidumps and module lists give it).
  uint64_t load_bias(uint64_t map_start, uint64_t map_offset) const override {
    return map_start - map_offset - image_base_;
  }
  /// "pdata": the exception directory's RUNTIME_FUNCTION table (its UNWIND_INFO lives anywhere in
  /// the image: the unwind source reads it through read_code).
  std::vector<object::UnwindTable> unwind_tables() const override;
  std::span<const uint8_t> file_bytes() const override { return {data_, size_}; }
  const FileIdentity* file_identity() const override { return identity_.known() ? &identity_ : nullptr; }
  /// The sections' file contents at image base + RVA.
  std::vector<object::Segment> loaded_segments() const override;
  /// Sections with IMAGE_SCN_CNT_CODE or IMAGE_SCN_MEM_EXECUTE.
  std::vector<object::CodeSection> code_sections() const override;
  bool file_changed() const override;
  const std::string& target_root() const override { return target_root_; }

  // ---- PE-specific
  uint16_t machine() const { return machine_; }
  uint64_t image_base() const { return image_base_; }
  uint32_t size_of_image() const { return size_of_image_; }
  uint32_t timestamp() const { return timestamp_; }
  const std::vector<Section>& sections() const { return sections_; }
  DataDirectory directory(uint32_t i) const { return i < dirs_.size() ? dirs_[i] : DataDirectory{}; }
  const std::vector<DebugEntry>& debug_entries() const { return debug_; }
  const std::optional<CodeView>& codeview() const { return codeview_; }
  /// The COFF symbol table (PointerToSymbolTable, NumberOfSymbols; long names through the string
  /// table); records whose name lies outside the string table are left out. Read on first use.
  const std::vector<CoffSymbol>& coff_symbols() const;
  /// The export directory's entries, in export address table order; empty when the image has
  /// none or it is malformed. Read on first use.
  const std::vector<Export>& exports() const;
  /// The file bytes of [rva, rva + len) when they lie in one section's raw data (or the headers),
  /// else an empty span.
  std::span<const uint8_t> at_rva(uint32_t rva, uint32_t len) const;

 private:
  PeObject() = default;
  Status parse();
  void load_coff_symbols() const;
  void load_exports() const;
  void load_functions() const;
  /// The NUL-terminated string at `rva` inside one section's raw data; empty when it is not.
  std::string_view string_at_rva(uint32_t rva) const;
  std::string path_, target_root_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // mmap base when opened from a file
  std::vector<uint8_t> owned_;  // bytes of from_bytes()
  FileIdentity identity_;
  ModuleId id_;
  Arch arch_ = Arch::kUnknown;
  uint16_t machine_ = 0;
  bool pe32plus_ = true;
  uint64_t image_base_ = 0;
  uint32_t size_of_image_ = 0, size_of_headers_ = 0, timestamp_ = 0;
  std::vector<Section> sections_;
  std::vector<DataDirectory> dirs_;
  std::vector<DebugEntry> debug_;
  std::optional<CodeView> codeview_;
  uint32_t symtab_off_ = 0, nsyms_ = 0;
  uint64_t strtab_at_ = 0, strtab_size_ = 0;  ///< the COFF string table (0 bytes: none)
  mutable stackprov::OnceFlag coff_once_, exports_once_, functions_once_;
  mutable std::vector<CoffSymbol> coff_;
  mutable std::vector<char> short_names_;  ///< NUL-terminated copies of 8-byte names
  mutable std::vector<Export> exports_;
  mutable std::vector<object::Symbol> functions_;  ///< symbols(), sorted, sized
};

/// The registry entry: sniffs "MZ" with a PE header offset inside the first bytes' reach.
extern const object::Format kPeFormat;

}  // namespace stackprov::pe
