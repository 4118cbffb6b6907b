// SPDX-License-Identifier: Apache-2.0
// Snapshots from an ELF core file: one per thread, modules from NT_FILE (checked against the core's build-ids).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "elf/core_file.hpp"
#include "memory/memory_reader.hpp"
#include "memory/snapshot.hpp"

namespace stackprov::memory {

/// Serves target memory from a core's PT_LOAD bytes (dumped bytes only).
class CoreReader final : public MemoryReader {
 public:
  explicit CoreReader(const elf::CoreFile& core) : core_(&core) {}
  bool read(uint64_t addr, void* buf, size_t len) override { return core_->read(addr, buf, len); }
  const char* name() const override { return "core"; }

 private:
  const elf::CoreFile* core_;
};

struct CoreCaptureOptions {
  int64_t tid = 0;                       ///< 0: every thread; else only this one
  uint32_t max_stack_bytes = 512 * 1024; ///< copied per thread from sp upward
  std::string exe;                       ///< host path of the main program; "" = from NT_FILE
  std::string sysroot;                   ///< module files are opened under it; "" = as is
  /// No module file is opened (SPROV_CTX_OFFLINE): modules, build-ids and load
  /// biases come from the core alone (NT_FILE and the core's copy of each
  /// module's first page); `exe` must be empty. Cores without NT_FILE (their
  /// module list needs the files' program headers) then list no modules.
  bool offline = false;
};

/// The signal that terminated the process, as gdb reads it (bfd: the first
/// NT_PRSTATUS with a non-zero pr_cursig; that thread is gdb's current thread).
struct CoreSignal {
  int32_t signal = 0;  ///< pr_cursig; 0 when no thread has one
  int64_t tid = 0;     ///< the thread that has it
  bool has_siginfo = false;
  elf::CoreSiginfo siginfo;  ///< that thread's NT_SIGINFO
};

struct CoreCapture {
  int64_t pid = 0;
  /// NT_PRSTATUS order, except that the signalled thread (CoreSignal::tid) is
  /// first (the kernel and gdb's gcore write it first anyway).
  std::vector<Snapshot> threads;
  std::string warnings;           ///< one finding per line, each ending in '\n'
  CoreSignal signal;
  std::string program_name;  ///< NT_PRPSINFO pr_fname (the main thread's comm)
  std::string program_args;  ///< NT_PRPSINFO pr_psargs
  bool truncated = false;          ///< the core file is cut short (CoreFile::truncated)
  bool build_id_mismatch = false;  ///< a module file has another build-id than the core's copy
};

/// Called once per thread snapshot while the core is still open, with the
/// core as a reader of all its memory (e.g. to pre-walk and copy the extra
/// pages a walk needs into the snapshot, capi::prewalk_record).
using CoreWalkFn = std::function<void(Snapshot&, MemoryReader&)>;

/// Builds one snapshot per thread of `core`:
///  - registers from NT_PRSTATUS (frame 0's pc is the interrupted pc, flags 0);
///  - memory: [sp, sp + max_stack_bytes) clipped to the dumped bytes of the
///    PT_LOAD holding sp, plus the vDSO (AT_SYSINFO_EHDR) when it was dumped;
///  - modules: the executable NT_FILE mappings (a PT_LOAD with PF_X at the
///    same start), files opened under `sysroot`; the main program (the NT_FILE
///    mapping holding AT_ENTRY, else the path at AT_EXECFN) is opened at
///    `exe` when given, and its module path then is `exe` (absolute) — under
///    a sysroot, `exe` relative to the sysroot when it lies inside it.
/// Checks, reported as warning lines (not errors): a module file that is
/// missing ("module P not found (looked at H)"), of another architecture than
/// the core ("... not used"), or whose build-id differs from the one in the
/// core's copy of its first page ("module P: build-id mismatch: core has X,
/// file has Y"; the snapshot then carries the core's id, so the file is not
/// used to unwind). Modules that are missing keep the core's build-id too.
/// Errors: SPROV_ERR_ARCH_MISMATCH when `exe` is for another architecture,
/// SPROV_ERR_NOT_FOUND for an unknown `tid`, SPROV_ERR_TRUNCATED/ELF when
/// the core has no usable thread, SPROV_ERR_INVALID_ARG for `exe` with
/// `offline`. With `offline` no file is opened and there are no file checks;
/// a module whose build-id the core does not hold is reported ("module P:
/// build-id not in the core ..."). Thread-safe (the CoreFile is immutable);
/// `while_open` runs on the calling thread.
Result<CoreCapture> capture_core(const elf::CoreFile& core, const CoreCaptureOptions& opts,
                                 const CoreWalkFn& while_open);

}  // namespace stackprov::memory
