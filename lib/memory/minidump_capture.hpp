// SPDX-License-Identifier: Apache-2.0
// Snapshots from a Windows minidump: one per thread with a context, the faulting thread first with
// the exception's context; modules with their pdb-guid-age identity (CodeView record, else the
// image headers in the dump's memory, else the module file) and their files looked up on a path.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/memory_reader.hpp"
#include "memory/snapshot.hpp"
#include "minidump/minidump.hpp"

namespace stackprov::memory {

/// Serves target memory from a minidump's memory ranges (MemoryList and Memory64List).
class MinidumpReader final : public MemoryReader {
 public:
  explicit MinidumpReader(const minidump::Minidump& d) : dump_(&d) {}
  bool read(uint64_t addr, void* buf, size_t len) override { return dump_->read(addr, buf, len); }
  const char* name() const override { return "minidump"; }

 private:
  const minidump::Minidump* dump_;
};

struct MinidumpCaptureOptions {
  int64_t tid = 0;                        ///< 0: every thread; else only this one
  uint32_t max_stack_bytes = 512 * 1024;  ///< copied per thread from sp upward
  /// Directories searched for module files, in order: DIR/NAME, then the symbol-store layout
  /// DIR/NAME/<TIMESTAMP as %08X><SIZEOFIMAGE as %x>/NAME (NAME: the module name's last component).
  std::vector<std::string> symbol_path;
  /// No module file is opened: identities come from the dump alone.
  bool offline = false;
  /// Each module's own name is tried first as a file (a live capture on Windows: the names are
  /// this machine's paths). Never for a dump, which may come from another machine.
  bool own_module_paths = false;
};

/// Where a module's identity came from (the report says which, per module).
enum class IdSource : uint8_t {
  kNone = 0,     ///< none known: the record is empty and neither the image headers nor a file give one
  kCodeView,     ///< the dump's CodeView record of the module
  kMemory,       ///< the PE headers and debug directory in the dump's memory (a full dump)
  kFile,         ///< the module file found (its TimeDateStamp and SizeOfImage equal the dump's)
  /// none of the above has a CodeView record: the code id (pe::code_id) of the module list's
  /// TimeDateStamp and SizeOfImage (the process's module information for a live capture)
  kModuleList,
};
const char* id_source_name(IdSource s);

struct MinidumpModuleInfo {
  std::string name;  ///< as the dump names it (UTF-8)
  IdSource id_source = IdSource::kNone;
  std::string file;  ///< the host file used, "" when none
  bool headers_in_memory = false;  ///< the dump's memory holds the image headers (with or without RSDS)
};

struct MinidumpCapture {
  int64_t pid = 0;  ///< MiscInfo's ProcessId, 0 when absent
  /// Threads with a context, the exception's thread first (registers from the exception's
  /// context), then ThreadList order.
  std::vector<Snapshot> threads;
  std::vector<MinidumpModuleInfo> modules;  ///< parallel to the dump's ModuleList
  std::string warnings;                     ///< one finding per line, each ending in '\n'
  bool has_exception = false;
  minidump::Exception exception;
};

using MinidumpWalkFn = std::function<void(Snapshot&, MemoryReader&)>;

/// Bounds of a capture of a Windows target (a dump, or a live process): all threads' stack copies
/// together, and threads x modules (the module list is copied into each thread's snapshot).
constexpr uint64_t kMaxTotalStackBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxThreadModuleCopies = uint64_t{1} << 22;

/// Reads of a Windows target's memory (a dump, or a live process): all `len` bytes or false.
using TargetRead = std::function<bool(uint64_t addr, void* buf, size_t len)>;

/// A module of a Windows target as a snapshot module, and where its identity came from.
struct PlannedModule {
  SnapshotModule snap;
  MinidumpModuleInfo info;
};

/// The snapshot module of PE image `m` (base, SizeOfImage, TimeDateStamp, name, CodeView record
/// when a dump has one) of a target whose memory `read` serves, as capture_minidump describes its
/// modules; `source` ("dump", "process") names the target in the warnings appended to *warnings.
/// Shared by capture_minidump and the live Windows capture (windows_capture.hpp).
PlannedModule plan_pe_module(const minidump::Module& m, const TargetRead& read, const char* source,
                             const MinidumpCaptureOptions& opts, std::string* warnings);

/// Sets `s`'s rip, rsp and (with `integer`: CONTEXT_INTEGER) the other 15 integer registers of an
/// x64 CONTEXT, `gpr` in CONTEXT order (Rax Rcx Rdx Rbx Rsp Rbp Rsi Rdi R8..R15), DWARF-numbered.
void set_x64_context(Snapshot& s, uint64_t rip, const uint64_t gpr[16], bool integer);

/// Builds the snapshots of `dump` (x64 only; SPROV_ERR_UNSUPPORTED names another architecture):
///  - registers from each thread's x64 CONTEXT (rip and rsp with CONTEXT_CONTROL, the others with
///    CONTEXT_INTEGER; xmm registers are not kept: no unwind rule needs their values); a thread
///    without a context (wine gives the dumping thread none) is a warning and left out;
///  - memory: [rsp, rsp + max_stack_bytes) as far as the dump holds it without a gap;
///  - modules: base, base + SizeOfImage, the dump's name as the path; identity as IdSource says;
///    the file found on the symbol path (or, for wine's "Z:\" drive, at the same host path) is
///    used when its TimeDateStamp and SizeOfImage equal the dump's and its identity, when the dump
///    gives one, equals it; its ImageBase gives the load bias (else the headers in memory).
/// Errors: SPROV_ERR_NOT_FOUND for an unknown `tid`; SPROV_ERR_UNSUPPORTED when no thread has a
/// usable context. Thread-safe for distinct dumps; `while_open` runs on the calling thread.
Result<MinidumpCapture> capture_minidump(const minidump::Minidump& dump, const MinidumpCaptureOptions& opts,
                                         const MinidumpWalkFn& while_open);

}  // namespace stackprov::memory
