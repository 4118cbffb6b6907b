// SPDX-License-Identifier: Apache-2.0
// Windows minidumps: the checked reader of the header, the stream directory and the streams a stack needs.
#include "minidump/minidump.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/mapped_file.hpp"
#include "core/open_file.hpp"

namespace stackprov::minidump {

namespace {

// Sizes of the records (minidumpapiset.h; every record is packed, 4-byte aligned in the file).
constexpr uint32_t kHeaderSize = 32;
constexpr uint32_t kDirEntrySize = 12;
constexpr uint32_t kThreadSize = 48;
constexpr uint32_t kModuleSize = 108;
constexpr uint32_t kMemDescSize = 16;
constexpr uint32_t kMemDesc64Size = 16;
constexpr uint32_t kExceptionStreamSize = 168;
constexpr uint32_t kSystemInfoSize = 56;
// Offsets in the x64 CONTEXT (winnt.h).
constexpr uint32_t kCtxFlags = 0x30, kCtxMxcsr = 0x34, kCtxEflags = 0x44, kCtxRax = 0x78, kCtxRip = 0xf8,
                   kCtxXmm0 = 0x1a0;

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t le64(const uint8_t* p) { return le32(p) | (static_cast<uint64_t>(le32(p + 4)) << 32); }
Location location(const uint8_t* p) { return Location{le32(p), le32(p + 4)}; }

const char* stream_name(uint32_t type) {
  switch (type) {
    case kThreadListStream: return "ThreadList";
    case kModuleListStream: return "ModuleList";
    case kMemoryListStream: return "MemoryList";
    case kExceptionStream: return "Exception";
    case kSystemInfoStream: return "SystemInfo";
    case kMemory64ListStream: return "Memory64List";
    case kMiscInfoStream: return "MiscInfo";
    default: return "stream";
  }
}

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

/// UTF-16LE to UTF-8; an unpaired surrogate becomes U+FFFD. Stops at a NUL unit.
std::string utf16_to_utf8(const uint8_t* p, size_t units) {
  std::string out;
  out.reserve(units);
  for (size_t i = 0; i < units; i++) {
    uint32_t u = le16(p + 2 * i);
    if (u == 0) break;
    if (u >= 0xd800 && u < 0xdc00 && i + 1 < units) {
      const uint32_t lo = le16(p + 2 * (i + 1));
      if (lo >= 0xdc00 && lo < 0xe000) {
        put_utf8(out, 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00));
        i++;
        continue;
      }
    }
    if (u >= 0xd800 && u < 0xe000) u = 0xfffd;
    put_utf8(out, u);
  }
  return out;
}

}  // namespace

Minidump::~Minidump() {
  if (map_ != nullptr) unmap_file(map_, size_);
}

Result<std::unique_ptr<Minidump>> Minidump::open(const std::string& path) {
  int err = 0;
  const int fd = open_regular_file(path, &err);
  if (fd < 0) return make_error(-err, "minidump %s: %s", path.c_str(), std::strerror(err));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(-e, "minidump %s: %s", path.c_str(), std::strerror(e));
  }
  if (st.st_size < static_cast<off_t>(kHeaderSize)) {
    ::close(fd);
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: %lld bytes, shorter than its 32-byte header", path.c_str(),
                      static_cast<long long>(st.st_size));
  }
  if (Status s = check_file_size(path, static_cast<uint64_t>(st.st_size)); !s.ok()) {
    ::close(fd);
    return s.error();
  }
  const size_t size = static_cast<size_t>(st.st_size);
  auto mapped = map_file(fd, size, false, "minidump " + path);
  ::close(fd);
  if (!mapped) return std::move(mapped).error();
  std::unique_ptr<Minidump> d(new Minidump());
  d->path_ = path;
  d->map_ = mapped.value();
  d->data_ = static_cast<const uint8_t*>(d->map_);
  d->size_ = size;
  if (Status s = d->parse(); !s.ok()) return s.error();
  return d;
}

Result<std::unique_ptr<Minidump>> Minidump::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::unique_ptr<Minidump> d(new Minidump());
  d->path_ = std::move(name);
  d->owned_ = std::move(bytes);
  d->data_ = d->owned_.data();
  d->size_ = d->owned_.size();
  if (Status s = d->parse(); !s.ok()) return s.error();
  return d;
}

Status Minidump::check(Location loc, const char* what) const {
  if (static_cast<uint64_t>(loc.rva) + loc.size > size_)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: %s at offset 0x%x, 0x%x bytes, passes the end of the file (0x%zx bytes)",
                      path_.c_str(), what, loc.rva, loc.size, size_);
  return Status();
}

std::span<const uint8_t> Minidump::bytes(Location loc) const {
  if (static_cast<uint64_t>(loc.rva) + loc.size > size_) return {};
  return {data_ + loc.rva, loc.size};
}

std::span<const uint8_t> Minidump::bytes(const MemoryRange& r) const {
  if (r.offset > size_ || r.size > size_ - r.offset) return {};
  return {data_ + r.offset, static_cast<size_t>(r.size)};
}

Status Minidump::parse() {
  const char* p = path_.c_str();
  if (size_ < kHeaderSize)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: %zu bytes, shorter than its 32-byte header", p, size_);
  if (le32(data_) != kSignature)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s is not a minidump (signature 0x%08x, not \"MDMP\")", p, le32(data_));
  version_ = le32(data_ + 4);
  const uint32_t n = le32(data_ + 8);
  const uint32_t dir = le32(data_ + 12);
  timestamp_ = le32(data_ + 20);
  flags_ = le64(data_ + 24);
  if (n > kMaxStreams)
    return make_error(SPROV_ERR_LIMIT, "minidump %s: %u streams (at most %u are read)", p, n, kMaxStreams);
  if (Status s = check(Location{n * kDirEntrySize, dir}, "the stream directory"); !s.ok()) return s;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* e = data_ + dir + i * kDirEntrySize;
    StreamEntry se{le32(e), location(e + 4)};
    streams_.push_back(se);
  }
  uint32_t seen = 0;  // bit per stream type read: a second stream of one is an error
  for (size_t i = 0; i < streams_.size(); i++) {
    const StreamEntry& se = streams_[i];
    if (se.type > 31 || !((1u << se.type) & ((1u << kThreadListStream) | (1u << kModuleListStream) |
                                               (1u << kMemoryListStream) | (1u << kExceptionStream) |
                                               (1u << kSystemInfoStream) | (1u << kMemory64ListStream) |
                                               (1u << kMiscInfoStream))))
      continue;
    if (seen & (1u << se.type))
      return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: a second %s stream (directory entry %zu)", p,
                        stream_name(se.type), i);
    seen |= 1u << se.type;
    char what[64];
    std::snprintf(what, sizeof what, "the %s stream", stream_name(se.type));
    if (Status s = check(se.loc, what); !s.ok()) return s;
    Status s;
    switch (se.type) {
      case kThreadListStream: s = parse_threads(se.loc); break;
      case kModuleListStream: s = parse_modules(se.loc); break;
      case kMemoryListStream: s = parse_memory(se.loc); break;
      case kMemory64ListStream: s = parse_memory64(se.loc); break;
      case kExceptionStream: s = parse_exception(se.loc); break;
      case kSystemInfoStream: s = parse_system_info(se.loc); break;
      case kMiscInfoStream:
        // MINIDUMP_MISC_INFO: SizeOfInfo, Flags1, ProcessId (valid with MINIDUMP_MISC1_PROCESS_ID, 1).
        if (se.loc.size >= 12 && (le32(data_ + se.loc.rva + 4) & 1)) process_id_ = le32(data_ + se.loc.rva + 8);
        break;
    }
    if (!s.ok()) return s;
  }
  std::stable_sort(memory_.begin(), memory_.end(),
                   [](const MemoryRange& a, const MemoryRange& b) { return a.start < b.start; });
  max_end_.resize(memory_.size());
  uint64_t m = 0;
  for (size_t i = 0; i < memory_.size(); i++) max_end_[i] = m = std::max(m, memory_[i].start + memory_[i].size);
  return Status();
}

Status Minidump::parse_threads(Location loc) {
  if (loc.size < 4)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: ThreadList stream of %u bytes has no count", path_.c_str(), loc.size);
  const uint32_t n = le32(data_ + loc.rva);
  if (n > kMaxThreads) return make_error(SPROV_ERR_LIMIT, "minidump %s: %u threads (at most %u)", path_.c_str(), n, kMaxThreads);
  if (4 + static_cast<uint64_t>(n) * kThreadSize > loc.size)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: ThreadList stream of %u bytes cannot hold its %u threads of 48 bytes",
                      path_.c_str(), loc.size, n);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* t = data_ + loc.rva + 4 + i * kThreadSize;
    Thread th;
    th.id = le32(t);
    th.suspend_count = le32(t + 4);
    th.priority_class = le32(t + 8);
    th.priority = le32(t + 12);
    th.teb = le64(t + 16);
    th.stack.start = le64(t + 24);
    const Location mem = location(t + 32);
    th.context = location(t + 40);
    char what[80];
    std::snprintf(what, sizeof what, "thread 0x%x's stack", th.id);
    if (Status s = check(mem, what); !s.ok()) return s;
    if (th.stack.start + mem.size < th.stack.start)
      return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: thread 0x%x's stack at 0x%llx, 0x%x bytes, wraps around", path_.c_str(),
                        th.id, static_cast<unsigned long long>(th.stack.start), mem.size);
    th.stack.size = mem.size;
    th.stack.offset = mem.rva;
    std::snprintf(what, sizeof what, "thread 0x%x's context", th.id);
    if (Status s = check(th.context, what); !s.ok()) return s;
    threads_.push_back(th);
  }
  return Status();
}

Result<std::string> Minidump::read_string(uint32_t rva, const char* what) const {
  if (static_cast<uint64_t>(rva) + 4 > size_)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: %s at offset 0x%x passes the end of the file", path_.c_str(), what, rva);
  const uint32_t len = le32(data_ + rva);
  if (len > kMaxNameBytes || (len & 1))
    return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: %s at offset 0x%x has a length of %u bytes (even, at most %u)",
                      path_.c_str(), what, rva, len, kMaxNameBytes);
  if (static_cast<uint64_t>(rva) + 4 + len > size_)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: %s at offset 0x%x, %u bytes, passes the end of the file",
                      path_.c_str(), what, rva, len);
  return utf16_to_utf8(data_ + rva + 4, len / 2);
}

Status Minidump::parse_modules(Location loc) {
  if (loc.size < 4)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: ModuleList stream of %u bytes has no count", path_.c_str(), loc.size);
  const uint32_t n = le32(data_ + loc.rva);
  if (n > kMaxModules) return make_error(SPROV_ERR_LIMIT, "minidump %s: %u modules (at most %u)", path_.c_str(), n, kMaxModules);
  if (4 + static_cast<uint64_t>(n) * kModuleSize > loc.size)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: ModuleList stream of %u bytes cannot hold its %u modules of 108 bytes",
                      path_.c_str(), loc.size, n);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* m = data_ + loc.rva + 4 + i * kModuleSize;
    Module mod;
    mod.base = le64(m);
    mod.size = le32(m + 8);
    mod.checksum = le32(m + 12);
    mod.timestamp = le32(m + 16);
    const uint32_t name_rva = le32(m + 20);
    // VS_FIXEDFILEINFO: 13 u32 at +24; CvRecord at +76, MiscRecord at +84.
    mod.cv_record = location(m + 76);
    mod.misc_record = location(m + 84);
    if (mod.base + mod.size < mod.base)
      return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: module %u at 0x%llx, 0x%x bytes, wraps around", path_.c_str(), i,
                        static_cast<unsigned long long>(mod.base), mod.size);
    char what[64];
    std::snprintf(what, sizeof what, "module %u's name", i);
    auto name = read_string(name_rva, what);
    if (!name.ok()) return std::move(name).error();
    mod.name = std::move(name).value();
    std::snprintf(what, sizeof what, "module %u's CodeView record", i);
    if (Status s = check(mod.cv_record, what); !s.ok()) return s;
    if (mod.cv_record.size > kMaxCodeViewBytes)
      return make_error(SPROV_ERR_LIMIT, "minidump %s: module %u (%s): CodeView record of %u bytes (at most %u)", path_.c_str(),
                        i, mod.name.c_str(), mod.cv_record.size, kMaxCodeViewBytes);
    if (mod.cv_record.size != 0) {
      const uint8_t* c = data_ + mod.cv_record.rva;
      if (mod.cv_record.size < 4)
        return make_error(SPROV_ERR_TRUNCATED, "minidump %s: module %u (%s): CodeView record of %u bytes has no signature",
                          path_.c_str(), i, mod.name.c_str(), mod.cv_record.size);
      CodeView cv;
      cv.signature = le32(c);
      if (cv.signature == 0x53445352) {  // "RSDS": signature, GUID, age, NUL-terminated path
        if (mod.cv_record.size < 24)
          return make_error(SPROV_ERR_TRUNCATED, "minidump %s: module %u (%s): RSDS record of %u bytes (at least 24)",
                            path_.c_str(), i, mod.name.c_str(), mod.cv_record.size);
        cv.kind = CodeView::Kind::kRsds;
        std::memcpy(cv.guid.data(), c + 4, 16);
        cv.age = le32(c + 20);
        const char* s = reinterpret_cast<const char*>(c + 24);
        cv.pdb_path.assign(s, strnlen(s, mod.cv_record.size - 24));
      }
      mod.codeview = std::move(cv);
    }
    std::snprintf(what, sizeof what, "module %u's misc record", i);
    if (Status s = check(mod.misc_record, what); !s.ok()) return s;
    modules_.push_back(std::move(mod));
  }
  return Status();
}

Status Minidump::parse_memory(Location loc) {
  if (loc.size < 4)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: MemoryList stream of %u bytes has no count", path_.c_str(), loc.size);
  const uint32_t n = le32(data_ + loc.rva);
  if (n > kMaxMemoryRanges)
    return make_error(SPROV_ERR_LIMIT, "minidump %s: MemoryList of %u ranges (at most %llu)", path_.c_str(), n,
                      static_cast<unsigned long long>(kMaxMemoryRanges));
  if (4 + static_cast<uint64_t>(n) * kMemDescSize > loc.size)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: MemoryList stream of %u bytes cannot hold its %u ranges of 16 bytes",
                      path_.c_str(), loc.size, n);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* d = data_ + loc.rva + 4 + i * kMemDescSize;
    MemoryRange r;
    r.start = le64(d);
    const Location l = location(d + 8);
    char what[64];
    std::snprintf(what, sizeof what, "MemoryList range %u", i);
    if (Status s = check(l, what); !s.ok()) return s;
    if (r.start + l.size < r.start)
      return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: MemoryList range %u at 0x%llx, 0x%x bytes, wraps around",
                        path_.c_str(), i, static_cast<unsigned long long>(r.start), l.size);
    r.size = l.size;
    r.offset = l.rva;
    if (r.size != 0) memory_.push_back(r);
  }
  return Status();
}

Status Minidump::parse_memory64(Location loc) {
  if (loc.size < 16)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: Memory64List stream of %u bytes has no count and base", path_.c_str(),
                      loc.size);
  const uint64_t n = le64(data_ + loc.rva);
  uint64_t offset = le64(data_ + loc.rva + 8);
  if (n > kMaxMemoryRanges)
    return make_error(SPROV_ERR_LIMIT, "minidump %s: Memory64List of %llu ranges (at most %llu)", path_.c_str(),
                      static_cast<unsigned long long>(n), static_cast<unsigned long long>(kMaxMemoryRanges));
  if (16 + n * kMemDesc64Size > loc.size)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: Memory64List stream of %u bytes cannot hold its %llu ranges of 16 bytes",
                      path_.c_str(), loc.size, static_cast<unsigned long long>(n));
  has_memory64_ = true;
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t* d = data_ + loc.rva + 16 + i * kMemDesc64Size;
    MemoryRange r;
    r.start = le64(d);
    r.size = le64(d + 8);
    r.offset = offset;
    // The ranges' bytes follow each other from BaseRva on.
    if (offset > size_ || r.size > size_ - offset)
      return make_error(SPROV_ERR_TRUNCATED,
                        "minidump %s: Memory64List range %llu (0x%llx, 0x%llx bytes) at offset 0x%llx passes the end of the "
                        "file (0x%zx bytes)",
                        path_.c_str(), static_cast<unsigned long long>(i), static_cast<unsigned long long>(r.start),
                        static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(offset), size_);
    if (r.start + r.size < r.start)
      return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: Memory64List range %llu at 0x%llx, 0x%llx bytes, wraps around",
                        path_.c_str(), static_cast<unsigned long long>(i), static_cast<unsigned long long>(r.start),
                        static_cast<unsigned long long>(r.size));
    offset += r.size;
    if (r.size != 0) memory_.push_back(r);
  }
  return Status();
}

Status Minidump::parse_exception(Location loc) {
  if (loc.size < kExceptionStreamSize)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: Exception stream of %u bytes (at least %u)", path_.c_str(), loc.size,
                      kExceptionStreamSize);
  const uint8_t* e = data_ + loc.rva;
  Exception x;
  x.thread_id = le32(e);
  x.code = le32(e + 8);
  x.flags = le32(e + 12);
  x.record = le64(e + 16);
  x.address = le64(e + 24);
  x.num_params = le32(e + 32);
  if (x.num_params > x.params.size())
    return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: the exception has %u parameters (at most 15)", path_.c_str(),
                      x.num_params);
  for (uint32_t i = 0; i < x.num_params; i++) x.params[i] = le64(e + 40 + 8 * i);
  x.context = location(e + 160);
  if (Status s = check(x.context, "the exception's context"); !s.ok()) return s;
  exception_ = x;
  return Status();
}

Status Minidump::parse_system_info(Location loc) {
  if (loc.size < kSystemInfoSize)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: SystemInfo stream of %u bytes (at least %u)", path_.c_str(), loc.size,
                      kSystemInfoSize);
  const uint8_t* s = data_ + loc.rva;
  SystemInfo si;
  si.arch = le16(s);
  si.level = le16(s + 2);
  si.revision = le16(s + 4);
  si.processors = s[6];
  si.product_type = s[7];
  si.major = le32(s + 8);
  si.minor = le32(s + 12);
  si.build = le32(s + 16);
  si.platform = le32(s + 20);
  const uint32_t csd = le32(s + 24);
  if (csd != 0)
    if (auto str = read_string(csd, "the CSD version string"); str.ok()) si.csd_version = std::move(str).value();
  system_info_ = si;
  return Status();
}

Result<X64Context> Minidump::x64_context(Location loc) const {
  if (loc.size < kX64ContextSize || static_cast<uint64_t>(loc.rva) + loc.size > size_)
    return make_error(SPROV_ERR_TRUNCATED, "minidump %s: context at offset 0x%x of %u bytes: an x64 CONTEXT has %u",
                      path_.c_str(), loc.rva, loc.size, kX64ContextSize);
  const uint8_t* c = data_ + loc.rva;
  X64Context x;
  x.flags = le32(c + kCtxFlags);
  if ((x.flags & kContextAmd64) == 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "minidump %s: context at offset 0x%x: ContextFlags 0x%x lacks CONTEXT_AMD64 (0x%x)",
                      path_.c_str(), loc.rva, x.flags, kContextAmd64);
  x.mxcsr = le32(c + kCtxMxcsr);
  x.eflags = le32(c + kCtxEflags);
  for (int i = 0; i < 16; i++) x.gpr[i] = le64(c + kCtxRax + 8 * i);
  x.rip = le64(c + kCtxRip);
  for (int i = 0; i < 16; i++) std::memcpy(x.xmm[i].data(), c + kCtxXmm0 + 16 * i, 16);
  return x;
}

const MemoryRange* Minidump::range_at(uint64_t addr) const {
  // The ranges starting at or below addr, nearest first; max_end_ (the largest end so far) says
  // when no earlier range can reach addr.
  auto it = std::upper_bound(memory_.begin(), memory_.end(), addr,
                             [](uint64_t a, const MemoryRange& r) { return a < r.start; });
  size_t i = static_cast<size_t>(it - memory_.begin());
  const MemoryRange* best = nullptr;
  // Bounded: ranges that overlap (dbghelp writes none; a hostile dump can list millions over one
  // early large range) are searched back at most kMaxOverlapScan entries, so a read never costs
  // O(ranges); an address reachable only from further back reads as absent.
  constexpr size_t kMaxOverlapScan = 64;
  for (size_t steps = 0; i-- > 0 && max_end_[i] > addr && steps < kMaxOverlapScan; steps++)
    if (addr - memory_[i].start < memory_[i].size &&
        (best == nullptr || memory_[i].start + memory_[i].size > best->start + best->size))
      best = &memory_[i];
  return best;
}

bool Minidump::read(uint64_t addr, void* buf, size_t len) const {
  uint8_t* out = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const MemoryRange* hit = range_at(addr);
    if (hit == nullptr) return false;
    const uint64_t take = std::min<uint64_t>(len, hit->size - (addr - hit->start));
    std::memcpy(out, data_ + hit->offset + (addr - hit->start), static_cast<size_t>(take));
    out += take;
    addr += take;
    len -= static_cast<size_t>(take);
  }
  return true;
}

uint64_t Minidump::readable_from(uint64_t addr, uint64_t max) const {
  uint64_t total = 0;
  // Each step moves to the end of a range (ends strictly grow): at most one step per range.
  while (total < max) {
    const MemoryRange* hit = range_at(addr);
    if (hit == nullptr) break;
    const uint64_t end = hit->start + hit->size;
    total += end - addr;
    addr = end;
  }
  return std::min(total, max);
}

const char* exception_name(uint32_t code) {
  switch (code) {
    case 0x80000001: return "EXCEPTION_GUARD_PAGE";
    case 0x80000002: return "EXCEPTION_DATATYPE_MISALIGNMENT";
    case 0x80000003: return "EXCEPTION_BREAKPOINT";
    case 0x80000004: return "EXCEPTION_SINGLE_STEP";
    case 0xC0000005: return "EXCEPTION_ACCESS_VIOLATION";
    case 0xC0000006: return "EXCEPTION_IN_PAGE_ERROR";
    case 0xC0000008: return "EXCEPTION_INVALID_HANDLE";
    case 0xC000001D: return "EXCEPTION_ILLEGAL_INSTRUCTION";
    case 0xC0000025: return "EXCEPTION_NONCONTINUABLE_EXCEPTION";
    case 0xC0000026: return "EXCEPTION_INVALID_DISPOSITION";
    case 0xC000008C: return "EXCEPTION_ARRAY_BOUNDS_EXCEEDED";
    case 0xC000008D: return "EXCEPTION_FLT_DENORMAL_OPERAND";
    case 0xC000008E: return "EXCEPTION_FLT_DIVIDE_BY_ZERO";
    case 0xC000008F: return "EXCEPTION_FLT_INEXACT_RESULT";
    case 0xC0000090: return "EXCEPTION_FLT_INVALID_OPERATION";
    case 0xC0000091: return "EXCEPTION_FLT_OVERFLOW";
    case 0xC0000092: return "EXCEPTION_FLT_STACK_CHECK";
    case 0xC0000093: return "EXCEPTION_FLT_UNDERFLOW";
    case 0xC0000094: return "EXCEPTION_INT_DIVIDE_BY_ZERO";
    case 0xC0000095: return "EXCEPTION_INT_OVERFLOW";
    case 0xC0000096: return "EXCEPTION_PRIV_INSTRUCTION";
    case 0xC00000FD: return "EXCEPTION_STACK_OVERFLOW";
    case 0xC0000409: return "STATUS_STACK_BUFFER_OVERRUN";
    case 0xE06D7363: return "C++ exception (0xE06D7363)";
    default: return "";
  }
}

}  // namespace stackprov::minidump
