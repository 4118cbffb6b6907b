// SPDX-License-Identifier: Apache-2.0
// bench/unwind: snapshots loaded through the public ABI, plus the memory view the peers read (stackprov's own reader).
#ifndef STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP
#define STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "memory/snapshot.hpp"  // stackprov::memory::{Snapshot, SnapshotReader}: what our unwinder reads
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
  sprov_snapshot* snap = nullptr;  // what stackprov unwinds (public ABI)
  /// The same bytes deserialized into the library's own representation: the
  /// peers' memory reads go through it (see PeerMemory).
  std::unique_ptr<stackprov::memory::Snapshot> mem;
  int source = 0;  // kSnapSourceNative / kSnapSourcePython
  std::string category;
  size_t group = 0;
  uint64_t regs[kNumRegs] = {};
  uint32_t reg_mask = 0;
};

/// Target memory as a peer reads it during one walk. Fairness: stackprov's
/// unwinder reads the stack (and every other captured byte: the vDSO, ...)
/// through one stackprov::memory::SnapshotReader per walk, over the snapshot's
/// sorted memory regions (an inline last-region-hit check, then a binary
/// search). A peer's memory callback does exactly the same: one SnapshotReader
/// per walk over the same deserialized regions, the same class, so a stack read
/// costs a peer what it costs us. Only what is not captured memory falls
/// through to the module files: nongnu libunwind in remote mode reads
/// .eh_frame_hdr and .eh_frame through its access_mem callback, which stackprov
/// (and libdwfl) read from their own mapping of the module file without any
/// reader; those reads pay one failed SnapshotReader lookup (a binary search
/// over a handful of regions) before the module's segment lookup (itself with
/// a last-hit hint, like SnapshotReader). Earlier versions kept a private flat
/// copy of the stack for the peers and sent the remaining reads through the C
/// ABI (sprov_snapshot_read_memory, which formats an error message on a miss):
/// cheaper stack reads than ours, much dearer misses.
class PeerMemory {
 public:
  PeerMemory(const Group& g, const Snapshot& s) : group_(&g), reader_(*s.mem) {}
  bool read(uint64_t addr, void* out, size_t len) {
    if (reader_.read(addr, out, len)) return true;
    return read_module(addr, out, len);
  }

 private:
  bool read_module(uint64_t addr, void* out, size_t len);

  const Group* group_;
  stackprov::memory::SnapshotReader reader_;
  const Segment* hit_ = nullptr;
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

 private:
  std::vector<Snapshot> snaps_;
  std::vector<Group> groups_;
  std::vector<std::unique_ptr<ModuleFile>> files_;
};

}  // namespace bench_unwind

#endif  // STACKPROV_BENCH_UNWIND_SNAPSHOT_SET_HPP
