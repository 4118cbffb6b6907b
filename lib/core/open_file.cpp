// SPDX-License-Identifier: Apache-2.0
// open_regular_file: O_PATH, fstat, then a read-only open of the same file through /proc/self/fd;
// a target's files resolved inside its root with openat2(RESOLVE_IN_ROOT); held roots.
#include "core/open_file.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>

namespace stackprov {

namespace {

std::mutex g_roots_mu;
std::multimap<int64_t, int>& held_roots() {  // pid -> fd of each live HeldRoot, oldest first
  static std::multimap<int64_t, int> m;
  return m;
}

/// Splits "/proc/PID/<kind>/REST" into PID and REST ("" when the path is the directory itself).
bool split_proc_path(const std::string& path, const char* kind, int64_t* pid, std::string* rest) {
  if (path.compare(0, 6, "/proc/") != 0) return false;
  size_t i = 6;
  int64_t v = 0;
  const size_t digits = i;
  while (i < path.size() && path[i] >= '0' && path[i] <= '9' && i - digits < 10) v = v * 10 + (path[i++] - '0');
  if (i == digits || i >= path.size() || path[i] != '/') return false;
  const std::string k = std::string("/") + kind;
  if (path.compare(i, k.size(), k) != 0) return false;
  i += k.size();
  if (i < path.size() && path[i] != '/') return false;
  *pid = v;
  *rest = i < path.size() ? path.substr(i + 1) : std::string();
  return true;
}

/// An O_PATH fd of `rest` resolved inside process `pid`'s root, or -1 with *err.
int open_in_root(int64_t pid, const std::string& rest, int* err) {
  int root = -1;
  {
    std::lock_guard<std::mutex> lock(g_roots_mu);
    auto range = held_roots().equal_range(pid);
    if (range.first != range.second) root = fcntl(std::prev(range.second)->second, F_DUPFD_CLOEXEC, 0);  // the newest
  }
  if (root < 0) {
    const std::string r = "/proc/" + std::to_string(pid) + "/root";
    root = ::open(r.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
      *err = errno;
      return -1;
    }
  }
  struct open_how how = {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string rel = rest.empty() ? std::string(".") : rest;
  long fd = -1;
  // EAGAIN: a rename or mount raced a ".." lookup; a target can cause it at will, so the
  // retries are bounded.
  for (int tries = 0; tries < 32; ++tries) {
    fd = syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) break;
  }
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
    // No openat2 (a kernel before 5.6, or a seccomp filter): a process whose root is ours sees
    // our paths, so the plain lookup is the same lookup; another root is refused (fail closed).
    struct stat ours, theirs;
    const int e = errno;
    if (stat("/", &ours) == 0 && fstat(root, &theirs) == 0 && ours.st_dev == theirs.st_dev &&
        ours.st_ino == theirs.st_ino)
      fd = ::open(("/" + rest).c_str(), O_PATH | O_CLOEXEC);
    else
      errno = e;
  }
  if (fd < 0) *err = errno;
  close(root);
  return static_cast<int>(fd);
}

}  // namespace

int open_regular_file(const std::string& path, int* err) {
  int64_t pid = 0;
  std::string rest;
  int pfd;
  if (split_proc_path(path, "root", &pid, &rest)) {
    pfd = open_in_root(pid, rest, err);
    if (pfd < 0) return -1;
  } else {
    pfd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (pfd < 0) {
      *err = errno;
      return -1;
    }
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
  if (fd < 0 && errno == ENOENT && pid == 0)  // no /proc: the path again, non-blocking (no FIFO wait)
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) *err = errno;
  close(pfd);
  return fd;
}

int stat_path(const std::string& path, struct stat* st) {
  int64_t pid = 0;
  std::string rest;
  if (!split_proc_path(path, "root", &pid, &rest)) return ::stat(path.c_str(), st);
  int err = 0;
  const int fd = open_in_root(pid, rest, &err);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  const int rc = fstat(fd, st);
  const int e = errno;
  close(fd);
  errno = e;
  return rc;
}

int statfs_path(const std::string& path, struct statfs* fs) {
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  const int rc = fstatfs(fd, fs);
  const int e = errno;
  close(fd);
  errno = e;
  return rc;
}

std::string target_root_of(const std::string& path) {
  int64_t pid = 0;
  std::string rest;
  if (!split_proc_path(path, "root", &pid, &rest) && !split_proc_path(path, "map_files", &pid, &rest)) return "";
  // A process whose root is ours (no container) sees the host's paths: nothing to translate, and
  // an image cached from such a process stays usable after it exits.
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  struct stat ours, theirs;
  if (stat("/", &ours) == 0 && stat(root.c_str(), &theirs) == 0 && ours.st_dev == theirs.st_dev &&
      ours.st_ino == theirs.st_ino)
    return "";
  return root;
}

std::string under_root_of(const std::string& module_path, const std::string& p) {
  const std::string root = target_root_of(module_path);
  if (root.empty() || p.empty() || p[0] != '/') return p;
  if (p.compare(0, root.size(), root) == 0 && (p.size() == root.size() || p[root.size()] == '/')) return p;
  return root + p;
}

bool relative_names_stay_in_root(const std::string& dir) {
  int64_t pid = 0;
  std::string rest;
  return !split_proc_path(dir, "map_files", &pid, &rest) || target_root_of(dir).empty();
}

std::shared_ptr<HeldRoot> HeldRoot::hold(int64_t pid) {
  const std::string r = "/proc/" + std::to_string(pid) + "/root";
  const int fd = ::open(r.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_roots_mu);
  held_roots().emplace(pid, fd);
  return std::shared_ptr<HeldRoot>(new HeldRoot(pid, fd));
}

HeldRoot::~HeldRoot() {
  std::lock_guard<std::mutex> lock(g_roots_mu);
  auto range = held_roots().equal_range(pid_);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == fd_) {
      held_roots().erase(it);
      break;
    }
  close(fd_);
}

}  // namespace stackprov
