// SPDX-License-Identifier: Apache-2.0
// bench/unwind: snapshots loaded through the public ABI, plus the plain memory view the peers read.
#ifndef STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP
#define STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "stackprov/stackprov.h"

namespace bench_unwind {

constexpr int kNumRegs = 17;  // x86_64 DWARF 0..16 (rax..r15, rip = return-address column)
constexpr int kRegSp = 7;
constexpr int kRegIp = 16;

/// A module file mapped read-only once (shared by every group that lists it).
class ModuleFile {
 public:
  ~ModuleFile();
  /// Maps `path` and reads its program headers; nullptr when it is not a readable ELF64 file.
  static std::unique_ptr<ModuleFile> open(const std::string& path);

  struct Load {
    uint64_t vaddr, memsz, offset, filesz;
    bool exec;
  };
  struct EhFrameHdr {
    bool present = false;
    uint64_t vaddr = 0;        // link-time address of .eh_frame_hdr
    uint64_t table_vaddr = 0;  // link-time address of its binary-search table
    uint64_t fde_count = 0;
  };

  const std::string& path() const { return path_; }
  const uint8_t* bytes() const { return bytes_; }
  size_t size() const { return size_; }
  const std::vector<Load>& loads() const { return loads_; }
  const EhFrameHdr& eh_frame_hdr() const { return hdr_; }

 private:
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  std::vector<Load> loads_;
  EhFrameHdr hdr_;
};

/// A module file at one load bias: how a peer sees a module in the snapshot's process.
struct PlacedModule {
  const ModuleFile* file = nullptr;
  uint64_t load_bias = 0;
  std::string path;
};

/// A segment of a placed module in runtime addresses (bytes past filesz read as 0).
struct Segment {
  uint64_t lo, hi;
  const uint8_t* data;
  uint64_t filesz;
  int module;  // index into Group::modules
  bool exec;
};

/// Snapshots whose module lists are identical (one process): the peers share
/// one address space / Dwfl per group.
struct Group {
  std::string key;
  std::vector<PlacedModule> modules;
  std::vector<Segment> segments;  // sorted by lo
  std::vector<size_t> members;    // snapshot indices

  /// The segment holding addr, or nullptr.
  const Segment* find(uint64_t addr) const;
};

struct Snapshot {
  sprov_snapshot* snap = nullptr;
  int source = 0;  // kSnapSourceNative / kSnapSourcePython
  std::string category;
  size_t group = 0;
  uint64_t regs[kNumRegs] = {};
  uint32_t reg_mask = 0;
  uint64_t stack_lo = 0;  // a plain copy of the captured stack [stack_lo, stack_lo + size)
  std::vector<uint8_t> stack;
};

/// All snapshots of the input files, deserialized once, grouped by module list.
class SnapshotSet {
 public:
  ~SnapshotSet();
  /// Appends the records of a file written by the fixtures; false (with a message on stderr) on error.
  bool load_file(const std::string& path, size_t limit);
  /// Opens the module files of every group; false when a module file is missing.
  bool place_modules();

  std::vector<Snapshot>& snapshots() { return snaps_; }
  const std::vector<Snapshot>& snapshots() const { return snaps_; }
  std::vector<Group>& groups() { return groups_; }
  const std::vector<Group>& groups() const { return groups_; }

  /// Reads target memory as a peer sees it: the stack copy, then module bytes,
  /// then the rest of the snapshot's memory (vDSO). Word-sized reads are the common case.
  bool read(const Snapshot& s, uint64_t addr, void* out, size_t len) const;

 private:
  std::vector<Snapshot> snaps_;
  std::vector<Group> groups_;
  std::vector<std::unique_ptr<ModuleFile>> files_;
};

}  // namespace bench_unwind

#endif  // STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP
