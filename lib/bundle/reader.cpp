// SPDX-License-Identifier: Apache-2.0
// Bundle reader: validates header, section table and module table at open, each module's records once on first use.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <utility>

#include "bundle/format.hpp"
#include "bundle/format_layout.hpp"

namespace stackprov::bundle {

using namespace layout;

namespace {

struct Slice {
  uint64_t first = 0;
  uint64_t count = 0;
};

inline constexpr uint64_t kSampleStride = 16;

struct ModuleMeta {
  Slice strings, ranges, pads, frames, rows, blob;
};

/// Per-module index, built and validated once (std::call_once) on first use.
struct ModuleIndex {
  std::once_flag once;
  bool ok = false;
  Error err;
  std::vector<uint64_t> depth_begin;  // ranges of depth d: [depth_begin[d], depth_begin[d + 1])
  /// Start address of every kSampleStride-th range of the module (in file order): the
  /// first steps of a lookup's binary search stay in this small array instead of
  /// touching records spread over the mapping.
  std::vector<uint64_t> sample;
};

Error bad(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Error bad(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return make_error(SPROV_ERR_BUNDLE, "bundle: %s", buf);
}

}  // namespace

struct BundleReader::Impl {
  const uint8_t* sec[kSectionTypeCount + 1] = {};
  uint64_t sec_len[kSectionTypeCount + 1] = {};
  std::vector<ModuleMeta> meta;
  std::unique_ptr<ModuleIndex[]> index;

  const uint8_t* range(const ModuleMeta& m, uint64_t i) const {
    return sec[kSecRanges] + (m.ranges.first + i) * kRangeSize;
  }
  const uint8_t* pad(const ModuleMeta& m, uint64_t i) const { return sec[kSecPads] + (m.pads.first + i) * kPadSize; }
  const uint8_t* frame(const ModuleMeta& m, uint64_t i) const {
    return sec[kSecPadFrames] + (m.frames.first + i) * kPadFrameSize;
  }
  const uint8_t* row(const ModuleMeta& m, uint64_t i) const {
    return sec[kSecUnwind] + (m.rows.first + i) * kUnwindSize;
  }
  /// A string ref already checked against the module's table (which ends with a NUL).
  std::string_view str(const ModuleMeta& m, uint32_t ref) const {
    const char* p = reinterpret_cast<const char*>(sec[kSecStrings] + m.strings.first + ref);
    return std::string_view(p, strnlen(p, m.strings.count - ref));
  }
  Status build_index(size_t mi, ModuleIndex& ix) const;
  Result<const ModuleIndex*> module_index(size_t mi) const;
};

namespace {

/// Checks that [first, first + count) lies within `limit` and adds up with the previous
/// module's slice (the canonical layout has the slices back to back).
Status check_slice(size_t mi, const char* what, Slice s, uint64_t expected_first, uint64_t limit) {
  if (s.first != expected_first)
    return bad("module %zu: %s start at %" PRIu64 ", expected %" PRIu64, mi, what, s.first, expected_first);
  if (s.count > limit || s.first > limit - s.count)
    return bad("module %zu: %s count %" PRIu64 " at %" PRIu64 " exceeds the section's %" PRIu64, mi, what, s.count,
               s.first, limit);
  return {};
}

}  // namespace

Status BundleReader::Impl::build_index(size_t mi, ModuleIndex& ix) const {
  const ModuleMeta& m = meta[mi];
  // Ranges: depth non-decreasing by steps of 1, starts sorted and non-overlapping per depth.
  ix.depth_begin.push_back(0);
  uint32_t depth = 0;
  uint64_t prev_end = 0;
  for (uint64_t i = 0; i < m.ranges.count; i++) {
    const uint8_t* r = range(m, i);
    const uint64_t start = ld64(r);
    const uint32_t len = ld32(r + 8);
    const uint32_t d = ld16(r + 12);
    if (ld16(r + 14) != 0) return bad("module %zu: range %" PRIu64 " has flags 0x%x", mi, i, ld16(r + 14));
    if (len == 0 || start > UINT64_MAX - len)
      return bad("module %zu: range %" PRIu64 " at 0x%" PRIx64 " has length 0x%x", mi, i, start, len);
    if (d > kMaxInlineDepth) return bad("module %zu: range %" PRIu64 " has depth %u > %u", mi, i, d, kMaxInlineDepth);
    if (d != depth) {
      if (d != depth + 1) return bad("module %zu: range %" PRIu64 " has depth %u after depth %u", mi, i, d, depth);
      depth = d;
      ix.depth_begin.push_back(i);
    } else if (i > 0 && start < prev_end) {
      return bad("module %zu: range %" PRIu64 " at 0x%" PRIx64 " overlaps or precedes the one before (end 0x%" PRIx64
                 ")", mi, i, start, prev_end);
    }
    prev_end = start + len;
    if (i % kSampleStride == 0) ix.sample.push_back(start);
    for (size_t f : {16u, 20u, 32u}) {
      const uint32_t ref = ld32(r + f);
      if (ref >= m.strings.count)
        return bad("module %zu: range %" PRIu64 " string ref %u beyond the table of %" PRIu64, mi, i, ref,
                   m.strings.count);
    }
  }
  ix.depth_begin.push_back(m.ranges.count);

  uint64_t prev_addr = 0;
  for (uint64_t i = 0; i < m.pads.count; i++) {
    const uint8_t* p = pad(m, i);
    const uint64_t addr = ld64(p);
    const uint32_t first = ld32(p + 8), count = ld32(p + 12);
    if (i > 0 && addr <= prev_addr)
      return bad("module %zu: return pad %" PRIu64 " at 0x%" PRIx64 " is not after 0x%" PRIx64, mi, i, addr, prev_addr);
    prev_addr = addr;
    if (count == 0 || count > kMaxInlineDepth + 1 || first > m.frames.count || count > m.frames.count - first)
      return bad("module %zu: return pad 0x%" PRIx64 " frames [%u, +%u) outside 1..%u frames of %" PRIu64, mi, addr,
                 first, count, kMaxInlineDepth + 1, m.frames.count);
  }
  for (uint64_t i = 0; i < m.frames.count; i++) {
    const uint8_t* f = frame(m, i);
    for (size_t o : {0u, 4u}) {
      const uint32_t ref = ld32(f + o);
      if (ref >= m.strings.count)
        return bad("module %zu: pad frame %" PRIu64 " string ref %u beyond the table of %" PRIu64, mi, i, ref,
                   m.strings.count);
    }
  }

  uint64_t prev_pc = 0;
  for (uint64_t i = 0; i < m.rows.count; i++) {
    const uint8_t* r = row(m, i);
    const uint64_t pc = ld64(r);
    if (i > 0 && pc <= prev_pc)
      return bad("module %zu: unwind row %" PRIu64 " at 0x%" PRIx64 " is not after 0x%" PRIx64, mi, i, pc, prev_pc);
    prev_pc = pc;
    if (r[8] < UnwindRowRecord::kCfaReg || r[8] > UnwindRowRecord::kNoInfo)
      return bad("module %zu: unwind row 0x%" PRIx64 " has kind %u", mi, pc, r[8]);
    if (r[10] > UnwindRowRecord::kRaUnspecified)
      return bad("module %zu: unwind row 0x%" PRIx64 " has ra kind %u", mi, pc, r[10]);
    if (r[17] > kMaxSavedRegs) return bad("module %zu: unwind row 0x%" PRIx64 " saves %u registers", mi, pc, r[17]);
    if ((r[18] & ~(kRowSignalFrame | kRowFromDebugFrame)) != 0 || r[19] != 0)
      return bad("module %zu: unwind row 0x%" PRIx64 " has flags 0x%x/0x%x", mi, pc, r[18], r[19]);
  }
  return {};
}

Result<const ModuleIndex*> BundleReader::Impl::module_index(size_t mi) const {
  if (mi >= meta.size()) return bad("module index %zu out of %zu", mi, meta.size());
  ModuleIndex& ix = index[mi];
  std::call_once(ix.once, [&] {
    Status s = build_index(mi, ix);
    ix.ok = s.ok();
    if (!ix.ok) {
      ix.err = s.error();
      ix.depth_begin.clear();
      ix.sample.clear();
    }
  });
  if (!ix.ok) return ix.err;
  return &ix;
}

BundleReader::BundleReader() : impl_(std::make_unique<Impl>()) {}
BundleReader::BundleReader(BundleReader&& o) noexcept { *this = std::move(o); }
BundleReader& BundleReader::operator=(BundleReader&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) munmap(map_, map_len_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    modules_ = std::move(o.modules_);
    impl_ = std::move(o.impl_);
  }
  return *this;
}
BundleReader::~BundleReader() {
  if (map_ != nullptr) munmap(map_, map_len_);
}

Result<BundleReader> BundleReader::open(const uint8_t* data, size_t len) {
  if (data == nullptr || len < kHeaderSize) return bad("%zu bytes are shorter than the %zu-byte header", len, kHeaderSize);
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) return bad("bad magic (not a stackprov symbol bundle)");
  const uint32_t version = ld32(data + 8);
  if (version != kFormatVersion) return bad("format version %u, this reader knows %u", version, kFormatVersion);
  const uint32_t nsec = ld32(data + 12);
  if (nsec > kMaxSections) return bad("section count %u exceeds %u", nsec, kMaxSections);
  const uint64_t file_size = ld64(data + 16);
  if (file_size != len) return bad("header says %" PRIu64 " bytes, the file has %zu", file_size, len);
  if (ld32(data + 24) != 0 || ld32(data + 28) != 0) return bad("header flags 0x%x/0x%x", ld32(data + 24), ld32(data + 28));
  const uint64_t table_end = kHeaderSize + static_cast<uint64_t>(nsec) * kSectionEntrySize;
  if (table_end > len) return bad("section table of %u entries ends at %" PRIu64 " beyond %zu bytes", nsec, table_end, len);

  BundleReader rd;
  Impl& im = *rd.impl_;
  rd.data_ = data;
  rd.size_ = len;
  struct Span {
    uint64_t off, len;
  };
  std::vector<Span> spans;
  bool seen[kSectionTypeCount + 1] = {};
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t* e = data + kHeaderSize + i * kSectionEntrySize;
    const uint32_t type = ld32(e), flags = ld32(e + 4);
    const uint64_t off = ld64(e + 8), slen = ld64(e + 16);
    if (flags != 0) return bad("section %u (type %u) has flags 0x%x", i, type, flags);
    if (off % kSectionAlign != 0 || off < table_end || off > len || slen > len - off)
      return bad("section %u (type %u) at %" PRIu64 " length %" PRIu64 " is outside [%" PRIu64 ", %zu) or unaligned", i,
                 type, off, slen, table_end, len);
    spans.push_back({off, slen});
    if (type == 0 || (type > kSectionTypeCount && (type & kSectionOptionalBit) == 0))
      return bad("section %u has unknown type %u", i, type);
    if (type > kSectionTypeCount) continue;  // optional, unknown: skipped
    if (seen[type]) return bad("section type %u appears twice", type);
    seen[type] = true;
    im.sec[type] = data + off;
    im.sec_len[type] = slen;
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.off < b.off; });
  for (size_t i = 1; i < spans.size(); i++)
    if (spans[i - 1].off + spans[i - 1].len > spans[i].off)
      return bad("sections at %" PRIu64 " and %" PRIu64 " overlap", spans[i - 1].off, spans[i].off);
  // The file ends where its last section ends, padded to 8 bytes (canonical layout).
  const uint64_t last_end = spans.empty() ? table_end : std::max(table_end, spans.back().off + spans.back().len);
  const uint64_t want_len = (last_end + kSectionAlign - 1) & ~static_cast<uint64_t>(kSectionAlign - 1);
  if (want_len != len) return bad("the sections end at %" PRIu64 " (padded %" PRIu64 "), the file has %zu bytes",
                                  last_end, want_len, len);
  for (uint32_t t = kSecModules; t <= kSecUnwind; t++)
    if (!seen[t]) return bad("required section type %u is missing", t);
  static const size_t kRecSize[kSectionTypeCount + 1] = {0, kModuleSize, 1, kRangeSize, kPadSize, kPadFrameSize,
                                                         kUnwindSize, 1};
  uint64_t nrec[kSectionTypeCount + 1] = {};
  for (uint32_t t = 1; t <= kSectionTypeCount; t++) {
    if (im.sec_len[t] % kRecSize[t] != 0)
      return bad("section type %u length %" PRIu64 " is not a multiple of %zu", t, im.sec_len[t], kRecSize[t]);
    nrec[t] = im.sec_len[t] / kRecSize[t];
  }
  if (nrec[kSecModules] > kMaxModules) return bad("module count %" PRIu64 " exceeds %zu", nrec[kSecModules], kMaxModules);

  const size_t nmod = static_cast<size_t>(nrec[kSecModules]);
  im.meta.resize(nmod);
  rd.modules_.resize(nmod);
  ModuleMeta next;  // where the next module's slices start
  for (size_t mi = 0; mi < nmod; mi++) {
    const uint8_t* r = im.sec[kSecModules] + mi * kModuleSize;
    ModuleMeta& m = im.meta[mi];
    ModuleView& v = rd.modules_[mi];
    const uint8_t kind = r[kModIdKind], id_len = r[kModIdLen];
    if (kind < 1 || kind > 3) return bad("module %zu has id kind %u", mi, kind);
    if (id_len == 0 || id_len > kMaxIdBytes) return bad("module %zu has id length %u (1..%zu)", mi, id_len, kMaxIdBytes);
    if ((kind == 2 && id_len != 20) || (kind == 3 && id_len != 16))
      return bad("module %zu: id length %u is wrong for id kind %u", mi, id_len, kind);
    for (size_t i = id_len; i < kMaxIdBytes; i++)
      if (r[kModId + i] != 0) return bad("module %zu: id byte %zu past its length %u is not zero", mi, i, id_len);
    if (ld16(r + kModFlags) != 0) return bad("module %zu has flags 0x%x", mi, ld16(r + kModFlags));
    auto slice = [&](size_t o) { return Slice{ld64(r + o), ld64(r + o + 8)}; };
    m = {slice(kModStrings), slice(kModRanges), slice(kModPads), slice(kModPadFrames), slice(kModUnwind),
         slice(kModBlob)};
    if (auto s = check_slice(mi, "strings", m.strings, next.strings.first, nrec[kSecStrings]); !s) return s.error();
    if (auto s = check_slice(mi, "ranges", m.ranges, next.ranges.first, nrec[kSecRanges]); !s) return s.error();
    if (auto s = check_slice(mi, "return pads", m.pads, next.pads.first, nrec[kSecPads]); !s) return s.error();
    if (auto s = check_slice(mi, "pad frames", m.frames, next.frames.first, nrec[kSecPadFrames]); !s) return s.error();
    if (auto s = check_slice(mi, "unwind rows", m.rows, next.rows.first, nrec[kSecUnwind]); !s) return s.error();
    if (auto s = check_slice(mi, "debug blob", m.blob, next.blob.first, nrec[kSecBlobs]); !s) return s.error();
    for (uint64_t c : {m.ranges.count, m.pads.count, m.frames.count, m.rows.count})
      if (c > kMaxRecords) return bad("module %zu: record count %" PRIu64 " exceeds %" PRIu64, mi, c, kMaxRecords);
    next = {{m.strings.first + m.strings.count, 0}, {m.ranges.first + m.ranges.count, 0},
            {m.pads.first + m.pads.count, 0},       {m.frames.first + m.frames.count, 0},
            {m.rows.first + m.rows.count, 0},       {m.blob.first + m.blob.count, 0}};
    const uint8_t* st = im.sec[kSecStrings] + m.strings.first;
    if (m.strings.count == 0 || st[0] != 0 || st[m.strings.count - 1] != 0)
      return bad("module %zu: string table of %" PRIu64 " bytes does not start and end with NUL", mi, m.strings.count);
    const uint32_t name = ld32(r + kModName);
    if (name >= m.strings.count) return bad("module %zu: name ref %u beyond the table of %" PRIu64, mi, name, m.strings.count);

    v.index = mi;
    v.id_kind = static_cast<IdKind>(kind);
    v.id = std::span<const uint8_t>(r + kModId, id_len);
    v.name = im.str(m, name);
    std::memcpy(v.sha256_file.data(), r + kModShaFile, 32);
    std::memcpy(v.sha256_debug.data(), r + kModShaDebug, 32);
    v.range_count = m.ranges.count;
    v.pad_count = m.pads.count;
    v.unwind_count = m.rows.count;
    if (m.blob.count > 0) v.debug_blob = std::span<const uint8_t>(im.sec[kSecBlobs] + m.blob.first, m.blob.count);
    if (mi > 0) {
      const ModuleView& p = rd.modules_[mi - 1];
      const bool less = p.id_kind != v.id_kind ? p.id_kind < v.id_kind
                                               : std::lexicographical_compare(p.id.begin(), p.id.end(), v.id.begin(),
                                                                              v.id.end());
      if (!less) return bad("module %zu is not sorted after module %zu by identity", mi, mi - 1);
    }
  }
  const uint64_t used[] = {next.strings.first, next.ranges.first, next.pads.first,
                           next.frames.first,  next.rows.first,   next.blob.first};
  const uint32_t types[] = {kSecStrings, kSecRanges, kSecPads, kSecPadFrames, kSecUnwind,
                            kSecBlobs};
  for (size_t i = 0; i < 6; i++)
    if (used[i] != nrec[types[i]])
      return bad("section type %u holds %" PRIu64 " records, the modules use %" PRIu64, types[i], nrec[types[i]], used[i]);
  im.index = std::make_unique<ModuleIndex[]>(nmod);
  return rd;
}

Result<BundleReader> BundleReader::open_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(-errno, "bundle: cannot open %s: %s", path.c_str(), strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(-e, "bundle: cannot stat %s: %s", path.c_str(), strerror(e));
  }
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return make_error(SPROV_ERR_BUNDLE, "bundle: %s is not a non-empty regular file (%lld bytes)", path.c_str(),
                      static_cast<long long>(st.st_size));
  }
  const size_t len = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return make_error(-e, "bundle: cannot map %s: %s", path.c_str(), strerror(e));
  auto rd = open(static_cast<const uint8_t*>(p), len);
  if (!rd) {
    munmap(p, len);
    Error err = std::move(rd).error();
    err.message = path + ": " + err.message;
    return err;
  }
  rd->map_ = p;
  rd->map_len_ = len;
  return rd;
}

const ModuleView* BundleReader::find_module(IdKind kind, std::span<const uint8_t> id) const {
  auto it = std::lower_bound(modules_.begin(), modules_.end(), 0, [&](const ModuleView& v, int) {
    if (v.id_kind != kind) return v.id_kind < kind;
    return std::lexicographical_compare(v.id.begin(), v.id.end(), id.begin(), id.end());
  });
  if (it == modules_.end() || it->id_kind != kind || !std::equal(it->id.begin(), it->id.end(), id.begin(), id.end()))
    return nullptr;
  return &*it;
}

Result<std::vector<FrameView>> BundleReader::lookup(size_t module, uint64_t rel_addr) const {
  auto ix = impl_->module_index(module);
  if (!ix) return std::move(ix).error();
  const ModuleMeta& m = impl_->meta[module];
  const std::vector<uint64_t>& db = ix.value()->depth_begin;
  const uint8_t* hits[kMaxInlineDepth + 1];
  size_t n = 0;
  for (size_t d = 0; d + 1 < db.size() && n <= kMaxInlineDepth; d++) {
    // Last range of this depth with start <= rel_addr: narrow [db[d], db[d+1]) with the
    // sampled starts (sample[k] is the start of range k * kSampleStride), then search the
    // records in between.
    uint64_t lo = db[d], hi = db[d + 1];
    const std::vector<uint64_t>& sm = ix.value()->sample;
    uint64_t slo = (lo + kSampleStride - 1) / kSampleStride, shi = (hi + kSampleStride - 1) / kSampleStride;
    // Samples with index in [slo, shi) lie inside this depth; find the first one > rel_addr.
    {
      uint64_t a = slo, b = shi;
      while (a < b) {
        const uint64_t mid = a + (b - a) / 2;
        if (sm[mid] <= rel_addr)
          a = mid + 1;
        else
          b = mid;
      }
      if (a < shi) hi = std::min(hi, a * kSampleStride);
      if (a > slo) lo = std::max(lo, (a - 1) * kSampleStride);
    }
    const uint64_t base = db[d];
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (ld64(impl_->range(m, mid)) <= rel_addr)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == base) break;
    const uint8_t* r = impl_->range(m, lo - 1);
    if (rel_addr - ld64(r) >= ld32(r + 8)) break;
    hits[n++] = r;
  }
  std::vector<FrameView> out(n);
  for (size_t i = 0; i < n; i++) {
    out[i].function = impl_->str(m, ld32(hits[i] + 16));
    if (i + 1 < n) {
      out[i].file = impl_->str(m, ld32(hits[i + 1] + 32));
      out[i].line = ld32(hits[i + 1] + 36);
      out[i].column = ld32(hits[i + 1] + 40);
    } else {
      out[i].file = impl_->str(m, ld32(hits[i] + 20));
      out[i].line = ld32(hits[i] + 24);
      out[i].column = ld32(hits[i] + 28);
    }
  }
  return out;
}

Result<std::vector<FrameView>> BundleReader::return_pad(size_t module, uint64_t addr) const {
  auto ix = impl_->module_index(module);
  if (!ix) return std::move(ix).error();
  const ModuleMeta& m = impl_->meta[module];
  uint64_t lo = 0, hi = m.pads.count;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (ld64(impl_->pad(m, mid)) < addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  std::vector<FrameView> out;
  if (lo == m.pads.count || ld64(impl_->pad(m, lo)) != addr) return out;
  const uint8_t* p = impl_->pad(m, lo);
  const uint32_t first = ld32(p + 8), count = ld32(p + 12);
  out.resize(count);
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t* f = impl_->frame(m, first + i);
    out[i] = {impl_->str(m, ld32(f)), impl_->str(m, ld32(f + 4)), ld32(f + 8), ld32(f + 12)};
  }
  return out;
}

Result<BundleReader::RowLookup> BundleReader::unwind_row(size_t module, uint64_t rel_pc) const {
  auto ix = impl_->module_index(module);
  if (!ix) return std::move(ix).error();
  const ModuleMeta& m = impl_->meta[module];
  uint64_t lo = 0, hi = m.rows.count;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (ld64(impl_->row(m, mid)) <= rel_pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  RowLookup out;
  if (lo == 0) return out;
  const uint8_t* b = impl_->row(m, lo - 1);
  UnwindRowRecord& r = out.row;
  out.found = true;
  r.pc = ld64(b);
  r.kind = b[8];
  r.cfa_reg = b[9];
  r.ra_kind = b[10];
  r.ra_reg = b[11];
  r.cfa_off = static_cast<int32_t>(ld32(b + 12));
  r.ra_off = static_cast<int8_t>(b[16]);
  r.nsaved = b[17];
  r.signal_frame = (b[18] & kRowSignalFrame) != 0;
  r.from_debug_frame = (b[18] & kRowFromDebugFrame) != 0;
  for (size_t i = 0; i < r.nsaved; i++) {
    r.saved_reg[i] = b[20 + i];
    r.saved_off[i] = static_cast<int8_t>(b[32 + i]);
  }
  return out;
}

Result<std::vector<RangeRecord>> BundleReader::ranges(size_t module) const {
  auto ix = impl_->module_index(module);
  if (!ix) return std::move(ix).error();
  const ModuleMeta& m = impl_->meta[module];
  std::vector<RangeRecord> out(m.ranges.count);
  for (uint64_t i = 0; i < m.ranges.count; i++) {
    const uint8_t* r = impl_->range(m, i);
    RangeRecord& o = out[i];
    o.start = ld64(r);
    o.length = ld32(r + 8);
    o.depth = ld16(r + 12);
    o.function = impl_->str(m, ld32(r + 16));
    o.file = impl_->str(m, ld32(r + 20));
    o.line = ld32(r + 24);
    o.column = ld32(r + 28);
    o.call_file = impl_->str(m, ld32(r + 32));
    o.call_line = ld32(r + 36);
    o.call_column = ld32(r + 40);
  }
  return out;
}

Result<std::vector<ReturnPadRecord>> BundleReader::return_pads(size_t module) const {
  auto ix = impl_->module_index(module);
  if (!ix) return std::move(ix).error();
  const ModuleMeta& m = impl_->meta[module];
  std::vector<ReturnPadRecord> out(m.pads.count);
  for (uint64_t i = 0; i < m.pads.count; i++) {
    const uint8_t* p = impl_->pad(m, i);
    const uint32_t first = ld32(p + 8), count = ld32(p + 12);  // checked by build_index
    ReturnPadRecord& o = out[i];
    o.addr = ld64(p);
    o.frames.resize(count);
    for (uint32_t k = 0; k < count; k++) {
      const uint8_t* f = impl_->frame(m, first + k);
      o.frames[k] = {std::string(impl_->str(m, ld32(f))), std::string(impl_->str(m, ld32(f + 4))), ld32(f + 8),
                     ld32(f + 12)};
    }
  }
  return out;
}

}  // namespace stackprov::bundle
