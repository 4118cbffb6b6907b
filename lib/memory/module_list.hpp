// SPDX-License-Identifier: Apache-2.0
// Building a snapshot's module list from a maps listing: identities (build-ids) and load biases.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/module_map.hpp"
#include "memory/snapshot.hpp"

namespace stackprov::elf {
class ElfImage;
}

namespace stackprov::memory {

/// The files a live process maps, each checked to be the file its maps line names: the same inode,
/// on the same device unless the path's file system stacks (overlayfs, btrfs: their files stat
/// with another device than maps names). A path that names another file (replaced or deleted
/// since it was mapped, or swapped by the target) is read through /proc/PID/map_files/START-END,
/// which is the mapped file (its inode checked), opened once per (device, inode). Where that
/// cannot be opened (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), the mapped file's ELF
/// header, program headers and build-id note are read from the process's memory (its mapping at
/// file offset 0, found in /proc/PID/maps by the same device and inode): the module is then
/// described by that build-id and load bias with no file (its unwind rules and names come from a
/// bundle or debug file with that build-id, or from the file's read-only segments in that memory,
/// Choice::memory_image); where that fails too it is to be left out rather than described by
/// another file.
class MappedFiles {
 public:
  /// `live_pid`: the process whose listing is checked (this process's own: /proc/self).
  /// `keep_images`: a module described from memory also gets Choice::memory_image (the caller puts
  /// it into a snapshot; its warning then says the module is unwound and named from it).
  explicit MappedFiles(int64_t live_pid, bool keep_images = false);
  ~MappedFiles();
  MappedFiles(const MappedFiles&) = delete;
  MappedFiles& operator=(const MappedFiles&) = delete;

  struct Choice {
    std::shared_ptr<elf::ElfImage> image;  ///< the mapped file; null when none could be read
    std::string open_path;                 ///< "/proc/PID/map_files/START-END" when read through it
    bool left_out = false;                 ///< the path names another file and nothing describes the mapped one
    bool from_memory = false;              ///< no file: `build_id` and `load_bias` read from the process's memory
    /// from_memory: the mapped file's bytes an unwinder and a symbolizer need (its headers and
    /// notes, `.eh_frame_hdr`, `.eh_frame`, `.dynsym`, `.dynstr`, `.dynamic`: the read-only
    /// segments that hold them), as the process maps them; null when they could not be read. The
    /// capture puts them into the snapshot, where the module's image is rebuilt from
    /// (elf::rebuild_image).
    std::shared_ptr<const std::vector<MemoryRegion>> memory_image;
    ModuleId build_id;
    uint64_t load_bias = 0;
    std::string warning;                   ///< left out or from memory: why (one line, no newline)
  };
  /// Whether `img`, opened as `host`, is the file listing line `e` maps (always, for a line without an inode).
  static bool matches(const elf::ElfImage& img, const MapsEntry& e, const std::string& host);
  /// `by_path`: the image `host` (root + the listing's path) gave; null when it could not be opened.
  /// A listing line without an inode is taken as it is.
  Choice choose(const MapsEntry& e, std::shared_ptr<elf::ElfImage> by_path, const std::string& host,
                const std::string& module_path);

 private:
  struct Exact {
    std::shared_ptr<elf::ElfImage> image;  // null: `error`
    std::string error;
  };
  struct Header {  // read from memory
    ModuleId build_id;  // empty: `error`
    uint64_t load_bias = 0;
    std::shared_ptr<const std::vector<MemoryRegion>> image;  // null: `image_error`
    std::string image_error;
    std::string error;
  };
  Header header_of(const MapsEntry& e);
  int64_t pid_;
  bool keep_images_;
  /// Opened through map_files, by the listing's (major, minor, inode). Only successes are kept: a
  /// failure (a mapping gone meanwhile) is tried again for the next mapping.
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, Exact> exact_;
  /// By the executable mapping's (start, file offset, major, minor, inode): the same file mapped
  /// the same way at the same place has the same header where its offset 0 is mapped. Only
  /// headers read are kept.
  std::map<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, uint64_t>, Header> headers_;
};

/// Largest ELF image rebuilt from a process's memory (elf::rebuild_image: the file's read-only
/// segments, code included, at their file offsets), and most bytes of it a capture keeps.
inline constexpr uint64_t kMaxMemoryImage = 256u << 20;
inline constexpr uint64_t kMaxMemoryImageKept = 16u << 20;

/// The regions of an image rebuilt from memory (`bytes`, whose offset 0 is mapped with load bias
/// `bias`) that a capture keeps: each read-only PT_LOAD holding the ELF header, a note,
/// `.eh_frame_hdr`, `.eh_frame`, `.dynsym`, `.dynstr` or a hash table, and PT_DYNAMIC; at their
/// run-time addresses. Errors: SPROV_ERR_NOT_FOUND (no `.eh_frame` and no `.dynsym` found),
/// SPROV_ERR_LIMIT (over kMaxMemoryImageKept).
Result<std::vector<MemoryRegion>> memory_image_regions(std::vector<uint8_t> bytes, uint64_t bias);

/// Adds every executable file mapping of `maps` to `s.modules`, plus the vDSO
/// (parsed from `s`'s memory, so its bytes must already have been added).
/// Module files are opened as `root + path` (root "" = as is; "/proc/PID/root"
/// for live targets, so containerized targets are read from the files they
/// really map). A module that cannot be opened is still listed (no build-id,
/// bias 0) and a line is appended to *warnings; one the snapshot cannot hold
/// (a path over its limit, more modules than it takes) is left out with a
/// warning. Anonymous executable memory (JIT code) is not a module.
///
/// `live_pid` != 0: `maps` is the live listing of that process, and each file opened must be
/// the file mapped (the listing's device and inode; the inode alone on a stacking file system
/// such as overlayfs, whose files stat with the overlay's device). A path naming another file
/// (replaced or deleted since it was mapped, or swapped by the target) is read through
/// /proc/PID/map_files/START-END instead, which is the mapped file (SnapshotModule::open_path);
/// where that cannot be opened (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) the module is
/// left out with a warning rather than described by another file. 0: a listing from elsewhere
/// (a recording, another host), taken as it is.
Status add_modules_from_maps(Snapshot& s, const std::vector<MapsEntry>& maps, const std::string& root,
                             std::string* warnings, int64_t live_pid = 0);

}  // namespace stackprov::memory
