// SPDX-License-Identifier: Apache-2.0
// Live-process capture on macOS (doc/macos.md "The live Mach reader"): a mach_vm_read reader, every
// thread suspended, its x86_THREAD_STATE64 / ARM_THREAD_STATE64, its stack, and the image list
// from dyld_all_image_infos. The Mach calls are mach_api.h's (mach_task_darwin.c on a Mac, stubs
// elsewhere: capture_mach_task then fails with SPROV_ERR_UNSUPPORTED). Only the parsing of
// dyld's image list has run here (unit_memory); the capture itself has never run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "memory/memory_reader.hpp"
#include "memory/process_capture.hpp"

namespace stackprov::memory {

/// mach_vm_read_overwrite on a task port (not owned). A read fills all `len` bytes or fails.
class MachVmReader final : public MemoryReader {
 public:
  explicit MachVmReader(uint32_t task) : task_(task) {}
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "mach_vm_read"; }

 private:
  uint32_t task_;
};

/// One image of dyld's list: its mach header's address in the target and the path dyld loaded it from.
struct DyldImage {
  uint64_t header = 0;
  std::string path;
  bool is_dyld = false;  ///< dyld itself (dyldImageLoadAddress; not in infoArray)
};

inline constexpr uint32_t kMaxDyldImages = 1u << 16;  ///< entries of infoArray taken
inline constexpr size_t kMaxDyldPath = 1024;          ///< MAXPATHLEN

/// The images of a 64-bit task from its dyld_all_image_infos at `infos` (`infos_size` bytes, what
/// TASK_DYLD_INFO gives), read through `mem`: infoArray's entries (header address, path read up to
/// its NUL within kMaxDyldPath bytes, page by page), then dyld itself (dyldImageLoadAddress, its path
/// from dyldPath at version >= 15, else "/usr/lib/dyld"). Hostile input: every count, address and
/// length is bounded. An entry whose path cannot be read is skipped with a line in *warnings.
/// Errors: SPROV_ERR_BAD_FORMAT (infos_size too small, infoArray NULL: dyld is updating the list,
/// a count over kMaxDyldImages), SPROV_ERR_CAPTURE (the structure or the array unreadable).
Result<std::vector<DyldImage>> read_dyld_images(MemoryReader& mem, uint64_t infos, uint64_t infos_size,
                                                std::string* warnings);

struct MachCaptureOptions {
  uint64_t only_tid = 0;                  ///< 0: every thread (thread_identifier_info's thread_id)
  uint32_t max_stack_bytes = 512 * 1024;  ///< copied per thread from sp up, page by page until one fails
};

/// Captures the threads of live task `pid` (x86_64 or arm64, the architecture of this build):
/// task_for_pid, task_threads, thread_suspend of each (all before the first state is read), the
/// thread states (PAC bits stripped from pc, lr, fp and sp on arm64e), each stack, and the modules
/// (read_dyld_images; each module file opened and checked against the LC_UUID in the target's
/// memory: a different file is left out with a warning, the module kept by identity). Every
/// suspended thread is resumed and every port right released before this returns, on every path.
/// `while_stopped` runs once per thread while all are suspended. Errors: SPROV_ERR_UNSUPPORTED
/// (no Mach API: not macOS), -EPERM (task_for_pid refused: not root, or SIP), -ESRCH, SPROV_ERR_CAPTURE.
Result<ProcessCapture> capture_mach_task(int pid, const MachCaptureOptions& opts, const WhileStopped& while_stopped);

}  // namespace stackprov::memory
