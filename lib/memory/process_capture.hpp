// SPDX-License-Identifier: Apache-2.0
// Live-process capture: ptrace-stop every thread, copy registers, stacks, the vDSO and the module list, detach always.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/memory_reader.hpp"
#include "memory/snapshot.hpp"

namespace stackprov::memory {

/// The result of capturing a live process: one snapshot per thread that
/// stopped, sorted by tid, all sharing the same module list.
struct ProcessCapture {
  int64_t pid = 0;
  std::vector<Snapshot> threads;
  std::string warnings;  ///< non-fatal findings, one per line ("thread 12 exited during capture")
  std::string program_name;                      ///< /proc/PID/comm ("" when unreadable)
  std::map<int64_t, std::string> thread_names;   ///< /proc/PID/task/TID/comm of each captured thread
};

/// Called once per captured thread while every thread is still stopped, with
/// a live reader of the target (process_vm_readv, /proc/PID/mem, then ptrace
/// PEEKDATA on that thread). It may add memory to the snapshot (see
/// capi::prewalk_record). It runs on the capture's tracer thread.
using WhileStopped = std::function<void(Snapshot&, MemoryReader&)>;

/// Captures the threads of live process `pid` (all of them, or only
/// `only_tid` when non-zero): PTRACE_SEIZE + PTRACE_INTERRUPT each thread,
/// registers through PTRACE_GETREGSET (NT_PRSTATUS), up to `max_stack_bytes`
/// of stack from sp (bounded by the mapping that holds sp), the vDSO bytes,
/// and the module list (files opened as /proc/PID/root/<path>). Maps are read
/// once while all threads are stopped.
///
/// Detach guarantee: every thread is detached before this returns, on every
/// path; a signal that was pending at the stop is re-injected on detach. The
/// ptrace work runs on a dedicated tracer thread, so a thread that never
/// stopped (uninterruptible sleep, vfork parent) is detached by the kernel
/// when that thread exits. While attached, SIGINT/SIGTERM/SIGHUP/SIGPIPE
/// (unless ignored) are caught: the handler detaches every thread
/// (async-signal-safe: ptrace system calls only), restores the previous
/// disposition and re-raises; if the process survives, the capture fails with
/// -EINTR.
///
/// Thread-safety: captures are serialized process-wide (the signal-safe
/// detach list is global). Errors: -ESRCH (no such process, or the tid is not
/// a thread of pid), -EPERM (message: ptrace_permission_hint),
/// SPROV_ERR_CAPTURE (zombie, own process, no thread could be stopped),
/// SPROV_ERR_INVALID_ARG, -EINTR (interrupted by a signal).
Result<ProcessCapture> capture_process(pid_t pid, pid_t only_tid, uint32_t max_stack_bytes,
                                       const WhileStopped& while_stopped);

/// How the threads of a process are listed: the tids under /proc/PID/task, sorted.
using TaskLister = std::function<Result<std::vector<pid_t>>(pid_t pid)>;

/// capture_process with the thread listing supplied. A tid can be reused by another process
/// between a listing and PTRACE_SEIZE; each seized tid is checked to be a thread of `pid` once
/// attached (from then on it cannot be reused), and one that is not is detached, left out and
/// named in the warnings. Tests pass a listing that names another process's thread to get there.
Result<ProcessCapture> capture_process(pid_t pid, pid_t only_tid, uint32_t max_stack_bytes,
                                       const WhileStopped& while_stopped, const TaskLister& list_tasks);

/// What a user can act on when attaching fails with EPERM: Yama's ptrace_scope (named only when
/// `yama_dir`, /proc/sys/kernel/yama, exists: kernels without Yama have classic ptrace
/// permissions only), whether this process has CAP_SYS_PTRACE, an existing tracer (`tracer_pid`,
/// "" for none) and what to do. One line, no trailing period. With CAP_SYS_PTRACE, no other tracer
/// and a `proc_dir` (/proc/PID) whose `exe` link the kernel will not show this process, the advice
/// says that nothing a user can change here helps: the kernel's access check itself refuses (a user
/// namespace above this one, a target that is not dumpable under other credentials, a security
/// module).
std::string ptrace_permission_hint(const std::string& yama_dir, bool cap_sys_ptrace, const std::string& tracer_pid,
                                   const std::string& proc_dir = "");

}  // namespace stackprov::memory
