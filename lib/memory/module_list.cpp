// SPDX-License-Identifier: Apache-2.0
// Building a snapshot's module list from a maps listing: identities (build-ids) and load biases.
#include "memory/module_list.hpp"

#include <elf.h>
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
#include "core/open_file.hpp"
#include "elf/core_file.hpp"
#include "elf/elf_bytes.hpp"
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
  // Of the file itself, resolved inside a target's root (statfs of the path would follow its
  // symlinks from the host's root).
  return statfs_path(path, &fs) == 0 && (fs.f_type == kOverlayfsMagic || fs.f_type == kBtrfsMagic);
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

MappedFiles::MappedFiles(int64_t live_pid, bool keep_images) : pid_(live_pid), keep_images_(keep_images) {}

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
    c.memory_image = h.image;
    c.warning = "module " + module_path + ": " + what + " and " + mf + " cannot be read (" + o.error +
                "): described by build-id " + h.build_id.hex() + " read from the process's memory, " +
                (h.image != nullptr  ? std::string("unwound and named from its .eh_frame and .dynsym there (or a "
                                                   "bundle or debug file of it)")
                 : !keep_images_ ? std::string("unwound and named only from a bundle or debug file of it")
                                 : "unwound and named only from a bundle or debug file of it (its tables there: " +
                                       h.image_error + ")");
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
    // The file's unwind tables and dynamic symbols, from its read-only segments there.
    if (!keep_images_) {
      h.image_error = "not kept";
      headers_.emplace(key, h);
      return h;
    }
    auto bytes = elf::rebuild_image(base->start, read, kMaxMemoryImage);
    auto regions = bytes.ok() ? memory_image_regions(std::move(bytes).value(), img->load_bias)
                              : Result<std::vector<MemoryRegion>>(bytes.error());
    if (regions.ok()) h.image = std::make_shared<const std::vector<MemoryRegion>>(std::move(regions).value());
    else h.image_error = regions.error().message;
    headers_.emplace(key, h);
  }
  return h;
}

Result<std::vector<MemoryRegion>> memory_image_regions(std::vector<uint8_t> bytes, uint64_t bias) {
  auto parsed = elf::ElfImage::from_bytes(std::move(bytes), "image in memory");
  if (!parsed.ok()) return std::move(parsed).error();
  const elf::ElfImage& img = *parsed.value();
  std::vector<std::pair<uint64_t, uint64_t>> wanted;  // file ranges the image's readers use
  wanted.emplace_back(0, img.is_64bit() ? 64 : 52);   // the ELF header
  bool tables = false;
  for (const char* name : {".eh_frame", ".dynsym", ".dynstr", ".dynamic"})
    if (auto sec = img.section(name)) {
      wanted.emplace_back(sec->offset, sec->size);
      tables = tables || std::strcmp(name, ".eh_frame") == 0 || std::strcmp(name, ".dynsym") == 0;
    }
  if (!tables) return make_error(SPROV_ERR_NOT_FOUND, "no .eh_frame and no .dynsym found through its program headers");
  if (auto hdr = img.eh_frame_hdr()) wanted.emplace_back(hdr->offset, hdr->size);
  // The hash tables that count .dynsym's entries (DT_HASH, DT_GNU_HASH), placed by .dynamic.
  if (auto dyn = img.section(".dynamic"); dyn && dyn->data != nullptr) {
    const bool is64 = img.is_64bit();
    const uint64_t dent = is64 ? 16 : 8;
    const elf::detail::ByteView v(dyn->data, dyn->size, img.big_endian());
    for (uint64_t o = 0; o + dent <= std::min<uint64_t>(dyn->size, dent * 4096); o += dent) {
      const uint64_t tag = *v.word(o, is64), val = *v.word(o + dent / 2, is64);
      if (tag == DT_NULL) break;
      if (tag != DT_HASH && tag != DT_GNU_HASH) continue;
      for (const elf::ProgramHeader& p : img.program_headers())
        if (p.type == PT_LOAD && val >= p.vaddr && val - p.vaddr < p.filesz) wanted.emplace_back(p.offset + (val - p.vaddr), 16);
    }
  }
  for (const elf::ProgramHeader& p : img.program_headers())
    if (p.type == PT_NOTE) wanted.emplace_back(p.offset, p.filesz);
  const uint8_t* data = img.file_data();
  const uint64_t size = img.file_size();
  std::vector<MemoryRegion> out;
  uint64_t total = 0;
  auto keep = [&](const elf::ProgramHeader& p) -> Status {
    if (p.offset > size || p.filesz > size - p.offset)
      return make_error(SPROV_ERR_ELF, "segment at file offset 0x%llx past the image",
                        static_cast<unsigned long long>(p.offset));
    total += p.filesz;
    if (total > kMaxMemoryImageKept)
      return make_error(SPROV_ERR_LIMIT, "its segments holding them are over %llu bytes",
                        static_cast<unsigned long long>(kMaxMemoryImageKept));
    MemoryRegion r;
    r.addr = bias + p.vaddr;
    r.bytes.assign(data + p.offset, data + p.offset + p.filesz);
    out.push_back(std::move(r));
    return {};
  };
  std::vector<const elf::ProgramHeader*> loads;
  for (const elf::ProgramHeader& p : img.program_headers()) {
    if (p.type != PT_LOAD || (p.flags & PF_W) != 0 || p.filesz == 0) continue;
    bool holds = false;
    for (const auto& [o, n] : wanted) holds = holds || (o < p.offset + p.filesz && p.offset < o + std::max<uint64_t>(n, 1));
    if (!holds) continue;
    if (Status st = keep(p); !st.ok()) return st.error();
    loads.push_back(&p);
  }
  for (const elf::ProgramHeader& p : img.program_headers()) {
    if (p.type != PT_DYNAMIC || p.filesz == 0) continue;
    bool inside = false;  // a read-only .dynamic (MIPS, -z rodynamic) is in a segment kept already
    for (const elf::ProgramHeader* l : loads) inside = inside || (p.vaddr >= l->vaddr && p.vaddr - l->vaddr < l->filesz);
    if (!inside)
      if (Status st = keep(p); !st.ok()) return st.error();
  }
  return out;
}

Status add_modules_from_maps(Snapshot& s, const std::vector<MapsEntry>& maps, const std::string& root,
                             std::string* warnings, int64_t live_pid) {
  struct Opened {
    std::shared_ptr<elf::ElfImage> image;  // null: `error`
    std::string error;
  };
  std::map<std::string, Opened> opened;  // one open per file
  MappedFiles mapped(live_pid, /*keep_images=*/true);
  std::set<std::string> left_out;
  std::set<const void*> images;  // memory images copied into `s`
  for (const MapsEntry& e : maps) {
    if (!e.executable) continue;
    SnapshotModule m;
    m.start = e.start;
    m.end = e.end;
    m.file_offset = e.offset;
    if (e.path == kVdsoName) {
      m.path = kVdsoName;
      SnapshotReader rd(s);
      std::vector<uint8_t> bytes;  // sized only once the size is known to be sane (a hostile listing)
      if (e.end - e.start <= (64u << 20)) bytes.resize(e.end - e.start);
      if (!bytes.empty() && rd.read(e.start, bytes.data(), bytes.size())) {
        auto img = elf::ElfImage::from_bytes(std::move(bytes), std::string(kVdsoName));
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
          // The module's tables as the process maps them, once per image: its image is rebuilt
          // from the snapshot's bytes (acquire_module).
          if (c.memory_image != nullptr && images.insert(c.memory_image.get()).second)
            for (const MemoryRegion& r : *c.memory_image)
              if (Status st = s.add_memory(r.addr, r.data(), r.size()); !st.ok() && warnings)
                *warnings += "module " + m.path + ": its tables in memory are not in the capture: " +
                             st.error().message + "\n";
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
