// SPDX-License-Identifier: Apache-2.0
// Module lists of sampled processes over time, from MMAP/MMAP2/COMM/FORK/EXIT records.
#include "perf/module_tracker.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "core/context.hpp"
#include "core/module_cache.hpp"
#include "core/module_map.hpp"
#include "elf/elf_image.hpp"
#include "memory/module_list.hpp"

namespace stackprov::perf {

namespace {

constexpr size_t kMaxMappingsPerProc = 65536;
constexpr size_t kMaxLists = size_t{1} << 20;
// Totals over every process and list, so that small hostile records cannot multiply big ones: a
// 40-byte FORK copies its parent's mappings, a mmap + sample pair makes a new list of them all.
constexpr size_t kMaxTotalMappings = size_t{1} << 20;
constexpr size_t kMaxTotalListModules = size_t{1} << 22;
constexpr size_t kMaxModuleFiles = 8192;   // each open file is mapped: stay far below vm.max_map_count
constexpr size_t kMaxModulePaths = 65536;  // spellings (sharing the files they name)
// Exited processes whose mappings are kept for late samples (on_exit).
constexpr size_t kKeptExited = 4096;

std::string strip_deleted(const std::string& p) {
  static const std::string kSuffix = " (deleted)";
  if (p.size() > kSuffix.size() && p.compare(p.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return p.substr(0, p.size() - kSuffix.size());
  return p;
}

}  // namespace

std::vector<uint8_t> read_own_vdso() {
  auto text = read_maps_text(0);
  if (!text.ok()) return {};
  auto maps = parse_maps(text.value());
  if (!maps.ok()) return {};
  for (const MapsEntry& e : maps.value()) {
    if (e.path == kVdsoName && e.end > e.start && e.end - e.start <= (1u << 20)) {
      std::vector<uint8_t> bytes(e.end - e.start);
      std::memcpy(bytes.data(), reinterpret_cast<const void*>(e.start), bytes.size());
      return bytes;
    }
  }
  return {};
}

ModuleTracker::ModuleTracker(std::string root, std::map<std::string, ModuleId> recorded_ids,
                             std::vector<uint8_t> vdso, bool open_files)
    : root_(std::move(root)), open_files_(open_files), recorded_ids_(std::move(recorded_ids)) {
  if (!vdso.empty()) {
    auto img = elf::ElfImage::from_bytes(vdso, std::string(kVdsoName));
    if (img.ok()) {
      auto it = recorded_ids_.find(std::string(kVdsoName));
      if (it == recorded_ids_.end() || it->second.empty() || it->second == img.value()->build_id()) {
        vdso_image_ = img.value();
        vdso_ = std::move(vdso);
      } else {
        warn_once("module [vdso]: recorded build-id " + it->second.hex() + " differs from this host's " +
                  img.value()->build_id().hex() + ": vDSO frames are not unwound");
      }
    }
  }
}

ModuleTracker::~ModuleTracker() = default;

void ModuleTracker::warn_once(const std::string& line) {
  if (warned_.emplace(line, true).second) warnings_ += line + "\n";
}

const ModuleTracker::MapTable& ModuleTracker::Proc::maps() const {
  static const MapTable kEmpty;
  return table ? *table : kEmpty;
}

ModuleTracker::MapTable& ModuleTracker::Proc::edit_maps() {
  if (!table) table = std::make_shared<MapTable>();
  else if (table.use_count() > 1) table = std::make_shared<MapTable>(*table);
  return *table;
}

namespace {
/// The first mapping of `maps` that [start, end) overlaps, or end().
template <typename Table>
auto first_overlap(Table& maps, uint64_t start, uint64_t end) {
  auto it = maps.lower_bound(start);
  if (it != maps.begin() && std::prev(it)->second.end > start) --it;
  return it != maps.end() && it->second.start < end ? it : maps.end();
}
}  // namespace

void ModuleTracker::remove_range(Proc& p, uint64_t start, uint64_t end) {
  // Remove or trim the mappings that [start, end) overlaps (mmap semantics). The mappings are
  // disjoint and keyed by start: only the one before `start` and those starting inside are touched.
  // A shared table is copied only when something overlaps (a child's data mappings copy nothing).
  if (first_overlap(p.maps(), start, end) == p.maps().end()) return;
  MapTable& maps = p.edit_maps();
  auto it = first_overlap(maps, start, end);
  while (it != maps.end() && it->second.start < end) {
    p.dirty = true;
    Mapping e = std::move(it->second);
    it = maps.erase(it);
    total_maps_--;
    if (e.start < start) {
      Mapping left = e;
      left.end = start;
      maps.emplace(left.start, std::move(left));
      total_maps_++;
    }
    if (e.end > end) {
      Mapping right = std::move(e);
      right.pgoff += end - right.start;
      right.start = end;
      it = maps.emplace(right.start, std::move(right)).first;
      total_maps_++;
      break;  // nothing after it overlaps
    }
  }
}

void ModuleTracker::insert(uint32_t pid, Mapping m) {
  Proc& p = revive(pid);
  reclaim(kKeptExited, 1);
  remove_range(p, m.start, m.end);
  if (p.map_count() >= kMaxMappingsPerProc || total_maps_ >= kMaxTotalMappings) {
    warn_once(p.map_count() >= kMaxMappingsPerProc
                  ? "process has more than 65536 executable mappings: further mappings ignored"
                  : "more than 2^20 executable mappings in all processes: further mappings ignored");
    return;
  }
  const uint64_t start = m.start;
  p.edit_maps().emplace(start, std::move(m));
  total_maps_++;
  p.dirty = true;
}

void ModuleTracker::on_mmap(const RawMmap& m) {
  const bool exec = (m.prot & PROT_EXEC) != 0;
  const bool file_backed = !m.path.empty() && m.path[0] == '/';
  if (m.len == 0) return;
  if (!exec || !(file_backed || m.path == kVdsoName)) {
    // A non-code mapping over code ends that code (munmap + mmap of data).
    remove_range(revive(m.pid), m.start, m.start + m.len);
    return;
  }
  std::string path = strip_deleted(m.path);
  Proc& p = revive(m.pid);
  if (p.exec_pending && file_backed) {
    p.program = path;
    p.exec_pending = false;
  }
  insert(m.pid, Mapping{m.start, m.start + m.len, m.pgoff, std::move(path), m.build_id, m.dev_major, m.dev_minor,
                        m.inode});
}

void ModuleTracker::on_comm(const RawComm& c) {
  if (!c.exec || c.pid != c.tid) return;
  Proc& p = revive(c.pid);  // exec: a new address space; the new mappings follow
  p.main_exited = false;    // the thread that exec'd is the main thread now
  total_maps_ -= p.map_count();
  p.table.reset();
  p.program.clear();
  p.exec_pending = true;
  p.dirty = true;
}

void ModuleTracker::on_fork(const RawTask& t) {
  auto it = procs_.find(t.ppid);
  if (it != procs_.end()) it->second.exit_seq = 0;  // it made a task: running (revive), never reclaimed
  if (t.pid == t.ppid) return;                      // a new thread shares the address space
  // the child's pid may hold an exited process's state: it is replaced below, freed or not
  reclaim(kKeptExited, it == procs_.end() ? 0 : it->second.map_count());
  Proc child;
  Proc& slot = procs_[t.pid];
  total_maps_ -= slot.map_count();
  if (it != procs_.end()) {
    // A live parent's child is checked too, through the parent's listing, map_files and memory (the
    // child inherited those mappings at the same addresses; MappedFiles finds each by its inode, so
    // one the parent no longer has is left out, never taken from another file). Shared: a server
    // forking per request adds no mapped images or warnings per child.
    child.mapped = it->second.mapped;
    child.program = it->second.program;  // the same program until the child execs
    child.exec_pending = it->second.exec_pending;
    if (total_maps_ + it->second.map_count() <= kMaxTotalMappings) {
      // The parent's table, shared until either changes; the parent's list while it holds (the
      // same mappings, program and files give the same list: list_for need not build it again).
      child.table = it->second.table;
      child.dirty = it->second.dirty;
      child.list = it->second.list;
    } else {
      warn_once("more than 2^20 executable mappings in all processes: forked children start without modules");
    }
  }
  total_maps_ += child.map_count();
  slot = std::move(child);
}

void ModuleTracker::on_exit(const RawTask& t) {
  auto it = procs_.find(t.pid);
  if (it == procs_.end()) return;
  Proc& p = it->second;
  if (t.pid == t.tid) p.main_exited = true;
  else if (!p.main_exited) return;  // a thread ended; the main one runs on
  mark_exited(t.pid, p);            // again, if it was: the newer exit counts
  reclaim(kKeptExited, 0);
}

void ModuleTracker::on_sample(uint32_t pid, uint32_t tid) {
  if (pid == tid) return;  // the main thread's own last samples may follow its EXIT
  if (auto it = procs_.find(pid); it != procs_.end()) it->second.exit_seq = 0;
}

ModuleTracker::Proc& ModuleTracker::revive(uint32_t pid) {
  Proc& p = procs_[pid];
  p.exit_seq = 0;
  return p;
}

void ModuleTracker::mark_exited(uint32_t pid, Proc& p) {
  p.exit_seq = ++exit_seq_;
  exited_.emplace_back(pid, exit_seq_);
}

void ModuleTracker::reclaim(size_t keep, size_t need) {
  // Each pass pops one entry: a stale one (the pid running again, or used by another process
  // since, with exit_seq 0 or newer) or the oldest exited process, freed. Callers revive the
  // processes they change first, so none of them is freed here.
  while (!exited_.empty() && (exited_.size() > keep || total_maps_ + need > kMaxTotalMappings)) {
    const auto [pid, seq] = exited_.front();
    exited_.pop_front();
    auto it = procs_.find(pid);
    if (it == procs_.end() || it->second.exit_seq != seq) continue;
    total_maps_ -= it->second.map_count();
    procs_.erase(it);
  }
}

void ModuleTracker::seed_maps(uint32_t pid, const std::string& maps_text) {
  auto maps = parse_maps(maps_text);
  if (!maps.ok()) {
    warn_once("maps of pid " + std::to_string(pid) + ": " + maps.error().message);
    return;
  }
  for (const MapsEntry& e : maps.value()) {
    if (!e.executable) continue;
    RawMmap m;
    m.pid = pid;
    m.start = e.start;
    m.len = e.end - e.start;
    m.pgoff = e.offset;
    m.prot = PROT_READ | PROT_EXEC;
    m.path = e.path;
    m.dev_major = e.dev_major;
    m.dev_minor = e.dev_minor;
    m.inode = e.inode;
    on_mmap(m);
  }
}

void ModuleTracker::set_live(uint32_t pid, int64_t live_pid) {
  Proc& p = procs_[pid];
  p.mapped = std::make_shared<memory::MappedFiles>(live_pid);
  p.dirty = true;
}

const ModuleTracker::FileInfo& ModuleTracker::file(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  FileInfo fi;
  static const FileInfo kNone;
  if (files_.size() >= kMaxModulePaths) {
    warn_once("more than 65536 distinct module paths: further modules are not opened");
    return kNone;
  }
  if (open_files_) {
    // The file a spelling names, by identity first: another spelling of it shares its image.
    const std::string host = join_root(root_, path);
    struct stat st;
    if (stat(host.c_str(), &st) == 0) {
      const FileIdentity id = file_identity_of(st);
      auto same = images_.find({id.dev, id.ino, id.mtime_ns});
      if (same != images_.end()) fi.image = same->second;
    }
    if (fi.image == nullptr) {
      if (images_.size() >= kMaxModuleFiles) {
        warn_once("more than 8192 distinct module files: further modules are not opened");
        return kNone;
      }
      auto img = elf::ElfImage::open(host);
      if (img.ok()) {
        fi.image = img.value();
        if (const FileIdentity* id = fi.image->file_identity())
          images_.emplace(std::make_tuple(id->dev, id->ino, id->mtime_ns), fi.image);
      } else {
        fi.error = img.error().message;
      }
    }
  }
  return files_.emplace(path, std::move(fi)).first->second;
}

std::shared_ptr<elf::ElfImage> ModuleTracker::reopen(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end() || !open_files_) return nullptr;
  auto img = elf::ElfImage::open(join_root(root_, path));
  if (!img.ok()) return nullptr;
  const FileIdentity* id = img.value()->file_identity();
  if (id == nullptr) return nullptr;
  auto key = std::make_tuple(id->dev, id->ino, id->mtime_ns);
  if (auto same = images_.find(key); same != images_.end()) {
    it->second.image = same->second;
  } else {
    if (images_.size() >= kMaxModuleFiles) return nullptr;
    images_.emplace(key, img.value());
    it->second.image = img.value();
  }
  it->second.error.clear();
  return it->second.image;
}

uint32_t ModuleTracker::list_for(uint32_t pid) {
  Proc& p = procs_[pid];
  if (!p.dirty && !lists_.empty()) return p.list;
  auto list = std::make_shared<ModuleList>();
  // The program (see list_for's comment): the exec'd file's first module, and the first module
  // whose file is a program; an unopened file is taken on the recording's word.
  int32_t exec_index = -1, program_index = -1;
  bool exec_is_program = true;
  auto note = [&](const std::string& path, const elf::ElfImage* image) {
    const auto index = static_cast<int32_t>(list->modules.size());
    const bool exec = exec_index < 0 && !p.program.empty() && path == p.program;
    if (!exec && program_index >= 0) return;
    const bool program = image != nullptr && image->is_program();
    if (exec) {
      exec_index = index;
      exec_is_program = image == nullptr || program;
    }
    if (program_index < 0 && program) program_index = index;
  };
  for (const auto& [start, e] : p.maps()) {
    memory::SnapshotModule m;
    m.start = e.start;
    m.end = e.end;
    m.file_offset = e.pgoff;
    m.path = e.path;
    std::shared_ptr<elf::ElfImage> chosen;  // the file read for this module (null: none, the vDSO)
    if (e.path == kVdsoName) {
      if (!vdso_image_) continue;
      m.build_id = vdso_image_->build_id();
      m.load_bias = vdso_image_->load_bias(e.start, 0);
      list->vdso_start = e.start;
    } else {
      const FileInfo& fi = file(e.path);
      std::shared_ptr<elf::ElfImage> image = fi.image;
      const std::string open_error = fi.error;
      if (p.mapped != nullptr && open_files_ && e.inode != 0) {
        MapsEntry line;
        line.start = e.start;
        line.end = e.end;
        line.offset = e.pgoff;
        line.dev_major = e.dev_major;
        line.dev_minor = e.dev_minor;
        line.inode = e.inode;
        line.path = e.path;
        const std::string host = join_root(root_, e.path);
        // The spelling's file was opened earlier: the path may name a newer file by now, which
        // the process has mapped since (a re-exec, a dlopen again after a package upgrade).
        if (image != nullptr && !memory::MappedFiles::matches(*image, line, host))
          if (auto fresh = reopen(e.path); fresh != nullptr) image = fresh;
        memory::MappedFiles::Choice c = p.mapped->choose(line, image, host, e.path);
        if (c.left_out || c.from_memory) warn_once(c.warning);
        if (c.left_out) continue;
        if (c.from_memory) {  // no file: the build-id and bias the process's memory gave
          m.build_id = c.build_id;
          m.load_bias = c.load_bias;
          note(e.path, nullptr);
          list->modules.push_back(std::move(m));
          list->images.push_back(nullptr);
          continue;
        }
        if (c.image != nullptr) {
          image = c.image;
          m.open_path = c.open_path;
        }
      }
      if (image == nullptr && !open_error.empty()) warn_once("module " + e.path + ": " + open_error);
      ModuleId recorded = e.build_id;
      if (recorded.empty()) {
        auto r = recorded_ids_.find(e.path);
        if (r != recorded_ids_.end()) recorded = r->second;
      }
      if (image) {
        m.load_bias = image->load_bias(e.start, e.pgoff, /*executable=*/true);
        m.build_id = image->build_id();
        if (!recorded.empty() && recorded != m.build_id)
          warn_once("module " + e.path + ": build-id mismatch: recording has " + recorded.hex() + ", file has " +
                    m.build_id.hex());
        else if (image->file_identity() != nullptr)
          m.file = *image->file_identity();  // the file read: later loads key the cache by it, no stat
      }
      if (!recorded.empty()) m.build_id = recorded;
      note(e.path, image.get());
      chosen = image;
    }
    list->modules.push_back(std::move(m));
    list->images.push_back(std::move(chosen));
  }
  list->main = exec_index >= 0 && (exec_is_program || program_index < 0) ? exec_index : program_index;
  memory::Snapshot probe;
  probe.modules = list->modules;
  list->hash = probe.module_list_hash();
  p.dirty = false;
  for (uint32_t id : lists_by_hash_[list->hash]) {
    const ModuleList& o = *lists_[id];
    bool same = o.modules.size() == list->modules.size() && o.vdso_start == list->vdso_start && o.main == list->main;
    for (size_t i = 0; same && i < o.modules.size(); i++) {
      const auto &a = o.modules[i], &b = list->modules[i];
      same = a.start == b.start && a.end == b.end && a.file_offset == b.file_offset && a.load_bias == b.load_bias &&
             a.path == b.path && a.build_id == b.build_id && a.file == b.file && a.open_path == b.open_path;
    }
    if (same) return p.list = id;
  }
  if (!lists_.empty() &&
      (lists_.size() >= kMaxLists || list_modules_ + list->modules.size() > kMaxTotalListModules)) {
    warn_once(lists_.size() >= kMaxLists ? "more than 2^20 distinct module lists: reusing the last one"
                                         : "more than 2^22 modules in all module lists: reusing the last list");
    return p.list = static_cast<uint32_t>(lists_.size() - 1);
  }
  list_modules_ += list->modules.size();
  p.list = static_cast<uint32_t>(lists_.size());
  lists_by_hash_[list->hash].push_back(p.list);
  lists_.push_back(std::move(list));
  return p.list;
}

}  // namespace stackprov::perf
