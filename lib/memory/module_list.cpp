// SPDX-License-Identifier: Apache-2.0
// Building a snapshot's module list from a maps listing: identities (build-ids) and load biases.
#include "memory/module_list.hpp"

#include <map>
#include <memory>

#include "core/context.hpp"
#include "elf/elf_image.hpp"

namespace stackprov::memory {

namespace {

std::string strip_deleted(const std::string& p) {
  static const std::string kSuffix = " (deleted)";
  if (p.size() > kSuffix.size() && p.compare(p.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return p.substr(0, p.size() - kSuffix.size());
  return p;
}

}  // namespace

Status add_modules_from_maps(Snapshot& s, const std::vector<MapsEntry>& maps, const std::string& root,
                             std::string* warnings) {
  std::map<std::string, std::shared_ptr<elf::ElfImage>> opened;  // one open per file
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
      if (it == opened.end()) {
        auto img = elf::ElfImage::open(host);
        if (!img.ok()) {
          if (warnings) *warnings += "module " + m.path + ": " + img.error().message + "\n";
          it = opened.emplace(host, nullptr).first;
        } else {
          it = opened.emplace(host, img.value()).first;
        }
      }
      if (it->second) {
        m.build_id = it->second->build_id();
        m.load_bias = it->second->load_bias(e.start, e.offset, /*executable=*/true);
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
