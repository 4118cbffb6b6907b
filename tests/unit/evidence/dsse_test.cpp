// SPDX-License-Identifier: Apache-2.0
// DSSE tests: the protocol.md P-256 vector, the 9 Ed25519 vectors, PAE, sign/verify round trips, tampering.
#include <catch2/catch.hpp>

#include <mbedtls/ecp.h>
#include <mbedtls/pk.h>

#include "evidence/dsse.hpp"
#include "evidence/json.hpp"
#include "test_support.hpp"

using namespace stackprov::evidence;

namespace {

Json load(const char* name) {
  auto j = parse_json(bundle_test::slurp(bundle_test::sigstore_dir() + "/" + name), name);
  REQUIRE(j.ok());
  return j.value();
}

// SPKI DER of the P-256 point (x, y) given in decimal, built with mbedTLS.
Bytes p256_spki(const std::string& x, const std::string& y) {
  mbedtls_pk_context pk;
  mbedtls_pk_init(&pk);
  REQUIRE(mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) == 0);
  auto* ec = mbedtls_pk_ec(pk);
  REQUIRE(mbedtls_ecp_group_load(&ec->grp, MBEDTLS_ECP_DP_SECP256R1) == 0);
  REQUIRE(mbedtls_mpi_read_string(&ec->Q.X, 10, x.c_str()) == 0);
  REQUIRE(mbedtls_mpi_read_string(&ec->Q.Y, 10, y.c_str()) == 0);
  REQUIRE(mbedtls_mpi_lset(&ec->Q.Z, 1) == 0);
  uint8_t buf[200];
  int n = mbedtls_pk_write_pubkey_der(&pk, buf, sizeof(buf));
  mbedtls_pk_free(&pk);
  REQUIRE(n > 0);
  return Bytes(buf + sizeof(buf) - n, buf + sizeof(buf));
}

}  // namespace

TEST_CASE("PAE matches the DSSE protocol examples", "[dsse]") {
  CHECK(pae("http://example.com/HelloWorld", "hello world") == "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  CHECK(pae("application/vnd.in-toto+json", "") == "DSSEv1 28 application/vnd.in-toto+json 0 ");
  CHECK(pae("application/vnd.ex\xc3\xa4mple+json", "x").rfind("DSSEv1 29 ", 0) == 0);
}

TEST_CASE("DSSE protocol.md P-256 vector verifies (raw r||s signature)", "[dsse]") {
  Json v = load("dsse-vector.p256.json");
  auto key = PublicKey::from_spki_der(p256_spki(v["key"]["x_dec"], v["key"]["y_dec"]));
  REQUIRE(key.ok());
  auto env = envelope_from_json(v["envelope"], "envelope");
  REQUIRE(env.ok());
  CHECK(pae(env.value().payload_type, as_sv(env.value().payload)) == v["pae_utf8"].get<std::string>());
  auto r = verify_envelope(env.value(), {key.value()}, 1, {v["payloadType"].get<std::string>()});
  CHECK(r.ok());
  // Flip one byte of the body: must fail.
  auto bad = env.value();
  bad.payload[0] ^= 1;
  CHECK_FALSE(verify_envelope(bad, {key.value()}, 1, {v["payloadType"].get<std::string>()}).ok());
}

TEST_CASE("DSSE Ed25519 vectors give their expected outcome and PAE", "[dsse]") {
  Json v = load("dsse-vectors.ed25519.json");
  std::map<std::string, PublicKey> keys;
  for (auto& [name, k] : v["keys"].items()) {
    auto raw = hex_decode(k["public"].get<std::string>());
    REQUIRE(raw.ok());
    keys.emplace(name, PublicKey::ed25519(raw.value()).value());
  }
  size_t n = 0;
  for (const auto& t : v["vectors"]) {
    INFO(t["id"].get<std::string>());
    auto env = envelope_from_json(t["envelope"], "envelope");
    REQUIRE(env.ok());
    if (t.contains("pae") && t["expect"].get<std::string>() == "accept") {
      // "pae" is what the signature covers; for accepted vectors it is the envelope's own PAE.
      auto want = hex_decode(t["pae"].get<std::string>());
      REQUIRE(want.ok());
      CHECK(pae(env.value().payload_type, as_sv(env.value().payload)) == std::string(as_sv(want.value())));
    }
    std::vector<PublicKey> trusted;
    for (const auto& k : t["trustedKeys"]) trusted.push_back(keys.at(k.get<std::string>()));
    std::vector<std::string> types = t["supportedPayloadTypes"].get<std::vector<std::string>>();
    auto r = verify_envelope(env.value(), trusted, t["threshold"].get<size_t>(), types);
    CHECK(r.ok() == (t["expect"].get<std::string>() == "accept"));
    ++n;
  }
  CHECK(n == 9);
}

TEST_CASE("sign then verify; deterministic RFC 6979 signatures; tampering each field is rejected", "[dsse]") {
  auto key = SigningKey::generate();
  REQUIRE(key.ok());
  Hash digest = sha256(std::string_view("artifact bytes"));
  std::string stmt = make_statement({Subject{"a.bin", digest}}, kStackprovPredicate, Json::object());
  auto env = sign_envelope(kInTotoPayloadType, stmt, key.value());
  REQUIRE(env.ok());
  auto env2 = sign_envelope(kInTotoPayloadType, stmt, key.value());
  REQUIRE(env2.ok());
  CHECK(env.value().signatures[0].sig == env2.value().signatures[0].sig);  // RFC 6979: same key+msg, same sig
  CHECK(env.value().signatures[0].keyid == key.value().public_key().key_id_hex());
  std::vector<PublicKey> trusted{key.value().public_key()};
  std::string text = serialize_envelope(env.value());
  auto parsed = parse_envelope(text);
  REQUIRE(parsed.ok());
  REQUIRE(verify_envelope(parsed.value(), trusted, 1, {kInTotoPayloadType}).ok());
  CHECK(check_statement_subject(parsed.value().payload, digest).ok());
  CHECK(check_statement_subject(parsed.value().payload, sha256(std::string_view("other"))).error().code ==
        SPROV_ERR_DIGEST_MISMATCH);

  SECTION("payload") {
    auto e = parsed.value();
    e.payload.back() ^= 0x20;
    CHECK(verify_envelope(e, trusted, 1, {kInTotoPayloadType}).error().code == SPROV_ERR_SIGNATURE);
  }
  SECTION("payloadType") {
    auto e = parsed.value();
    e.payload_type = "application/vnd.in-toto+jsom";
    CHECK(verify_envelope(e, trusted, 1, {kInTotoPayloadType, e.payload_type}).error().code == SPROV_ERR_SIGNATURE);
  }
  SECTION("signature") {
    auto e = parsed.value();
    e.signatures[0].sig[10] ^= 1;
    CHECK(verify_envelope(e, trusted, 1, {kInTotoPayloadType}).error().code == SPROV_ERR_SIGNATURE);
  }
  SECTION("keyid is unauthenticated and does not matter") {
    auto e = parsed.value();
    e.signatures[0].keyid = "somebody-else";
    CHECK(verify_envelope(e, trusted, 1, {kInTotoPayloadType}).ok());
  }
  SECTION("untrusted key") {
    auto other = SigningKey::generate();
    CHECK(verify_envelope(parsed.value(), {other.value().public_key()}, 1, {kInTotoPayloadType}).error().code ==
          SPROV_ERR_SIGNATURE);
  }
  SECTION("unsupported payload type after a good signature") {
    CHECK(verify_envelope(parsed.value(), trusted, 1, {"application/other"}).error().code == SPROV_ERR_POLICY);
  }
  SECTION("threshold over distinct keys") {
    auto k2 = SigningKey::generate().value();
    auto e = parsed.value();
    e.signatures.push_back(e.signatures[0]);  // same key twice
    std::vector<PublicKey> two{key.value().public_key(), k2.public_key()};
    CHECK(verify_envelope(e, two, 2, {kInTotoPayloadType}).error().code == SPROV_ERR_SIGNATURE);
    auto s2 = k2.sign(pae(e.payload_type, as_sv(e.payload)));
    e.signatures[1] = DsseSignature{"", s2.value()};
    CHECK(verify_envelope(e, two, 2, {kInTotoPayloadType}).ok());
  }
}

TEST_CASE("malformed, truncated and oversized envelopes give clean errors", "[dsse]") {
  auto key = SigningKey::generate().value();
  std::string text = serialize_envelope(sign_envelope(kInTotoPayloadType, "{}", key).value());
  for (size_t cut = 0; cut < text.size() - 2; cut += 7) CHECK_FALSE(parse_envelope(text.substr(0, cut)).ok());
  CHECK(parse_envelope("{\"payload\":\"e30=\",\"payloadType\":\"x\",\"signatures\":[]}").error().code == SPROV_ERR_BUNDLE);
  CHECK(parse_envelope("{\"payload\":\"e30\",\"payloadType\":\"x\",\"signatures\":[{\"sig\":\"AA==\"}]}").error().code ==
        SPROV_ERR_BASE64);
  CHECK(parse_envelope("{\"payload\":5,\"payloadType\":\"x\",\"signatures\":[{\"sig\":\"AA==\"}]}").error().code ==
        SPROV_ERR_JSON);
  CHECK(parse_envelope(std::string(200, '[')).error().code == SPROV_ERR_LIMIT);
  CHECK(parse_envelope(std::string(kMaxDocumentBytes + 1, ' ')).error().code == SPROV_ERR_LIMIT);
}
