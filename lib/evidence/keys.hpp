// SPDX-License-Identifier: Apache-2.0
// Keys for evidence: ECDSA P-256/P-384 (mbedTLS) and Ed25519 (libsodium) public keys, P-256 signing keys, key ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "evidence/encoding.hpp"

namespace stackprov::evidence {

enum class KeyType { kEcdsaP256, kEcdsaP384, kEd25519 };
const char* key_type_name(KeyType t);

/// A verification key. Immutable after parsing; safe to share between threads.
class PublicKey {
 public:
  /// DER SubjectPublicKeyInfo (ECDSA P-256/P-384 through mbedTLS; Ed25519 by its fixed prefix).
  static Result<PublicKey> from_spki_der(const Bytes& der);
  /// PEM "PUBLIC KEY" or "CERTIFICATE" (the certificate's key), or raw DER of either.
  static Result<PublicKey> from_pem_or_der(const Bytes& data);
  /// A raw 32-byte Ed25519 public key.
  static Result<PublicKey> ed25519(const Bytes& raw);

  KeyType type() const { return type_; }
  const Bytes& spki_der() const { return spki_; }
  /// Raw Ed25519 key (32 bytes); empty for ECDSA.
  const Bytes& raw_ed25519() const { return raw_; }
  /// Lower-case hex SHA-256 of the DER SPKI: our DSSE keyid, and Rekor's logId for ECDSA keys.
  std::string key_id_hex() const;
  Hash spki_sha256() const { return sha256(spki_); }

  /// Verifies `sig` over `msg`. ECDSA: SHA-256 (P-256) or SHA-384 (P-384) of msg,
  /// signature in ASN.1 DER or raw r||s. Ed25519: pure Ed25519 over msg.
  Status verify(std::string_view msg, const Bytes& sig) const;
  /// ECDSA only: verifies a signature over an already computed SHA-256 digest.
  Status verify_prehashed_sha256(const Hash& digest, const Bytes& sig) const;

  struct Impl;

 private:
  KeyType type_ = KeyType::kEcdsaP256;
  Bytes spki_;
  Bytes raw_;
  std::shared_ptr<Impl> impl_;
};

/// An X.509 certificate reduced to what offline verification uses.
struct Certificate {
  Bytes der;
  int64_t not_before = 0;  // Unix seconds
  int64_t not_after = 0;
  std::string subject;
};
Result<std::pair<Certificate, PublicKey>> parse_certificate(const Bytes& der_or_pem);

/// An ECDSA P-256 signing key. The private scalar never leaves this object
/// except through write_pem(); it is never formatted into messages or logs.
class SigningKey {
 public:
  static Result<SigningKey> generate();
  static Result<SigningKey> from_pem_or_der(const Bytes& data);
  static Result<SigningKey> load(const std::string& path);

  /// PKCS#8/SEC1 PEM of the private key (mbedTLS writes SEC1 "EC PRIVATE KEY").
  Result<std::string> private_pem() const;
  const PublicKey& public_key() const { return pub_; }
  /// ASN.1 DER ECDSA signature over SHA-256(msg), RFC 6979 deterministic nonce.
  Result<Bytes> sign(std::string_view msg) const;

  struct Impl;

 private:
  PublicKey pub_;
  std::shared_ptr<Impl> impl_;
};

/// PEM of a DER SPKI ("-----BEGIN PUBLIC KEY-----").
std::string spki_to_pem(const Bytes& der);

/// The public key (or certificate) in file `path`. A private key file names its public key too:
/// accepted with `allow_private` (key ids), refused otherwise (SPROV_ERR_KEY) -- a verifier is
/// given public keys, and a private key where one is expected is a mistake worth saying.
Result<PublicKey> load_public_key(const char* path, bool allow_private = false);

/// The public keys of files `paths[0..n)` (at most 256; SPROV_ERR_INVALID_ARG for a NULL path).
Result<std::vector<PublicKey>> load_public_keys(const char* const* paths, size_t n);

}  // namespace stackprov::evidence
