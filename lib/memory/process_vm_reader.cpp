// SPDX-License-Identifier: Apache-2.0
// process_vm_readv(2) reads of another process, with partial transfers retried until they fail.
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>

#include "memory/live_readers.hpp"

namespace stackprov::memory {

bool process_vm_read_all(pid_t pid, uint64_t addr, void* buf, size_t len, int* err) {
  const int saved_errno = errno;
  auto* out = static_cast<char*>(buf);
  bool ok = true;
  *err = 0;
  if (addr + len < addr) {  // the range wraps around the address space
    *err = EFAULT;
    return false;
  }
  while (len > 0) {
    iovec local{out, len};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), len};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A retried partial read that makes no progress stopped at an unmapped page.
      *err = n == 0 ? EFAULT : errno;
      ok = false;
      break;
    }
    out += n;
    addr += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  errno = saved_errno;
  return ok;
}

bool ProcessVmReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  return process_vm_read_all(pid_, addr, buf, len, &errno_);
}

}  // namespace stackprov::memory
