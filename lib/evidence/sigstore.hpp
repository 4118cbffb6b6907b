// SPDX-License-Identifier: Apache-2.0
// Offline verification of Sigstore bundles v0.1-v0.3 (Rekor v1 and v2): log proofs, SET, entry body, signature.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evidence/encoding.hpp"
#include "evidence/keys.hpp"

namespace stackprov::evidence {

inline constexpr size_t kMaxTlogEntries = 32;

/// One transparency log of a Sigstore trusted root.
struct TrustedLog {
  std::string base_url;
  std::string host;  // checkpoint key name (and Rekor v2 origin)
  std::string name;  // baseUrl without its scheme: the key name of a local stackprov log
  PublicKey key;
  Hash log_id{};          // logId.keyId
  int64_t valid_from = INT64_MIN;
  int64_t valid_to = INT64_MAX;
};

struct TrustedRoot {
  std::vector<TrustedLog> tlogs;
};

/// Parses application/vnd.dev.sigstore.trustedroot+json (tlogs only; CAs are not used).
Result<TrustedRoot> parse_trusted_root(std::string_view json_text);
/// A trusted root with a single log (for a local log): origin is also the key name.
TrustedLog trusted_log_from_key(const std::string& origin, const PublicKey& key);

/// RFC 3339 "YYYY-MM-DDTHH:MM:SS[.frac]Z" to Unix seconds.
Result<int64_t> parse_rfc3339(std::string_view s);

struct SigstoreOptions {
  std::optional<Hash> artifact_digest;  // from --artifact or --digest; none: artifact binding not checked
};

/// What was verified; on failure, the Error's message starts with the failed check's name
/// ("checkpoint-signature: ...") and names the values involved.
struct SigstoreReport {
  std::string media_type;
  int bundle_minor = 0;  // 1, 2 or 3
  std::string content;   // "dsse" or "message-signature"
  std::vector<std::string> checks;  // checks that passed, in order
  std::vector<std::string> notes;   // things deliberately not checked
};

Result<SigstoreReport> verify_sigstore_bundle(std::string_view bundle_json, const TrustedRoot& root,
                                              const SigstoreOptions& opts);

}  // namespace stackprov::evidence
