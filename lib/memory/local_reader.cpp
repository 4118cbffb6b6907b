// SPDX-License-Identifier: Apache-2.0
// Fault-free reads of the calling process: process_vm_readv on itself, else a pipe write() probe.
//
// Async-signal-safety: every path uses only system calls (getpid, process_vm_readv,
// pipe2, write, read, close) and lock-free atomics; errno is preserved. The probe
// pipe is created lazily and shared; a caller that finds it busy (another thread,
// or a signal handler interrupting a read on the same thread) uses a private pipe
// for that one read instead of waiting, so there is no lock to deadlock on.
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "memory/live_readers.hpp"

namespace stackprov::memory {

namespace {

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "signal-handler state must be lock-free");

std::atomic<bool> g_vm_unavailable{false};  // process_vm_readv failed with ENOSYS or EPERM
std::atomic<int> g_pipe_read{-1};
std::atomic<int> g_pipe_write{-1};
std::atomic<bool> g_pipe_busy{false};

/// Chunk size: at most PIPE_BUF so that a write to the non-blocking pipe is
/// all-or-nothing with respect to capacity, and always fits in an empty pipe.
constexpr size_t kProbeChunk = PIPE_BUF;

/// Copies through the pipe: the kernel reads `src` on our behalf in write(),
/// reporting EFAULT instead of delivering SIGSEGV. The pipe is empty on entry
/// and on exit.
bool copy_through_pipe(int rfd, int wfd, uint64_t addr, void* buf, size_t len) {
  auto* out = static_cast<char*>(buf);
  while (len > 0) {
    const size_t chunk = len < kProbeChunk ? len : kProbeChunk;
    ssize_t w;
    do {
      w = write(wfd, reinterpret_cast<const void*>(static_cast<uintptr_t>(addr)), chunk);
    } while (w < 0 && errno == EINTR);
    if (w <= 0) return false;
    size_t got = 0;
    while (got < static_cast<size_t>(w)) {
      const ssize_t r = ::read(rfd, out + got, static_cast<size_t>(w) - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;  // cannot happen for bytes just written; be safe
      got += static_cast<size_t>(r);
    }
    if (static_cast<size_t>(w) != chunk) return false;  // faulted part-way
    out += chunk;
    addr += chunk;
    len -= chunk;
  }
  return true;
}

bool read_with_private_pipe(uint64_t addr, void* buf, size_t len) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  const bool ok = copy_through_pipe(fds[0], fds[1], addr, buf, len);
  close(fds[0]);
  close(fds[1]);
  return ok;
}

bool read_with_pipe(uint64_t addr, void* buf, size_t len) {
  if (g_pipe_busy.exchange(true, std::memory_order_acquire))
    return read_with_private_pipe(addr, buf, len);
  int rfd = g_pipe_read.load(std::memory_order_relaxed);
  int wfd = g_pipe_write.load(std::memory_order_relaxed);
  if (rfd < 0) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      g_pipe_busy.store(false, std::memory_order_release);
      return false;
    }
    rfd = fds[0];
    wfd = fds[1];
    g_pipe_read.store(rfd, std::memory_order_relaxed);
    g_pipe_write.store(wfd, std::memory_order_relaxed);
  }
  bool ok = copy_through_pipe(rfd, wfd, addr, buf, len);
  if (!ok) {
    // Leave no stray bytes behind for the next reader: drop this pipe.
    g_pipe_read.store(-1, std::memory_order_relaxed);
    g_pipe_write.store(-1, std::memory_order_relaxed);
    close(rfd);
    close(wfd);
  }
  g_pipe_busy.store(false, std::memory_order_release);
  return ok;
}

}  // namespace

bool LocalReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  if (addr + len < addr) return false;
  const int saved_errno = errno;
  bool ok = false;
  if (!g_vm_unavailable.load(std::memory_order_relaxed)) {
    int err = 0;
    ok = process_vm_read_all(getpid(), addr, buf, len, &err);
    if (ok || (err != ENOSYS && err != EPERM)) {
      errno = saved_errno;
      return ok;
    }
    g_vm_unavailable.store(true, std::memory_order_relaxed);
  }
  ok = read_with_pipe(addr, buf, len);
  errno = saved_errno;
  return ok;
}

}  // namespace stackprov::memory
