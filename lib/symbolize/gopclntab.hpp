// SPDX-License-Identifier: Apache-2.0
// Go symbol tables: the runtime's pclntab (Go 1.18+ layout) read from a Go binary, stripped or not —
// function, file:line and inline chains (FUNCDATA_InlTree / PCDATA_InlTreeIndex), and pcsp SP deltas.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <mutex>
#include <unordered_map>

#include "object/object_image.hpp"
#include "symbolize/dwarf_resolver.hpp"

namespace stackprov::symbolize {

/// One frame of a Go pc: innermost inlined call first, the physical function last.
struct GoFrame {
  std::string function;  ///< Go symbol name, e.g. "main.outerCompute" or "runtime.gopark"
  std::string file;      ///< absolute source path as the compiler recorded it
  uint32_t line = 0;
  uint64_t entry = 0;    ///< entry pc of the physical function (link-time)
};

/// The pclntab of one Go binary (doc/runtime-frames.md "Go"). Found by section
/// name (.gopclntab; .data.rel.ro.gopclntab in PIE), else by its header magic
/// (0xfffffff0 Go 1.18-1.19, 0xfffffff1 Go 1.20+) in the data sections of a
/// binary whose sections were renamed or removed. The inline tree needs
/// moduledata.gofunc: the `go.func.*`/`go:func.*` symbol, else moduledata
/// found in .noptrdata by its pointer to the pclntab. Immutable after load;
/// thread-safe for concurrent lookups.
class GoPclntab {
 public:
  /// Null when the image holds no pclntab of a supported version.
  static std::unique_ptr<GoPclntab> load(std::shared_ptr<const object::ObjectImage> image);

  /// Frames for link-time `pc` (inline chain, innermost first); false when no Go function covers it.
  bool lookup(uint64_t pc, std::vector<GoFrame>* out) const;
  /// Entry and end of the function covering `pc`.
  bool function_range(uint64_t pc, uint64_t* entry, uint64_t* end) const;
  /// The pcsp value at `pc`: bytes the function has pushed below its entry SP
  /// (the return address excluded; on amd64 the caller's SP is sp + value + 8).
  std::optional<int64_t> sp_delta(uint64_t pc) const;
  /// The function's _func.flag bits (Go 1.18+: kTopFrame 1, kSpWrite 2, kAsm 4); 0 when no function covers `pc`.
  static constexpr uint8_t kTopFrame = 1, kSpWrite = 2, kAsm = 4;
  uint8_t func_flags(uint64_t pc) const;

  /// "1.18" (magic 0xfffffff0, Go 1.18-1.19) or "1.20" (0xfffffff1, Go 1.20+).
  std::string_view version() const { return go120_ ? "1.20" : "1.18"; }
  /// How the table was found: "section <name>" or "magic in <section>".
  const std::string& found_by() const { return found_by_; }
  uint64_t text_start() const { return text_start_; }
  /// The image's path() and id(), read at load.
  const std::string& path() const { return *path_; }
  const ModuleId& id() const { return *id_; }

 private:
  struct FuncRef {
    uint64_t entry, end;
    const uint8_t* func;  ///< the _func record
  };
  bool find_func(uint64_t pc, FuncRef* f) const;
  uint32_t u32(const uint8_t* p) const;
  uint64_t uptr(const uint8_t* p) const;
  /// pcvalue table `off` (in pctab) evaluated at `pc` of function `f`; nullopt when outside.
  std::optional<int32_t> pcvalue(const FuncRef& f, uint32_t off, uint64_t pc) const;
  std::string_view cstr(size_t table_off, size_t off) const;
  std::string file_name(const FuncRef& f, int32_t fileno) const;
  const uint8_t* vaddr_ptr(uint64_t addr, size_t n) const;
  void find_gofunc();

  std::shared_ptr<const object::ObjectImage> image_;
  std::span<const uint8_t> file_;        ///< image_->file_bytes()
  std::vector<object::Segment> segs_;    ///< image_->loaded_segments()
  const std::string* path_ = nullptr;
  const ModuleId* id_ = nullptr;
  const uint8_t* base_ = nullptr;  ///< pcHeader
  size_t size_ = 0;
  uint64_t vaddr_ = 0;             ///< link-time address of pcHeader
  bool go120_ = false, big_endian_ = false;
  uint8_t ptr_size_ = 8, min_lc_ = 1;
  uint64_t nfunc_ = 0, text_start_ = 0;
  uint64_t funcname_off_ = 0, cu_off_ = 0, filetab_off_ = 0, pctab_off_ = 0, pcln_off_ = 0;
  uint64_t gofunc_ = 0;            ///< moduledata.gofunc (0: unknown, no inline chains)
  std::string found_by_;
};

/// The resolver chain's "gopclntab" step: one GoPclntab per module (loaded on
/// first use; modules without one are remembered). Thread-safe.
class GoResolver {
 public:
  /// Fills `out` (resolver kGopclntab, provenance "gopclntab", the inline
  /// chain) and returns true when the module is a Go binary whose pclntab
  /// covers `addr`.
  bool resolve(const std::shared_ptr<const object::ObjectImage>& image, uint64_t addr, Resolution* out);
  /// The module's table (null when it has none).
  const GoPclntab* table(const std::shared_ptr<const object::ObjectImage>& image);

 private:
  std::mutex mu_;
  std::unordered_map<const object::ObjectImage*,
                     std::pair<std::shared_ptr<const object::ObjectImage>, std::unique_ptr<GoPclntab>>>
      tables_;
};

}  // namespace stackprov::symbolize
