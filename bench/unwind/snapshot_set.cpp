// SPDX-License-Identifier: Apache-2.0
// bench/unwind: loading the snapshot files, grouping by module list, mapping module files for the peers.
#include "snapshot_set.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "snapshot_file.h"

namespace bench_unwind {

ModuleFile::~ModuleFile() {
  if (bytes_ != nullptr) munmap(const_cast<uint8_t*>(bytes_), size_);
}

namespace {

template <class T>
bool read_at(const uint8_t* base, size_t size, uint64_t off, T* out) {
  if (off > size || size - off < sizeof(T)) return false;
  memcpy(out, base + off, sizeof(T));
  return true;
}

// .eh_frame_hdr layout: LSB 5.0 "Exception Frames", section .eh_frame_hdr.
constexpr uint8_t kEhPePcrelSdata4 = 0x1b;
constexpr uint8_t kEhPeUdata4 = 0x03;
constexpr uint8_t kEhPeDatarelSdata4 = 0x3b;

}  // namespace

std::unique_ptr<ModuleFile> ModuleFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto f = std::unique_ptr<ModuleFile>(new ModuleFile());
  f->path_ = path;
  f->bytes_ = static_cast<const uint8_t*>(p);
  f->size_ = static_cast<size_t>(st.st_size);

  Elf64_Ehdr eh;
  memcpy(&eh, f->bytes_, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return nullptr;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (!read_at(f->bytes_, f->size_, eh.e_phoff + uint64_t{i} * eh.e_phentsize, &ph)) return nullptr;
    if (ph.p_type == PT_LOAD) {
      f->loads_.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_X) != 0});
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      uint8_t h[4];
      if (ph.p_offset + 12 > f->size_) continue;
      memcpy(h, f->bytes_ + ph.p_offset, 4);
      // version 1; eh_frame_ptr pcrel sdata4; fde_count udata4; table datarel sdata4 (what ld emits).
      if (h[0] != 1 || h[1] != kEhPePcrelSdata4 || h[2] != kEhPeUdata4 || h[3] != kEhPeDatarelSdata4)
        continue;
      uint32_t count;
      memcpy(&count, f->bytes_ + ph.p_offset + 8, 4);
      f->hdr_.present = true;
      f->hdr_.vaddr = ph.p_vaddr;
      f->hdr_.table_vaddr = ph.p_vaddr + 12;
      f->hdr_.fde_count = count;
    }
  }
  return f;
}

const Segment* Group::find(uint64_t addr) const {
  auto it = std::upper_bound(segments.begin(), segments.end(), addr,
                             [](uint64_t a, const Segment& s) { return a < s.lo; });
  if (it == segments.begin()) return nullptr;
  --it;
  return addr < it->hi ? &*it : nullptr;
}

SnapshotSet::~SnapshotSet() {
  for (Snapshot& s : snaps_) sprov_snapshot_free(s.snap);
}

bool SnapshotSet::load_file(const std::string& path, size_t limit) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    perror(path.c_str());
    return false;
  }
  char magic[8];
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, SPB_SNAP_MAGIC, 8) != 0) {
    fprintf(stderr, "%s: not a bench/unwind snapshot file\n", path.c_str());
    fclose(f);
    return false;
  }
  std::map<std::string, size_t> group_of;
  for (size_t g = 0; g < groups_.size(); g++) group_of[groups_[g].key] = g;
  std::vector<uint8_t> buf;
  size_t added = 0;
  for (;;) {
    if (limit != 0 && added >= limit) break;
    uint8_t src, n;
    if (fread(&src, 1, 1, f) != 1) break;
    char cat[256];
    uint64_t len;
    if (fread(&n, 1, 1, f) != 1 || fread(cat, 1, n, f) != n || fread(&len, 8, 1, f) != 1 ||
        len > (1ull << 30)) {
      fprintf(stderr, "%s: truncated record\n", path.c_str());
      fclose(f);
      return false;
    }
    buf.resize(len);
    if (fread(buf.data(), 1, len, f) != len) {
      fprintf(stderr, "%s: truncated snapshot\n", path.c_str());
      fclose(f);
      return false;
    }
    Snapshot s;
    if (sprov_snapshot_deserialize(buf.data(), len, &s.snap) != 0) {
      fprintf(stderr, "%s: %s\n", path.c_str(), sprov_last_error_message());
      fclose(f);
      return false;
    }
    auto internal = stackprov::memory::deserialize(buf.data(), len);
    if (!internal.ok()) {
      fprintf(stderr, "%s: %s\n", path.c_str(), internal.error().message.c_str());
      sprov_snapshot_free(s.snap);
      fclose(f);
      return false;
    }
    s.mem = std::make_unique<stackprov::memory::Snapshot>(std::move(internal).value());
    s.source = src;
    s.category.assign(cat, n);
    for (int r = 0; r < kNumRegs; r++)
      if (sprov_snapshot_reg(s.snap, static_cast<uint32_t>(r), &s.regs[r]) == 0) s.reg_mask |= 1u << r;

    // Group key: the placed module list.
    std::string key;
    std::vector<PlacedModule> mods;
    size_t nm = sprov_snapshot_module_count(s.snap);
    for (size_t i = 0; i < nm; i++) {
      sprov_module_info mi;
      memset(&mi, 0, sizeof mi);
      mi.sz = sizeof mi;
      if (sprov_snapshot_module(s.snap, i, &mi) != 0 || mi.path == nullptr) continue;
      std::string mpath = mi.path;
      bool dup = false;
      for (const PlacedModule& m : mods) dup |= m.path == mpath && m.load_bias == mi.load_bias;
      if (dup) continue;
      mods.push_back({nullptr, mi.load_bias, mpath});
      char bias[32];
      snprintf(bias, sizeof bias, "@%llx;", static_cast<unsigned long long>(mi.load_bias));
      key += mpath + bias;
    }
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      it = group_of.emplace(key, groups_.size()).first;
      Group g;
      g.key = key;
      g.modules = std::move(mods);
      groups_.push_back(std::move(g));
    }
    s.group = it->second;
    groups_[s.group].members.push_back(snaps_.size());
    snaps_.push_back(std::move(s));
    added++;
  }
  fclose(f);
  return true;
}

bool SnapshotSet::place_modules() {
  std::map<std::string, const ModuleFile*> by_path;
  for (const auto& f : files_) by_path[f->path()] = f.get();
  for (Group& g : groups_) {
    g.segments.clear();
    for (size_t mi = 0; mi < g.modules.size(); mi++) {
      PlacedModule& m = g.modules[mi];
      if (m.path.empty() || m.path[0] != '/') continue;  // [vdso] and friends: bytes are in the snapshot
      auto it = by_path.find(m.path);
      if (it == by_path.end()) {
        auto f = ModuleFile::open(m.path);
        if (f == nullptr) {
          fprintf(stderr, "bench_unwind: cannot map module %s\n", m.path.c_str());
          return false;
        }
        it = by_path.emplace(m.path, f.get()).first;
        files_.push_back(std::move(f));
      }
      m.file = it->second;
      for (const ModuleFile::Load& l : m.file->loads()) {
        uint64_t filesz = std::min<uint64_t>(l.filesz, m.file->size() - std::min<uint64_t>(l.offset, m.file->size()));
        g.segments.push_back({m.load_bias + l.vaddr, m.load_bias + l.vaddr + l.memsz,
                              m.file->bytes() + l.offset, filesz, static_cast<int>(mi), l.exec});
      }
    }
    std::sort(g.segments.begin(), g.segments.end(),
              [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
  }
  return true;
}

bool PeerMemory::read_module(uint64_t addr, void* out, size_t len) {
  const Segment* seg = hit_;
  if (seg == nullptr || addr < seg->lo || addr >= seg->hi) {
    seg = group_->find(addr);
    if (seg == nullptr) return false;
    hit_ = seg;
  }
  if (seg->hi - addr < len) return false;
  const uint64_t off = addr - seg->lo;
  if (off + len <= seg->filesz) {
    memcpy(out, seg->data + off, len);
    return true;
  }
  auto* o = static_cast<uint8_t*>(out);  // past p_filesz: .bss reads as 0
  for (size_t i = 0; i < len; i++) o[i] = off + i < seg->filesz ? seg->data[off + i] : 0;
  return true;
}

}  // namespace bench_unwind
