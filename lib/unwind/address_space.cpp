// SPDX-License-Identifier: Apache-2.0
// The module table of one process, updated incrementally and published by generation (readers never block).
#include "unwind/address_space.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>

#include "core/module_map.hpp"

namespace stackprov::unwind {

namespace {

constexpr const char* kUprobes = "[uprobes]";

/// Identity of a loaded module inside one address space.
std::string module_identity(const memory::SnapshotModule& m) {
  return m.path + '\0' + m.build_id.hex() + '\0' + std::to_string(m.load_bias) + '\0' + std::to_string(m.file.dev) +
         ':' + std::to_string(m.file.ino) + ':' + std::to_string(m.file.mtime_ns);
}

bool same_table(const AddressSpaceVersion& v, const std::vector<memory::SnapshotModule>& mods,
                const std::vector<AddrRange>& tramps) {
  if (v.modules.size() != mods.size() || v.trampolines.size() != tramps.size()) return false;
  for (size_t i = 0; i < mods.size(); i++) {
    const auto &a = v.modules[i], &b = mods[i];
    if (a.start != b.start || a.end != b.end || a.file_offset != b.file_offset || a.load_bias != b.load_bias ||
        a.path != b.path || a.build_id != b.build_id || !(a.file == b.file))
      return false;
  }
  for (size_t i = 0; i < tramps.size(); i++)
    if (v.trampolines[i].start != tramps[i].start || v.trampolines[i].end != tramps[i].end) return false;
  return true;
}

}  // namespace

AddressSpace::AddressSpace(uint32_t pid, std::string root, Loader loader, bool load_debug_frame)
    : pid_(pid),
      root_(root),
      loader_(std::move(loader)),
      load_debug_frame_(load_debug_frame),
      tracker_(std::move(root), {}, perf::read_own_vdso()) {
  auto* v = new AddressSpaceVersion();  // generation 0: no mappings yet
  v->table.finish();
  slots_[0].version.store(v);
  current_.store(0);
}

void AddressSpace::set_live(int64_t live_pid) {
  std::lock_guard<std::mutex> lock(mu_);
  tracker_.set_live(pid_, live_pid);
}

AddressSpace::~AddressSpace() {
  for (Slot& s : slots_) delete s.version.load();
}

const AddressSpaceVersion* AddressSpace::pin(uint32_t* slot) const noexcept {
  for (;;) {
    const uint32_t i = current_.load();
    slots_[i].enter.fetch_add(1);
    if (current_.load() == i) {
      *slot = i;
      return slots_[i].version.load();
    }
    slots_[i].exit.fetch_add(1);  // the writer moved on meanwhile: back out, never touch the version
  }
}

void AddressSpace::unpin(uint32_t slot) const noexcept { slots_[slot].exit.fetch_add(1); }

uint64_t AddressSpace::generation() const noexcept {
  uint32_t slot;
  const uint64_t g = pin(&slot)->generation;
  unpin(slot);
  return g;
}

uint32_t AddressSpace::live_versions() const {
  uint32_t n = 0;
  for (const Slot& s : slots_) n += s.version.load() != nullptr;
  return n;
}

void AddressSpace::reclaim_locked() {
  const uint32_t cur = current_.load();
  for (uint32_t i = 0; i < kSlots; i++) {
    if (i == cur) continue;
    AddressSpaceVersion* v = slots_[i].version.load();
    // exit first, then enter. Read the other way, a reader inside (enter 1, exit 0) and a second
    // reader backing out of a stale index (enter 2, then exit 1) could be seen as enter 1 == exit 1,
    // and the version freed under the first (TSan found it in CI). Read exit-then-enter, equal
    // counts mean no reader was inside when exit was read, and none entered since.
    const uint32_t out = slots_[i].exit.load();
    if (v != nullptr && slots_[i].enter.load() == out) {
      slots_[i].version.store(nullptr);
      delete v;
    }
  }
}

void AddressSpace::cut_trampolines_locked(uint64_t start, uint64_t end) {
  std::vector<AddrRange> out;
  for (const AddrRange& r : trampolines_) {
    if (r.end <= start || r.start >= end) {
      out.push_back(r);
      continue;
    }
    if (r.start < start) out.push_back({r.start, start});
    if (r.end > end) out.push_back({end, r.end});
  }
  trampolines_ = std::move(out);
}

Status AddressSpace::Batch::mmap(const perf::RawMmap& m) {
  if (m.start + m.len < m.start)
    return make_error(SPROV_ERR_INVALID_ARG, "mapping 0x%llx+0x%llx wraps", static_cast<unsigned long long>(m.start),
                      static_cast<unsigned long long>(m.len));
  if (m.len == 0) return {};
  as_.cut_trampolines_locked(m.start, m.start + m.len);
  perf::RawMmap own = m;
  own.pid = as_.pid_;
  if (m.path == kUprobes) {
    as_.trampolines_.push_back({m.start, m.start + m.len});
    std::sort(as_.trampolines_.begin(), as_.trampolines_.end(),
              [](const AddrRange& a, const AddrRange& b) { return a.start < b.start; });
    own.prot = PROT_READ;  // a trampoline page over code ends that code
    own.path.clear();
  }
  as_.tracker_.on_mmap(own);
  return {};
}

Status AddressSpace::Batch::unmap(uint64_t start, uint64_t end) {
  if (end < start)
    return make_error(SPROV_ERR_INVALID_ARG, "range 0x%llx-0x%llx ends before it starts",
                      static_cast<unsigned long long>(start), static_cast<unsigned long long>(end));
  perf::RawMmap hole;  // a mapping that is not code ends the code it covers (ModuleTracker::on_mmap)
  hole.start = start;
  hole.len = end - start;
  hole.prot = PROT_READ;
  return mmap(hole);
}

void AddressSpace::Batch::exec() {
  perf::RawComm c;
  c.pid = c.tid = as_.pid_;
  c.exec = true;
  as_.tracker_.on_comm(c);
  as_.trampolines_.clear();
}

Status AddressSpace::Batch::maps(const std::string& maps_text) {
  auto maps = parse_maps(maps_text);
  if (!maps.ok()) return std::move(maps).error();
  exec();
  for (const MapsEntry& e : maps.value()) {
    if (!e.executable || e.end <= e.start) continue;
    perf::RawMmap m;
    m.start = e.start;
    m.len = e.end - e.start;
    m.pgoff = e.offset;
    m.prot = PROT_READ | PROT_EXEC;
    m.path = e.path;
    m.dev_major = e.dev_major;
    m.dev_minor = e.dev_minor;
    m.inode = e.inode;
    if (Status st = mmap(m); !st.ok()) return st;
  }
  return {};
}

Status AddressSpace::update(const std::function<Status(Batch&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Batch b(*this);
  Status st = fn(b);
  Status pub = publish_locked();
  return st.ok() ? pub : st;
}

Status AddressSpace::publish_locked() {
  const perf::ModuleList& list = *tracker_.lists()[tracker_.list_for(pid_)];
  const AddressSpaceVersion& cur = *slots_[current_.load()].version.load();
  if (same_table(cur, list.modules, trampolines_)) return {};

  auto v = std::make_unique<AddressSpaceVersion>();
  v->modules = list.modules;
  v->trampolines = trampolines_;
  memory::Snapshot vdso;
  if (list.vdso_start != 0 && !tracker_.vdso_bytes().empty())
    (void)vdso.add_memory(list.vdso_start, tracker_.vdso_bytes().data(), tracker_.vdso_bytes().size());
  std::map<std::string, std::shared_ptr<LoadedModule>> loaded;
  std::string failures;
  for (size_t i = 0; i < v->modules.size(); i++) {
    const memory::SnapshotModule& m = v->modules[i];
    const std::string id = module_identity(m);
    std::shared_ptr<LoadedModule> mod;
    if (auto it = loaded_.find(id); it != loaded_.end()) {
      mod = it->second;
    } else if (auto it2 = loaded.find(id); it2 != loaded.end()) {
      mod = it2->second;
    } else {
      auto r = loader_(m, vdso);
      if (r.ok()) {
        mod = r.value();
        if (load_debug_frame_ && mod->has_elf()) (void)mod->debug_frame();
      } else {
        failures += "module " + m.path + ": " + r.error().message + "\n";
      }
    }
    if (mod) loaded[id] = mod;
    ModuleSlot slot;
    slot.start = m.start;
    slot.end = m.end;
    slot.bias = m.load_bias;
    slot.snapshot_index = static_cast<int32_t>(i);
    slot.module = mod.get();
    v->table.add(slot, mod);
  }
  v->table.finish();
  v->warnings = tracker_.warnings() + failures;

  // A free slot: reclaim what no reader pins; wait (bounded) for readers still inside.
  uint32_t free_slot = kSlots;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    reclaim_locked();
    for (uint32_t i = 0; i < kSlots && free_slot == kSlots; i++)
      if (slots_[i].version.load() == nullptr) free_slot = i;
    if (free_slot != kSlots) break;
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(-EBUSY, "address space: all %u generations are still pinned by readers after 2 s", kSlots);
    sched_yield();
  }
  v->generation = next_generation_++;
  slots_[free_slot].version.store(v.release());
  current_.store(free_slot);
  loaded_ = std::move(loaded);
  reclaim_locked();
  return {};
}

}  // namespace stackprov::unwind
