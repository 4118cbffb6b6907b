// SPDX-License-Identifier: Apache-2.0
// AtomicFile (mkostemp + fsync + rename), write_file_atomic and open_lock_file.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace stackprov {

Result<AtomicFile> AtomicFile::create(const std::string& path, unsigned mode) {
  if (path.empty()) return make_error(SPROV_ERR_INVALID_ARG, "empty output path");
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return make_error(SPROV_ERR_INVALID_ARG, "'%s' is a directory, not a file", path.c_str());
  AtomicFile f;
  f.path_ = path;
  f.tmp_ = path + ".tmp.XXXXXX";
  f.fd_ = mkostemp(f.tmp_.data(), O_CLOEXEC);
  if (f.fd_ < 0) {
    const int e = errno;
    return make_error(-e, "cannot create a file beside '%s': %s", path.c_str(), strerror(e));
  }
  if (fchmod(f.fd_, mode & 07777) != 0) {
    const int e = errno;
    return make_error(-e, "chmod of '%s' failed: %s", f.tmp_.c_str(), strerror(e));
  }
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(std::exchange(o.fd_, -1)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    discard();
    path_ = std::move(o.path_);
    tmp_ = std::move(o.tmp_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
  unlink(tmp_.c_str());
}

Status AtomicFile::write(std::string_view data) {
  if (fd_ < 0) return make_error(SPROV_ERR_INVALID_ARG, "'%s' is already committed", path_.c_str());
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return make_error(-e, "write to '%s' failed: %s", tmp_.c_str(), strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Status AtomicFile::commit(bool sync_dir, bool replace) {
  if (fd_ < 0) return make_error(SPROV_ERR_INVALID_ARG, "'%s' is already committed", path_.c_str());
  if (fsync(fd_) != 0) {
    const int e = errno;
    discard();
    return make_error(-e, "fsync of '%s' failed: %s", tmp_.c_str(), strerror(e));
  }
  int rc = replace ? rename(tmp_.c_str(), path_.c_str())
                   : renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && !replace && errno == EINVAL) {  // a file system without RENAME_NOREPLACE (NFS, CIFS)
    rc = link(tmp_.c_str(), path_.c_str());       // fails with EEXIST as well
    if (rc == 0) unlink(tmp_.c_str());
  }
  if (rc != 0) {
    const int e = errno;
    discard();
    if (e == EEXIST) return make_error(-e, "'%s' exists: not replaced", path_.c_str());
    return make_error(-e, "rename to '%s' failed: %s", path_.c_str(), strerror(e));
  }
  close(fd_);
  fd_ = -1;
  if (!sync_dir) return {};
  const auto slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data, unsigned mode, bool sync_dir,
                         bool replace) {
  auto f = AtomicFile::create(path, mode);
  if (!f) return std::move(f).error();
  if (auto st = f.value().write(data); !st) return st;
  return f.value().commit(sync_dir, replace);
}

Result<int> open_lock_file(const std::string& path, unsigned timeout_ms, unsigned mode) {
  // O_NOFOLLOW: a symlink planted at the fixed name fails (ELOOP, or EACCES in a sticky
  // directory) instead of creating or locking its target; O_NONBLOCK: a FIFO planted there does
  // not block the open. The lstat first only words the refusal.
  struct stat lst;
  if (lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
    return make_error(-ELOOP, "lock file '%s' is a symbolic link: refused", path.c_str());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) return make_error(-e, "lock file '%s' is a symbolic link: refused", path.c_str());
    return make_error(-e, "cannot open lock file '%s': %s", path.c_str(), strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return make_error(-e, "cannot stat lock file '%s': %s", path.c_str(), strerror(e));
  }
  // The caller's own lock file, or root's (a log a user also writes with sudo).
  if (!S_ISREG(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0)) {
    const bool reg = S_ISREG(st.st_mode);
    close(fd);
    return make_error(SPROV_ERR_INVALID_ARG, "lock file '%s' is %s: refused", path.c_str(),
                      reg ? "owned by another user" : "not a regular file");
  }
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    const int e = errno;
    if (e != EWOULDBLOCK && e != EINTR) {
      close(fd);
      return make_error(-e, "cannot lock '%s': %s", path.c_str(), strerror(e));
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    // In ns: a per-field ms division rounds a negative nsec difference up (gives up early).
    const long long waited_ns = (now.tv_sec - start.tv_sec) * 1000000000LL + (now.tv_nsec - start.tv_nsec);
    if (waited_ns >= static_cast<long long>(timeout_ms) * 1000000LL) {
      close(fd);
      return make_error(SPROV_ERR_LIMIT, "'%s' is locked by another process (waited %u ms)", path.c_str(), timeout_ms);
    }
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
}

}  // namespace stackprov
