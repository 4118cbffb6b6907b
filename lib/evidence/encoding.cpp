// SPDX-License-Identifier: Apache-2.0
// Strict base64, hex, SHA-256 (mbedTLS), digest strings and crash-safe file writes.
#include "evidence/encoding.hpp"

#include <fcntl.h>
#include <mbedtls/sha256.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stackprov::evidence {

namespace {

// Returns the 6-bit value of c in the given alphabet (1 = std, 2 = url), or -1.
int b64_value(char c, int* which) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') { *which |= 1; return 62; }
  if (c == '/') { *which |= 1; return 63; }
  if (c == '-') { *which |= 2; return 62; }
  if (c == '_') { *which |= 2; return 63; }
  return -1;
}

std::string printable_prefix(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 24; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 24) out += "...";
  return out;
}

}  // namespace

Result<Bytes> base64_decode(std::string_view in, B64Alphabet alphabet, const char* what) {
  if (in.size() > kMaxDocumentBytes * 2)
    return make_error(SPROV_ERR_LIMIT, "%s: %zu base64 characters exceed the limit", what, in.size());
  size_t pad = 0;
  while (pad < in.size() && pad < 3 && in[in.size() - 1 - pad] == '=') ++pad;
  if (pad > 2)
    return make_error(SPROV_ERR_BASE64, "%s: too much padding in '%s'", what,
                      printable_prefix(in).c_str());
  std::string_view body = in.substr(0, in.size() - pad);
  if (pad > 0 && in.size() % 4 != 0)
    return make_error(SPROV_ERR_BASE64, "%s: padded length %zu is not a multiple of 4", what,
                      in.size());
  if (body.size() % 4 == 1)
    return make_error(SPROV_ERR_BASE64, "%s: impossible length %zu", what, body.size());
  int which = 0;
  Bytes out;
  out.reserve(body.size() * 3 / 4 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    int v = b64_value(body[i], &which);
    if (v < 0)
      return make_error(SPROV_ERR_BASE64, "%s: invalid character 0x%02x at offset %zu", what,
                        static_cast<unsigned char>(body[i]), i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  if (which == 3)
    return make_error(SPROV_ERR_BASE64, "%s: mixes the standard and URL alphabets", what);
  if (alphabet == B64Alphabet::kStandard && which == 2)
    return make_error(SPROV_ERR_BASE64, "%s: URL-alphabet character where standard base64 is required", what);
  if (alphabet == B64Alphabet::kUrl && which == 1)
    return make_error(SPROV_ERR_BASE64, "%s: standard-alphabet character where URL base64 is required", what);
  // Standard base64 must be padded; URL base64 may omit padding (RFC 4648 §5).
  if (pad == 0 && body.size() % 4 != 0 && (alphabet == B64Alphabet::kStandard || which != 2))
    return make_error(SPROV_ERR_BASE64, "%s: missing padding (length %zu)", what, body.size());
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return make_error(SPROV_ERR_BASE64, "%s: non-zero trailing bits", what);
  return out;
}

std::string base64_encode(const uint8_t* data, size_t len, bool url) {
  static const char* kStd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static const char* kUrlAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char* a = url ? kUrlAlpha : kStd;
  std::string out;
  out.reserve((len + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t(data[i]) << 16) | (uint32_t(data[i + 1]) << 8) | data[i + 2];
    out += a[v >> 18];
    out += a[(v >> 12) & 63];
    out += a[(v >> 6) & 63];
    out += a[v & 63];
  }
  if (len - i == 1) {
    uint32_t v = uint32_t(data[i]) << 16;
    out += a[v >> 18];
    out += a[(v >> 12) & 63];
    out += "==";
  } else if (len - i == 2) {
    uint32_t v = (uint32_t(data[i]) << 16) | (uint32_t(data[i + 1]) << 8);
    out += a[v >> 18];
    out += a[(v >> 12) & 63];
    out += a[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string hex_encode(const uint8_t* data, size_t len) {
  static const char* kHex = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 15];
  }
  return out;
}

Result<Bytes> hex_decode(std::string_view in, const char* what) {
  if (in.size() % 2 != 0)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: odd hex length %zu", what, in.size());
  Bytes out(in.size() / 2);
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    int v = (c >= '0' && c <= '9') ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: invalid hex character 0x%02x at offset %zu",
                        what, static_cast<unsigned char>(c), i);
    out[i / 2] = static_cast<uint8_t>((out[i / 2] << 4) | v);
  }
  return out;
}

Hash sha256(const uint8_t* data, size_t len) {
  Hash h{};
  mbedtls_sha256_ret(data, len, h.data(), 0);
  return h;
}

Result<Hash> sha256_file(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return make_error(-errno, "cannot open '%s': %s", path.c_str(), strerror(errno));
  mbedtls_sha256_context ctx;
  mbedtls_sha256_init(&ctx);
  mbedtls_sha256_starts_ret(&ctx, 0);
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) mbedtls_sha256_update_ret(&ctx, buf, n);
  bool err = ferror(f) != 0;
  fclose(f);
  Hash h{};
  mbedtls_sha256_finish_ret(&ctx, h.data());
  mbedtls_sha256_free(&ctx);
  if (err) return make_error(SPROV_ERR_IO, "read error on '%s'", path.c_str());
  return h;
}

std::string digest_string(const Hash& h) { return "sha256:" + hex_encode(h); }

Result<Hash> parse_digest(std::string_view s) {
  auto colon = s.find(':');
  if (colon == std::string_view::npos)
    return make_error(SPROV_ERR_INVALID_ARG, "digest '%s' is not of the form sha256:<hex>",
                      printable_prefix(s).c_str());
  std::string algo(s.substr(0, colon));
  if (algo != "sha256")
    return make_error(SPROV_ERR_UNSUPPORTED, "digest algorithm '%s' is not supported (only sha256)",
                      printable_prefix(algo).c_str());
  auto hex = s.substr(colon + 1);
  if (hex.size() != 64)
    return make_error(SPROV_ERR_INVALID_ARG, "digest '%s': expected 64 hex digits, got %zu",
                      printable_prefix(s).c_str(), hex.size());
  auto b = hex_decode(hex, "digest");
  if (!b) return b.error();
  return to_hash(b.value(), "digest");
}

Result<Hash> to_hash(const Bytes& b, const char* what) {
  if (b.size() != 32)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: expected 32 bytes, got %zu", what, b.size());
  Hash h;
  memcpy(h.data(), b.data(), 32);
  return h;
}

Result<Bytes> read_file(const std::string& path, size_t limit) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(-errno, "cannot open '%s': %s", path.c_str(), strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return make_error(-e, "cannot stat '%s': %s", path.c_str(), strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return make_error(-EISDIR, "'%s' is a directory", path.c_str());
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    close(fd);
    return make_error(SPROV_ERR_LIMIT, "'%s' is %lld bytes, over the %zu-byte limit", path.c_str(),
                      static_cast<long long>(st.st_size), limit);
  }
  Bytes out;
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return make_error(-e, "read error on '%s': %s", path.c_str(), strerror(e));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > limit) {
      close(fd);
      return make_error(SPROV_ERR_LIMIT, "'%s' exceeds the %zu-byte limit", path.c_str(), limit);
    }
    out.insert(out.end(), buf, buf + n);
  }
  close(fd);
  return out;
}


Status make_dirs(const std::string& path, unsigned mode) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
      return make_error(-errno, "cannot create directory '%s': %s", cur.c_str(), strerror(errno));
  }
  return {};
}

Result<uint64_t> parse_u64(std::string_view s, const char* what) {
  if (s.empty() || s.size() > 20)
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: '%s' is not a decimal integer", what,
                      printable_prefix(s).c_str());
  if (s.size() > 1 && s[0] == '0')
    return make_error(SPROV_ERR_BAD_FORMAT, "%s: '%s' has a leading zero", what,
                      printable_prefix(s).c_str());
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: '%s' is not a decimal integer", what,
                        printable_prefix(s).c_str());
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10)
      return make_error(SPROV_ERR_BAD_FORMAT, "%s: '%s' overflows 64 bits", what,
                        printable_prefix(s).c_str());
    v = v * 10 + d;
  }
  return v;
}

}  // namespace stackprov::evidence
