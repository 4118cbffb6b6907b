// SPDX-License-Identifier: Apache-2.0
// The module table of one process, updated incrementally and published by generation (readers never block).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "memory/snapshot.hpp"
#include "perf/module_tracker.hpp"
#include "unwind/module_unwind.hpp"

namespace stackprov::unwind {

/// A half-open address range [start, end).
struct AddrRange {
  uint64_t start = 0;
  uint64_t end = 0;
};

/// One immutable generation: what a walk reads. Built by the writer, freed by
/// the writer once no reader pins it.
struct AddressSpaceVersion {
  uint64_t generation = 0;
  ModuleTable table;                           ///< slots' snapshot_index index `modules`
  std::vector<memory::SnapshotModule> modules; ///< sorted by start
  std::vector<AddrRange> trampolines;          ///< `[uprobes]` mappings
  std::string warnings;                        ///< the writer's findings when it was published
};

/// The module table of one process. Writer side: the update functions, which
/// take a mutex, change the mapping state (perf::ModuleTracker: mmap semantics,
/// module identities and biases) and publish a new generation when the module
/// table changed. Reader side: pin()/unpin(), lock-free and async-signal-safe.
///
/// Generations live in a ring of kSlots slots. A reader loads the current slot
/// index, increments that slot's `enter` counter, and re-reads the index: if it
/// changed meanwhile it increments `exit` and retries, else it uses the slot's
/// version until unpin() increments `exit`. The writer installs a new version in
/// a free slot, then stores the index (seq_cst), and frees a retired slot's
/// version only when enter == exit, reading exit first (a reader backing out
/// of a stale index raises both counters: read enter first, its exit could
/// hide a reader still inside). With sequentially consistent operations a
/// reader either is seen by the writer's check (the writer waits) or sees the new
/// index on its re-check (it backs out without touching the old version).
class AddressSpace {
 public:
  static constexpr uint32_t kSlots = 8;

  /// Loads a module for the table (through the context's module cache); `vdso`
  /// holds the vDSO's bytes when the list has one. A failure leaves the module
  /// without unwind info (its message goes to the warnings).
  using Loader = std::function<Result<std::shared_ptr<LoadedModule>>(const memory::SnapshotModule& m,
                                                                     const memory::Snapshot& vdso)>;

  /// `pid` keys the tracked process; `root` prefixes module paths for identities
  /// and biases. `load_debug_frame`: attach every module's separate debug file
  /// when it enters the table, so walks never load it.
  AddressSpace(uint32_t pid, std::string root, Loader loader, bool load_debug_frame);
  ~AddressSpace();
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  // ---- writer side (serialized by a mutex; never from a signal handler)

  /// The mappings are those of live process `live_pid`, its files opened under `root`: each
  /// module file is checked to be the one a maps listing names (perf::ModuleTracker::set_live).
  void set_live(int64_t live_pid);

  /// The changes of one update; every call applies at once to the writer state,
  /// the new generation is published when update() returns.
  class Batch {
   public:
    /// mmap semantics: `m` replaces what it overlaps ("[uprobes]" is a trampoline range).
    Status mmap(const perf::RawMmap& m);
    /// munmap semantics.
    Status unmap(uint64_t start, uint64_t end);
    /// exec: drops every mapping.
    void exec();
    /// exec, then every executable mapping of a /proc/PID/maps listing.
    Status maps(const std::string& maps_text);

   private:
    friend class AddressSpace;
    explicit Batch(AddressSpace& as) : as_(as) {}
    AddressSpace& as_;
  };
  /// Runs `fn` under the writer mutex, then publishes a new generation when the
  /// module table changed (the changes stay applied when `fn` fails).
  Status update(const std::function<Status(Batch&)>& fn);

  /// The current version for the writer's thread (module listings of the C ABI).
  const AddressSpaceVersion& current() const { return *slots_[current_.load()].version.load(); }
  uint32_t pid() const { return pid_; }

  // ---- reader side (lock-free, async-signal-safe)

  /// Pins the current version; release it with unpin(slot).
  const AddressSpaceVersion* pin(uint32_t* slot) const noexcept;
  void unpin(uint32_t slot) const noexcept;
  uint64_t generation() const noexcept;

  /// Versions not yet freed (the current one included); for tests.
  uint32_t live_versions() const;

 private:
  struct Slot {
    mutable std::atomic<uint32_t> enter{0};
    mutable std::atomic<uint32_t> exit{0};
    std::atomic<AddressSpaceVersion*> version{nullptr};
  };
  void cut_trampolines_locked(uint64_t start, uint64_t end);
  Status publish_locked();
  void reclaim_locked();

  const uint32_t pid_;
  const std::string root_;
  Loader loader_;
  const bool load_debug_frame_;

  std::mutex mu_;
  perf::ModuleTracker tracker_;
  std::vector<AddrRange> trampolines_;
  /// Loaded modules of the current table by identity (path, build-id, bias, file identity), kept so a
  /// publish loads only what is new.
  std::map<std::string, std::shared_ptr<LoadedModule>> loaded_;
  uint64_t next_generation_ = 1;  ///< generation 0 is the empty table of a new address space

  Slot slots_[kSlots];
  std::atomic<uint32_t> current_{0};
};

/// RAII pin of an address space's current version (reader side).
class PinnedVersion {
 public:
  explicit PinnedVersion(const AddressSpace& as) noexcept : as_(as), v_(as.pin(&slot_)) {}
  ~PinnedVersion() { as_.unpin(slot_); }
  PinnedVersion(const PinnedVersion&) = delete;
  PinnedVersion& operator=(const PinnedVersion&) = delete;
  const AddressSpaceVersion& operator*() const { return *v_; }
  const AddressSpaceVersion* operator->() const { return v_; }

 private:
  const AddressSpace& as_;
  uint32_t slot_ = 0;
  const AddressSpaceVersion* v_;
};

}  // namespace stackprov::unwind
