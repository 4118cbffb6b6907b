// SPDX-License-Identifier: Apache-2.0
// Opening files named by hostile input (module paths from a target's maps, a core, a perf record):
// regular files only, without running a device's or a FIFO's open.
#pragma once

#include <string>

namespace stackprov {

/// Opens `path` read-only (O_CLOEXEC) if it is a regular file. The path is resolved with O_PATH
/// first, which opens no device and blocks on no FIFO; only a regular file is then opened for
/// reading (through /proc/self/fd, so the file checked is the file read). Returns the fd, or -1
/// with *err set: an errno value, or EINVAL when the path is not a regular file.
int open_regular_file(const std::string& path, int* err);

}  // namespace stackprov
