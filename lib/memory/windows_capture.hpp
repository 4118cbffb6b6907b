// SPDX-License-Identifier: Apache-2.0
// Live-process capture on Windows (the win64 build only, windows_capture_win.cpp): a ReadProcessMemory
// reader, and every thread suspended, its x64 CONTEXT, its stack and the module list copied.
#pragma once

#include <cstdint>

#include "core/error.hpp"
#include "memory/memory_reader.hpp"
#include "memory/minidump_capture.hpp"
#include "memory/process_capture.hpp"

namespace stackprov::memory {

/// ReadProcessMemory on a process handle opened with PROCESS_VM_READ (not owned: the caller closes
/// it). A read fills all `len` bytes or fails (a partial copy, an unmapped page: Windows error 299
/// or 998, kept in last_error()); never faults. Thread-safe apart from last_error().
class ReadProcessMemoryReader final : public MemoryReader {
 public:
  explicit ReadProcessMemoryReader(void* process_handle) : process_(process_handle) {}
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "ReadProcessMemory"; }
  uint32_t last_error() const { return last_error_; }

 private:
  void* process_;
  uint32_t last_error_ = 0;
};

struct WindowsCaptureOptions {
  uint32_t only_tid = 0;                 ///< 0: every thread of the process
  uint32_t max_stack_bytes = 512 * 1024; ///< copied per thread from rsp up, within the stack's committed pages
  /// Module files are looked up as for a minidump (plan_pe_module), each module's own path first.
  MinidumpCaptureOptions modules;
};

/// Captures the threads of live process `pid` (x64 only): OpenProcess, the thread list
/// (CreateToolhelp32Snapshot TH32CS_SNAPTHREAD, sorted by id), SuspendThread of each (all of them
/// before the first context is read), GetThreadContext (CONTEXT_FULL), the stack bytes by
/// ReadProcessMemory from rsp up to the end of the thread's committed stack pages (VirtualQueryEx)
/// or max_stack_bytes (all threads together at most kMaxTotalStackBytes; threads x modules at most
/// kMaxThreadModuleCopies, as for a minidump), and the module list (EnumProcessModulesEx,
/// GetModuleFileNameExW, GetModuleInformation; identities as plan_pe_module gives them, "process" naming the source).
/// `while_stopped` runs once per thread while every thread is still suspended, with a
/// ReadProcessMemory reader. Every suspended thread is resumed before this returns, on every path.
/// ProcessCapture::program_name is the main module's file name; thread_names stay empty.
/// Errors: -ESRCH (no such process, or only_tid not one of its threads), -EPERM (access denied),
/// SPROV_ERR_UNSUPPORTED (a 32-bit process under WOW64), SPROV_ERR_CAPTURE (the calling process
/// itself, or no thread could be suspended), each naming the Windows error. Not thread-safe for
/// the same target (two captures suspend and resume the same threads).
Result<ProcessCapture> capture_windows_process(uint32_t pid, const WindowsCaptureOptions& opts,
                                               const WhileStopped& while_stopped);

}  // namespace stackprov::memory
