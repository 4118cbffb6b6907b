// SPDX-License-Identifier: Apache-2.0
// Building a snapshot's module list from a maps listing: identities (build-ids) and load biases.
#include "memory/module_list.hpp"

#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "core/context.hpp"
#include "elf/core_file.hpp"
#include "elf/elf_image.hpp"
#include "memory/live_readers.hpp"

namespace stackprov::memory {

namespace {

std::string strip_deleted(const std::string& p) {
  static const std::string kSuffix = " (deleted)";
  if (p.size() > kSuffix.size() && p.compare(p.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return p.substr(0, p.size() - kSuffix.size());
  return p;
}

bool same_device(const elf::ElfImage& img, const MapsEntry& e) {
  const FileIdentity* id = img.file_identity();
  return id != nullptr && major(static_cast<dev_t>(id->dev)) == e.dev_major &&
         minor(static_cast<dev_t>(id->dev)) == e.dev_minor;
}

/// File systems whose files stat with another device than the one maps names: overlayfs (maps
/// names the underlying file's device, stat the overlay's) and btrfs (stat names the subvolume's
/// device, maps the file system's).
bool device_may_differ(const std::string& path) {
  constexpr long kOverlayfsMagic = 0x794c7630, kBtrfsMagic = 0x9123683e;
  struct statfs fs;
  return statfs(path.c_str(), &fs) == 0 && (fs.f_type == kOverlayfsMagic || fs.f_type == kBtrfsMagic);
}

/// Whether `img`, opened as `path`, was read from the file `e` maps: the same inode, on the same
/// device unless `path`'s file system stacks (device_may_differ). A target's own FUSE or tmpfs
/// mount choosing the inode number is on another device.
bool is_mapped_file(const elf::ElfImage& img, const MapsEntry& e, const std::string& path) {
  const FileIdentity* id = img.file_identity();
  if (id == nullptr || e.inode == 0) return true;  // nothing to compare
  return id->ino == e.inode && (same_device(img, e) || device_may_differ(path));
}

std::string describe(const elf::ElfImage& img, const MapsEntry& e) {
  char b[160];
  const FileIdentity* id = img.file_identity();
  const dev_t d = static_cast<dev_t>(id ? id->dev : 0);
  std::snprintf(b, sizeof b, "maps: device %02x:%02x inode %" PRIu64 "; file: device %02x:%02x inode %" PRIu64,
                e.dev_major, e.dev_minor, e.inode, major(d), minor(d), id ? id->ino : 0);
  return b;
}

}  // namespace

MappedFiles::MappedFiles(int64_t live_pid) : pid_(live_pid) {}

bool MappedFiles::matches(const elf::ElfImage& img, const MapsEntry& e, const std::string& host) {
  return e.inode == 0 || is_mapped_file(img, e, host);
}
MappedFiles::~MappedFiles() = default;

MappedFiles::Choice MappedFiles::choose(const MapsEntry& e, std::shared_ptr<elf::ElfImage> by_path,
                                        const std::string& host, const std::string& module_path) {
  Choice c;
  if (e.inode == 0 || (by_path != nullptr && is_mapped_file(*by_path, e, host))) {
    c.image = std::move(by_path);
    return c;
  }
  // The path names another file than the one mapped, or none (deleted since): the mapping's own
  // file (its inode is checked; its device may be a btrfs subvolume's), or nothing.
  char mf[96];
  if (pid_ == static_cast<int64_t>(getpid()))
    std::snprintf(mf, sizeof mf, "/proc/self/map_files/%" PRIx64 "-%" PRIx64, e.start, e.end);
  else
    std::snprintf(mf, sizeof mf, "/proc/%" PRId64 "/map_files/%" PRIx64 "-%" PRIx64, pid_, e.start, e.end);
  auto key = std::make_tuple(e.dev_major, e.dev_minor, e.inode);
  Exact o;
  if (auto ex = exact_.find(key); ex != exact_.end()) {
    o = ex->second;
  } else {
    auto exact = elf::ElfImage::open(mf);
    if (!exact.ok()) o.error = exact.error().message;
    else if (exact.value()->file_identity() == nullptr || exact.value()->file_identity()->ino != e.inode)
      o.error = "another file";
    else exact_.emplace(key, o = Exact{exact.value(), {}});
  }
  if (o.image != nullptr) {
    c.image = o.image;
    c.open_path = mf;
    return c;
  }
  // No file to read: the mapped file's header and build-id note, from the process's memory.
  const Header h = header_of(e);
  const std::string what = by_path != nullptr ? "the file at this path is not the one mapped (" + describe(*by_path, e) + ")"
                                              : "the file at this path cannot be opened";
  if (!h.build_id.empty()) {
    c.from_memory = true;
    c.build_id = h.build_id;
    c.load_bias = h.load_bias;
    c.warning = "module " + module_path + ": " + what + " and " + mf + " cannot be read (" + o.error +
                "): described by build-id " + h.build_id.hex() +
                " read from the process's memory, unwound and named only from a bundle or debug file of it";
  } else if (by_path != nullptr) {
    c.left_out = true;
    c.warning = "module " + module_path + ": " + what + ", " + mf + " cannot be read (" + o.error +
                ") and neither can its build-id in the process's memory (" + h.error + "): left out";
  }
  return c;
}

MappedFiles::Header MappedFiles::header_of(const MapsEntry& e) {
  auto key = std::make_tuple(e.start, e.offset, e.dev_major, e.dev_minor, e.inode);
  if (auto it = headers_.find(key); it != headers_.end()) return it->second;
  Header h;  // kept only when read
  // The file's offset 0 is mapped at the closest start at or below e's with that offset, device
  // and inode, in the listing as it is now (a listing read earlier may name mappings since gone).
  auto text = read_maps_text(pid_ == static_cast<int64_t>(getpid()) ? 0 : static_cast<int>(pid_));
  Result<std::vector<MapsEntry>> listing = text.ok() ? parse_maps(text.value()) : Result<std::vector<MapsEntry>>(text.error());
  if (!listing.ok()) {
    h.error = listing.error().message;
    return h;
  }
  const MapsEntry* base = nullptr;
  for (const MapsEntry& m : listing.value())
    if (m.offset == 0 && m.inode == e.inode && m.dev_major == e.dev_major && m.dev_minor == e.dev_minor &&
        m.start <= e.start && (base == nullptr || m.start > base->start))
      base = &m;
  if (base == nullptr) {
    h.error = "no mapping of its file offset 0 in the maps listing";
    return h;
  }
  ProcessVmReader vm(static_cast<pid_t>(pid_));
  ProcMemReader mem(static_cast<pid_t>(pid_));
  int err = 0;
  auto read = [&](uint64_t addr, void* buf, size_t len) {
    if (vm.read(addr, buf, len) || mem.read(addr, buf, len)) return true;
    err = mem.last_errno() != 0 ? mem.last_errno() : vm.last_errno();
    return false;
  };
  auto img = elf::image_in_memory(base->start, read);
  if (!img) h.error = err != 0 ? std::string("memory: ") + std::strerror(err) : "no ELF header there";
  else if (img->build_id.empty()) h.error = "no build-id note";
  else {
    h.build_id = img->build_id;
    h.load_bias = img->load_bias;
    headers_.emplace(key, h);
  }
  return h;
}

Status add_modules_from_maps(Snapshot& s, const std::vector<MapsEntry>& maps, const std::string& root,
                             std::string* warnings, int64_t live_pid) {
  struct Opened {
    std::shared_ptr<elf::ElfImage> image;  // null: `error`
    std::string error;
  };
  std::map<std::string, Opened> opened;  // one open per file
  MappedFiles mapped(live_pid);
  std::set<std::string> left_out;
  for (const MapsEntry& e : maps) {
    if (!e.executable) continue;
    SnapshotModule m;
    m.start = e.start;
    m.end = e.end;
    m.file_offset = e.offset;
    if (e.path == "[vdso]") {
      m.path = "[vdso]";
      SnapshotReader rd(s);
      std::vector<uint8_t> bytes;  // sized only once the size is known to be sane (a hostile listing)
      if (e.end - e.start <= (64u << 20)) bytes.resize(e.end - e.start);
      if (!bytes.empty() && rd.read(e.start, bytes.data(), bytes.size())) {
        auto img = elf::ElfImage::from_bytes(std::move(bytes), "[vdso]");
        if (img.ok()) {
          m.build_id = img.value()->build_id();
          m.load_bias = img.value()->load_bias(e.start, 0);
        }
      }
    } else if (!e.path.empty() && e.path[0] == '/') {
      m.path = strip_deleted(e.path);
      const std::string host = join_root(root, m.path);
      auto it = opened.find(host);
      const bool first = it == opened.end();
      if (first) {
        auto img = elf::ElfImage::open(host);
        it = opened.emplace(host, img.ok() ? Opened{img.value(), {}} : Opened{nullptr, img.error().message}).first;
      }
      std::shared_ptr<elf::ElfImage> img = it->second.image;
      if (live_pid != 0) {
        MappedFiles::Choice c = mapped.choose(e, img, host, m.path);
        if (c.left_out || c.from_memory)
          if (warnings && left_out.insert(m.path).second) *warnings += c.warning + "\n";
        if (c.left_out) continue;
        if (c.from_memory) {
          m.build_id = c.build_id;
          m.load_bias = c.load_bias;
          img = nullptr;
        } else if (c.image != nullptr) {
          img = c.image;
          m.open_path = c.open_path;
        }
      }
      if (img == nullptr && m.build_id.empty() && first && warnings)
        *warnings += "module " + m.path + ": " + it->second.error + "\n";
      if (img) {
        if (img->file_identity() != nullptr) m.file = *img->file_identity();
        m.build_id = img->build_id();
        m.load_bias = img->load_bias(e.start, e.offset, /*executable=*/true);
      }
    } else {
      continue;
    }
    // A module the snapshot cannot hold (a path over its limit, more modules than it takes: a
    // target can make both) is left out with a warning; the capture of the rest goes on.
    const std::string path = m.path;
    if (Status st = s.add_module(std::move(m)); !st.ok()) {
      if (st.error().code != SPROV_ERR_LIMIT) return st;
      if (warnings) *warnings += "module " + path.substr(0, 256) + (path.size() > 256 ? "...: " : ": ") +
                                 st.error().message + " (left out)\n";
    }
  }
  return {};
}

}  // namespace stackprov::memory
