// SPDX-License-Identifier: Apache-2.0
// Key parsing, signing and verification on top of mbedTLS 2.28 (ECDSA) and libsodium (Ed25519).
#include "evidence/keys.hpp"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha512.h>
#include <mbedtls/x509_crt.h>
#include <sodium.h>

#include <cstring>
#include <ctime>

namespace stackprov::evidence {

namespace {

// DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410 §4): SEQ{SEQ{OID 1.3.101.112}, BIT STRING}.
constexpr uint8_t kEd25519SpkiPrefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                            0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

std::string mbed_err(int rc) {
  char buf[128];
  snprintf(buf, sizeof(buf), "mbedTLS -0x%04x", static_cast<unsigned>(-rc));
  return buf;
}

struct Drbg {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  int rc = 0;
  Drbg() {
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    static const char kPers[] = "stackprov-bundle";
    rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                               reinterpret_cast<const uint8_t*>(kPers), sizeof(kPers) - 1);
  }
  ~Drbg() {
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
  }
};

bool starts_with(const Bytes& b, std::string_view p) {
  return b.size() >= p.size() && memcmp(b.data(), p.data(), p.size()) == 0;
}

Bytes with_nul(const Bytes& b) {
  Bytes c = b;
  c.push_back(0);
  return c;
}

bool looks_pem(const Bytes& b) {
  for (size_t i = 0; i < b.size() && i < 64; ++i)
    if (b[i] == '-') return starts_with(Bytes(b.begin() + static_cast<long>(i), b.end()), "-----BEGIN");
  return false;
}

int64_t x509_time_to_unix(const mbedtls_x509_time& t) {
  struct tm tm {};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.mon - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.min;
  tm.tm_sec = t.sec;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

struct PublicKey::Impl {
  mbedtls_pk_context pk;
  Impl() { mbedtls_pk_init(&pk); }
  ~Impl() { mbedtls_pk_free(&pk); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

struct SigningKey::Impl {
  mbedtls_pk_context pk;
  Impl() { mbedtls_pk_init(&pk); }
  ~Impl() { mbedtls_pk_free(&pk); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

const char* key_type_name(KeyType t) {
  switch (t) {
    case KeyType::kEcdsaP256: return "ecdsa-p256";
    case KeyType::kEcdsaP384: return "ecdsa-p384";
    case KeyType::kEd25519: return "ed25519";
  }
  return "unknown";
}

Result<PublicKey> PublicKey::ed25519(const Bytes& raw) {
  if (raw.size() != crypto_sign_PUBLICKEYBYTES)
    return make_error(SPROV_ERR_KEY, "Ed25519 public key must be 32 bytes, got %zu", raw.size());
  PublicKey k;
  k.type_ = KeyType::kEd25519;
  k.raw_ = raw;
  k.spki_.assign(kEd25519SpkiPrefix, kEd25519SpkiPrefix + sizeof(kEd25519SpkiPrefix));
  k.spki_.insert(k.spki_.end(), raw.begin(), raw.end());
  return k;
}

Result<PublicKey> PublicKey::from_spki_der(const Bytes& der) {
  if (der.size() == 44 && memcmp(der.data(), kEd25519SpkiPrefix, sizeof(kEd25519SpkiPrefix)) == 0)
    return ed25519(Bytes(der.begin() + 12, der.end()));
  if (der.empty() || der.size() > 4096)
    return make_error(SPROV_ERR_KEY, "public key DER of %zu bytes is not a key", der.size());
  auto impl = std::make_shared<Impl>();
  int rc = mbedtls_pk_parse_public_key(&impl->pk, der.data(), der.size());
  if (rc != 0)
    return make_error(SPROV_ERR_KEY, "cannot parse public key (%zu bytes DER): %s", der.size(),
                      mbed_err(rc).c_str());
  if (mbedtls_pk_get_type(&impl->pk) != MBEDTLS_PK_ECKEY)
    return make_error(SPROV_ERR_KEY, "public key type '%s' is not supported (ECDSA or Ed25519 only)",
                      mbedtls_pk_get_name(&impl->pk));
  PublicKey k;
  auto gid = mbedtls_pk_ec(impl->pk)->grp.id;
  if (gid == MBEDTLS_ECP_DP_SECP256R1) k.type_ = KeyType::kEcdsaP256;
  else if (gid == MBEDTLS_ECP_DP_SECP384R1) k.type_ = KeyType::kEcdsaP384;
  else return make_error(SPROV_ERR_KEY, "EC curve id %d is not supported (P-256 or P-384)", gid);
  // Re-serialise so that spki_ is the canonical DER, whatever the input carried.
  uint8_t buf[256];
  int n = mbedtls_pk_write_pubkey_der(&impl->pk, buf, sizeof(buf));
  if (n <= 0) return make_error(SPROV_ERR_KEY, "cannot re-encode public key: %s", mbed_err(n).c_str());
  k.spki_.assign(buf + sizeof(buf) - n, buf + sizeof(buf));
  k.impl_ = std::move(impl);
  return k;
}

Result<std::pair<Certificate, PublicKey>> parse_certificate(const Bytes& data) {
  mbedtls_x509_crt crt;
  mbedtls_x509_crt_init(&crt);
  int rc = looks_pem(data) ? mbedtls_x509_crt_parse(&crt, with_nul(data).data(), data.size() + 1)
                           : mbedtls_x509_crt_parse_der(&crt, data.data(), data.size());
  if (rc != 0) {
    mbedtls_x509_crt_free(&crt);
    return make_error(SPROV_ERR_KEY, "cannot parse X.509 certificate (%zu bytes): %s", data.size(),
                      mbed_err(rc).c_str());
  }
  Certificate c;
  c.der.assign(crt.raw.p, crt.raw.p + crt.raw.len);
  c.not_before = x509_time_to_unix(crt.valid_from);
  c.not_after = x509_time_to_unix(crt.valid_to);
  char subj[256];
  if (mbedtls_x509_dn_gets(subj, sizeof(subj), &crt.subject) > 0) c.subject = subj;
  uint8_t buf[1024];
  int n = mbedtls_pk_write_pubkey_der(&crt.pk, buf, sizeof(buf));
  mbedtls_x509_crt_free(&crt);
  if (n <= 0)
    return make_error(SPROV_ERR_KEY, "certificate key is not ECDSA P-256/P-384 (%s)", mbed_err(n).c_str());
  auto pk = PublicKey::from_spki_der(Bytes(buf + sizeof(buf) - n, buf + sizeof(buf)));
  if (!pk) return pk.error();
  return std::make_pair(std::move(c), std::move(pk.value()));
}

Result<PublicKey> PublicKey::from_pem_or_der(const Bytes& data) {
  if (data.size() > 65536)
    return make_error(SPROV_ERR_LIMIT, "key input of %zu bytes is too large", data.size());
  if (looks_pem(data)) {
    std::string_view s = as_sv(data);
    if (s.find("-----BEGIN CERTIFICATE-----") != std::string_view::npos) {
      auto c = parse_certificate(data);
      if (!c) return c.error();
      return std::move(c.value().second);
    }
    auto impl = std::make_shared<Impl>();
    auto z = with_nul(data);
    int rc = mbedtls_pk_parse_public_key(&impl->pk, z.data(), z.size());
    if (rc != 0) {
      // Ed25519 PEM: mbedTLS cannot parse it, so take the DER out of the armour ourselves.
      auto b = s.find("-----BEGIN PUBLIC KEY-----");
      auto e = s.find("-----END PUBLIC KEY-----");
      if (b == std::string_view::npos || e == std::string_view::npos || e < b)
        return make_error(SPROV_ERR_KEY, "PEM is not a PUBLIC KEY or CERTIFICATE: %s", mbed_err(rc).c_str());
      std::string body;
      for (char ch : s.substr(b + 26, e - b - 26))
        if (ch != '\n' && ch != '\r' && ch != ' ') body += ch;
      auto der = base64_decode(body, B64Alphabet::kStandard, "PEM body");
      if (!der) return der.error();
      return from_spki_der(der.value());
    }
    uint8_t buf[256];
    int n = mbedtls_pk_write_pubkey_der(&impl->pk, buf, sizeof(buf));
    if (n <= 0) return make_error(SPROV_ERR_KEY, "cannot re-encode PEM key: %s", mbed_err(n).c_str());
    return from_spki_der(Bytes(buf + sizeof(buf) - n, buf + sizeof(buf)));
  }
  auto k = from_spki_der(data);
  if (k) return k;
  auto c = parse_certificate(data);
  if (c) return std::move(c.value().second);
  return k.error();
}

std::string PublicKey::key_id_hex() const { return hex_encode(sha256(spki_)); }

Status PublicKey::verify(std::string_view msg, const Bytes& sig) const {
  if (type_ == KeyType::kEd25519) {
    if (sig.size() != crypto_sign_BYTES)
      return make_error(SPROV_ERR_SIGNATURE, "Ed25519 signature must be 64 bytes, got %zu", sig.size());
    if (sodium_init() < 0) return make_error(SPROV_ERR_INTERNAL, "libsodium initialisation failed");
    if (crypto_sign_verify_detached(sig.data(), reinterpret_cast<const uint8_t*>(msg.data()),
                                    msg.size(), raw_.data()) != 0)
      return make_error(SPROV_ERR_SIGNATURE, "Ed25519 signature does not verify");
    return {};
  }
  if (type_ == KeyType::kEcdsaP256) {
    return verify_prehashed_sha256(sha256(msg), sig);
  }
  uint8_t h[64];
  mbedtls_sha512_ret(reinterpret_cast<const uint8_t*>(msg.data()), msg.size(), h, 1);
  int rc = mbedtls_pk_verify(&impl_->pk, MBEDTLS_MD_SHA384, h, 48, sig.data(), sig.size());
  if (rc != 0 && sig.size() == 96) {
    mbedtls_mpi r, s;
    mbedtls_mpi_init(&r);
    mbedtls_mpi_init(&s);
    mbedtls_mpi_read_binary(&r, sig.data(), 48);
    mbedtls_mpi_read_binary(&s, sig.data() + 48, 48);
    auto* ec = mbedtls_pk_ec(impl_->pk);
    rc = mbedtls_ecdsa_verify(&ec->grp, h, 48, &ec->Q, &r, &s);
    mbedtls_mpi_free(&r);
    mbedtls_mpi_free(&s);
  }
  if (rc != 0)
    return make_error(SPROV_ERR_SIGNATURE, "ECDSA P-384 signature does not verify (%s)", mbed_err(rc).c_str());
  return {};
}

Status PublicKey::verify_prehashed_sha256(const Hash& digest, const Bytes& sig) const {
  if (type_ == KeyType::kEd25519)
    return make_error(SPROV_ERR_KEY, "Ed25519 keys cannot verify a prehashed digest");
  if (sig.empty() || sig.size() > 256)
    return make_error(SPROV_ERR_SIGNATURE, "ECDSA signature of %zu bytes is malformed", sig.size());
  int rc = mbedtls_pk_verify(&impl_->pk, MBEDTLS_MD_SHA256, digest.data(), 32, sig.data(), sig.size());
  size_t coord = type_ == KeyType::kEcdsaP256 ? 32 : 48;
  if (rc != 0 && sig.size() == 2 * coord) {
    // Raw r||s (as in the DSSE protocol.md vector).
    mbedtls_mpi r, s;
    mbedtls_mpi_init(&r);
    mbedtls_mpi_init(&s);
    mbedtls_mpi_read_binary(&r, sig.data(), coord);
    mbedtls_mpi_read_binary(&s, sig.data() + coord, coord);
    auto* ec = mbedtls_pk_ec(impl_->pk);
    rc = mbedtls_ecdsa_verify(&ec->grp, digest.data(), 32, &ec->Q, &r, &s);
    mbedtls_mpi_free(&r);
    mbedtls_mpi_free(&s);
  }
  if (rc != 0)
    return make_error(SPROV_ERR_SIGNATURE, "ECDSA %s signature does not verify (%s)",
                      type_ == KeyType::kEcdsaP256 ? "P-256" : "P-384", mbed_err(rc).c_str());
  return {};
}

std::string spki_to_pem(const Bytes& der) {
  std::string b64 = base64_encode(der);
  std::string out = "-----BEGIN PUBLIC KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) out += b64.substr(i, 64) + "\n";
  out += "-----END PUBLIC KEY-----\n";
  return out;
}

namespace {
Result<PublicKey> public_of(mbedtls_pk_context* pk) {
  uint8_t buf[256];
  int n = mbedtls_pk_write_pubkey_der(pk, buf, sizeof(buf));
  if (n <= 0) return make_error(SPROV_ERR_KEY, "cannot encode public key: %s", mbed_err(n).c_str());
  return PublicKey::from_spki_der(Bytes(buf + sizeof(buf) - n, buf + sizeof(buf)));
}
}  // namespace

Result<SigningKey> SigningKey::generate() {
  Drbg rng;
  if (rng.rc != 0) return make_error(SPROV_ERR_INTERNAL, "RNG seeding failed: %s", mbed_err(rng.rc).c_str());
  auto impl = std::make_shared<Impl>();
  int rc = mbedtls_pk_setup(&impl->pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
  if (rc == 0)
    rc = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(impl->pk), mbedtls_ctr_drbg_random,
                             &rng.drbg);
  if (rc != 0) return make_error(SPROV_ERR_KEY, "P-256 key generation failed: %s", mbed_err(rc).c_str());
  auto pub = public_of(&impl->pk);
  if (!pub) return pub.error();
  SigningKey k;
  k.pub_ = std::move(pub.value());
  k.impl_ = std::move(impl);
  return k;
}

Result<SigningKey> SigningKey::from_pem_or_der(const Bytes& data) {
  if (data.size() > 65536) return make_error(SPROV_ERR_LIMIT, "private key input of %zu bytes is too large", data.size());
  auto impl = std::make_shared<Impl>();
  Bytes in = looks_pem(data) ? with_nul(data) : data;
  Drbg rng;
  int rc = mbedtls_pk_parse_key(&impl->pk, in.data(), in.size(), nullptr, 0);
  mbedtls_platform_zeroize(in.data(), in.size());
  if (rc != 0) return make_error(SPROV_ERR_KEY, "cannot parse private key: %s (encrypted keys are not supported)", mbed_err(rc).c_str());
  if (mbedtls_pk_get_type(&impl->pk) != MBEDTLS_PK_ECKEY ||
      mbedtls_pk_ec(impl->pk)->grp.id != MBEDTLS_ECP_DP_SECP256R1)
    return make_error(SPROV_ERR_KEY, "signing key must be ECDSA P-256 (got %s)", mbedtls_pk_get_name(&impl->pk));
  auto pub = public_of(&impl->pk);
  if (!pub) return pub.error();
  SigningKey k;
  k.pub_ = std::move(pub.value());
  k.impl_ = std::move(impl);
  return k;
}

Result<SigningKey> SigningKey::load(const std::string& path) {
  auto data = read_file(path, 65536);
  if (!data) return data.error();
  auto k = from_pem_or_der(data.value());
  if (!k && PublicKey::from_pem_or_der(data.value()))
    return make_error(SPROV_ERR_KEY, "'%s' is a public key; signing needs its private key", path.c_str());
  mbedtls_platform_zeroize(data.value().data(), data.value().size());
  if (!k) return make_error(k.error().code, "'%s': %s", path.c_str(), k.error().message.c_str());
  return k;
}

Result<std::string> SigningKey::private_pem() const {
  std::string buf(1024, '\0');
  int rc = mbedtls_pk_write_key_pem(&impl_->pk, reinterpret_cast<uint8_t*>(buf.data()), buf.size());
  if (rc != 0) return make_error(SPROV_ERR_KEY, "cannot encode private key: %s", mbed_err(rc).c_str());
  buf.resize(strlen(buf.c_str()));
  return buf;
}

Result<Bytes> SigningKey::sign(std::string_view msg) const {
  Drbg rng;  // used only for blinding; the nonce is RFC 6979 deterministic
  if (rng.rc != 0) return make_error(SPROV_ERR_INTERNAL, "RNG seeding failed: %s", mbed_err(rng.rc).c_str());
  Hash h = sha256(msg);
  Bytes sig(MBEDTLS_ECDSA_MAX_LEN);
  size_t len = 0;
  int rc = mbedtls_ecdsa_write_signature(mbedtls_pk_ec(impl_->pk), MBEDTLS_MD_SHA256, h.data(), h.size(),
                                         sig.data(), &len, mbedtls_ctr_drbg_random, &rng.drbg);
  if (rc != 0) return make_error(SPROV_ERR_SIGNATURE, "ECDSA signing failed: %s", mbed_err(rc).c_str());
  sig.resize(len);
  return sig;
}

Result<PublicKey> load_public_key(const char* path, bool allow_private) {
  auto data = read_file(path, 65536);
  if (!data) return data.error();
  auto k = PublicKey::from_pem_or_der(data.value());
  if (k) return k;
  auto sk = SigningKey::from_pem_or_der(data.value());
  if (sk && allow_private) return sk.value().public_key();
  if (sk)
    return make_error(SPROV_ERR_KEY,
                      "'%s' is a private key; verifying needs its public key (PEM PUBLIC KEY or a certificate)", path);
  return make_error(k.error().code, "'%s': %s", path, k.error().message.c_str());
}

Result<std::vector<PublicKey>> load_public_keys(const char* const* paths, size_t n) {
  if (n > 0 && paths == nullptr) return make_error(SPROV_ERR_INVALID_ARG, "%s is NULL", "key_paths");
  if (n > 256) return make_error(SPROV_ERR_LIMIT, "%zu keys exceed the limit of 256", n);
  std::vector<PublicKey> keys;
  for (size_t i = 0; i < n; ++i) {
    if (!paths[i]) return make_error(SPROV_ERR_INVALID_ARG, "%s is NULL", "key_paths[i]");
    auto k = load_public_key(paths[i]);
    if (!k) return k.error();
    keys.push_back(std::move(k.value()));
  }
  return keys;
}

}  // namespace stackprov::evidence
