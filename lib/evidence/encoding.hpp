// SPDX-License-Identifier: Apache-2.0
// Byte encodings for evidence: strict base64 (std and URL alphabets), hex, SHA-256 and sha256:<hex> digests.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace stackprov::evidence {

using Bytes = std::vector<uint8_t>;
using Hash = std::array<uint8_t, 32>;

/// Any input larger than this is refused before parsing (bundles, envelopes, notes).
inline constexpr size_t kMaxDocumentBytes = 16u << 20;

inline std::string_view as_sv(const Bytes& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
inline Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

enum class B64Alphabet { kStandard, kUrl, kEither };

/// Strict base64: padding must be complete (or, for kUrl/kEither, absent but
/// with a valid length), no whitespace, no mixing of the two alphabets, and the
/// unused low bits of the last symbol must be zero. `what` names the field in errors.
Result<Bytes> base64_decode(std::string_view in, B64Alphabet alphabet = B64Alphabet::kEither,
                            const char* what = "base64");
/// Padded standard (or URL-alphabet) base64.
std::string base64_encode(const uint8_t* data, size_t len, bool url = false);
inline std::string base64_encode(const Bytes& b, bool url = false) {
  return base64_encode(b.data(), b.size(), url);
}
inline std::string base64_encode(const Hash& h) { return base64_encode(h.data(), h.size()); }

std::string hex_encode(const uint8_t* data, size_t len);
inline std::string hex_encode(const Bytes& b) { return hex_encode(b.data(), b.size()); }
inline std::string hex_encode(const Hash& h) { return hex_encode(h.data(), h.size()); }
/// Lower- or upper-case hex of even length.
Result<Bytes> hex_decode(std::string_view in, const char* what = "hex");

Hash sha256(const uint8_t* data, size_t len);
inline Hash sha256(std::string_view s) {
  return sha256(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline Hash sha256(const Bytes& b) { return sha256(b.data(), b.size()); }
/// SHA-256 of a file, streamed.
Result<Hash> sha256_file(const std::string& path);

/// "sha256:<64 lower-case hex>".
std::string digest_string(const Hash& h);
/// Parses "sha256:<hex>" (case-insensitive hex). Other algorithms are refused by name.
Result<Hash> parse_digest(std::string_view s);

Result<Hash> to_hash(const Bytes& b, const char* what);

/// Reads a whole file, refusing files larger than `limit`.
Result<Bytes> read_file(const std::string& path, size_t limit = kMaxDocumentBytes);
/// Files are written with stackprov::write_file_atomic (core/atomic_file.hpp).
using stackprov::write_file_atomic;
/// mkdir -p: creates every missing directory of `path`.
Status make_dirs(const std::string& path, unsigned mode = 0755);

/// Decimal uint64 with no sign, no leading zeros (except "0"), no overflow.
Result<uint64_t> parse_u64(std::string_view s, const char* what);

}  // namespace stackprov::evidence
