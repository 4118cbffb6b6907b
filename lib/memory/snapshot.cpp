// SPDX-License-Identifier: Apache-2.0
// Snapshot construction, module-list hashing, the checked binary format and the snapshot reader.
#include "memory/snapshot.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>

namespace stackprov::memory {

namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'O', 'V', 'S', 'N', 'P'};
constexpr uint32_t kVersion1 = 1;  // fixed layout; every id an ELF build-id
constexpr uint32_t kVersion2 = 2;  // tagged sections (snapshot.hpp)
constexpr uint32_t kSectionRequired = 1u << 0;
constexpr uint32_t kKnownSectionFlags = kSectionRequired;
constexpr uint32_t kMaxSections = 64;
enum : uint32_t { kSectionEnd = 0, kSectionHeader = 1, kSectionMemory = 2, kSectionModules = 3, kSectionAsync = 4, kSectionRuntime = 5 };
constexpr uint32_t kLastKnownSection = kSectionRuntime;
constexpr uint64_t kMaxTotalMemory = uint64_t{1} << 30;  // 1 GiB
constexpr uint32_t kMaxRegions = 65536;
constexpr uint32_t kMaxModules = 65536;
constexpr uint32_t kMaxPathLen = 4096;
constexpr uint32_t kKnownFlags = Snapshot::kFlagPcIsReturnAddress;
constexpr uint8_t kMaxArch = static_cast<uint8_t>(Arch::kMips32);
constexpr uint8_t kMaxEndian = static_cast<uint8_t>(Endian::kBig);
/// Smallest encodings, used to bound counts against the remaining bytes.
constexpr size_t kMinRegionBytes = 8 + 8 + 1;
constexpr size_t kMinModuleBytes = 8 * 4 + 4 + 1;

uint64_t total_memory(const Snapshot& s) {
  uint64_t total = 0;
  for (const MemoryRegion& r : s.memory) total += r.size();
  return total;
}

bool path_has_nul(const std::string& p) { return p.find('\0') != std::string::npos; }

// ---- little-endian writer

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; i++) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

// ---- bounds-checked little-endian reader; every failure names the field and offset

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t len) : data_(data), len_(len) {}
  size_t offset() const { return off_; }
  size_t remaining() const { return len_ - off_; }

  Status need(const char* field, size_t n) const {
    if (n > remaining())
      return make_error(SPROV_ERR_SNAPSHOT,
                        "truncated: field '%s' at offset %zu needs %zu bytes, %zu remain", field,
                        off_, n, remaining());
    return {};
  }
  Result<uint64_t> uint(const char* field, int n) {
    if (Status st = need(field, n); !st) return st.error();
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= uint64_t{data_[off_ + i]} << (8 * i);
    off_ += n;
    return v;
  }
  Result<const uint8_t*> bytes(const char* field, size_t n) {
    if (Status st = need(field, n); !st) return st.error();
    const uint8_t* p = data_ + off_;
    off_ += n;
    return p;
  }
  /// The next n bytes (n <= remaining(), checked by the caller) as a cursor whose offsets count
  /// from this one's start, so that errors name the offset in the whole input; skips them here.
  Cursor sub(size_t n) {
    Cursor c(data_, off_ + n);
    c.off_ = off_;
    off_ += n;
    return c;
  }

 private:
  const uint8_t* data_;
  size_t len_;
  size_t off_ = 0;
};

Error field_error(const char* field, size_t offset, const char* what) {
  return make_error(SPROV_ERR_SNAPSHOT, "field '%s' at offset %zu: %s", field, offset, what);
}

#define SPROV_TRY_UINT(var, cur, field, n)       \
  uint64_t var = 0;                              \
  do {                                           \
    auto r_ = (cur).uint(field, n);              \
    if (!r_) return std::move(r_).error();       \
    var = r_.value();                            \
  } while (0)

Result<uint32_t> parse_magic_version(Cursor& c) {
  auto magic = c.bytes("magic", sizeof(kMagic));
  if (!magic) return magic.error();
  if (std::memcmp(magic.value(), kMagic, sizeof(kMagic)) != 0)
    return field_error("magic", 0, "not \"SPROVSNP\"");
  size_t at = c.offset();
  SPROV_TRY_UINT(version, c, "version", 4);
  if (version != kVersion1 && version != kVersion2)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'version' at offset %zu: unsupported version %" PRIu64
                      " (expected %u or %u)",
                      at, version, kVersion1, kVersion2);
  return static_cast<uint32_t>(version);
}

/// The fixed header after the version (v1), or the header section's payload (v2).
Status parse_header(Cursor& c, Snapshot& s) {
  size_t at = c.offset();
  SPROV_TRY_UINT(arch, c, "arch", 1);
  if (arch > kMaxArch)
    return make_error(SPROV_ERR_SNAPSHOT, "field 'arch' at offset %zu: unknown arch %" PRIu64,
                      at, arch);
  at = c.offset();
  SPROV_TRY_UINT(endian, c, "endian", 1);
  if (endian > kMaxEndian)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'endian' at offset %zu: unknown endianness %" PRIu64, at, endian);
  at = c.offset();
  SPROV_TRY_UINT(reserved, c, "reserved", 2);
  if (reserved != 0) return field_error("reserved", at, "must be zero");
  SPROV_TRY_UINT(pid, c, "pid", 8);
  SPROV_TRY_UINT(tid, c, "tid", 8);
  at = c.offset();
  SPROV_TRY_UINT(flags, c, "flags", 4);
  if (flags & ~uint64_t{kKnownFlags})
    return make_error(SPROV_ERR_SNAPSHOT, "field 'flags' at offset %zu: unknown flags 0x%" PRIx64,
                      at, flags & ~uint64_t{kKnownFlags});
  at = c.offset();
  SPROV_TRY_UINT(regs_valid, c, "regs_valid", 8);
  if (regs_valid >> kSnapshotMaxRegs)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'regs_valid' at offset %zu: bits set beyond register %d (0x%" PRIx64
                      ")",
                      at, kSnapshotMaxRegs - 1, regs_valid);
  s.arch = static_cast<Arch>(arch);
  s.endian = static_cast<Endian>(endian);
  s.pid = static_cast<int64_t>(pid);
  s.tid = static_cast<int64_t>(tid);
  s.flags = static_cast<uint32_t>(flags);
  s.regs_valid = regs_valid;
  for (int i = 0; i < kSnapshotMaxRegs; i++) {
    SPROV_TRY_UINT(reg, c, "regs", 8);
    s.regs[i] = reg;
  }
  return {};
}

Status parse_regions(Cursor& c, Snapshot& s) {
  size_t at = c.offset();
  SPROV_TRY_UINT(n, c, "n_regions", 4);
  if (n > kMaxRegions)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'n_regions' at offset %zu: %" PRIu64 " regions exceed the limit %u",
                      at, n, kMaxRegions);
  if (n > c.remaining() / kMinRegionBytes)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'n_regions' at offset %zu: %" PRIu64
                      " regions cannot fit in %zu remaining bytes",
                      at, n, c.remaining());
  s.memory.reserve(n);
  uint64_t total = 0;
  uint64_t prev_end = 0;
  for (uint64_t i = 0; i < n; i++) {
    const size_t region_at = c.offset();
    SPROV_TRY_UINT(addr, c, "region.addr", 8);
    at = c.offset();
    SPROV_TRY_UINT(len, c, "region.len", 8);
    if (len == 0) return field_error("region.len", at, "empty region");
    if (len > kMaxTotalMemory - total)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'region.len' at offset %zu: %" PRIu64
                        " bytes exceed the 1 GiB memory limit (%" PRIu64 " already)",
                        at, len, total);
    if (len > c.remaining())
      return make_error(SPROV_ERR_SNAPSHOT,
                        "truncated: field 'region.bytes' at offset %zu needs %" PRIu64
                        " bytes, %zu remain",
                        c.offset(), len, c.remaining());
    if (addr + len < addr)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'region.addr' at offset %zu: region 0x%" PRIx64 "+0x%" PRIx64
                        " wraps around the address space",
                        region_at, addr, len);
    if (i > 0 && addr < prev_end)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'region.addr' at offset %zu: region at 0x%" PRIx64
                        " is unsorted or overlaps the previous one ending at 0x%" PRIx64,
                        region_at, addr, prev_end);
    auto bytes = c.bytes("region.bytes", len);
    if (!bytes) return bytes.error();
    MemoryRegion r;
    r.addr = addr;
    r.bytes.assign(bytes.value(), bytes.value() + len);
    s.memory.push_back(std::move(r));
    total += len;
    prev_end = addr + len;
  }
  return {};
}

/// v1: { ..., u8 id_len, id } (an ELF build-id); v2: { ..., u8 id_kind, u8 id_len, id }.
Status parse_modules(Cursor& c, Snapshot& s, uint32_t version) {
  size_t at = c.offset();
  SPROV_TRY_UINT(n, c, "n_modules", 4);
  if (n > kMaxModules)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'n_modules' at offset %zu: %" PRIu64 " modules exceed the limit %u",
                      at, n, kMaxModules);
  if (n > c.remaining() / kMinModuleBytes)
    return make_error(SPROV_ERR_SNAPSHOT,
                      "field 'n_modules' at offset %zu: %" PRIu64
                      " modules cannot fit in %zu remaining bytes",
                      at, n, c.remaining());
  s.modules.reserve(n);
  for (uint64_t i = 0; i < n; i++) {
    const size_t module_at = c.offset();
    SPROV_TRY_UINT(start, c, "module.start", 8);
    SPROV_TRY_UINT(end, c, "module.end", 8);
    SPROV_TRY_UINT(file_offset, c, "module.file_offset", 8);
    SPROV_TRY_UINT(load_bias, c, "module.load_bias", 8);
    if (start >= end)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'module.end' at offset %zu: empty or inverted range [0x%" PRIx64
                        ", 0x%" PRIx64 ")",
                        module_at + 8, start, end);
    if (i > 0 && start < s.modules.back().end)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'module.start' at offset %zu: module [0x%" PRIx64 ", 0x%" PRIx64
                        ") is unsorted or overlaps [0x%" PRIx64 ", 0x%" PRIx64 ")",
                        module_at, start, end, s.modules.back().start, s.modules.back().end);
    at = c.offset();
    SPROV_TRY_UINT(path_len, c, "module.path_len", 4);
    if (path_len > kMaxPathLen)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'module.path_len' at offset %zu: %" PRIu64
                        " exceeds the limit %u",
                        at, path_len, kMaxPathLen);
    at = c.offset();
    auto path = c.bytes("module.path", path_len);
    if (!path) return path.error();
    SnapshotModule m;
    m.path.assign(reinterpret_cast<const char*>(path.value()), path_len);
    if (path_has_nul(m.path)) return field_error("module.path", at, "contains a NUL byte");
    IdKind kind = IdKind::kElfBuildId;
    if (version >= kVersion2) {
      at = c.offset();
      SPROV_TRY_UINT(id_kind, c, "module.id_kind", 1);
      if (id_kind > kMaxIdKind)
        return make_error(SPROV_ERR_SNAPSHOT, "field 'module.id_kind' at offset %zu: unknown identity kind %" PRIu64,
                          at, id_kind);
      kind = static_cast<IdKind>(id_kind);
    }
    at = c.offset();
    SPROV_TRY_UINT(id_len, c, "module.id_len", 1);
    if ((id_len == 0) != (kind == IdKind::kNone) && version >= kVersion2)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'module.id_len' at offset %zu: %" PRIu64 " bytes for identity kind %s", at,
                        id_len, id_kind_name(kind));
    if (id_len > ModuleId::kMax)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "field 'module.id_len' at offset %zu: %" PRIu64 " exceeds %zu", at,
                        id_len, ModuleId::kMax);
    auto id = c.bytes("module.id", id_len);
    if (!id) return id.error();
    m.start = start;
    m.end = end;
    m.file_offset = file_offset;
    m.load_bias = load_bias;
    m.build_id = ModuleId::from_bytes(id.value(), id_len, kind);
    s.modules.push_back(std::move(m));
  }
  return {};
}

/// Section 4: the registered async stacks and the thread's async stack root (SnapshotAsync).
Status parse_async(Cursor& c, Snapshot& s) {
  SnapshotAsync& a = s.async;
  size_t at = c.offset();
  SPROV_TRY_UINT(root, c, "async.root", 8);
  at = c.offset();
  SPROV_TRY_UINT(source, c, "async.root_source", 4);
  if (source > SnapshotAsync::kRootSlot || (source == 0) != (root == 0))
    return make_error(SPROV_ERR_SNAPSHOT, "field 'async.root_source' at offset %zu: %" PRIu64 " for root 0x%" PRIx64,
                      at, source, root);
  a.root = root;
  a.root_source = static_cast<uint32_t>(source);
  at = c.offset();
  SPROV_TRY_UINT(n, c, "async.n_stacks", 4);
  if (n > SnapshotAsync::kMaxStacks || n * 24 > c.remaining())
    return make_error(SPROV_ERR_SNAPSHOT, "field 'async.n_stacks' at offset %zu: %" PRIu64
                      " stacks (at most %zu, %zu bytes remain)", at, n, SnapshotAsync::kMaxStacks, c.remaining());
  for (uint64_t i = 0; i < n; i++) {
    at = c.offset();
    SPROV_TRY_UINT(lo, c, "async.stack.lo", 8);
    SPROV_TRY_UINT(hi, c, "async.stack.hi", 8);
    SPROV_TRY_UINT(resumer, c, "async.stack.resumer", 8);
    if (lo >= hi || (!a.stacks.empty() && lo < a.stacks.back().hi))
      return make_error(SPROV_ERR_SNAPSHOT, "field 'async.stack.lo' at offset %zu: stack [0x%" PRIx64 ", 0x%" PRIx64
                        ") is empty, unsorted or overlaps the one before", at, lo, hi);
    a.stacks.push_back({lo, hi, resumer});
  }
  return {};
}

/// A section 5 string: u32 length (at most SnapshotRuntime::kMaxString), then the bytes.
Status parse_string(Cursor& c, const char* field, std::string& out) {
  const size_t at = c.offset();
  SPROV_TRY_UINT(n, c, field, 4);
  if (n > SnapshotRuntime::kMaxString)
    return make_error(SPROV_ERR_SNAPSHOT, "field '%s' at offset %zu: a string of %" PRIu64 " bytes (at most %zu)",
                      field, at, n, SnapshotRuntime::kMaxString);
  auto bytes = c.bytes(field, n);
  if (!bytes) return bytes.error();
  out.assign(reinterpret_cast<const char*>(bytes.value()), n);
  return {};
}

#define SPROV_TRY_STRING(cur, field, out)                          \
  do {                                                             \
    if (Status st_ = parse_string(cur, field, out); !st_) return st_; \
  } while (0)

/// Section 5: the language runtime's frames of the thread (SnapshotRuntime).
Status parse_runtime(Cursor& c, Snapshot& s) {
  SnapshotRuntime& rt = s.runtime;
  size_t at = c.offset();
  SPROV_TRY_UINT(kind, c, "runtime.kind", 1);
  if (kind != SnapshotRuntime::kCPython)
    return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.kind' at offset %zu: unknown runtime %" PRIu64
                      " (1 is CPython)", at, kind);
  SPROV_TRY_STRING(c, "runtime.description", rt.description);
  at = c.offset();
  SPROV_TRY_UINT(n_eval, c, "runtime.n_eval", 4);
  if (n_eval > SnapshotRuntime::kMaxRanges || n_eval * 16 > c.remaining())
    return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.n_eval' at offset %zu: %" PRIu64
                      " ranges (at most %zu, %zu bytes remain)", at, n_eval, SnapshotRuntime::kMaxRanges, c.remaining());
  for (uint64_t i = 0; i < n_eval; i++) {
    at = c.offset();
    SPROV_TRY_UINT(start, c, "runtime.eval.start", 8);
    SPROV_TRY_UINT(end, c, "runtime.eval.end", 8);
    if (start >= end)
      return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.eval.start' at offset %zu: empty or inverted range [0x%" PRIx64
                        ", 0x%" PRIx64 ")", at, start, end);
    rt.eval.push_back({start, end});
  }
  at = c.offset();
  SPROV_TRY_UINT(has_thread, c, "runtime.has_thread", 1);
  if (has_thread > 1)
    return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.has_thread' at offset %zu: %" PRIu64 " (0 or 1)", at,
                      has_thread);
  const size_t thread_at = c.offset();
  SPROV_TRY_UINT(ident, c, "runtime.ident", 8);
  SPROV_TRY_UINT(tstate, c, "runtime.tstate", 8);
  SPROV_TRY_STRING(c, "runtime.name", rt.name);
  SPROV_TRY_STRING(c, "runtime.problem", rt.problem);
  at = c.offset();
  SPROV_TRY_UINT(n_frames, c, "runtime.n_frames", 4);
  // The smallest frame: three empty strings, line, flags, owner, two addresses.
  constexpr size_t kMinFrameBytes = 3 * 4 + 4 + 1 + 1 + 8 + 8;
  if (n_frames > SnapshotRuntime::kMaxFrames || n_frames > c.remaining() / kMinFrameBytes)
    return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.n_frames' at offset %zu: %" PRIu64
                      " frames (at most %zu, %zu bytes remain)", at, n_frames, SnapshotRuntime::kMaxFrames, c.remaining());
  if (!has_thread && (ident || tstate || !rt.name.empty() || !rt.problem.empty() || n_frames))
    return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.ident' at offset %zu: a thread's fields (ident 0x%" PRIx64
                      ", %" PRIu64 " frames) without has_thread", thread_at, ident, n_frames);
  rt.kind = static_cast<uint8_t>(kind);
  rt.has_thread = has_thread != 0;
  rt.ident = ident;
  rt.tstate = tstate;
  rt.frames.reserve(n_frames);
  for (uint64_t i = 0; i < n_frames; i++) {
    SnapshotRuntime::Frame f;
    SPROV_TRY_STRING(c, "runtime.frame.function", f.function);
    SPROV_TRY_STRING(c, "runtime.frame.qualname", f.qualname);
    SPROV_TRY_STRING(c, "runtime.frame.file", f.file);
    SPROV_TRY_UINT(line, c, "runtime.frame.line", 4);
    at = c.offset();
    SPROV_TRY_UINT(flags, c, "runtime.frame.flags", 1);
    if (flags > 1)
      return make_error(SPROV_ERR_SNAPSHOT, "field 'runtime.frame.flags' at offset %zu: unknown flags 0x%" PRIx64, at,
                        flags);
    SPROV_TRY_UINT(owner, c, "runtime.frame.owner", 1);  // the target's byte, as read (3.11 uses 0-2)
    SPROV_TRY_UINT(frame_addr, c, "runtime.frame.frame_addr", 8);
    SPROV_TRY_UINT(code_addr, c, "runtime.frame.code_addr", 8);
    f.line = static_cast<uint32_t>(line);
    f.is_entry = flags & 1;
    f.owner = static_cast<uint8_t>(owner);
    f.frame_addr = frame_addr;
    f.code_addr = code_addr;
    rt.frames.push_back(std::move(f));
  }
  return {};
}

#undef SPROV_TRY_STRING

/// v2: sections { u32 tag, u32 flags, u64 length, payload } up to the end section, which ends the
/// input (so that a blob cut at a section boundary is refused, not read as one without sections).
Status parse_sections(Cursor& c, Snapshot& s) {
  bool seen[kLastKnownSection + 1] = {};
  for (uint32_t n = 0;; n++) {
    const size_t at = c.offset();
    if (n == kMaxSections)
      return make_error(SPROV_ERR_SNAPSHOT, "field 'section' at offset %zu: more than %u sections", at, kMaxSections);
    SPROV_TRY_UINT(tag, c, "section.tag", 4);
    const size_t flags_at = c.offset();
    SPROV_TRY_UINT(flags, c, "section.flags", 4);
    if (flags & ~uint64_t{kKnownSectionFlags})
      return make_error(SPROV_ERR_SNAPSHOT, "field 'section.flags' at offset %zu: unknown flags 0x%" PRIx64,
                        flags_at, flags & ~uint64_t{kKnownSectionFlags});
    const size_t len_at = c.offset();
    SPROV_TRY_UINT(len, c, "section.length", 8);
    if (len > c.remaining())
      return make_error(SPROV_ERR_SNAPSHOT,
                        "truncated: field 'section.length' at offset %zu: section %" PRIu64 " of %" PRIu64
                        " bytes, %zu remain",
                        len_at, tag, len, c.remaining());
    if (n == 0 && tag != kSectionHeader)
      return make_error(SPROV_ERR_SNAPSHOT, "field 'section.tag' at offset %zu: the first section is %" PRIu64
                        ", not the header (%u)", at, tag, kSectionHeader);
    if (tag == kSectionEnd) {
      if (len != 0) return make_error(SPROV_ERR_SNAPSHOT, "field 'section.length' at offset %zu: end section of %" PRIu64 " bytes", len_at, len);
      break;
    }
    if (tag > kLastKnownSection) {
      if (flags & kSectionRequired)
        return make_error(SPROV_ERR_SNAPSHOT,
                          "field 'section.tag' at offset %zu: unknown section %" PRIu64
                          " is marked required (written by a newer stackprov)",
                          at, tag);
      (void)c.bytes("section.payload", len);  // an optional section this reader does not know
      continue;
    }
    if (seen[tag])
      return make_error(SPROV_ERR_SNAPSHOT, "field 'section.tag' at offset %zu: section %" PRIu64 " twice", at, tag);
    seen[tag] = true;
    Cursor body = c.sub(len);
    Status st = tag == kSectionHeader ? parse_header(body, s)
                : tag == kSectionMemory ? parse_regions(body, s)
                : tag == kSectionAsync  ? parse_async(body, s)
                : tag == kSectionRuntime ? parse_runtime(body, s)
                                        : parse_modules(body, s, kVersion2);
    if (!st) return st;
    if (body.remaining() != 0)
      return make_error(SPROV_ERR_SNAPSHOT, "field 'section.length' at offset %zu: %zu bytes of section %" PRIu64
                        " left unread", len_at, body.remaining(), tag);
  }
  for (uint32_t tag : {kSectionMemory, kSectionModules})
    if (!seen[tag]) return make_error(SPROV_ERR_SNAPSHOT, "field 'section.tag': no section %u (%s) before the end section", tag, tag == kSectionMemory ? "memory" : "modules");
  return {};
}

#undef SPROV_TRY_UINT

}  // namespace

namespace {
/// Where a new region [addr, addr + len) goes in s.memory, or why it cannot (add_memory's checks).
Result<size_t> region_slot(const Snapshot& s, uint64_t addr, const void* bytes, size_t len) {
  const std::vector<MemoryRegion>& memory = s.memory;
  if (len == 0) return make_error(SPROV_ERR_INVALID_ARG, "empty memory region at 0x%" PRIx64, addr);
  if (bytes == nullptr)
    return make_error(SPROV_ERR_INVALID_ARG, "null bytes for region at 0x%" PRIx64, addr);
  const uint64_t end = addr + len;
  if (end < addr)
    return make_error(SPROV_ERR_INVALID_ARG,
                      "memory region 0x%" PRIx64 "+0x%zx wraps around the address space", addr,
                      len);
  if (memory.size() >= kMaxRegions)
    return make_error(SPROV_ERR_LIMIT, "snapshot already holds %zu regions (limit %u)",
                      memory.size(), kMaxRegions);
  const uint64_t total = total_memory(s);
  if (len > kMaxTotalMemory - total)
    return make_error(SPROV_ERR_LIMIT,
                      "region [0x%" PRIx64 ", 0x%" PRIx64 ") would exceed the 1 GiB limit (%" PRIu64
                      " bytes held)",
                      addr, end, total);
  auto it = std::upper_bound(memory.begin(), memory.end(), addr,
                             [](uint64_t a, const MemoryRegion& r) { return a < r.addr; });
  if (it != memory.begin()) {
    const MemoryRegion& prev = *(it - 1);
    const uint64_t prev_end = prev.addr + prev.size();
    if (prev_end > addr)
      return make_error(SPROV_ERR_INVALID_ARG,
                        "memory region [0x%" PRIx64 ", 0x%" PRIx64
                        ") overlaps region [0x%" PRIx64 ", 0x%" PRIx64 ")",
                        addr, end, prev.addr, prev_end);
  }
  if (it != memory.end() && it->addr < end)
    return make_error(SPROV_ERR_INVALID_ARG,
                      "memory region [0x%" PRIx64 ", 0x%" PRIx64 ") overlaps region [0x%" PRIx64
                      ", 0x%" PRIx64 ")",
                      addr, end, it->addr, it->addr + it->size());
  return static_cast<size_t>(it - memory.begin());
}
}  // namespace

Status Snapshot::add_memory(uint64_t addr, const void* bytes, size_t len, std::vector<uint8_t>* reuse) {
  auto at = region_slot(*this, addr, bytes, len);
  if (!at.ok()) return at.error();
  MemoryRegion r;
  r.addr = addr;
  if (reuse != nullptr) r.bytes.swap(*reuse);
  const auto* b = static_cast<const uint8_t*>(bytes);
  r.bytes.assign(b, b + len);
  memory.insert(memory.begin() + static_cast<std::ptrdiff_t>(at.value()), std::move(r));
  return {};
}

Status Snapshot::add_memory_view(uint64_t addr, const uint8_t* bytes, size_t len) {
  auto at = region_slot(*this, addr, bytes, len);
  if (!at.ok()) return at.error();
  MemoryRegion r;
  r.addr = addr;
  r.view = bytes;
  r.view_len = len;
  memory.insert(memory.begin() + static_cast<std::ptrdiff_t>(at.value()), std::move(r));
  return {};
}

void Snapshot::drop_views() {
  memory.erase(std::remove_if(memory.begin(), memory.end(), [](const MemoryRegion& r) { return r.view != nullptr; }),
               memory.end());
}

namespace {

/// add_module's checks of one module on its own (not against the others).
Status check_module(const SnapshotModule& m) {
  if (m.start >= m.end)
    return make_error(SPROV_ERR_INVALID_ARG,
                      "module '%s' has an empty or inverted range [0x%" PRIx64 ", 0x%" PRIx64 ")",
                      m.path.c_str(), m.start, m.end);
  if (m.path.size() > kMaxPathLen)
    return make_error(SPROV_ERR_LIMIT, "module path of %zu bytes exceeds the limit %u",
                      m.path.size(), kMaxPathLen);
  if (path_has_nul(m.path))
    return make_error(SPROV_ERR_INVALID_ARG, "module path contains a NUL byte");
  if (m.build_id.len > ModuleId::kMax)
    return make_error(SPROV_ERR_INVALID_ARG, "module '%s' build-id length %u exceeds %zu",
                      m.path.c_str(), unsigned{m.build_id.len}, ModuleId::kMax);
  return {};
}

Error overlap(const SnapshotModule& m, const SnapshotModule& other) {
  return make_error(SPROV_ERR_INVALID_ARG,
                    "module [0x%" PRIx64 ", 0x%" PRIx64 ") overlaps module [0x%" PRIx64 ", 0x%" PRIx64 ")",
                    m.start, m.end, other.start, other.end);
}

}  // namespace

Status Snapshot::add_module(SnapshotModule m) {
  if (Status st = check_module(m); !st) return st;
  if (modules.size() >= kMaxModules)
    return make_error(SPROV_ERR_LIMIT, "snapshot already holds %zu modules (limit %u)",
                      modules.size(), kMaxModules);
  auto it = std::upper_bound(modules.begin(), modules.end(), m.start,
                             [](uint64_t a, const SnapshotModule& x) { return a < x.start; });
  if (it != modules.begin() && (it - 1)->end > m.start) return overlap(m, *(it - 1));
  if (it != modules.end() && it->start < m.end) return overlap(m, *it);
  modules.insert(it, std::move(m));
  return {};
}

Status Snapshot::set_modules(std::vector<SnapshotModule> mods) {
  modules.clear();
  if (mods.size() > kMaxModules)
    return make_error(SPROV_ERR_LIMIT, "snapshot already holds %u modules (limit %u)", kMaxModules, kMaxModules);
  for (const SnapshotModule& m : mods)
    if (Status st = check_module(m); !st) return st;
  std::stable_sort(mods.begin(), mods.end(), [](const SnapshotModule& a, const SnapshotModule& b) { return a.start < b.start; });
  for (size_t i = 1; i < mods.size(); ++i)
    if (mods[i - 1].end > mods[i].start) return overlap(mods[i], mods[i - 1]);
  modules = std::move(mods);
  return {};
}

uint64_t Snapshot::module_files_hash() const {
  bool any = !module_root.empty();
  for (const SnapshotModule& m : modules) any = any || m.file.known() || !m.open_path.empty();
  if (!any) return 0;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  std::vector<uint8_t> rec;
  Writer w(rec);
  w.u32(static_cast<uint32_t>(module_root.size()));
  w.bytes(module_root.data(), module_root.size());
  XXH3_64bits_update(&state, rec.data(), rec.size());
  for (const SnapshotModule& m : modules) {
    rec.clear();
    w.u64(m.file.dev);
    w.u64(m.file.ino);
    w.u64(m.file.mtime_ns);
    w.u32(static_cast<uint32_t>(m.open_path.size()));
    w.bytes(m.open_path.data(), m.open_path.size());
    XXH3_64bits_update(&state, rec.data(), rec.size());
  }
  return XXH3_64bits_digest(&state);
}

uint64_t Snapshot::module_list_hash() const {
  // Each field is fed in a fixed little-endian encoding (the serialized module
  // record), so the hash is independent of the host and of struct padding.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  std::vector<uint8_t> rec;
  Writer w(rec);
  w.u32(static_cast<uint32_t>(modules.size()));
  XXH3_64bits_update(&state, rec.data(), rec.size());
  for (const SnapshotModule& m : modules) {
    rec.clear();
    w.u64(m.start);
    w.u64(m.end);
    w.u64(m.file_offset);
    w.u64(m.load_bias);
    w.u32(static_cast<uint32_t>(m.path.size()));
    w.bytes(m.path.data(), m.path.size());
    const uint8_t id_len = std::min<uint8_t>(m.build_id.len, ModuleId::kMax);
    w.u8(id_len);
    w.bytes(m.build_id.bytes, id_len);
    w.u8(id_len ? static_cast<uint8_t>(m.build_id.kind) : 0);
    XXH3_64bits_update(&state, rec.data(), rec.size());
  }
  return XXH3_64bits_digest(&state);
}

namespace {

void write_header(Writer& w, const Snapshot& s) {
  w.u8(static_cast<uint8_t>(s.arch));
  w.u8(static_cast<uint8_t>(s.endian));
  w.u16(0);
  w.u64(static_cast<uint64_t>(s.pid));
  w.u64(static_cast<uint64_t>(s.tid));
  w.u32(s.flags);
  w.u64(s.regs_valid);
  for (uint64_t r : s.regs) w.u64(r);
}

void write_regions(Writer& w, const Snapshot& s) {
  w.u32(static_cast<uint32_t>(s.memory.size()));
  for (const MemoryRegion& r : s.memory) {
    w.u64(r.addr);
    w.u64(r.size());
    w.bytes(r.data(), r.size());
  }
}

void write_modules(Writer& w, const Snapshot& s, uint32_t version) {
  w.u32(static_cast<uint32_t>(s.modules.size()));
  for (const SnapshotModule& m : s.modules) {
    w.u64(m.start);
    w.u64(m.end);
    w.u64(m.file_offset);
    w.u64(m.load_bias);
    w.u32(static_cast<uint32_t>(m.path.size()));
    w.bytes(m.path.data(), m.path.size());
    const uint8_t id_len = std::min<uint8_t>(m.build_id.len, ModuleId::kMax);
    if (version >= kVersion2) w.u8(id_len ? static_cast<uint8_t>(m.build_id.kind) : 0);
    w.u8(id_len);
    w.bytes(m.build_id.bytes, id_len);
  }
}

/// A section 5 string, cut at SnapshotRuntime::kMaxString bytes (a capture never reads longer
/// ones; the cut keeps what is written readable).
void write_string(Writer& w, const std::string& v) {
  const size_t n = std::min(v.size(), SnapshotRuntime::kMaxString);
  w.u32(static_cast<uint32_t>(n));
  w.bytes(v.data(), n);
}

void write_runtime(Writer& w, const SnapshotRuntime& rt) {
  w.u8(rt.kind);
  write_string(w, rt.description);
  const size_t n_eval = std::min(rt.eval.size(), SnapshotRuntime::kMaxRanges);
  w.u32(static_cast<uint32_t>(n_eval));
  for (size_t i = 0; i < n_eval; i++) {
    w.u64(rt.eval[i].start);
    w.u64(rt.eval[i].end);
  }
  w.u8(rt.has_thread ? 1 : 0);
  const bool t = rt.has_thread;
  w.u64(t ? rt.ident : 0);
  w.u64(t ? rt.tstate : 0);
  write_string(w, t ? rt.name : std::string());
  write_string(w, t ? rt.problem : std::string());
  const size_t n = t ? std::min(rt.frames.size(), SnapshotRuntime::kMaxFrames) : 0;
  w.u32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; i++) {
    const SnapshotRuntime::Frame& f = rt.frames[i];
    write_string(w, f.function);
    write_string(w, f.qualname);
    write_string(w, f.file);
    w.u32(f.line);
    w.u8(f.is_entry ? 1 : 0);
    w.u8(f.owner);
    w.u64(f.frame_addr);
    w.u64(f.code_addr);
  }
}

/// Appends one v2 section: the header, then `body`'s bytes, the length patched in after.
template <typename F>
void write_section(std::vector<uint8_t>& out, uint32_t tag, uint32_t flags, F&& body) {
  Writer w(out);
  w.u32(tag);
  w.u32(flags);
  const size_t len_at = out.size();
  w.u64(0);
  const size_t start = out.size();
  body(w);
  const uint64_t len = out.size() - start;
  for (int i = 0; i < 8; i++) out[len_at + i] = static_cast<uint8_t>(len >> (8 * i));
}

}  // namespace

uint32_t serialized_version(const Snapshot& s) {
  if (!s.async.empty() || !s.runtime.empty()) return kVersion2;  // sections 4, 5
  for (const SnapshotModule& m : s.modules)
    if (!m.build_id.empty() && m.build_id.kind != IdKind::kElfBuildId) return kVersion2;
  return kVersion1;
}

std::vector<uint8_t> serialize(const Snapshot& s) {
  std::vector<uint8_t> out;
  size_t size = 8 + 4 + 4 + 8 + 8 + 4 + 8 + 8 * kSnapshotMaxRegs + 4 + 4 + 3 * 16;
  for (const MemoryRegion& r : s.memory) size += 16 + r.size();
  for (const SnapshotModule& m : s.modules) size += kMinModuleBytes + 1 + m.path.size() + m.build_id.len;
  out.reserve(size);
  Writer w(out);
  w.bytes(kMagic, sizeof(kMagic));
  const uint32_t version = serialized_version(s);
  w.u32(version);
  if (version == kVersion1) {
    write_header(w, s);
    write_regions(w, s);
    write_modules(w, s, version);
    return out;
  }
  write_section(out, kSectionHeader, kSectionRequired, [&](Writer& sw) { write_header(sw, s); });
  write_section(out, kSectionMemory, kSectionRequired, [&](Writer& sw) { write_regions(sw, s); });
  write_section(out, kSectionModules, kSectionRequired, [&](Writer& sw) { write_modules(sw, s, version); });
  if (!s.async.empty())
    write_section(out, kSectionAsync, 0, [&](Writer& sw) {
      sw.u64(s.async.root);
      sw.u32(s.async.root_source);
      sw.u32(static_cast<uint32_t>(s.async.stacks.size()));
      for (const SnapshotAsync::Stack& st : s.async.stacks) {
        sw.u64(st.lo);
        sw.u64(st.hi);
        sw.u64(st.resumer);
      }
    });
  if (!s.runtime.empty())
    write_section(out, kSectionRuntime, 0, [&](Writer& sw) { write_runtime(sw, s.runtime); });
  write_section(out, kSectionEnd, kSectionRequired, [](Writer&) {});
  return out;
}

Result<Snapshot> deserialize(const uint8_t* data, size_t len) {
  if (data == nullptr && len != 0)
    return make_error(SPROV_ERR_SNAPSHOT, "null data with length %zu", len);
  Cursor c(data, len);
  Snapshot s;
  auto version = parse_magic_version(c);
  if (!version) return version.error();
  if (version.value() == kVersion2) {
    // The version named: a v1 blob with a damaged version byte fails in the sections' fields.
    if (Status st = parse_sections(c, s); !st)
      return make_error(SPROV_ERR_SNAPSHOT, "version 2 snapshot: %s", st.error().message.c_str());
    if (c.remaining() != 0)
      return make_error(SPROV_ERR_SNAPSHOT, "version 2 snapshot: %zu trailing bytes after the end section at offset %zu",
                        c.remaining(), c.offset());
    return s;
  }
  if (Status st = parse_header(c, s); !st) return st.error();
  if (Status st = parse_regions(c, s); !st) return st.error();
  if (Status st = parse_modules(c, s, kVersion1); !st) return st.error();
  if (c.remaining() != 0)
    return make_error(SPROV_ERR_SNAPSHOT, "%zu trailing bytes at offset %zu", c.remaining(),
                      c.offset());
  return s;
}

bool SnapshotReader::seek_slow(uint64_t addr) {
  const std::vector<MemoryRegion>& mem = snap_->memory;
  auto it = std::upper_bound(mem.begin(), mem.end(), addr,
                             [](uint64_t a, const MemoryRegion& r) { return a < r.addr; });
  if (it == mem.begin()) return false;
  const MemoryRegion& r = *--it;
  if (addr - r.addr >= r.bytes.size()) return false;
  hit_addr_ = r.addr;
  hit_data_ = r.bytes.data();
  hit_size_ = r.bytes.size();
  return true;
}

bool SnapshotReader::read_slow(uint64_t addr, void* buf, size_t len) {
  if (len == 0) return true;
  const std::vector<MemoryRegion>& mem = snap_->memory;
  auto it = std::upper_bound(mem.begin(), mem.end(), addr,
                             [](uint64_t a, const MemoryRegion& r) { return a < r.addr; });
  if (it == mem.begin()) return false;
  size_t idx = static_cast<size_t>(it - mem.begin()) - 1;
  auto* out = static_cast<uint8_t*>(buf);
  uint64_t cur = addr;
  size_t left = len;
  const size_t first = idx;
  while (true) {
    const MemoryRegion& r = mem[idx];
    const uint64_t off = cur - r.addr;
    if (off >= r.size()) return false;
    const size_t n = std::min<uint64_t>(left, r.size() - off);
    std::memcpy(out, r.data() + off, n);
    out += n;
    left -= n;
    if (left == 0) break;
    cur += n;  // == r.addr + r.size(): the next region must start exactly here
    if (++idx == mem.size() || mem[idx].addr != cur) return false;
  }
  hit_addr_ = mem[first].addr;
  hit_data_ = mem[first].data();
  hit_size_ = mem[first].size();
  return true;
}

}  // namespace stackprov::memory
