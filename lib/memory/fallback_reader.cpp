// SPDX-License-Identifier: Apache-2.0
// The reader ladder: process_vm_readv, then /proc/PID/mem, then ptrace, abandoning a stage on EPERM/ENOSYS/EACCES.
#include <cerrno>

#include "memory/live_readers.hpp"

namespace stackprov::memory {

namespace {
constexpr int kStageVm = 0, kStageMem = 1, kStagePtrace = 2, kStageNone = 3;
}  // namespace

FallbackReader::FallbackReader(pid_t pid, pid_t ptrace_tid)
    : vm_(pid), mem_(pid), pt_(ptrace_tid), ptrace_allowed_(ptrace_tid != 0) {}

bool FallbackReader::abandons_stage(int err) {
  return err == EPERM || err == ENOSYS || err == EACCES;
}

bool FallbackReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  // EFAULT, EIO, ESRCH and the like mean the address (or the thread) is bad:
  // the next reader would fail the same way, so the stage stays.
  while (stage_ != kStageNone) {
    switch (stage_) {
      case kStageVm:
        if (vm_.read(addr, buf, len)) return true;
        if (!abandons_stage(vm_.last_errno())) return false;
        stage_ = kStageMem;
        break;
      case kStageMem:
        if (mem_.read(addr, buf, len)) return true;
        if (!abandons_stage(mem_.last_errno())) return false;
        stage_ = ptrace_allowed_ ? kStagePtrace : kStageNone;
        break;
      default:
        if (pt_.read(addr, buf, len)) return true;
        if (!abandons_stage(pt_.last_errno())) return false;
        stage_ = kStageNone;
        break;
    }
  }
  return false;
}

const char* FallbackReader::name() const {
  switch (stage_) {
    case kStageVm:
      return vm_.name();
    case kStageMem:
      return mem_.name();
    case kStagePtrace:
      return pt_.name();
    default:
      return "none";
  }
}

}  // namespace stackprov::memory
