// SPDX-License-Identifier: Apache-2.0
// DWARF resolver: function, file:line:column and the inline chain of a module address, with symbol-table fallback and provenance.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/once.hpp"
#include "dwarf/dwarf_index.hpp"
#include "dwarf/split_dwarf.hpp"
#include "elf/elf_symbols.hpp"
#include "object/object_image.hpp"
#include "symbolize/debuginfod_client.hpp"
#include "symbolize/resolve_attempt.hpp"

namespace stackprov::symbolize {

/// One frame of a resolved address, llvm-symbolizer's DILineInfo.
struct ResolvedFrame {
  std::string function;      ///< linkage-preferred display name (demangled when asked); empty when unknown
  std::string short_function;  ///< DW_AT_name (llvm --functions=short); empty when unknown
  std::string linkage_name;  ///< raw linkage name (DWARF or symbol); empty when unknown
  std::string file;          ///< empty when unknown
  uint32_t line = 0;
  uint32_t column = 0;
  uint32_t discriminator = 0;
  std::string start_file;    ///< declaration file of the function
  bool start_file_implicit_const = false;  ///< see dwarf::DwarfFrame
  uint32_t start_line = 0;   ///< declaration line of the function
  bool has_start_address = false;
  uint64_t start_address = 0;
};

/// Values equal enum sprov_resolver.
enum class ResolvedBy : int32_t { kNone = 0, kSymtab = 1, kDynsym = 2, kDwarf = 3, kDebuginfod = 4, kBundle = 5,
                                    kGopclntab = 6, kPerfMap = 7, kPdb = 8 };

struct Resolution {
  std::vector<ResolvedFrame> frames;  ///< innermost first; the last is the physical function
  ResolvedBy resolver = ResolvedBy::kNone;
  std::string source;                 ///< file that answered (debuginfod: the URL it came from; bundle: "sha256:<hex>")
  ModuleId source_build_id;            ///< that file's build-id (empty when it has none; bundle: the module's)
  std::string provenance;             ///< "dwarf", "debuginfod+dwarf", "bundle", "symtab", "minidebuginfo+symtab", "dynsym", "none"
  std::string bundle_digest;          ///< "sha256:<hex>" of the bundle that answered (resolver kBundle), else ""
  /// The physical function's name and start come from a symbol table (llvm's
  /// symbol-table override); bundles: always (they keep the physical name).
  bool symbol_named = false;
  /// The lines are a PDB's (resolver kPdb, or a bundle module built from a PDB): without inlines
  /// llvm answers the physical frame alone, with its line table's line.
  bool pdb_lines = false;
  /// What that override replaced in the physical frame, so that it can be undone
  /// (llvm's --functions=short and =none never read the symbol table).
  struct BeforeSymbol {
    bool has_start_address = false;
    uint64_t start_address = 0;
    bool file_from_symbol = false;  ///< FileName was the STT_FILE before the symbol
    bool dwarf = false;             ///< DWARF described the address (else the name is the symbol's alone)
  } before_symbol;
};

/// Which symbol tables may name an address that DWARF does not describe.
enum class SymtabPolicy {
  /// The module's .symtab (or MiniDebugInfo's), else its .dynsym, then the
  /// separate debug file's .symtab (a superset; what eu-stack and gdb use).
  kWithDebugFile,
  /// llvm-symbolizer-14 exactly (elf::LlvmSymbolTable): the module's .symtab,
  /// else its .dynsym, with llvm's choice among symbols at one address and its
  /// nearest-preceding-symbol rule; never the debug file's .symtab nor
  /// MiniDebugInfo (llvm prints "??" there).
  kModuleOnly,
  /// kModuleOnly, then, for an address that neither DWARF nor the module's tables
  /// describe, llvm-symbolizer-14's answer for the separate debug file itself
  /// (`--obj=<debug file>`: its .symtab, the same choice and rules): the local
  /// symbols a stripped module lost, e.g. libc's `__restore_rt`. What symbol bundles
  /// carry (doc/bundles.md, "Symbol-table ranges").
  kModuleThenDebugFile,
};

struct DwarfResolverOptions {
  bool demangle = true;
  object::DebugFileOptions debug;
  /// Ask debuginfod (DEBUGINFOD_URLS) when no local debug file is found.
  bool debuginfod = true;
  /// Read DWARF at all; false: symbol tables only (resolver policy without "dwarf").
  bool dwarf = true;
  /// Keep, per module, every file and server the DWARF step looked at and why each did not
  /// serve (attempts()); off, the search gathers nothing.
  bool record_attempts = false;
};

/// How a module's DWARF was found (for diagnostics and tests).
struct ModuleReport {
  std::string dwarf_file;      ///< file whose .debug_info is indexed ("" without DWARF)
  std::string debuginfod_url;  ///< set when the debug file came from debuginfod
  std::string alt_file;        ///< dwz supplementary file ("" when none)
  std::string minidebuginfo;   ///< "" or "yes" when .gnu_debugdata gave the symbol table
  std::string error;           ///< why no DWARF was found ("" when found)
  size_t skeleton_units = 0, dwo_loaded = 0, dwo_missing = 0;
};

/// Resolves link-time addresses of modules. DWARF comes from the module
/// itself or from its separate debug file (ObjectImage::find_debug_file: for
/// ELF the build-id path or debuglink with CRC, build-id checked). The physical function's name is the symbol table's
/// (.symtab, else .dynsym of the module) when a symbol covers the address, as
/// llvm-symbolizer does; without DWARF the answer is the symbol alone.
/// The symbol tables are ELF's (elf_symbols.hpp: .symtab, .dynsym, PLT,
/// MiniDebugInfo), or another format's own (ObjectImage::symbols(), and
/// symbolizer_symbols() for llvm's naming: COFF symbols, exports). DWARF is read
/// from a module of any format that has it (by the DWARF standard's section names). Thread-safe: modules are loaded
/// under a lock, their indexes are shared and safe for concurrent lookups.
class DwarfResolver {
 public:
  explicit DwarfResolver(DwarfResolverOptions opts) : opts_(std::move(opts)) {}

  /// Fills `out` (always at least one frame). Returns false when nothing at
  /// all is known about `addr` (the frame is then empty and resolver kNone).
  /// `policy` chooses the tables that may name addresses without DWARF.
  bool resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out,
               SymtabPolicy policy = SymtabPolicy::kWithDebugFile);

  const DwarfResolverOptions& options() const { return opts_; }

  /// How the module's DWARF was found (loads the module when needed).
  ModuleReport report(const std::shared_ptr<const object::ObjectImage>& image);
  DebuginfodClient& debuginfod() { return debuginfod_; }

  /// What the DWARF step looked at for the module, in order (the module itself, each separate
  /// debug file candidate, each debuginfod URL), with why each did not serve; empty unless
  /// options().record_attempts (loads the module when needed).
  std::vector<ResolveAttempt> dwarf_attempts(const std::shared_ptr<const object::ObjectImage>& image);
  /// The "symtab" or "dynsym" step's tables for the module: found (where) or absent.
  std::vector<ResolveAttempt> table_attempts(const std::shared_ptr<const object::ObjectImage>& image, bool dynsym);
  /// The file whose DWARF the module's addresses are looked up in; "" when the module has none.
  std::string dwarf_file(const std::shared_ptr<const object::ObjectImage>& image);

  /// What gdb's tail-call search (dwarf/tail_calls.hpp) asks of one module, at its link-time
  /// addresses: its DWARF's call sites and subprograms (dwarf::DwarfIndex; false without DWARF)...
  bool call_site_at(const std::shared_ptr<const object::ObjectImage>& image, uint64_t ret, dwarf::CallSiteInfo* out);
  bool function_entry(const std::shared_ptr<const object::ObjectImage>& image, uint64_t pc, uint64_t* entry);
  bool tail_calls_of(const std::shared_ptr<const object::ObjectImage>& image, uint64_t entry,
                     std::vector<dwarf::CallSiteInfo>* out);
  /// All of the module's call sites and subprograms (dwarf::DwarfIndex::export_call_sites), for a
  /// bundle; false without DWARF. The target names in `out` stay valid while this resolver holds
  /// the module.
  bool export_call_sites(const std::shared_ptr<const object::ObjectImage>& image, dwarf::DwarfIndex::CallSiteExport* out);
  /// The formal parameters of the function covering link-time address `pc` and its frame base
  /// (dwarf::DwarfIndex::parameters; false without DWARF). The views in `out` stay valid while
  /// this resolver holds the module (its lifetime: a caller evaluates them at once).
  bool parameters(const std::shared_ptr<const object::ObjectImage>& image, uint64_t pc, dwarf::FrameParams* out);
  /// ... and a function symbol by name, as gdb's minimal symbols answer a call site naming a
  /// declaration: the module's .symtab, its separate debug file's .symtab, its .dynsym (a
  /// default-versioned `name@@V` counts as `name`); *global says whether it is global or weak.
  bool symbol_address(const std::shared_ptr<const object::ObjectImage>& image, std::string_view name, uint64_t* addr,
                      bool* global);
  /// The names symbol_address could be asked to find a function at `addr` by: every symbol there in
  /// the tables it reads, a version suffix (`@V`, `@@V`) cut off; appended to `out` (duplicates
  /// possible). Views valid while this resolver holds the module.
  void symbol_names_at(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                       std::vector<std::string_view>* out);

 public:
  /// A local function symbol and the STT_FILE name before it in .symtab.
  struct FileSymEntry {
    uint64_t addr;
    std::string_view name, file;
    bool from_debug_file;  ///< from the separate debug file's .symtab (`fallback`)
  };
  /// A file's path() and id(), read once (they live as long as the file).
  struct FileName {
    const std::string* path = nullptr;
    const ModuleId* id = nullptr;
  };

 private:
  struct Module {
    std::shared_ptr<const object::ObjectImage> image;
    std::shared_ptr<const object::ObjectImage> dwarf_file;  ///< image or its debug file; null without DWARF
    std::shared_ptr<const object::ObjectImage> alt_file;    ///< dwz supplementary file
    /// File whose .symtab is used (image or minidebuginfo); with symtab, symtab_name, dynsym and
    /// minidebuginfo set on first use (load_tables).
    mutable std::shared_ptr<const object::ObjectImage> symtab_file;
    mutable stackprov::OnceFlag tables_once;
    /// The separate debug file, whose .symtab answers only without DWARF: read on first
    /// use (load_fallback), then `fallback_file` is set when that table has symbols.
    std::shared_ptr<const object::ObjectImage> fallback_candidate;
    mutable std::shared_ptr<const object::ObjectImage> fallback_file;
    mutable stackprov::OnceFlag fallback_once, file_syms_once;
    std::shared_ptr<dwarf::SplitDwarfFiles> split;
    std::unique_ptr<dwarf::DwarfIndex> index;
    mutable elf::SymbolTable symtab;  ///< overrides the physical function's name (llvm: the module's .symtab)
    mutable elf::SymbolTable fallback;  ///< the debug file's .symtab: used only when DWARF has no answer
    mutable elf::SymbolTable dynsym;  ///< used only when DWARF has no answer
    /// The module is an ELF file (its symbol features apply); else its own format's function
    /// symbols (ObjectImage::symbols(), sorted) stand for .symtab.
    bool elf = true;
    std::vector<object::Symbol> object_syms;
    /// The module's symbols as llvm-symbolizer-14 picks them (kModuleOnly) and its
    /// `sym@plt` stubs (kWithDebugFile: llvm-14 does not name them); each built on
    /// first use by the policy that needs it.
    mutable stackprov::OnceFlag llvm_once, plt_once, llvm_debug_once;
    mutable elf::LlvmSymbolTable llvm;
    /// The separate debug file's symbols as llvm-symbolizer-14 picks them (kModuleThenDebugFile).
    mutable elf::LlvmSymbolTable llvm_debug;
    mutable elf::PltTable plt;
    /// STT_FILE name preceding each local function symbol of `symtab`/`fallback`
    /// (llvm prints it as FileName of symbol-table-only answers), sorted by address.
    mutable std::vector<FileSymEntry> file_syms;  ///< built on first use (load_file_syms)
    /// path() and id() of `image`, `dwarf_file`, `symtab_file` and `fallback_file`, read when each
    /// is set: an answer names its file without a virtual call per address.
    FileName image_name, dwarf_name;
    mutable FileName symtab_name;
    mutable FileName fallback_name;
    bool via_debuginfod = false;
    mutable bool minidebuginfo = false;
    std::string url;
    std::string error;
    std::vector<ResolveAttempt> attempts;  ///< the DWARF step's, when options().record_attempts
    /// Without DWARF of its own or a debug file: the image's debug map (Mach-O N_OSO objects), each
    /// object opened and indexed on first use (load_map_object).
    std::vector<object::DebugMapRange> map;
    struct MapObject {
      stackprov::OnceFlag once;
      object::DebugMapObjectFile file;
      std::unique_ptr<dwarf::DwarfIndex> index;
      std::string error;  ///< why it gives no DWARF ("" when it does)
      AttemptOutcome outcome = AttemptOutcome::kFound;  ///< what the attempt was (kFound when it gives DWARF)
      FileName name;
    };
    std::unique_ptr<MapObject[]> map_objects;
    mutable std::atomic<uint32_t> map_opened{0};  ///< map objects opened (at most kMaxMapObjects)
  };
  /// Debug map objects one module may open (each a mapping and a DWARF index kept while the
  /// resolver lives): a hostile map naming one object many times, or a huge image, stops here.
  static constexpr uint32_t kMaxMapObjects = 16384;
  std::shared_ptr<Module> module(const std::shared_ptr<const object::ObjectImage>& image);
  /// The module's .symtab (or MiniDebugInfo's) and .dynsym, read once on first use.
  void load_tables(const Module& m) const;
  bool attach_dwarf(Module* m, const std::shared_ptr<const object::ObjectImage>& f);
  /// attach_dwarf, recording what `f` gave when attempts are recorded.
  bool attach_recorded(Module* m, const std::shared_ptr<const object::ObjectImage>& f, const std::string& resolver,
                       const std::string& looked_at);
  void find_by_debuginfod(Module* m, std::shared_ptr<const object::ObjectImage>* debug_file);
  std::shared_ptr<const object::ObjectImage> find_alt(const object::ObjectImage& f, std::string* err);
  void load_fallback(const Module& m) const;
  /// Map object `i` of the module's debug map, opened and indexed once.
  Module::MapObject& load_map_object(const Module& m, uint32_t i) const;
  /// The debug map's DWARF frames of link-time `addr`, their start addresses the image's; false
  /// (and `out` empty) when the map does not cover it or its object gives no DWARF.
  bool map_lookup(const Module& m, uint64_t addr, std::vector<dwarf::DwarfFrame>* out, const FileName** src) const;
  void load_file_syms(const Module& m) const;
  void assign_display(std::string_view name, std::string* out) const;
  /// kWithDebugFile: the doc/symbols.md alias rule over .symtab, .dynsym and the debug file's .symtab.
  void name_from_tables(const Module& m, const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                        bool dwarf_hit, Resolution* out) const;
  /// kModuleOnly: llvm-symbolizer-14's SymbolizableObjectFile (elf::LlvmSymbolTable);
  /// `debug_file`: kModuleThenDebugFile.
  void name_like_llvm(const Module& m, const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr,
                      bool dwarf_hit, bool debug_file, Resolution* out) const;

  DwarfResolverOptions opts_;
  DebuginfodClient debuginfod_;
  std::mutex mu_;
  std::unordered_map<const object::ObjectImage*, std::shared_ptr<Module>> modules_;
};

}  // namespace stackprov::symbolize
