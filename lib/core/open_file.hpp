// SPDX-License-Identifier: Apache-2.0
// Opening files named by hostile input (module paths from a target's maps, a core, a perf record):
// regular files only, without running a device's or a FIFO's open, and a target's files only
// inside the target's own root.
#pragma once

#include <sys/stat.h>
#ifndef _WIN32
#include <sys/statfs.h>
#endif

#include <cstdint>
#include <memory>
#include <string>

namespace stackprov {

/// Opens `path` read-only (O_CLOEXEC) if it is a regular file. The path is resolved with O_PATH
/// first, which opens no device and blocks on no FIFO; only a regular file is then opened for
/// reading (through /proc/self/fd, so the file checked is the file read). Returns the fd, or -1
/// with *err set: an errno value, or EINVAL when the path is not a regular file.
///
/// A path inside a process's root, "/proc/PID/root/REST", is resolved as that process sees it:
/// openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) of REST relative to its root (the one a
/// HeldRoot keeps for PID, else /proc/PID/root opened now), so that the target's absolute
/// symlinks and ".." stay inside its root and never reach the host's files (doc/hardening.md,
/// attack 2). Without openat2 (a kernel before 5.6, or a seccomp filter) a process whose root is
/// ours is looked up as usual, another root is refused (ENOSYS).
int open_regular_file(const std::string& path, int* err);
// On Windows (open_file_win.cpp) the path is UTF-8, opened with CreateFileW (sharing read, write
// and delete, so that a target's loaded images open), and refused unless it is a disk file that
// is not a directory (EINVAL); there are no process roots: the functions below say "" and true.

/// stat(2) of `path` as open_regular_file resolves it: a target's "/proc/PID/root/REST" inside its
/// root (its symlinks never followed onto the host, not even to stat a host file), else stat.
/// 0, or -1 with errno set.
int stat_path(const std::string& path, struct stat* st);
#ifndef _WIN32
/// statfs(2) of the file open_regular_file would open for `path`. 0, or -1 with errno set.
int statfs_path(const std::string& path, struct statfs* fs);
#endif

/// "/proc/PID/root" when `path` names a file of process PID through its root or its map_files
/// ("/proc/PID/root/...", "/proc/PID/map_files/...") and that root is not this process's own
/// root (another mount namespace, chroot or pivot_root), else "".
std::string target_root_of(const std::string& path);

/// Whether a name relative to `dir` (a directory of a module's path) stays inside the module's
/// root: always for the host's own files and under "/proc/PID/root/..." (resolved there), never
/// under "/proc/PID/map_files" of a target (".." from there leaves through procfs onto the host).
bool relative_names_stay_in_root(const std::string& dir);

/// The absolute path `p`, taken from a file of a target (a debug link, a DWO name, a dwz path,
/// a debug directory), as the target sees it: under target_root_of(module_path) when the module
/// is the target's, else `p` unchanged.
std::string under_root_of(const std::string& module_path, const std::string& p);

/// Keeps process PID's root directory open while it lives (from the start of a capture), so that
/// its files are still opened inside that root after the process exits or its PID is reused.
/// open_regular_file uses the newest HeldRoot of a PID. Thread-safe.
class HeldRoot {
 public:
  /// Null when /proc/PID/root cannot be opened (the process is gone, or no permission).
  static std::shared_ptr<HeldRoot> hold(int64_t pid);
  ~HeldRoot();
  HeldRoot(const HeldRoot&) = delete;
  HeldRoot& operator=(const HeldRoot&) = delete;

 private:
#if !defined(_WIN32)  // Windows has no process roots: open_file_win.cpp's hold() holds none
  HeldRoot(int64_t pid, int fd) : pid_(pid), fd_(fd) {}
  int64_t pid_;
  int fd_;
#endif
};

}  // namespace stackprov
