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
constexpr size_t kMaxName = 256;

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::vector<uint8_t> serialize_capture(const std::vector<CapturedThread>& threads) {
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  put_le(out, kVersion, 4);
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
  return out;
}

Result<std::vector<CapturedThread>> deserialize_capture(const uint8_t* data, size_t len) {
  size_t at = 0;
  auto need = [&](size_t n, const char* field, size_t thread) -> Status {
    if (len - at < n)
      return make_error(SPROV_ERR_SNAPSHOT,
                        "captured data truncated: field '%s' of thread %zu at offset %zu needs %zu bytes, %zu left",
                        field, thread, at, n, len - at);
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
  if (version != kVersion)
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
  if (at != len)
    return make_error(SPROV_ERR_SNAPSHOT, "captured data: %zu trailing bytes at offset %zu", len - at, at);
  return out;
}

}  // namespace stackprov::trace
