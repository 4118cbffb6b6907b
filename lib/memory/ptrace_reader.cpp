// SPDX-License-Identifier: Apache-2.0
// PTRACE_PEEKDATA reads, one aligned word at a time, for unaligned start and end addresses.
#include <sys/ptrace.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "memory/live_readers.hpp"

namespace stackprov::memory {

bool PtraceReader::read(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  if (addr + len < addr) {
    errno_ = EFAULT;
    return false;
  }
  constexpr uint64_t kWord = sizeof(long);
  const int saved_errno = errno;
  auto* out = static_cast<uint8_t*>(buf);
  uint64_t word_addr = addr & ~(kWord - 1);
  size_t skip = static_cast<size_t>(addr - word_addr);  // bytes to drop from the first word
  bool ok = true;
  while (len > 0) {
    // PEEKDATA returns the word itself, so -1 is a valid value: errno tells.
    errno = 0;
    const long word = ptrace(PTRACE_PEEKDATA, tid_, reinterpret_cast<void*>(word_addr), nullptr);
    if (word == -1 && errno != 0) {
      errno_ = errno;
      ok = false;
      break;
    }
    uint8_t bytes[sizeof(long)];
    std::memcpy(bytes, &word, sizeof(word));
    const size_t n = std::min<size_t>(kWord - skip, len);
    std::memcpy(out, bytes + skip, n);
    out += n;
    len -= n;
    skip = 0;
    word_addr += kWord;
  }
  if (ok) errno_ = 0;
  errno = saved_errno;
  return ok;
}

}  // namespace stackprov::memory
