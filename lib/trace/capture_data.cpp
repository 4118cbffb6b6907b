// SPDX-License-Identifier: Apache-2.0
// The "SPROVTRD" container of a trace's thread snapshots: writer and checked reader.
#include "trace/capture_data.hpp"

#include <cinttypes>
#include <cstring>

#include "trace/trace.hpp"

namespace stackprov::trace {

namespace {

constexpr char kMagic[8] = {'S', 'P', 'R', 'O', 'V', 'T', 'R', 'D'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kVersionJit = 2;  ///< version 1 followed by the JIT section
constexpr size_t kMaxName = 256;

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads, const CapturedJit& jit) {
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  put_le(out, jit.entries.empty() ? kVersion : kVersionJit, 4);
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
  if (jit.entries.empty()) return out;
  auto put_str = [&](const std::string& v, size_t limit) {
    const size_t n = std::min(v.size(), limit);
    put_le(out, n, 4);
    out.insert(out.end(), v.begin(), v.begin() + static_cast<ptrdiff_t>(n));
  };
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
  return out;
}

Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len, CapturedJit* jit) {
  if (jit) *jit = {};
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
  if (version != kVersion && version != kVersionJit)
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
  if (version == kVersionJit) {
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
  if (at != len)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: %zu trailing bytes at offset %zu", len - at, at);
  return out;
}

}  // namespace stackprov::trace
