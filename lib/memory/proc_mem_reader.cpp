// SPDX-License-Identifier: Apache-2.0
// pread(2) on /proc/PID/mem, opened lazily and kept open for the reader's lifetime.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "memory/live_readers.hpp"

namespace stackprov::memory {

ProcMemReader::~ProcMemReader() {
  if (fd_ >= 0) close(fd_);
}

bool ProcMemReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  const int saved_errno = errno;
  if (fd_ < 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", static_cast<int>(pid_));
    fd_ = open(path, O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      errno_ = errno;
      errno = saved_errno;
      return false;
    }
  }
  // Offsets are off_t: addresses at or above 2^63 and wrapping ranges are unreadable.
  if (addr > static_cast<uint64_t>(INT64_MAX) || len > static_cast<uint64_t>(INT64_MAX) - addr) {
    errno_ = EIO;
    errno = saved_errno;
    return false;
  }
  auto* out = static_cast<char*>(buf);
  bool ok = true;
  while (len > 0) {
    const ssize_t n = pread(fd_, out, len, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno_ = n == 0 ? EIO : errno;
      ok = false;
      break;
    }
    out += n;
    addr += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  if (ok) errno_ = 0;
  errno = saved_errno;
  return ok;
}

}  // namespace stackprov::memory
