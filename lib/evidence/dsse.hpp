// SPDX-License-Identifier: Apache-2.0
// DSSE envelopes (PAE, sign, threshold verify) and in-toto Statement v1 payloads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "evidence/encoding.hpp"
#include "evidence/json.hpp"
#include "evidence/keys.hpp"

namespace stackprov::evidence {

inline constexpr const char* kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr const char* kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr const char* kStackprovPredicate = "https://stackprov.dev/provenance/v1";
inline constexpr size_t kMaxDsseSignatures = 64;

/// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body (DSSE protocol.md).
std::string pae(std::string_view payload_type, std::string_view payload);

struct DsseSignature {
  std::string keyid;  // optional and unauthenticated
  Bytes sig;
};

struct Envelope {
  std::string payload_type;
  Bytes payload;
  std::vector<DsseSignature> signatures;
};

/// Parses envelope JSON; payload and sigs may use either base64 alphabet.
Result<Envelope> parse_envelope(std::string_view json_text);
Result<Envelope> envelope_from_json(const Json& j, const char* path);
/// Envelope JSON with standard base64, keys in canonical order, trailing newline.
std::string serialize_envelope(const Envelope& env);

/// Signs payload with `key`; the signature's keyid is the key's key_id_hex().
Result<Envelope> sign_envelope(std::string_view payload_type, std::string_view payload, const SigningKey& key);

struct DsseVerifyResult {
  std::vector<size_t> verified_keys;  // indexes into the trusted key list
};

/// DSSE verification (protocol.md): every signature is checked over the PAE rebuilt from
/// the envelope's payloadType against every trusted key; the number of DISTINCT trusted keys
/// with a valid signature must reach `threshold`; then the payloadType must be supported
/// (empty `supported_types` accepts any non-empty type).
Result<DsseVerifyResult> verify_envelope(const Envelope& env, const std::vector<PublicKey>& trusted,
                                         size_t threshold, const std::vector<std::string>& supported_types);

struct Subject {
  std::string name;
  Hash sha256{};
};
/// in-toto Statement v1 (canonical JSON) with the given subjects and predicate.
std::string make_statement(const std::vector<Subject>& subjects, const std::string& predicate_type,
                           const Json& predicate);
/// Checks that the payload is an in-toto Statement v1 with a subject whose sha256 is `digest`.
Status check_statement_subject(const Bytes& payload, const Hash& digest);

}  // namespace stackprov::evidence
