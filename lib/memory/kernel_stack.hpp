// SPDX-License-Identifier: Apache-2.0
// A live thread's kernel stack and system call from /proc/PID/task/TID/{stack,syscall}: checked parsers and the reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace stackprov::memory {

/// One line of /proc/PID/task/TID/stack ("[<0>] do_nanosleep+0x5e/0x160 [module]"): the kernel
/// prints the address as 0 to everyone (kptr_restrict for %pK), so a frame is its name only.
struct KernelFrame {
  std::string symbol;
  uint64_t offset = 0;  ///< from the symbol's start
  uint64_t size = 0;    ///< the symbol's size
  std::string module;   ///< "" for the kernel image, else the module's name (without brackets)
};

/// /proc/PID/task/TID/syscall (proc_pid_syscall, fs/proc/base.c): "running", "-1 SP PC" (blocked,
/// not in a system call), or "NR A1 .. A6 SP PC" (blocked in system call NR; SP and PC the user
/// registers the kernel saved on entry).
struct SyscallState {
  enum class Kind : uint8_t { kRunning, kNotInSyscall, kInSyscall };
  Kind kind = Kind::kRunning;
  int64_t nr = -1;
  uint64_t args[6] = {};
  uint64_t sp = 0, pc = 0;
};

/// Bounds: a kernel stack has at most this many lines (the kernel's own cap is 64,
/// MAX_STACK_TRACE_DEPTH in fs/proc/base.c), and a line at most kMaxKernelLine bytes.
inline constexpr size_t kMaxKernelFrames = 256;
inline constexpr size_t kMaxKernelLine = 512;
inline constexpr size_t kMaxKernelText = 64 * 1024;

/// Parses /proc/.../stack text. Errors (SPROV_ERR_BAD_FORMAT, SPROV_ERR_LIMIT) name the line and
/// the offending text; never reads past `text`.
Result<std::vector<KernelFrame>> parse_kernel_stack(std::string_view text);

/// Parses /proc/.../syscall text (SPROV_ERR_BAD_FORMAT naming the field).
Result<SyscallState> parse_syscall(std::string_view text);

/// What was read of one thread: `readable` false with `why` (permission, no such thread, a kernel
/// thread, ...) or the frames (innermost first) and the system call state. A thread running on a
/// CPU has no stack to read (the kernel prints none for it): syscall.kind kRunning, no frames.
struct KernelThread {
  int64_t tid = 0;
  bool readable = false;
  std::string why;
  std::vector<KernelFrame> frames;
  SyscallState syscall;
};

/// Reads `tid`'s kernel stack and system call state (the syscall file first, then the stack, then
/// the syscall file again: a thread that moved in between is said to have been running). Bounded
/// reads (kMaxKernelText). Needs root (the stack file is 0400 and checked with
/// PTRACE_MODE_ATTACH_FSCREDS); failures are in the result, never thrown.
KernelThread read_kernel_thread(int64_t pid, int64_t tid);

/// Every thread of `pid` (the ids in /proc/PID/task, at most 65536), or only `tid` when non-zero.
std::vector<KernelThread> read_kernel_threads(int64_t pid, int64_t tid);

}  // namespace stackprov::memory
