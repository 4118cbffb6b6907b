// SPDX-License-Identifier: Apache-2.0
// PdbFile (issue 33): our own checked reader of Microsoft PDB files (MSF 7.0 container, PDB info
// stream, DBI, module streams with C13 lines and inlinee lines, IPI/TPI names, /names, publics),
// and the lookup of an address as llvm-symbolizer-14 answers it from a PDB.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::pdb {

/// Limits on what a hostile file may declare (no real PDB comes close).
inline constexpr uint32_t kMaxStreams = 1u << 20;
inline constexpr uint32_t kMaxModules = 1u << 20;
inline constexpr uint32_t kMaxInlineDepth = 256;

/// The PDB's identity as a ModuleId of kind kPdbGuidAge: the 16 GUID bytes as stored (the first
/// three fields little-endian, the layout of a PE's CodeView RSDS record) then the age (u32 LE).
ModuleId guid_age_id(const uint8_t guid[16], uint32_t age);
/// The symbol-server key of such an id: the GUID's 32 uppercase hex digits in Data1-Data2-Data3-
/// Data4 order, then the age in uppercase hex (as pe::symbol_server_key); "" for another kind.
std::string guid_age_key(const ModuleId& id);

/// One DBI module (a compiland): its names and where its symbols and C13 lines are.
struct ModuleInfo {
  std::string name, obj_name;
  uint16_t stream = 0xffff;  ///< 0xffff: the module has no stream
  uint32_t sym_bytes = 0, c11_bytes = 0, c13_bytes = 0;
};

/// One section contribution (DBI): [offset, offset + size) of section `section` (1-based) from
/// module `module`.
struct SectionContrib {
  uint16_t section = 0;
  int32_t offset = 0, size = 0;
  uint16_t module = 0;
};

/// A procedure record of a module stream (S_GPROC32, S_LPROC32 and their _ID forms).
struct Proc {
  uint16_t kind = 0;
  uint32_t record = 0;  ///< offset of the record in the module stream
  uint32_t end = 0;     ///< offset of its S_END
  uint32_t code_offset = 0, code_size = 0;
  uint16_t segment = 0;
  std::string name;
};

/// An S_PUB32 record of the symbol record stream.
struct Public {
  uint32_t flags = 0, offset = 0;
  uint16_t segment = 0;
  std::string name;
};

/// One frame of an answer, llvm's DILineInfo: function "" when none is known, file "" when no
/// line covers the address (llvm prints both as "??"), line and column 0 then.
struct Frame {
  std::string function;
  std::string file;
  uint32_t line = 0, column = 0;
  bool has_file = false;
};

/// What llvm-symbolizer-14 says of an address from the PDB (PDBContext::getInliningInfoForAddress):
/// the inline frames innermost first, then the physical frame, whose name is the public symbol's
/// (linkage name) when it starts where the function does, else the function's.
struct Answer {
  std::vector<Frame> frames;
  std::string short_name;  ///< the procedure's own name (llvm --functions=short), "" without one
  bool has_proc = false;   ///< an S_*PROC32 covers the address
  uint64_t proc_start = 0; ///< its address (load address + RVA) when has_proc
};

/// An opened PDB. open() maps the file and checks the MSF container, the PDB info stream and the
/// DBI stream's module list, section contributions and section headers; module streams, publics,
/// /names and the IPI/TPI records are read and checked on first use. Errors name the file, the
/// stream and the offending value (SPROV_ERR_BAD_FORMAT, SPROV_ERR_TRUNCATED, SPROV_ERR_LIMIT).
/// Thread-safe: lookups serialise on one mutex (the lazily read parts).
class PdbFile {
 public:
  /// Opens `path` through the root-aware open (core/open_file.hpp), mapped read-only and guarded.
  static Result<std::shared_ptr<PdbFile>> open(const std::string& path);
  /// The same for bytes held in memory (copied in); `name` names them in errors.
  static Result<std::shared_ptr<PdbFile>> from_bytes(std::vector<uint8_t> bytes, std::string name);
  ~PdbFile();
  PdbFile(const PdbFile&) = delete;
  PdbFile& operator=(const PdbFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* guid() const { return guid_; }
  uint32_t age() const { return age_; }
  /// guid_age_id(guid(), age()): the PDB info stream's GUID and age (the DBI stream's age is not used).
  ModuleId id() const { return guid_age_id(guid_, age_); }
  uint32_t block_size() const { return block_size_; }
  uint32_t stream_count() const { return static_cast<uint32_t>(stream_sizes_.size()); }
  const std::vector<ModuleInfo>& modules() const { return modules_; }
  const std::vector<SectionContrib>& section_contribs() const { return contribs_; }
  /// RVAs of the image's sections (the DBI optional debug header's section-header stream).
  const std::vector<uint32_t>& section_rvas() const { return section_rvas_; }
  /// Whether the mapped file shrank while mapped (its bytes past the new end read as zeros).
  bool file_changed() const;

  /// The procedures of module `m` in stream order; an error names a malformed module stream.
  Result<std::vector<Proc>> procs(size_t m);
  /// The public symbols in the publics stream's address-map order.
  Result<std::vector<Public>> publics();

  /// llvm-symbolizer-14's answer for the address `va` of an image loaded at `load_address` (the
  /// PE's image base for link-time addresses). A malformed part needed on the way is an error
  /// naming it.
  Result<Answer> lookup(uint64_t va, uint64_t load_address);

  struct ModuleData;  // a module stream read on first use (pdb_file.cpp)
  struct Names;       // /names, IPI, TPI, publics read on first use

 private:
  PdbFile();
  Status parse();
  Result<std::vector<uint8_t>> read_stream(uint32_t index, const char* what) const;
  Result<ModuleData*> module_data(size_t m);
  Status load_names();
  Status load_publics();
  Status load_types();
  std::string inlinee_name(uint32_t id);
  std::string file_name(const ModuleData& md, uint32_t checksum_offset, bool* ok);
  uint32_t rva_of(uint32_t sect, uint32_t off) const;
  /// The module whose section contribution holds `rva` (llvm's half-open intervals).
  bool module_of(uint64_t rva, uint16_t* m) const;
  void build_line_table(ModuleData* md) const;
  bool line_at(ModuleData* md, uint64_t rva, Frame* out);
  void inline_frames(ModuleData* md, const Proc& func, uint32_t code_off, std::vector<Frame>* out);
  bool inlinee_entry(const ModuleData& md, uint32_t inlinee, uint32_t* file_id, uint32_t* line) const;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;
  std::vector<uint8_t> owned_;
  uint32_t block_size_ = 0, num_blocks_ = 0;
  std::vector<uint32_t> stream_sizes_;
  std::vector<std::vector<uint32_t>> stream_blocks_;
  uint8_t guid_[16] = {};
  uint32_t age_ = 0;
  uint32_t names_stream_ = 0xffffffff;  ///< the named stream "/names"
  uint16_t publics_stream_ = 0xffff, symrec_stream_ = 0xffff;
  std::vector<ModuleInfo> modules_;
  std::vector<SectionContrib> contribs_;
  std::vector<uint32_t> section_rvas_;
  /// llvm's AddrToModuleIndex: half-open RVA intervals [begin, end) -> module, sorted by begin.
  struct ModuleRange {
    uint64_t begin, end;
    uint16_t module;
  };
  std::vector<ModuleRange> module_ranges_;

  std::mutex mu_;
  std::vector<std::unique_ptr<ModuleData>> module_data_;
  std::unique_ptr<Names> names_;
};

}  // namespace stackprov::pdb
