// SPDX-License-Identifier: Apache-2.0
// Signed-note / checkpoint tests: real Rekor v1 and v2 checkpoints, our own, every field tampered, tlog-proof parsing.
#include <catch2/catch.hpp>

#include "evidence/json.hpp"
#include "evidence/note.hpp"
#include "evidence/sigstore.hpp"
#include "test_support.hpp"

using namespace stackprov::evidence;

namespace {
std::string checkpoint_of(const char* bundle) {
  auto j = parse_json(bundle_test::slurp(bundle_test::sigstore_dir() + "/" + bundle), bundle);
  REQUIRE(j.ok());
  return j.value()["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]["envelope"];
}
PublicKey rekor_pub() {
  auto k = PublicKey::from_pem_or_der(to_bytes(bundle_test::slurp(bundle_test::sigstore_dir() + "/rekor.pub")));
  REQUIRE(k.ok());
  return k.value();
}
}  // namespace

TEST_CASE("real Rekor v1 checkpoints verify with rekor.pub (key id c0d23d6a)", "[note]") {
  auto v = make_note_verifier("rekor.sigstore.dev", rekor_pub());
  CHECK(hex_encode(v.key_id.data(), 4) == "c0d23d6a");
  auto cp = verify_checkpoint(checkpoint_of("01-valid-dsse-rekorv1.sigstore.json"), v, "");
  REQUIRE(cp.ok());
  CHECK(cp.value().checkpoint.origin == "rekor.sigstore.dev - 1193050959916656506");
  CHECK(cp.value().checkpoint.size == 33786589);
  auto cp2 = verify_checkpoint(checkpoint_of("02-valid-intoto-v0.1-rekorv1.sigstore.json"), v, "");
  REQUIRE(cp2.ok());
  REQUIRE(cp2.value().checkpoint.extensions.size() == 1);
  CHECK(cp2.value().checkpoint.extensions[0] == "Timestamp: 1692374735595899989");
  CHECK(verify_checkpoint(checkpoint_of("04-invalid-checkpoint-signature.sigstore.json"), v, "").error().code ==
        SPROV_ERR_CHECKPOINT);
}

TEST_CASE("real Rekor v2 checkpoint verifies with Ed25519 and ignores witness cosignatures", "[note]") {
  auto root = parse_trusted_root(bundle_test::slurp(bundle_test::sigstore_dir() + "/trusted_root.staging-rekorv2.json"));
  REQUIRE(root.ok());
  const TrustedLog* log = nullptr;
  for (const auto& t : root.value().tlogs)
    if (t.host == "log2025-alpha3.rekor.sigstage.dev") log = &t;
  REQUIRE(log);
  std::string cp = checkpoint_of("06-valid-dsse-rekorv2-ed25519.sigstore.json");
  auto v = make_note_verifier(log->host, log->key);
  auto r = verify_checkpoint(cp, v, log->host);
  REQUIRE(r.ok());
  CHECK(r.value().checkpoint.size == 4026479);
  auto note = parse_note(cp);
  REQUIRE(note.ok());
  CHECK(note.value().signatures.size() == 4);
  // Tamper the text: the Ed25519 signature must fail.
  std::string bad = cp;
  bad[bad.find('\n') + 1] = '5';
  CHECK(verify_checkpoint(bad, v, log->host).error().code == SPROV_ERR_CHECKPOINT);
}

TEST_CASE("our checkpoints: every field tampered in turn is rejected", "[note]") {
  auto key = SigningKey::generate().value();
  Checkpoint cp{"example.org/log", 12345, sha256(std::string_view("root")), {}};
  auto note = sign_note(format_checkpoint_text(cp), cp.origin, key);
  REQUIRE(note.ok());
  auto v = make_note_verifier(cp.origin, key.public_key());
  REQUIRE(verify_checkpoint(note.value(), v, cp.origin).ok());
  const std::string& n = note.value();
  auto rejected = [&](std::string s) { return !verify_checkpoint(s, v, cp.origin).ok(); };
  std::string s;
  s = n; s.replace(0, 7, "EXAMPLE");                      CHECK(rejected(s));  // origin
  s = n; s.replace(s.find("12345"), 5, "12346");          CHECK(rejected(s));  // size
  s = n; s[s.find('\n', 16) + 3] ^= 1;                    CHECK(rejected(s));  // root
  s = n; s.insert(s.find("\n\n") + 1, "extra line\n");    CHECK(rejected(s));  // extension added
  s = n; s[s.size() - 10] = s[s.size() - 10] == 'A' ? 'B' : 'A'; CHECK(rejected(s));  // signature
  s = n; s.replace(s.rfind("example.org/log"), 15, "example.org/lug"); CHECK(rejected(s));  // key name
  s = n; s.resize(s.size() - 1);                           CHECK(rejected(s));  // no final newline
  s = n; s.erase(s.find("\n\n"), 1);                       CHECK(rejected(s));  // no blank line
  for (size_t cut = 0; cut < n.size(); cut += 5) CHECK(rejected(n.substr(0, cut)));
  CHECK(parse_note(std::string(kMaxNoteBytes + 1, 'a')).error().code == SPROV_ERR_LIMIT);
  // Another key under the same name: ignored when its id differs, so "no signature" is reported.
  auto other = SigningKey::generate().value();
  auto v2 = make_note_verifier(cp.origin, other.public_key());
  auto r = verify_checkpoint(n, v2, cp.origin);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("no signature by") != std::string::npos);
}

TEST_CASE("tlog-proof@v1 parsing is strict", "[note]") {
  TlogProof p;
  p.index = 7;
  p.hashes = {sha256(std::string_view("a")), sha256(std::string_view("b"))};
  p.checkpoint = "o\n8\n" + base64_encode(sha256(std::string_view("r"))) + "\n\n\xE2\x80\x94 o AAAAAAAA\n";
  std::string t = format_tlog_proof(p);
  auto q = parse_tlog_proof(t);
  REQUIRE(q.ok());
  CHECK(q.value().index == 7);
  CHECK(q.value().hashes == p.hashes);
  CHECK(q.value().checkpoint == p.checkpoint);
  p.has_extra = true;
  p.extra = to_bytes("xyz");
  q = parse_tlog_proof(format_tlog_proof(p));
  REQUIRE(q.ok());
  CHECK(std::string(as_sv(q.value().extra)) == "xyz");
  CHECK_FALSE(parse_tlog_proof("c2sp.org/tlog-proof@v2\nindex 1\n\n").ok());
  CHECK_FALSE(parse_tlog_proof("c2sp.org/tlog-proof@v1\nindex 01\n\nx").ok());
  CHECK_FALSE(parse_tlog_proof("c2sp.org/tlog-proof@v1\nindex 1\nAAAA\n\nx").ok());
  for (size_t cut = 0; cut < t.size() - p.checkpoint.size(); ++cut) CHECK_FALSE(parse_tlog_proof(t.substr(0, cut)).ok());
}
