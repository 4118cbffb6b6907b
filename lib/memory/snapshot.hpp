// SPDX-License-Identifier: Apache-2.0
// Snapshots: captured registers, memory copies and the module list of one thread; serializable.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "memory/memory_reader.hpp"

namespace stackprov::memory {

/// Maximum number of DWARF registers a snapshot stores (covers all arches).
constexpr int kSnapshotMaxRegs = 40;

struct SnapshotModule {
  uint64_t start = 0;        ///< runtime address range of the mapping
  uint64_t end = 0;
  uint64_t file_offset = 0;  ///< file offset of `start`
  uint64_t load_bias = 0;    ///< runtime - link-time address
  std::string path;          ///< as the target mapped it ("[vdso]" for the vDSO)
  ModuleId build_id;          ///< empty when the module has none
  /// Not serialized: the file the live capture read the build-id from (checked against the
  /// maps line). Whoever opens the module later must find this file, or nothing: a path
  /// swapped since then names another. Unknown (zero) for modules not from a live capture.
  FileIdentity file;
  /// Not serialized: the file to open for this module instead of module_root + path, set when
  /// the path names another file than the one mapped (replaced or deleted since):
  /// /proc/PID/map_files/START-END of the live target.
  std::string open_path;
};

struct MemoryRegion {
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;  ///< the region's bytes, owned (empty when `view` is set)
  /// Borrowed bytes instead (Snapshot::add_memory_view): not owned, valid as long as whoever
  /// added them says. Read a region through data() and size(), which take either.
  const uint8_t* view = nullptr;
  size_t view_len = 0;
  const uint8_t* data() const { return view != nullptr ? view : bytes.data(); }
  size_t size() const { return view != nullptr ? view_len : bytes.size(); }
  /// Copies borrowed bytes into `bytes` (for a caller that changes them).
  void own() {
    if (view == nullptr) return;
    bytes.assign(view, view + view_len);
    view = nullptr;
    view_len = 0;
  }
};

/// What a program registered about its async stacks (doc/async-stacks.md), copied at capture:
/// coroutine stacks with their resumer's saved ucontext_t, and the thread's current async stack
/// root (folly's AsyncStackRoot shape). Addresses in the target; what they point at is read, like
/// the stack, from the snapshot's memory.
struct SnapshotAsync {
  struct Stack {
    uint64_t lo = 0;       ///< [lo, hi): the coroutine's stack
    uint64_t hi = 0;
    uint64_t resumer = 0;  ///< the resumer's saved ucontext_t
  };
  std::vector<Stack> stacks;  ///< sorted by lo, disjoint, at most kMaxStacks
  uint64_t root = 0;          ///< the current AsyncStackRoot, 0: none
  uint32_t root_source = 0;   ///< kRootFolly or kRootSlot (how the capture found it), 0 with no root
  static constexpr uint32_t kRootFolly = 1;  ///< folly_async_stack_root_tls_key's pthread value
  static constexpr uint32_t kRootSlot = 2;   ///< sprov_async_set_thread_root_slot
  static constexpr size_t kMaxStacks = 256;
  bool empty() const { return stacks.empty() && root == 0; }
  /// The registered stack holding `addr`, or nullptr.
  const Stack* stack_of(uint64_t addr) const {
    for (const Stack& st : stacks)
      if (addr >= st.lo && addr < st.hi) return &st;
    return nullptr;
  }
};

/// A language runtime's frames of this thread, as read at capture (doc/runtime-frames.md): the
/// interpreter, the native code ranges that run its frames, and the thread's frame chain. Kept so
/// that a serialized snapshot shows the Python frames the live capture showed; which native frame
/// runs which frame is derived again from the ranges and the entry flags when the stack is
/// interleaved, as at capture. Plain data, independent of lib/runtime (which depends on memory).
struct SnapshotRuntime {
  static constexpr uint8_t kCPython = 1;
  struct Range {
    uint64_t start = 0, end = 0;  ///< [start, end): runtime addresses (_PyEval_EvalFrameDefault, .cold)
  };
  struct Frame {
    std::string function;  ///< co_name
    std::string qualname;  ///< co_qualname
    std::string file;      ///< co_filename
    uint32_t line = 0;     ///< 0: unknown
    bool is_entry = false; ///< the first frame its evaluation-loop activation ran
    uint8_t owner = 0;     ///< 0 thread, 1 generator, 2 frame object (the target's byte)
    uint64_t frame_addr = 0;
    uint64_t code_addr = 0;
  };
  uint8_t kind = 0;          ///< kCPython; 0: no runtime was read (no section)
  std::string description;   ///< the interpreter ("CPython 3.11.2 (layout table: ...)")
  std::vector<Range> eval;   ///< at most kMaxRanges, each start < end
  bool has_thread = false;   ///< the runtime has a thread state for this OS thread
  uint64_t ident = 0;        ///< threading.get_ident() of the thread
  uint64_t tstate = 0;       ///< its PyThreadState
  std::string name;          ///< its threading name, "" none
  std::string problem;       ///< why its chain was cut short at capture, "" whole
  std::vector<Frame> frames; ///< innermost first, at most kMaxFrames
  static constexpr size_t kMaxRanges = 16;
  static constexpr size_t kMaxFrames = 65536;  ///< PythonLimits::max_frames
  /// Longest string (bytes of UTF-8): the reader copies at most 4096 bytes of a str (UCS1 at
  /// most doubles in UTF-8); problems are short sentences.
  static constexpr size_t kMaxString = 16384;
  bool empty() const { return kind == 0; }
};

/// A capture of one thread. Plain data: unwinding is a pure function of it.
struct Snapshot {
  Arch arch = Arch::kUnknown;
  Endian endian = Endian::kLittle;
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t regs[kSnapshotMaxRegs] = {};  ///< DWARF numbering of `arch`
  uint64_t regs_valid = 0;               ///< bit i set: regs[i] captured
  uint32_t flags = 0;                    ///< kFlag* below
  std::vector<MemoryRegion> memory;      ///< sorted by addr, non-overlapping
  std::vector<SnapshotModule> modules;   ///< sorted by start, non-overlapping
  SnapshotAsync async;                   ///< registered async stacks (section 4 when not empty)
  SnapshotRuntime runtime;               ///< runtime frames read at capture (section 5 when read)
  /// Not serialized: where module files were opened at capture time
  /// ("/proc/PID/root" for a live process, a sysroot for a core); "" = as is.
  std::string module_root;

  /// The pc register holds a return address (capture_self: the call site), so
  /// frame 0 is looked up at pc - 1 like a caller frame.
  static constexpr uint32_t kFlagPcIsReturnAddress = 1u << 0;

  bool has_reg(int r) const { return r >= 0 && r < kSnapshotMaxRegs && (regs_valid >> r) & 1; }
  void set_reg(int r, uint64_t v) {
    regs[r] = v;
    regs_valid |= 1ull << r;
  }

  /// Inserts a memory region keeping `memory` sorted; rejects overlaps. With `reuse`, the bytes
  /// are copied into its storage (a buffer of a region dropped before, its capacity kept: no
  /// allocation per region when a snapshot is refilled again and again), and *reuse is left empty.
  Status add_memory(uint64_t addr, const void* bytes, size_t len, std::vector<uint8_t>* reuse = nullptr);
  /// The same checks, the bytes not copied but borrowed: they must stay valid and unchanged until
  /// the region is removed (drop_views) or the snapshot refilled; a copy of the snapshot borrows
  /// them too. For a reader that hands out a record's bytes for as long as the snapshot is used
  /// (perf::Profile::fill_snapshot: a sample's user stack read in place).
  Status add_memory_view(uint64_t addr, const uint8_t* bytes, size_t len);
  /// Removes the borrowed regions (add_memory_view), before their bytes go away.
  void drop_views();
  /// Inserts a module keeping `modules` sorted; rejects overlaps.
  Status add_module(SnapshotModule m);
  /// Replaces the module list with `mods` in any order, as add_module of each would (the same
  /// checks and errors), in O(n log n) rather than n inserts into a sorted vector. On an error
  /// the list is left empty.
  Status set_modules(std::vector<SnapshotModule> mods);
  /// XXH3 of what module_list_hash leaves out (not serialized): module_root and each module's
  /// file identity and open_path. 0 when none is set.
  uint64_t module_files_hash() const;
  /// XXH3 of the module list (ranges, offsets, biases, paths, build-ids): two
  /// snapshots of the same process state have equal hashes. Deterministic.
  uint64_t module_list_hash() const;
};

/// Serialized format (all integers little-endian, every length checked), magic "SPROVSNP" and a
/// u32 version, then:
///   v1: u8 arch, u8 endian, u16 reserved, i64 pid, i64 tid, u32 flags, u64 regs_valid,
///       u64 regs[kSnapshotMaxRegs], u32 n_regions, { u64 addr, u64 len, bytes }*, u32 n_modules,
///       { u64 start, end, file_offset, load_bias, u32 path_len, path, u8 id_len, id }*
///       (every id an ELF build-id).
///   v2: tagged sections { u32 tag, u32 flags, u64 length, payload }: tag 1 header (first; v1's
///       fields from arch to regs), 2 memory (v1's n_regions and regions), 3 modules (v1's
///       modules with a u8 id_kind, IdKind, before id_len; kind 0 has no bytes), then tag 0, the
///       end (empty, last: nothing follows it). Tag 4 async (optional, not required; written only
///       when the snapshot has any): u64 root, u32 root_source, u32 n_stacks, { u64 lo, hi, resumer }*
///       (n ≤ 256, each lo < hi, sorted by lo and disjoint). Tag 5 runtime (optional, not
///       required; written when the capture read a language runtime, SnapshotRuntime): u8 kind (1
///       CPython), str description, u32 n_eval, { u64 start, end }* (n ≤ 16, start < end), u8
///       has_thread (0 or 1), u64 ident, u64 tstate, str name, str problem, u32 n_frames,
///       { str function, str qualname, str file, u32 line, u8 flags (bit 0 entry), u8 owner,
///       u64 frame_addr, u64 code_addr }* (n ≤ 65536); without a thread, ident, tstate, name,
///       problem and frames are zero/empty. str: u32 length (≤ 16384), bytes. Tags 1-3 exactly once, each payload read exactly. flags bit 0
///       "required": a reader that does not know the tag refuses the snapshot; other unknown
///       sections are skipped. New data (kernel stacks, async and runtime frames) comes as new
///       sections, never as a version 3.
/// serialize() writes the oldest version that holds the snapshot (serialized_version): v1 while
/// every id is an ELF build-id, so that older readers keep reading Linux snapshots.
/// Limits: ≤ 1 GiB of memory in total, ≤ 65536 regions and modules, paths ≤ 4096, ≤ 64 sections.
uint32_t serialized_version(const Snapshot& s);
std::vector<uint8_t> serialize(const Snapshot& s);
/// Errors are SPROV_ERR_SNAPSHOT with the offending field and offset named.
Result<Snapshot> deserialize(const uint8_t* data, size_t len);

/// Reads from a snapshot's memory regions (binary search; a read spanning two
/// adjacent regions succeeds). Reads outside every region fail.
class SnapshotReader final : public MemoryReader {
 public:
  explicit SnapshotReader(const Snapshot& s) : snap_(&s) {}
  /// Fast path inline (the unwinder reads 8 bytes at a time): the last region
  /// hit is tried first, then read_slow() binary-searches. Zero-length reads
  /// succeed. Not thread-safe (the hint is mutable state); never faults.
  bool read(uint64_t addr, void* buf, size_t len) override {
    const uint64_t off = addr - hit_addr_;  // wraps to a huge value when addr < hit_addr_
    if (off < hit_size_ && len <= hit_size_ - off) {
      std::memcpy(buf, hit_data_ + off, len);
      return true;
    }
    return read_slow(addr, buf, len);
  }
  const char* name() const override { return "snapshot"; }
  /// Where target byte `addr` lies in this process when it is in the region of the last read,
  /// else nullptr: a prefetch hint (the unwinder's stack reads ahead), never read through.
  const void* cached_host(uint64_t addr) const {
    const uint64_t off = addr - hit_addr_;
    return off < hit_size_ ? hit_data_ + off : nullptr;
  }
  /// Where target bytes [addr, addr + len) lie in this process when all of them are in the region
  /// of the last read, else nullptr (no search): the unwinder reads a rule's slots through it.
  const uint8_t* span(uint64_t addr, size_t len) const {
    const uint64_t off = addr - hit_addr_;
    return off < hit_size_ && len <= hit_size_ - off ? hit_data_ + off : nullptr;
  }
  /// The region of the last read: target bytes [addr, addr + size) are at data in this process
  /// (size 0 before any read). For a loop that keeps it in registers and checks its own bounds.
  struct Window {
    uint64_t addr;
    const uint8_t* data;
    size_t size;
  };
  Window window() const { return {hit_addr_, hit_data_, hit_size_}; }
  /// Moves the window to the region holding target byte `addr` without reading (a walk's first
  /// step); false when no region holds it (the window is then unchanged).
  bool seek(uint64_t addr) { return addr - hit_addr_ < hit_size_ || seek_slow(addr); }

 private:
  bool read_slow(uint64_t addr, void* buf, size_t len);
  bool seek_slow(uint64_t addr);

  const Snapshot* snap_;
  // The last region hit, copied here so that the fast path touches only the
  // reader (hot) and the bytes, not the region vector.
  uint64_t hit_addr_ = 0;
  const uint8_t* hit_data_ = nullptr;
  size_t hit_size_ = 0;
};

}  // namespace stackprov::memory
