// SPDX-License-Identifier: Apache-2.0
// Mappings of files that others may change: a file truncated while mapped reads as zeros and is
// reported, instead of killing the process with SIGBUS (doc/hardening.md, attack 4); the size bound
// on module files (attack 3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/types.hpp"

namespace stackprov {

/// How map_file protects the process from a file that shrinks under its mapping.
enum class FileGuard {
  /// mmap, and a SIGBUS handler (installed once, at the first mapping) that maps a zero page over
  /// a faulting page of a registered mapping and marks it faulted. A SIGBUS outside these mappings
  /// goes to the handler that was installed before ours (SA_SIGINFO or not), or to the default
  /// action. An embedder that installs its own SIGBUS handler afterwards must chain to the one it
  /// replaces (JVM: libjsig; Go forwards faults outside Go code to the earlier C handler).
  kSigbus,
  /// No signal handler: the file is copied into memory the library owns (an anonymous mapping
  /// filled with pread). Costs the file's size in memory; for embedders that own SIGBUS.
  kCopy,
};
/// Process-wide; the default kSigbus, or kCopy when $STACKPROV_FILE_GUARD=copy at the first use.
void set_file_guard(FileGuard g);
FileGuard file_guard();

/// Maps `len` bytes of the regular file `fd` from offset 0 (PROT_READ, or PROT_READ|PROT_WRITE
/// private copy-on-write when `writable`) under the guard. `path` names the file in errors.
/// Release with unmap_file. Thread-safe.
Result<void*> map_file(int fd, size_t len, bool writable, const std::string& path);
void unmap_file(void* base, size_t len);
/// Whether a page of the mapping at `base` faulted (its file shrank while mapped: the bytes past
/// the new end read as zeros). Async-signal-safe.
bool file_map_faulted(const void* base);
/// Faults handled since the process started (any mapping): a caller compares it before and after
/// an operation to learn that some file it read changed under it.
uint64_t file_fault_count();

/// The largest module or debug file stackprov maps, reads or hashes (default 4 GiB, or
/// $STACKPROV_MAX_FILE_SIZE bytes at the first use): a target that grows its own mapped library
/// (a sparse 4 TiB file keeps its inode) would otherwise make a capture hash it without bound.
uint64_t max_file_bytes();
void set_max_file_bytes(uint64_t n);
/// SPROV_ERR_LIMIT naming `path`, its size and the limit, when `size` exceeds max_file_bytes().
Status check_file_size(const std::string& path, uint64_t size);

/// A whole regular file mapped read-only under the guard (map_regular_file). Release with
/// unmap_file(base, size); a 0-byte file has base nullptr.
struct MappedRegularFile {
  void* base = nullptr;
  size_t size = 0;
  FileIdentity identity;  ///< dev, inode, mtime (module_cache.hpp file_identity_of)
};
/// How a parser opens a file named by hostile input: open_regular_file (O_PATH first: no device's
/// open, no FIFO wait; a target's paths inside its root), fstat, regular files only
/// (SPROV_ERR_BAD_FORMAT "not a regular file", or `not_regular_code` when given), the size bound
/// (check_file_size), then map_file. Open and fstat failures are the negative errno naming the call.
Result<MappedRegularFile> map_regular_file(const std::string& path, int not_regular_code = SPROV_ERR_BAD_FORMAT);

}  // namespace stackprov
