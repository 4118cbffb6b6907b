// SPDX-License-Identifier: Apache-2.0
// The "SPROVTRD" container of a trace's thread snapshots: writer and checked reader.
#include "trace/capture_data.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "trace/trace.hpp"

namespace stackprov::trace {

namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'O', 'V', 'T', 'R', 'D'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kVersionJit = 2;  ///< version 1 followed by the JIT section
constexpr uint32_t kVersionSections = 3;  ///< version 1, a section mask, then the sections it names
constexpr uint32_t kSectionJit = 1, kSectionKernel = 2;
constexpr size_t kMaxName = 256;

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

/// The kernel section of a version-3 container at `at` (advanced past it). Errors name the field,
/// the segment and frame, the offset and the value.
Result<CapturedKernel> read_kernel_section(const uint8_t* data, size_t len, size_t& at) {
  CapturedKernel k;
  auto truncated = [&](const char* field, size_t seg, size_t n) {
    return make_error(SPROV_ERR_SNAPSHOT,
                      "captured data truncated: field '%s' of kernel segment %zu at offset %zu needs %zu bytes, %zu left",
                      field, seg, at, n, len - at);
  };
  auto bad = [&](const char* field, size_t seg, size_t frame, uint64_t v, size_t lo, size_t hi) {
    return make_error(SPROV_ERR_SNAPSHOT,
                      "captured data: field '%s' of kernel segment %zu frame %zu at offset %zu: %" PRIu64
                      " is outside [%zu, %zu]", field, seg, frame, at, v, lo, hi);
  };
  auto get_le = [&](int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(data[at + i]) << (8 * i);
    at += n;
    return v;
  };
  // A length-prefixed string of [lo, hi] bytes.
  auto get_str = [&](const char* len_field, const char* field, size_t seg, size_t frame, size_t lo, size_t hi,
                     std::string* out) -> Status {
    if (len - at < 4) return truncated(len_field, seg, 4);
    const uint64_t n = data[at] | data[at + 1] << 8 | data[at + 2] << 16 | static_cast<uint64_t>(data[at + 3]) << 24;
    if (n < lo || n > hi) return bad(len_field, seg, frame, n, lo, hi);
    at += 4;
    if (len - at < n) return truncated(field, seg, n);
    out->assign(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return {};
  };
  if (len - at < 1) return truncated("kernel_id_len", 0, 1);
  const uint64_t id_len = get_le(1);
  if (id_len == 0 || id_len > kMaxKernelBuildId) {
    at -= 1;
    return bad("kernel_id_len", 0, 0, id_len, 1, kMaxKernelBuildId);
  }
  if (len - at < id_len + 32 + 4) return truncated("kernel_build_id", 0, id_len + 32 + 4);
  k.build_id.assign(data + at, data + at + id_len);
  at += id_len;
  std::copy(data + at, data + at + 32, k.btf_sha256.begin());
  at += 32;
  const uint64_t n_seg = get_le(4);
  if (n_seg == 0 || n_seg > kMaxThreads) {
    at -= 4;
    return bad("n_segments", 0, 0, n_seg, 1, kMaxThreads);
  }
  for (size_t i = 0; i < n_seg; ++i) {
    CapturedKernelSegment seg;
    if (len - at < 36) return truncated("tid", i, 36);
    seg.tid = get_le(8);
    seg.syscall = static_cast<int64_t>(get_le(8));
    seg.user_sp = get_le(8);
    seg.user_pc = get_le(8);
    const uint64_t nf = get_le(4);
    if (nf == 0 || nf > kMaxKernelSegmentFrames) {
      at -= 4;
      return bad("n_frames", i, 0, nf, 1, kMaxKernelSegmentFrames);
    }
    for (size_t f = 0; f < nf; ++f) {
      CapturedKernelFrame fr;
      if (Status s = get_str("name_len", "name", i, f, 1, kMaxKernelName, &fr.symbol); !s) return s.error();
      if (len - at < 16) return truncated("offset", i, 16);
      fr.offset = get_le(8);
      fr.size = get_le(8);
      if (Status s = get_str("module_len", "module", i, f, 0, kMaxKernelName, &fr.module); !s) return s.error();
      if (len - at < 5) return truncated("btf_func_id", i, 5);
      fr.btf_func_id = static_cast<uint32_t>(get_le(4));
      const uint64_t approx = get_le(1);
      if (approx > 1) {
        at -= 1;
        return bad("approximate", i, f, approx, 0, 1);
      }
      fr.approximate = approx == 1;
      if (Status s = get_str("proto_len", "prototype", i, f, 0, fr.btf_func_id ? kMaxKernelPrototype : 0,
                             &fr.prototype);
          !s)
        return s.error();
      seg.frames.push_back(std::move(fr));
    }
    k.segments.push_back(std::move(seg));
  }
  return k;
}

}  // namespace

std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads, const CapturedJit& jit,
                                       const CapturedKernel& kernel) {
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  // A capture without kernel segments keeps the version it always had (1, or 2 with JIT entries).
  const bool has_kernel = !kernel.empty() && !kernel.build_id.empty();
  put_le(out, has_kernel ? kVersionSections : jit.entries.empty() ? kVersion : kVersionJit, 4);
  put_le(out, threads.size(), 4);
  for (const CapturedThread& t : threads) {
    put_le(out, t.tid, 8);
    const size_t name_len = std::min(t.name.size(), kMaxName);
    put_le(out, name_len, 4);
    out.insert(out.end(), t.name.begin(), t.name.begin() + static_cast<ptrdiff_t>(name_len));
    std::vector<uint8_t> snap = memory::serialize(t.snapshot);
    put_le(out, snap.size(), 8);
    out.insert(out.end(), snap.begin(), snap.end());
  }
  if (has_kernel) put_le(out, kSectionKernel | (jit.entries.empty() ? 0 : kSectionJit), 4);
  auto put_str = [&](const std::string& v, size_t limit) {
    const size_t n = std::min(v.size(), limit);
    put_le(out, n, 4);
    out.insert(out.end(), v.begin(), v.begin() + static_cast<ptrdiff_t>(n));
  };
  if (!jit.entries.empty()) {
    put_str(jit.path, kMaxJitPath);
    size_t n = 0;
    for (const auto& e : jit.entries) n += e.size != 0 && e.start + e.size > e.start;
    n = std::min(n, kMaxJitEntries);
    put_le(out, n, 4);
    for (size_t i = 0, k = 0; i < jit.entries.size() && k < n; ++i) {
      const auto& e = jit.entries[i];
      if (e.size == 0 || e.start + e.size <= e.start) continue;
      put_le(out, e.start, 8);
      put_le(out, e.size, 8);
      put_str(e.name, kMaxJitName);
      ++k;
    }
  }
  if (!has_kernel) return out;
  const size_t id_len = std::min(kernel.build_id.size(), kMaxKernelBuildId);
  put_le(out, id_len, 1);
  out.insert(out.end(), kernel.build_id.begin(), kernel.build_id.begin() + static_cast<ptrdiff_t>(id_len));
  out.insert(out.end(), kernel.btf_sha256.begin(), kernel.btf_sha256.end());
  // Segments without frames say nothing: they are not written (the reader refuses an empty one).
  size_t n_seg = 0;
  for (const auto& seg : kernel.segments) n_seg += !seg.frames.empty();
  n_seg = std::min(n_seg, kMaxThreads);
  put_le(out, n_seg, 4);
  for (size_t i = 0, k = 0; i < kernel.segments.size() && k < n_seg; ++i) {
    const CapturedKernelSegment& seg = kernel.segments[i];
    if (seg.frames.empty()) continue;
    put_le(out, seg.tid, 8);
    put_le(out, static_cast<uint64_t>(seg.syscall), 8);
    put_le(out, seg.user_sp, 8);
    put_le(out, seg.user_pc, 8);
    const size_t nf = std::min(seg.frames.size(), kMaxKernelSegmentFrames);
    put_le(out, nf, 4);
    for (size_t f = 0; f < nf; ++f) {
      const CapturedKernelFrame& fr = seg.frames[f];
      put_str(fr.symbol, kMaxKernelName);
      put_le(out, fr.offset, 8);
      put_le(out, fr.size, 8);
      put_str(fr.module, kMaxKernelName);
      put_le(out, fr.btf_func_id, 4);
      put_le(out, fr.approximate ? 1 : 0, 1);
      put_str(fr.btf_func_id ? fr.prototype : std::string(), kMaxKernelPrototype);
    }
    ++k;
  }
  return out;
}

Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len, CapturedJit* jit,
                                                        CapturedKernel* kernel) {
  if (jit) *jit = {};
  if (kernel) *kernel = {};
  size_t at = 0;
  auto need = [&](size_t n, const char* field, size_t index, const char* of = "thread") -> Status {
    if (len - at < n)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "captured data truncated: field '%s' of %s %zu at offset %zu needs %zu bytes, %zu left",
                        field, of, index, at, n, len - at);
    return {};
  };
  auto get_le = [&](int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(data[at + i]) << (8 * i);
    at += n;
    return v;
  };
  if (len > kMaxDataBytes)
    return make_error(SPROV_ERR_LIMIT, "captured data of %zu bytes exceeds the limit of %zu", len, kMaxDataBytes);
  if (len < 16 || memcmp(data, kMagic, sizeof kMagic) != 0)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: not a SPROVTRD container (magic at offset 0)");
  at = 8;
  const uint64_t version = get_le(4);
  if (version != kVersion && version != kVersionJit && version != kVersionSections)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: field 'version' at offset 8: unsupported version %" PRIu64,
                      version);
  const uint64_t n = get_le(4);
  if (n > kMaxThreads)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: field 'n_threads' at offset 12: %" PRIu64
                      " threads exceed the limit %zu", n, kMaxThreads);
  std::vector<CapturedThread> out;
  for (size_t i = 0; i < n; ++i) {
    CapturedThread t;
    if (Status s = need(12, "tid", i); !s) return s.error();
    t.tid = get_le(8);
    const uint64_t name_len = get_le(4);
    if (name_len > kMaxName)
      return make_error(SPROV_ERR_SNAPSHOT, "captured data: field 'name_len' of thread %zu at offset %zu: %" PRIu64
                        " exceeds %zu", i, at - 4, name_len, kMaxName);
    if (Status s = need(name_len + 8, "name", i); !s) return s.error();
    t.name.assign(reinterpret_cast<const char*>(data + at), name_len);
    at += name_len;
    const uint64_t snap_len = get_le(8);
    if (snap_len > len - at)
      return make_error(SPROV_ERR_SNAPSHOT, "captured data truncated: field 'snapshot' of thread %zu at offset %zu needs %"
                        PRIu64 " bytes, %zu left", i, at, snap_len, len - at);
    auto snap = memory::deserialize(data + at, snap_len);
    if (!snap)
      return make_error(snap.error().code, "captured data: snapshot of thread %zu at offset %zu: %s", i, at,
                        snap.error().message.c_str());
    at += snap_len;
    t.snapshot = std::move(*snap);
    out.push_back(std::move(t));
  }
  uint64_t sections = version == kVersionJit ? kSectionJit : 0;
  if (version == kVersionSections) {
    if (Status s = need(4, "sections", 0, "container"); !s) return s.error();
    sections = get_le(4);
    if (!(sections & kSectionKernel) || (sections & ~static_cast<uint64_t>(kSectionJit | kSectionKernel)))
      return make_error(SPROV_ERR_SNAPSHOT, "captured data: field 'sections' at offset %zu: 0x%" PRIx64
                        " (version 3 needs bit 1, the kernel section; bits 0 and 1 are known)", at - 4, sections);
  }
  if (sections & kSectionJit) {
    CapturedJit j;
    auto jit_error = [&](const char* field, size_t entry, const char* what, uint64_t v, size_t limit) {
      return make_error(SPROV_ERR_SNAPSHOT, "captured data: field '%s' of JIT entry %zu at offset %zu: %s %" PRIu64
                        " (limit %zu)", field, entry, at, what, v, limit);
    };
    if (Status s = need(4, "jit_path_len", 0, "JIT entry"); !s) return s.error();
    const uint64_t path_len = get_le(4);
    if (path_len > kMaxJitPath) return jit_error("jit_path_len", 0, "length", path_len, kMaxJitPath);
    if (Status s = need(path_len + 4, "jit_path", 0, "JIT entry"); !s) return s.error();
    j.path.assign(reinterpret_cast<const char*>(data + at), path_len);
    at += path_len;
    const uint64_t n_jit = get_le(4);
    if (n_jit == 0 || n_jit > kMaxJitEntries) return jit_error("n_jit", 0, "count", n_jit, kMaxJitEntries);
    for (size_t i = 0; i < n_jit; ++i) {
      symbolize::PerfMap::Entry e;
      if (Status s = need(20, "jit_start", i, "JIT entry"); !s) return s.error();
      e.start = get_le(8);
      e.size = get_le(8);
      if (e.size == 0 || e.start + e.size <= e.start)
        return make_error(SPROV_ERR_SNAPSHOT, "captured data: field 'jit_size' of JIT entry %zu at offset %zu: size 0x%"
                          PRIx64 " at 0x%" PRIx64 " is empty or wraps", i, at - 8, e.size, e.start);
      const uint64_t name_len = get_le(4);
      if (name_len > kMaxJitName) return jit_error("jit_name_len", i, "length", name_len, kMaxJitName);
      if (Status s = need(name_len, "jit_name", i, "JIT entry"); !s) return s.error();
      e.name.assign(reinterpret_cast<const char*>(data + at), name_len);
      at += name_len;
      j.entries.push_back(std::move(e));
    }
    if (jit) *jit = std::move(j);
  }
  if (sections & kSectionKernel) {
    auto k = read_kernel_section(data, len, at);
    if (!k) return k.error();
    if (kernel) *kernel = std::move(k).value();
  }
  if (at != len)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: %zu trailing bytes at offset %zu", len - at, at);
  return out;
}

}  // namespace stackprov::trace
