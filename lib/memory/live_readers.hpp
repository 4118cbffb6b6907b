// SPDX-License-Identifier: Apache-2.0
// Readers of live process memory: the local process, process_vm_readv, /proc/PID/mem, ptrace PEEKDATA.
#pragma once

#include <sys/types.h>

#include <memory>

#include "memory/memory_reader.hpp"

namespace stackprov::memory {

/// process_vm_readv(2) of `len` bytes from `pid`, retried after partial
/// transfers; a read that stops at an unmapped page fails (EFAULT). Returns
/// true when every byte was read; otherwise false with the errno in `*err`.
/// Async-signal-safe (system calls only, errno preserved).
bool process_vm_read_all(pid_t pid, uint64_t addr, void* buf, size_t len, int* err);

/// The calling process. Safe against bad pointers (uses process_vm_readv on
/// itself, falling back to a pipe write() probe), async-signal-safe.
class LocalReader final : public MemoryReader {
 public:
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "local"; }
};

/// process_vm_readv(2) on another process.
class ProcessVmReader final : public MemoryReader {
 public:
  explicit ProcessVmReader(pid_t pid) : pid_(pid) {}
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "process_vm_readv"; }
  int last_errno() const { return errno_; }

 private:
  pid_t pid_;
  int errno_ = 0;
};

/// pread(2) on /proc/PID/mem (opened lazily, closed by the destructor).
class ProcMemReader final : public MemoryReader {
 public:
  explicit ProcMemReader(pid_t pid) : pid_(pid) {}
  ~ProcMemReader() override;
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "proc_mem"; }
  int last_errno() const { return errno_; }

 private:
  pid_t pid_;
  int fd_ = -1;
  int errno_ = 0;
};

/// PTRACE_PEEKDATA word by word; the caller must already be attached and the
/// thread stopped.
class PtraceReader final : public MemoryReader {
 public:
  explicit PtraceReader(pid_t tid) : tid_(tid) {}
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override { return "ptrace"; }
  int last_errno() const { return errno_; }

 private:
  pid_t tid_;
  int errno_ = 0;
};

/// process_vm_readv, then /proc/PID/mem, then ptrace PEEKDATA: a reader is
/// abandoned for good when it fails with EPERM or ENOSYS (not for EFAULT/EIO,
/// which mean the address is unmapped). `ptrace_tid` 0 disables ptrace.
class FallbackReader final : public MemoryReader {
 public:
  FallbackReader(pid_t pid, pid_t ptrace_tid);
  bool read(uint64_t addr, void* buf, size_t len) override;
  const char* name() const override;
  /// Current stage: 0 process_vm_readv, 1 /proc/PID/mem, 2 ptrace, 3 none left.
  int stage() const { return stage_; }
  /// Whether a reader failing with `err` is abandoned for good (EPERM, ENOSYS, EACCES).
  static bool abandons_stage(int err);

 private:
  ProcessVmReader vm_;
  ProcMemReader mem_;
  PtraceReader pt_;
  int stage_ = 0;  // 0 vm, 1 mem, 2 ptrace, 3 none
  bool ptrace_allowed_;
};

}  // namespace stackprov::memory
