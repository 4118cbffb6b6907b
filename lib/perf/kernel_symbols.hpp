// SPDX-License-Identifier: Apache-2.0
// Kernel frame names: /proc/kallsyms read as perf reads it, the running kernel's build-id, the check against a recording's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov::perf {

/// The kernel symbol table of a kallsyms listing ("ADDR TYPE NAME[\t[MODULE]]" per line), kept
/// and chosen among as perf 6.1 does (tools/perf/util/symbol.c): types T/W/D/B in either case;
/// names starting with '$' dropped; of several symbols at one address the one perf's
/// choose_best_symbol keeps (not weak, then global, then fewer leading underscores, then the
/// longer name, then the first listed); each symbol ends where the next begins, the last one of
/// the kernel or of a module at the next page boundary + 4096 (symbols__fixup_end). Not
/// thread-safe for concurrent parse; lookups are const.
class KernelSymbols {
 public:
  /// Names point into the listing the table keeps (no copy per symbol) and are NUL-terminated
  /// (data() is a C string); valid as long as the KernelSymbols (or a copy of it) lives.
  struct Symbol {
    uint64_t start = 0, end = 0;
    std::string_view name;
    std::string_view module;  ///< "[kernel.kallsyms]" or "[MODULE]", as perf script names the dso
  };
  /// Parses a kallsyms listing, taking it over (its line ends become NULs). Lines that do not
  /// parse are skipped. A listing whose addresses are all zero (kptr_restrict) yields no symbols.
  static KernelSymbols parse(std::string text);
  /// Reads and parses a kallsyms file. Errors: the file's errno naming it; SPROV_ERR_NOT_FOUND when
  /// it holds no symbol (addresses hidden by kernel.kptr_restrict, or no function symbols).
  static Result<KernelSymbols> load(const std::string& path = "/proc/kallsyms");
  /// The symbol covering `addr`, or nullptr.
  const Symbol* find(uint64_t addr) const;
  /// Address of `_text` in the listing (perf's reference symbol for relocation), 0 if absent.
  uint64_t text_address() const { return text_; }
  /// Address of `_etext` (the end of the core kernel's text), 0 if absent.
  uint64_t etext_address() const { return etext_; }
  size_t size() const { return syms_.size(); }
  /// Lines seen with a non-zero address (0 with a zero-only listing: addresses hidden).
  size_t nonzero_lines() const { return nonzero_; }

 private:
  std::shared_ptr<const std::string> text_buf_;  ///< the listing the names point into
  std::vector<Symbol> syms_;  ///< sorted by start, one per start
  uint64_t text_ = 0, etext_ = 0;
  size_t nonzero_ = 0;
};

/// A kallsyms listing kept as text and looked up in its core kernel part, [_text, _etext), where
/// the kernel lists symbols in address order: a binary search over the lines, then the few lines
/// around the address parsed as KernelSymbols::parse parses the whole listing (the same filters,
/// the same choice among symbols at one address, the end at the next symbol's start), so that a
/// handful of lookups does not parse 120k lines. Any line it cannot read, a module line or lines
/// out of order around the address make find() return nullptr (the caller then reads the whole
/// listing); order is checked around the address only: a listing shuffled far from it is not
/// detected (the listing is perf's copy of the kernel's, which the kernel writes sorted). At
/// most 65536 looked-up windows are kept.
class CoreListing {
 public:
  /// nullptr when the listing has no `_text` and `_etext` line in that order.
  static std::shared_ptr<CoreListing> open(std::string text);
  uint64_t text_address() const { return text_; }
  uint64_t etext_address() const { return etext_; }
  /// The symbol covering `addr` (in [_text, _etext)), or nullptr.
  const KernelSymbols::Symbol* find(uint64_t addr);

 private:
  bool line(size_t i, uint64_t* addr, char* type, std::string_view* name, bool* tab) const;
  bool accepted(size_t i, uint64_t* addr, bool* ok) const;
  std::string text_buf_;
  std::vector<uint32_t> starts_;  ///< offset of each line
  size_t lo_ = 0, hi_ = 0;        ///< lines of _text and _etext
  uint64_t text_ = 0, etext_ = 0;
  std::vector<std::unique_ptr<KernelSymbols>> windows_;
};

/// The GNU build-id in a kernel notes blob (/sys/kernel/notes: the kernel's ELF notes);
/// empty when none.
ModuleId kernel_build_id_from_notes(const std::string& notes);

/// The running kernel's build-id (from `notes_path`, normally /sys/kernel/notes) and `_text`
/// address (from `kallsyms_path`, 0 when hidden or absent). Errors name the file.
Result<ModuleId> running_kernel_build_id(const std::string& notes_path = "/sys/kernel/notes");
uint64_t running_kernel_text(const std::string& kallsyms_path = "/proc/kallsyms");

/// perf's build-id cache directory as perf finds it without a config file: $PERF_BUILDID_DIR,
/// else $HOME/.debug; "" when neither is set.
std::string perf_buildid_dir();

/// How kernel frames of a recording get names.
enum class KernelNaming : uint8_t {
  kNamed = 1,       ///< the recording's kernel build-id is the running kernel's: named from kallsyms
  kUnchecked = 2,   ///< the recording holds no kernel build-id: named from kallsyms, with a warning
  kMismatch = 3,    ///< the recording's kernel is another build: left unnamed
  kUnavailable = 4, ///< the running kernel's build-id or kallsyms cannot be read: left unnamed
  kCached = 5,      ///< another build, named from perf's build-id cache copy of its kallsyms (as perf does)
};

/// Names kernel addresses of one recording: compares the recorded kernel build-id (may be
/// empty) with the running kernel's before naming anything, then loads /proc/kallsyms on the
/// first lookup and relocates by the difference of the recorded and current `_text` (KASLR).
///
/// The core kernel's text [_text, _etext) is the same for every boot of one build at one `_text`:
/// when the recording's build-id is the running kernel's, addresses there are named from perf's
/// copy of the listing in its build-id cache (`perf record` writes
/// $PERF_BUILDID_DIR or $HOME/.debug, then "/[kernel.kallsyms]/BUILD-ID/kallsyms") if that copy's
/// `_text` is the recording's: reading a file instead of having the kernel print 120k lines (~24
/// ms of CPU, a quarter of a perf-import run). Any other address (modules, BPF, trampolines,
/// whose symbols come and go) loads /proc/kallsyms as before.
///
/// A recording of another kernel build is named, as `perf script` names it, from that build's copy in
/// perf's build-id cache ("[kernel.kallsyms]/BUILD-ID/kallsyms", the listing `perf record` saved on the
/// machine that recorded it, modules included) when the copy is there and its `_text` is the
/// recording's (kCached); without such a copy its frames stay unnamed (kMismatch).
class KernelNamer {
 public:
  /// `recorded_text`: `_text` at recording time (perf.data's "[kernel.kallsyms]_text" mmap
  /// pgoff, a capture file's KERNEL record), 0 when unknown (no relocation).
  /// `buildid_dir`: perf's build-id cache directory (perf_buildid_dir(); "" uses no copy).
  KernelNamer(ModuleId recorded, uint64_t recorded_text, std::string notes_path = "/sys/kernel/notes",
              std::string kallsyms_path = "/proc/kallsyms", std::string buildid_dir = perf_buildid_dir());
  KernelNaming naming() const { return naming_; }
  /// `_text` at recording time learnt after construction (a perf.data read once meets the kernel's
  /// map with its records); false when a lookup already used another value.
  bool set_recorded_text(uint64_t text) {
    if (loaded_ && text != recorded_text_) return false;
    recorded_text_ = text;
    return true;
  }
  /// One line saying how kernel frames are named (or why not), for warnings and summaries.
  const std::string& note() const { return note_; }
  const ModuleId& recorded_build_id() const { return recorded_; }
  const ModuleId& running_build_id() const { return running_; }
  /// The symbol of a recorded kernel address, start relocated back to the recording's
  /// addresses; nullptr when unnamed (mismatch, unreadable kallsyms, no symbol).
  const KernelSymbols::Symbol* find(uint64_t addr, uint64_t* start_out);

 private:
  void load();
  void load_cached_core();
  /// Whether kernel frames get names at all (from kallsyms or a cached copy).
  bool names() const {
    return naming_ == KernelNaming::kNamed || naming_ == KernelNaming::kUnchecked || naming_ == KernelNaming::kCached;
  }
  ModuleId recorded_, running_;
  uint64_t recorded_text_ = 0;
  std::string kallsyms_path_;
  std::string buildid_dir_;
  KernelNaming naming_ = KernelNaming::kUnavailable;
  std::string note_;
  std::string mismatch_note_;  ///< kCached: the note if the copy turns out unusable, less the reason
  bool loaded_ = false;
  int64_t delta_ = 0;  ///< current kallsyms address - recorded address
  KernelSymbols syms_;
  bool core_tried_ = false;
  std::shared_ptr<CoreListing> core_;  ///< perf's build-id cache copy, used in [_text, _etext) only
  std::string core_path_;     ///< its path; empty when not used
};

}  // namespace stackprov::perf
