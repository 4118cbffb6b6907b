// SPDX-License-Identifier: Apache-2.0
// The trace model: UUIDs, canonical times, deterministic gzip, content-addressed captured data, validation.
#include "trace/trace.hpp"

#include <sys/random.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <utility>

#include "trace/store_rows.hpp"

namespace stackprov::trace {

size_t Trace::frame_count() const {
  size_t n = 0;
  for (const Thread& th : threads) n += th.frames.size();
  return n;
}

ModuleId frame_module_id(const Frame& f) {
  IdKind kind = IdKind::kElfBuildId;
  if (!f.module_id_kind.empty()) {
    const std::optional<IdKind> k = id_kind_from_name(f.module_id_kind);
    if (!k || *k == IdKind::kNone) return ModuleId{};
    kind = *k;
  }
  return ModuleId::from_hex(f.module_build_id, kind);
}

Result<std::string> new_uuid() {
  uint8_t b[16];
  size_t got = 0;
  for (int tries = 0; got < sizeof b && tries < 16; ++tries) {
    ssize_t r = getrandom(b + got, sizeof b - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return make_error(-errno, "getrandom for a trace id failed");
    }
    got += static_cast<size_t>(r);
  }
  if (got != sizeof b) return make_error(SPROV_ERR_INTERNAL, "getrandom returned too few bytes");
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string h = evidence::hex_encode(b, sizeof b);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
         h.substr(20, 12);
}

static bool lower_hex_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !lower_hex_char(s[i])) return false;
  }
  return true;
}

bool is_lower_hex(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() % 2 || s.size() > max_len) return false;
  for (char c : s)
    if (!lower_hex_char(c)) return false;
  return true;
}

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1000000);
  struct tm tm{};
  gmtime_r(&secs, &tm);
  char buf[80];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1000000));
  return buf;
}

bool is_canonical_time(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS.ffffffZ
  static constexpr std::string_view pat = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (s.size() != pat.size()) return false;
  for (size_t i = 0; i < pat.size(); ++i) {
    if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i]) return false;
  }
  auto num = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; ++i) v = v * 10 + (s[at + i] - '0');
    return v;
  };
  int year = num(0, 4), mon = num(5, 2), day = num(8, 2);
  if (year < 1970 || mon < 1 || mon > 12 || day < 1 || num(11, 2) > 23 || num(14, 2) > 59 ||
      num(17, 2) > 59)
    return false;
  static constexpr int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day <= mdays[mon - 1] + (mon == 2 && leap ? 1 : 0);
}

Result<Bytes> gzip_compress(const uint8_t* data, size_t len) {
  if (len > kMaxDataBytes)
    return make_error(SPROV_ERR_LIMIT, "captured data of %zu bytes exceeds the limit of %zu", len,
                      kMaxDataBytes);
  z_stream zs{};
  // windowBits 15 + 16: a gzip wrapper with zlib's default header (mtime 0, no name, OS byte fixed).
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return make_error(SPROV_ERR_NOMEM, "deflateInit2 failed");
  Bytes out(deflateBound(&zs, static_cast<uLong>(len)) + 32);
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(len);
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return make_error(SPROV_ERR_INTERNAL, "deflate failed (zlib %d)", rc);
  out.resize(produced);
  return out;
}

Result<Bytes> gzip_decompress(const Bytes& gz, size_t limit) {
  if (gz.size() > kMaxDataBytes)
    return make_error(SPROV_ERR_LIMIT, "gzip data of %zu bytes exceeds the limit", gz.size());
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return make_error(SPROV_ERR_NOMEM, "inflateInit2 failed");
  Bytes out;
  uint8_t chunk[65536];
  zs.next_in = const_cast<Bytef*>(gz.data());
  zs.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = chunk;
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return make_error(SPROV_ERR_DECOMPRESS, "captured data is not valid gzip (zlib %d)", rc);
    }
    size_t n = sizeof chunk - zs.avail_out;
    if (out.size() + n > limit) {
      inflateEnd(&zs);
      return make_error(SPROV_ERR_LIMIT, "gzip data inflates beyond the limit of %zu bytes", limit);
    }
    out.insert(out.end(), chunk, chunk + n);
    if (rc == Z_OK && n == 0 && zs.avail_in == 0) {
      inflateEnd(&zs);
      return make_error(SPROV_ERR_TRUNCATED, "gzip data is truncated");
    }
  }
  bool trailing = zs.avail_in != 0;
  inflateEnd(&zs);
  if (trailing) return make_error(SPROV_ERR_BAD_FORMAT, "bytes after the gzip member");
  return out;
}

Status set_trace_data(Trace& t, const uint8_t* data, size_t len) {
  auto gz = gzip_compress(data, len);
  if (!gz) return gz.error();
  t.data_gzip = std::move(gz.value());
  t.data_sha256 = evidence::hex_encode(evidence::sha256(t.data_gzip));
  t.data_size = len;
  return {};
}

Result<Bytes> trace_data(const Trace& t) {
  std::string h = evidence::hex_encode(evidence::sha256(t.data_gzip));
  if (h != t.data_sha256)
    return make_error(SPROV_ERR_DIGEST_MISMATCH, "trace %s: captured data hashes to %s, not %s",
                      t.id.c_str(), h.c_str(), t.data_sha256.c_str());
  if (t.data_size > kMaxDataBytes)
    return make_error(SPROV_ERR_LIMIT, "trace %s: captured data of %llu bytes exceeds the limit of %zu",
                      t.id.c_str(), static_cast<unsigned long long>(t.data_size), kMaxDataBytes);
  // Inflated only up to the recorded size: a stored gzip bomb stops there, not at the limit.
  auto raw = gzip_decompress(t.data_gzip, static_cast<size_t>(t.data_size));
  if (!raw && raw.error().code == SPROV_ERR_LIMIT)
    return make_error(SPROV_ERR_BAD_FORMAT, "trace %s: captured data inflates beyond its recorded %llu bytes",
                      t.id.c_str(), static_cast<unsigned long long>(t.data_size));
  if (!raw) return raw;
  if (raw->size() != t.data_size)
    return make_error(SPROV_ERR_BAD_FORMAT, "trace %s: captured data is %zu bytes, recorded %llu",
                      t.id.c_str(), raw->size(), static_cast<unsigned long long>(t.data_size));
  return raw;
}

static Status bad(const char* field, std::string_view value) {
  std::string v(value.substr(0, 200));
  return make_error(SPROV_ERR_INVALID_ARG, "trace field %s: invalid value '%s'", field, v.c_str());
}

Status validate_trace(const Trace& t) {
  if (!is_uuid(t.id)) return bad("id", t.id);
  if (t.platform.empty() || t.platform.size() > 64) return bad("platform", t.platform);
  if (t.arch.empty() || t.arch.size() > 64) return bad("arch", t.arch);
  if (!is_canonical_time(t.captured_at)) return bad("captured_at", t.captured_at);
  if (!t.build_id.empty() && !is_lower_hex(t.build_id)) return bad("build_id", t.build_id);
  if (!is_lower_hex(t.data_sha256, 64) || t.data_sha256.size() != 64) return bad("data_sha256", t.data_sha256);
  if (evidence::hex_encode(evidence::sha256(t.data_gzip)) != t.data_sha256)
    return make_error(SPROV_ERR_DIGEST_MISMATCH, "trace %s: data_gzip does not hash to data_sha256 %s",
                      t.id.c_str(), t.data_sha256.c_str());
  if (t.data_size > kMaxDataBytes) return bad("data_size", std::to_string(t.data_size));
  if (!t.symbol_bundle_sha256.empty() &&
      (t.symbol_bundle_sha256.size() != 64 || !is_lower_hex(t.symbol_bundle_sha256, 64)))
    return bad("symbol_bundle_sha256", t.symbol_bundle_sha256);
  if (!t.dsse_ref.empty() && t.dsse_ref.rfind("dsse:", 0) != 0) return bad("dsse_ref", t.dsse_ref);
  return detail::validate_threads(t.threads);
}

namespace detail {

Status validate_threads(const std::vector<Thread>& threads) {
  if (threads.size() > kMaxThreads) return bad("threads", std::to_string(threads.size()));
  size_t frames = 0;
  for (const Thread& th : threads) frames += th.frames.size();
  if (frames > kMaxFramesPerTrace) return bad("frames", std::to_string(frames));
  for (const Thread& th : threads) {
    for (const Frame& f : th.frames) {
      if (!f.module_build_id.empty() && !is_lower_hex(f.module_build_id))
        return bad("frames.module_build_id", f.module_build_id);
      // "" is an ELF build-id (as in every trace before the kind was kept); else another kind's name.
      if (!f.module_id_kind.empty() && f.module_id_kind != "pdb-guid-age" && f.module_id_kind != "macho-uuid" &&
          f.module_id_kind != "pe-code-id")
        return bad("frames.module_id_kind", f.module_id_kind);
      if (!f.bundle_sha256.empty() && (f.bundle_sha256.size() != 64 || !is_lower_hex(f.bundle_sha256, 64)))
        return bad("frames.bundle_sha256", f.bundle_sha256);
      if (f.inline_chain.size() > kMaxInlineDepth)
        return bad("frames.inline_chain", std::to_string(f.inline_chain.size()));
    }
  }
  return {};
}

Status validate_symbol_bundle(const SymbolBundleRow& b) {
  if (b.sha256.size() != 64 || !is_lower_hex(b.sha256, 64)) {
    std::string v(b.sha256.substr(0, 80));
    return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle field sha256: invalid value '%s'", v.c_str());
  }
  if (b.os.size() > 64) {
    std::string v(b.os.substr(0, 80));
    return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle %s field os: invalid value '%s'", b.sha256.c_str(), v.c_str());
  }
  const std::pair<const char*, const std::string*> texts[] = {{"signer", &b.signer},
                                                              {"rekor_tile_ref", &b.rekor_tile_ref},
                                                              {"dsse_envelope", &b.dsse_envelope},
                                                              {"tlog_proof", &b.tlog_proof},
                                                              {"checkpoint", &b.checkpoint}};
  for (const auto& [field, text] : texts) {
    if (text->size() > kMaxBundleTextBytes)
      return make_error(SPROV_ERR_LIMIT, "symbol bundle %s field %s: %zu bytes exceed the limit of %zu",
                        b.sha256.c_str(), field, text->size(), kMaxBundleTextBytes);
    if (text->find('\0') != std::string::npos)
      return make_error(SPROV_ERR_INVALID_ARG, "symbol bundle %s field %s: contains a NUL byte at offset %zu",
                        b.sha256.c_str(), field, text->find('\0'));
  }
  return {};
}

}  // namespace detail

Status validate_replay(const Replay& r) {
  if (!is_uuid(r.replay_id)) return bad("replay_id", r.replay_id);
  if (!is_uuid(r.trace_id)) return bad("trace_id", r.trace_id);
  if (!is_canonical_time(r.started_at)) return bad("started_at", r.started_at);
  if (!is_canonical_time(r.finished_at)) return bad("finished_at", r.finished_at);
  if (!(r.replay_success_ratio >= 0 && r.replay_success_ratio <= 1))
    return bad("replay_success_ratio", std::to_string(r.replay_success_ratio));
  if (!(r.symbol_coverage_pct >= 0 && r.symbol_coverage_pct <= 100))
    return bad("symbol_coverage_pct", std::to_string(r.symbol_coverage_pct));
  if (r.verify_time_ms < 0 || r.verify_time_ms > INT32_MAX)
    return bad("verify_time_ms", std::to_string(r.verify_time_ms));
  return {};
}

}  // namespace stackprov::trace
