// SPDX-License-Identifier: Apache-2.0
// The object-format registry: sniff a file's first bytes, open it with the format that accepts them.
#include "object/object_image.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/open_file.hpp"

namespace stackprov::object {

ObjectImage::~ObjectImage() = default;

const std::string& ObjectImage::target_root() const {
  static const std::string kNone;
  return kNone;
}

Result<std::shared_ptr<const ObjectImage>> ObjectImage::find_debug_file(const DebugFileOptions&,
                                                                        std::vector<DebugFileCandidate>*) const {
  return make_error(SPROV_ERR_NOT_FOUND, "%s: the %.*s format has no separate debug files", path().c_str(),
                    static_cast<int>(format_name().size()), format_name().data());
}

Result<DebugMapObjectFile> ObjectImage::open_debug_map_object(uint32_t object) const {
  return make_error(SPROV_ERR_NOT_FOUND, "%s: no debug map object %u (the image has no debug map)", path().c_str(),
                    object);
}

// The built-in formats, in lib/object/formats.cpp (the one list a new format joins).
std::span<const Format* const> builtin_formats();

namespace {

std::mutex g_mu;
std::vector<const Format*>& extra_formats() {
  static std::vector<const Format*> v;
  return v;
}
}  // namespace

std::vector<const Format*> formats() {
  std::vector<const Format*> out(builtin_formats().begin(), builtin_formats().end());
  std::lock_guard<std::mutex> lock(g_mu);
  out.insert(out.end(), extra_formats().begin(), extra_formats().end());
  return out;
}

void register_format(const Format* f) {
  if (f == nullptr) return;
  for (const Format* b : builtin_formats())
    if (b == f) return;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& v = extra_formats();
  if (std::find(v.begin(), v.end(), f) == v.end()) v.push_back(f);
}

const Format* sniff(std::span<const uint8_t> head) {
  for (const Format* f : formats())
    if (f->sniff(head)) return f;
  return nullptr;
}

const Format* sniff_path(const std::string& path) {
  // Through the same root-aware open as the format's parser will use (core/open_file.hpp): a
  // target's path never reaches a host file, not even to be sniffed.
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0) return nullptr;
  uint8_t head[kSniffBytes];
  ssize_t n;
  do {
#ifdef _WIN32
    n = ::read(fd, head, sizeof(head));  // a new descriptor: at offset 0 (mingw has no pread)
#else
    n = ::pread(fd, head, sizeof(head), 0);
#endif
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n < 0 ? nullptr : sniff(std::span<const uint8_t>(head, static_cast<size_t>(n)));
}

Result<std::shared_ptr<ObjectImage>> open(const std::string& path) {
  // A file no format accepts, or that cannot be read, goes to ELF: its error, as users know it.
  const Format* f = sniff_path(path);
  return (f != nullptr ? f : builtin_formats().front())->open(path);
}

Result<std::shared_ptr<ObjectImage>> open_matching(const std::string& path, Arch arch, const ModuleId& id) {
  const Format* f = sniff_path(path);
  if (f != nullptr && f->open_matching != nullptr) return f->open_matching(path, arch, id);
  return open(path);
}

Result<std::shared_ptr<ObjectImage>> from_bytes(std::vector<uint8_t> bytes, std::string name) {
  const Format* f = sniff(std::span<const uint8_t>(bytes.data(), std::min(bytes.size(), kSniffBytes)));
  return (f != nullptr ? f : builtin_formats().front())->from_bytes(std::move(bytes), std::move(name));
}

}  // namespace stackprov::object
