// SPDX-License-Identifier: Apache-2.0
// Sigstore bundle verification against ../shared/conformance/sigstore/expectations.json, plus tampering.
#include <catch2/catch.hpp>

#include "bundle/json.hpp"
#include "bundle/note.hpp"
#include "bundle/sigstore.hpp"
#include "test_support.hpp"

using namespace stackprov::bundle;
using stackprov::Result;

namespace {

TrustedRoot load_root(const std::string& name) {
  auto r = parse_trusted_root(bundle_test::slurp(bundle_test::sigstore_dir() + "/" + name));
  REQUIRE(r.ok());
  return r.value();
}

std::string check_of(const Result<SigstoreReport>& r) {
  if (r.ok()) return "";
  const auto& m = r.error().message;
  return m.substr(0, m.find(':'));
}

// Each "fails_at" text of expectations.json, mapped to the check name we report.
std::string expected_check(const std::string& fails_at) {
  if (fails_at.rfind("entry-body", 0) == 0) return "entry-body";
  if (fails_at.rfind("checkpoint signature", 0) == 0) return "checkpoint-signature";
  if (fails_at.rfind("Merkle inclusion", 0) == 0) return "inclusion-proof";
  return "?";
}

}  // namespace

TEST_CASE("every conformance bundle gives the outcome in expectations.json", "[sigstore]") {
  auto ex = parse_json(bundle_test::slurp(bundle_test::sigstore_dir() + "/expectations.json"), "expectations");
  REQUIRE(ex.ok());
  size_t n = 0;
  for (const auto& c : ex.value()["cases"]) {
    std::string file = c["bundle"].get<std::string>();
    INFO(file);
    auto root = load_root(c["trusted_root"].get<std::string>());
    auto r = verify_sigstore_bundle(bundle_test::slurp(bundle_test::sigstore_dir() + "/" + file), root, {});
    bool want_accept = c["expect"].get<std::string>().rfind("accept", 0) == 0;
    if (!r.ok()) UNSCOPED_INFO("error: " << r.error().message);
    CHECK(r.ok() == want_accept);
    if (!want_accept) CHECK(check_of(r) == expected_check(c["fails_at"].get<std::string>()));
    ++n;
  }
  CHECK(n == 6);
}

TEST_CASE("trusted roots parse with their logs and key types", "[sigstore]") {
  auto prod = load_root("trusted_root.public-good.json");
  REQUIRE(prod.tlogs.size() >= 2);
  CHECK(prod.tlogs[0].host == "rekor.sigstore.dev");
  CHECK(hex_encode(prod.tlogs[0].log_id) == "c0d23d6ad406973f9559f3ba2d1ca01f84147d8ffc5b8445c224f98b9591801d");
  // README: logId = SHA-256(DER SPKI of rekor.pub).
  CHECK(prod.tlogs[0].key.spki_sha256() == prod.tlogs[0].log_id);
  CHECK(prod.tlogs[1].key.type() == KeyType::kEd25519);
  auto staging = load_root("trusted_root.staging-rekorv2.json");
  bool found = false;
  for (const auto& t : staging.tlogs)
    if (t.host == "log2025-alpha3.rekor.sigstage.dev") {
      found = true;
      // C2SP Ed25519 key hash (notes §3) must equal the trusted root's logId.
      CHECK(note_key_hash(t.host, t.key) == t.log_id);
    }
  CHECK(found);
}
