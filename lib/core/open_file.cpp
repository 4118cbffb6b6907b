// SPDX-License-Identifier: Apache-2.0
// open_regular_file: O_PATH, fstat, then a read-only open of the same file through /proc/self/fd.
#include "core/open_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace stackprov {

int open_regular_file(const std::string& path, int* err) {
  const int pfd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (pfd < 0) {
    *err = errno;
    return -1;
  }
  struct stat st;
  if (fstat(pfd, &st) != 0) {
    *err = errno;
    close(pfd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *err = EINVAL;
    close(pfd);
    return -1;
  }
  char self[64];
  std::snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
  int fd = ::open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 && errno == ENOENT)  // no /proc: the path again, non-blocking (no FIFO wait)
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) *err = errno;
  close(pfd);
  return fd;
}

}  // namespace stackprov
