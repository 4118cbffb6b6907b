// SPDX-License-Identifier: Apache-2.0
// The one way stackprov creates files: a unique temp file (O_EXCL) renamed into place, and a
// fixed-name lock file opened without following symlinks (doc/hardening.md, attack 5).
#pragma once

#include <string>
#include <string_view>

#include "core/error.hpp"

namespace stackprov {

/// A file being written: "<path>.tmp.XXXXXX" made by mkostemp (O_EXCL: a name another user
/// planted, a symlink among them, is never opened), filled through fd(), then commit() fsyncs it
/// and renames it over `path` (rename replaces a symlink at `path` itself, never its target).
/// An AtomicFile that is not committed removes its temp file. Not thread-safe; movable.
class AtomicFile {
 public:
  /// Creates the temp file beside `path` with `mode` (fchmod, not subject to the umask).
  /// An error names the temp file and errno; a `path` that is a directory is SPROV_ERR_INVALID_ARG.
  static Result<AtomicFile> create(const std::string& path, unsigned mode = 0644);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&& o) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  int fd() const { return fd_; }
  const std::string& temp_path() const { return tmp_; }
  /// Writes all of `data` (EINTR retried).
  Status write(std::string_view data);
  /// fsync, close, rename over the path (with !replace: renameat2(RENAME_NOREPLACE), an existing
  /// file is an error naming it), then fsync the directory unless !sync_dir.
  Status commit(bool sync_dir = true, bool replace = true);

 private:
  AtomicFile() = default;
  void discard();
  std::string path_, tmp_;
  int fd_ = -1;
};

/// AtomicFile::create + write + commit: concurrent writers of one path leave one whole file.
Status write_file_atomic(const std::string& path, std::string_view data, unsigned mode = 0644,
                         bool sync_dir = true, bool replace = true);

/// Opens the lock file `path` (created with `mode` when absent) and takes an exclusive flock,
/// waiting at most `timeout_ms`. The name is fixed, so the open uses O_NOFOLLOW|O_NONBLOCK and
/// the file must be a regular file owned by the calling user or root: a planted symlink, FIFO or
/// another user's file is refused with an error naming it, and a lock held elsewhere past the timeout is
/// SPROV_ERR_LIMIT naming the file. Returns the fd (closing it releases the lock).
Result<int> open_lock_file(const std::string& path, unsigned timeout_ms, unsigned mode = 0600);

}  // namespace stackprov
