// SPDX-License-Identifier: Apache-2.0
// Sigstore bundle verification against tests/data/sigstore/expectations.json, plus tampering.
#include <catch2/catch.hpp>

#include <algorithm>

#include "evidence/json.hpp"
#include "evidence/note.hpp"
#include "evidence/sigstore.hpp"
#include "test_support.hpp"

using namespace stackprov::evidence;
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

namespace {

enum class Mut { kFlipBase64, kAppendChar, kIncrement, kRemove, kFlipCheckpointRoot, kFlipCheckpointSig };

std::string mutate(const std::string& text, const std::string& ptr, Mut m) {
  Json j = parse_json(text, "bundle").value();
  Json::json_pointer p(ptr);
  Json& v = j[p];
  switch (m) {
    case Mut::kFlipBase64: {
      auto b = base64_decode(v.get<std::string>(), B64Alphabet::kStandard).value();
      b[b.size() / 2] ^= 0x01;
      v = base64_encode(b);
      break;
    }
    case Mut::kAppendChar: v = v.get<std::string>() + "x"; break;
    case Mut::kIncrement: v = std::to_string(std::stoll(v.get<std::string>()) + 1); break;
    case Mut::kRemove: j[p.parent_pointer()].erase(p.back()); break;
    case Mut::kFlipCheckpointRoot:
    case Mut::kFlipCheckpointSig: {
      std::string s = v.get<std::string>();
      // Root: a character of the third line. Signature: a character of the FIRST signature line's blob.
      size_t first_sig = s.find("\n\n") + 2;
      size_t pos = m == Mut::kFlipCheckpointRoot ? s.find('\n', s.find('\n') + 1) + 5
                                                 : s.find(' ', first_sig + 4) + 12;
      s[pos] = s[pos] == 'A' ? 'B' : 'A';
      v = s;
      break;
    }
  }
  return j.dump();
}

struct Tamper {
  const char* ptr;
  Mut mut;
  const char* check;  // expected failed check, from the verification order of provenance-formats.md §8
};

void run_tampering(const char* bundle, const char* root_file, const std::vector<Tamper>& cases) {
  std::string text = bundle_test::slurp(bundle_test::sigstore_dir() + "/" + bundle);
  auto root = load_root(root_file);
  REQUIRE(verify_sigstore_bundle(text, root, {}).ok());
  for (const auto& t : cases) {
    INFO(bundle << " " << t.ptr);
    auto r = verify_sigstore_bundle(mutate(text, t.ptr, t.mut), root, {});
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(check_of(r) == t.check);
  }
}

}  // namespace

TEST_CASE("Rekor v1 DSSE bundle: every field altered in turn is rejected by the right check", "[sigstore]") {
  const std::string e = "/verificationMaterial/tlogEntries/0";
  static const std::vector<std::string> keep{e};
  std::vector<Tamper> cases = {
      {"/mediaType", Mut::kAppendChar, "media-type"},
      {"/verificationMaterial/certificate/rawBytes", Mut::kFlipBase64, "certificate"},
      {"/verificationMaterial/tlogEntries/0/logIndex", Mut::kIncrement, "set"},
      {"/verificationMaterial/tlogEntries/0/logId/keyId", Mut::kFlipBase64, "tlog-threshold"},
      {"/verificationMaterial/tlogEntries/0/kindVersion/kind", Mut::kAppendChar, "kind-version"},
      {"/verificationMaterial/tlogEntries/0/kindVersion/version", Mut::kAppendChar, "kind-version"},
      {"/verificationMaterial/tlogEntries/0/integratedTime", Mut::kIncrement, "set"},
      {"/verificationMaterial/tlogEntries/0/inclusionPromise/signedEntryTimestamp", Mut::kFlipBase64, "set"},
      {"/verificationMaterial/tlogEntries/0/canonicalizedBody", Mut::kFlipBase64, "set"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/logIndex", Mut::kIncrement, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/rootHash", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/treeSize", Mut::kIncrement, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/hashes/0", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/hashes/10", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint/envelope", Mut::kFlipCheckpointRoot,
       "checkpoint-signature"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint/envelope", Mut::kFlipCheckpointSig,
       "checkpoint-signature"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint", Mut::kRemove, "tlog-entry"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof", Mut::kRemove, "tlog-entry"},
      {"/dsseEnvelope/payload", Mut::kFlipBase64, "entry-body"},
      {"/dsseEnvelope/payloadType", Mut::kAppendChar, "dsse-signature"},
      {"/dsseEnvelope/signatures/0/sig", Mut::kFlipBase64, "entry-body"},
  };
  run_tampering("01-valid-dsse-rekorv1.sigstore.json", "trusted_root.public-good.json", cases);
}

TEST_CASE("Rekor v1 intoto v0.1 bundle: tampering is rejected", "[sigstore]") {
  std::vector<Tamper> cases = {
      {"/mediaType", Mut::kAppendChar, "media-type"},
      // The flipped certificate still parses, but no longer matches the one logged in the entry body.
      {"/verificationMaterial/x509CertificateChain/certificates/0/rawBytes", Mut::kFlipBase64, "entry-body"},
      {"/verificationMaterial/tlogEntries/0/logIndex", Mut::kIncrement, "set"},
      {"/verificationMaterial/tlogEntries/0/inclusionPromise", Mut::kRemove, "tlog-entry"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/hashes/5", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint/envelope", Mut::kFlipCheckpointSig,
       "checkpoint-signature"},
      {"/dsseEnvelope/payload", Mut::kFlipBase64, "entry-body"},
      {"/dsseEnvelope/signatures/0/sig", Mut::kFlipBase64, "entry-body"},
  };
  run_tampering("02-valid-intoto-v0.1-rekorv1.sigstore.json", "trusted_root.public-good.json", cases);
}

TEST_CASE("Rekor v2 bundle: tampering is rejected", "[sigstore]") {
  std::vector<Tamper> cases = {
      {"/verificationMaterial/tlogEntries/0/logId/keyId", Mut::kFlipBase64, "tlog-threshold"},
      {"/verificationMaterial/tlogEntries/0/canonicalizedBody", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/logIndex", Mut::kIncrement, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/rootHash", Mut::kFlipBase64, "checkpoint-root"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/treeSize", Mut::kIncrement, "checkpoint-root"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/hashes/4", Mut::kFlipBase64, "inclusion-proof"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint/envelope", Mut::kFlipCheckpointRoot,
       "checkpoint-signature"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof/checkpoint/envelope", Mut::kFlipCheckpointSig,
       "checkpoint-signature"},
      {"/verificationMaterial/tlogEntries/0/inclusionProof", Mut::kRemove, "tlog-entry"},
      {"/dsseEnvelope/payload", Mut::kFlipBase64, "entry-body"},
      {"/dsseEnvelope/payloadType", Mut::kAppendChar, "entry-body"},
      {"/dsseEnvelope/signatures/0/sig", Mut::kFlipBase64, "entry-body"},
  };
  run_tampering("06-valid-dsse-rekorv2-ed25519.sigstore.json", "trusted_root.staging-rekorv2.json", cases);
}

TEST_CASE("Rekor v2: a tampered witness cosignature is ignored (C2SP: unknown keys are skipped)", "[sigstore]") {
  std::string text = bundle_test::slurp(bundle_test::sigstore_dir() + "/06-valid-dsse-rekorv2-ed25519.sigstore.json");
  Json j = parse_json(text, "b").value();
  auto& env = j["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]["envelope"];
  std::string s = env.get<std::string>();
  size_t pos = s.rfind(' ') + 12;  // inside the last (witness) signature
  s[pos] = s[pos] == 'A' ? 'B' : 'A';
  env = s;
  CHECK(verify_sigstore_bundle(j.dump(), load_root("trusted_root.staging-rekorv2.json"), {}).ok());
}

TEST_CASE("artifact binding, truncated and oversized bundles", "[sigstore]") {
  std::string text = bundle_test::slurp(bundle_test::sigstore_dir() + "/01-valid-dsse-rekorv1.sigstore.json");
  auto root = load_root("trusted_root.public-good.json");
  // The subject digest of bundle 01's in-toto statement, read independently from the payload.
  auto j = parse_json(text, "b").value();
  auto payload = base64_decode(j["dsseEnvelope"]["payload"].get<std::string>()).value();
  auto stmt = parse_json(as_sv(payload), "s").value();
  auto subject = parse_digest("sha256:" + stmt["subject"][0]["digest"]["sha256"].get<std::string>()).value();
  SigstoreOptions good;
  good.artifact_digest = subject;
  auto r = verify_sigstore_bundle(text, root, good);
  REQUIRE(r.ok());
  CHECK(std::find(r.value().checks.begin(), r.value().checks.end(), "artifact-digest") != r.value().checks.end());
  SigstoreOptions bad;
  bad.artifact_digest = sha256(std::string_view("not the artifact"));
  auto r2 = verify_sigstore_bundle(text, root, bad);
  REQUIRE_FALSE(r2.ok());
  CHECK(check_of(r2) == "artifact-digest");
  CHECK(r2.error().code == SPROV_ERR_DIGEST_MISMATCH);

  for (size_t cut = 0; cut < text.size(); cut += 97) {
    auto t = verify_sigstore_bundle(text.substr(0, cut), root, {});
    REQUIRE_FALSE(t.ok());
    CHECK(check_of(t) == "bundle-parse");
  }
  CHECK(verify_sigstore_bundle(std::string(kMaxDocumentBytes + 10, ' '), root, {}).error().code == SPROV_ERR_LIMIT);
  CHECK_FALSE(verify_sigstore_bundle("[]", root, {}).ok());
  CHECK_FALSE(verify_sigstore_bundle("{\"mediaType\":5}", root, {}).ok());
}
