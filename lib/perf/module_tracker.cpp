// SPDX-License-Identifier: Apache-2.0
// Module lists of sampled processes over time, from MMAP/MMAP2/COMM/FORK/EXIT records.
#include "perf/module_tracker.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "core/module_map.hpp"
#include "elf/elf_image.hpp"

namespace stackprov::perf {

namespace {

constexpr size_t kMaxMappingsPerProc = 65536;
constexpr size_t kMaxLists = size_t{1} << 20;

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
    if (e.path == "[vdso]" && e.end > e.start && e.end - e.start <= (1u << 20)) {
      std::vector<uint8_t> bytes(e.end - e.start);
      std::memcpy(bytes.data(), reinterpret_cast<const void*>(e.start), bytes.size());
      return bytes;
    }
  }
  return {};
}

ModuleTracker::ModuleTracker(std::string root, std::map<std::string, BuildId> recorded_ids,
                             std::vector<uint8_t> vdso, bool open_files)
    : root_(std::move(root)), open_files_(open_files), recorded_ids_(std::move(recorded_ids)) {
  if (!vdso.empty()) {
    auto img = elf::ElfImage::from_bytes(vdso, "[vdso]");
    if (img.ok()) {
      auto it = recorded_ids_.find("[vdso]");
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

void ModuleTracker::insert(Proc& p, Mapping m) {
  // Remove or trim the mappings that [m.start, m.end) replaces (mmap semantics).
  std::vector<Mapping> out;
  out.reserve(p.maps.size() + 2);
  for (Mapping& e : p.maps) {
    if (e.end <= m.start || e.start >= m.end) {
      out.push_back(std::move(e));
      continue;
    }
    if (e.start < m.start) {
      Mapping left = e;
      left.end = m.start;
      out.push_back(std::move(left));
    }
    if (e.end > m.end) {
      Mapping right = e;
      right.pgoff += m.end - e.start;
      right.start = m.end;
      out.push_back(std::move(right));
    }
  }
  if (out.size() >= kMaxMappingsPerProc) {
    warn_once("process has more than 65536 executable mappings: further mappings ignored");
    p.maps = std::move(out);
    return;
  }
  out.push_back(std::move(m));
  std::sort(out.begin(), out.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  p.maps = std::move(out);
  p.dirty = true;
}

void ModuleTracker::on_mmap(const RawMmap& m) {
  Proc& p = procs_[m.pid];
  const bool exec = (m.prot & PROT_EXEC) != 0;
  const bool file_backed = !m.path.empty() && m.path[0] == '/';
  if (m.len == 0) return;
  if (!exec || !(file_backed || m.path == "[vdso]")) {
    // A non-code mapping over code ends that code (munmap + mmap of data).
    bool overlaps = false;
    for (const Mapping& e : p.maps) overlaps |= e.start < m.start + m.len && m.start < e.end;
    if (!overlaps) return;
    Mapping hole{m.start, m.start + m.len, 0, {}, {}};
    insert(p, hole);
    p.maps.erase(std::remove_if(p.maps.begin(), p.maps.end(), [](const Mapping& e) { return e.path.empty(); }),
                 p.maps.end());
    return;
  }
  insert(p, Mapping{m.start, m.start + m.len, m.pgoff, strip_deleted(m.path), m.build_id});
}

void ModuleTracker::on_comm(const RawComm& c) {
  if (!c.exec || c.pid != c.tid) return;
  Proc& p = procs_[c.pid];  // exec: a new address space; the new mappings follow
  p.maps.clear();
  p.dirty = true;
}

void ModuleTracker::on_fork(const RawTask& t) {
  if (t.pid == t.ppid) return;  // a new thread shares the address space
  auto it = procs_.find(t.ppid);
  Proc child;
  if (it != procs_.end()) child.maps = it->second.maps;
  procs_[t.pid] = std::move(child);
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
    on_mmap(m);
  }
}

const ModuleTracker::FileInfo& ModuleTracker::file(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  FileInfo fi;
  if (open_files_) {
    auto img = elf::ElfImage::open(root_ + path);
    if (img.ok()) fi.image = img.value();
    else warn_once("module " + path + ": " + img.error().message);
  }
  return files_.emplace(path, std::move(fi)).first->second;
}

uint32_t ModuleTracker::list_for(uint32_t pid) {
  Proc& p = procs_[pid];
  if (!p.dirty && !lists_.empty()) return p.list;
  auto list = std::make_shared<ModuleList>();
  for (const Mapping& e : p.maps) {
    memory::SnapshotModule m;
    m.start = e.start;
    m.end = e.end;
    m.file_offset = e.pgoff;
    m.path = e.path;
    if (e.path == "[vdso]") {
      if (!vdso_image_) continue;
      m.build_id = vdso_image_->build_id();
      m.load_bias = vdso_image_->load_bias(e.start, 0);
      list->vdso_start = e.start;
    } else {
      const FileInfo& fi = file(e.path);
      BuildId recorded = e.build_id;
      if (recorded.empty()) {
        auto r = recorded_ids_.find(e.path);
        if (r != recorded_ids_.end()) recorded = r->second;
      }
      if (fi.image) {
        m.load_bias = fi.image->load_bias(e.start, e.pgoff, /*executable=*/true);
        m.build_id = fi.image->build_id();
        if (!recorded.empty() && recorded != m.build_id)
          warn_once("module " + e.path + ": build-id mismatch: recording has " + recorded.hex() + ", file has " +
                    m.build_id.hex());
      }
      if (!recorded.empty()) m.build_id = recorded;
    }
    list->modules.push_back(std::move(m));
  }
  memory::Snapshot probe;
  probe.modules = list->modules;
  list->hash = probe.module_list_hash();
  p.dirty = false;
  for (uint32_t id : lists_by_hash_[list->hash]) {
    const ModuleList& o = *lists_[id];
    bool same = o.modules.size() == list->modules.size() && o.vdso_start == list->vdso_start;
    for (size_t i = 0; same && i < o.modules.size(); i++) {
      const auto &a = o.modules[i], &b = list->modules[i];
      same = a.start == b.start && a.end == b.end && a.file_offset == b.file_offset && a.load_bias == b.load_bias &&
             a.path == b.path && a.build_id == b.build_id;
    }
    if (same) return p.list = id;
  }
  if (lists_.size() >= kMaxLists) {
    warn_once("more than 2^20 distinct module lists: reusing the last one");
    return p.list = static_cast<uint32_t>(lists_.size() - 1);
  }
  p.list = static_cast<uint32_t>(lists_.size());
  lists_by_hash_[list->hash].push_back(p.list);
  lists_.push_back(std::move(list));
  return p.list;
}

}  // namespace stackprov::perf
