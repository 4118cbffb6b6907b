// SPDX-License-Identifier: Apache-2.0
// C ABI tests for stackprov/bundle.h: layouts, sized options (older/newer callers), errors, round trips.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "stackprov/bundle.h"
#include "stackprov/stackprov.h"
#include "test_support.hpp"

namespace fs = std::filesystem;

static_assert(offsetof(sprov_sign_opts, sz) == 0);
static_assert(sizeof(sprov_sign_opts) == 32);
static_assert(sizeof(sprov_dsse_verify_opts) == 48);
static_assert(offsetof(sprov_dsse_verify_opts, threshold) == 24);
static_assert(sizeof(sprov_sigstore_opts) == 24);
static_assert(sizeof(sprov_trace_verify_opts) == 88);
static_assert(offsetof(sprov_trace_verify_opts, trusted_root_path) == 64);

namespace {
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/sprov-capi-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};
void write(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
}  // namespace

TEST_CASE("C ABI: keygen, sign, verify, log, prove, trace-verify", "[capi]") {
  TempDir d;
  std::string key = d.path + "/k", pub = d.path + "/k.pub";
  char id[SPROV_KEY_ID_STRLEN];
  REQUIRE(sprov_key_generate(key.c_str(), pub.c_str(), id, sizeof(id)) == 0);
  auto perms = fs::status(key).permissions();
  CHECK(((perms & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none));
  // Never overwrites an existing private key.
  CHECK(sprov_key_generate(key.c_str(), pub.c_str(), nullptr, 0) == -EEXIST);
  char id2[SPROV_KEY_ID_STRLEN];
  REQUIRE(sprov_key_id(pub.c_str(), id2, sizeof(id2)) == 0);
  CHECK(std::string(id) == id2);
  REQUIRE(sprov_key_id(key.c_str(), id2, sizeof(id2)) == 0);
  CHECK(std::string(id) == id2);
  // The private key never appears in error messages.
  std::string priv = bundle_test::slurp(key);
  std::string body = priv.substr(priv.find('\n') + 1, 40);
  CHECK(sprov_dsse_sign_file(key.c_str(), (d.path + "/missing").c_str(), nullptr, nullptr, nullptr) != 0);
  CHECK(std::string(sprov_last_error_message()).find(body) == std::string::npos);

  std::string art = d.path + "/a.bin";
  write(art, "some artifact\n");
  char digest[SPROV_DIGEST_STRLEN];
  REQUIRE(sprov_digest_file(art.c_str(), digest, sizeof(digest)) == 0);
  // Compared with coreutils sha256sum, an independent implementation.
  std::string want;
  if (FILE* p = popen(("sha256sum " + art).c_str(), "r")) {
    char buf[128] = {0};
    if (fgets(buf, sizeof(buf), p)) want = std::string(buf).substr(0, 64);
    pclose(p);
  }
  if (!want.empty()) CHECK(std::string(digest) == "sha256:" + want);
  char* env = nullptr;
  size_t env_len = 0;
  REQUIRE(sprov_dsse_sign_file(key.c_str(), art.c_str(), nullptr, &env, &env_len) == 0);
  std::string envelope(env, env_len);
  sprov_free(env);
  write(d.path + "/a.dsse.json", envelope);

  const char* keys[] = {pub.c_str()};
  SPROV_OPTS(sprov_dsse_verify_opts, vo, .key_paths = keys, .key_count = 1, .threshold = 1, .reserved = 0,
             .payload_type = nullptr, .subject_digest = digest);
  CHECK(sprov_dsse_verify(envelope.data(), envelope.size(), &vo) == 0);
  vo.threshold = 2;
  CHECK(sprov_dsse_verify(envelope.data(), envelope.size(), &vo) == SPROV_ERR_POLICY);
  vo.threshold = 1;
  vo.subject_digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
  CHECK(sprov_dsse_verify(envelope.data(), envelope.size(), &vo) == SPROV_ERR_DIGEST_MISMATCH);
  CHECK(std::string(sprov_last_error_message()).find("0000000000") != std::string::npos);

  // Log round trip through the C ABI.
  sprov_tlog* log = nullptr;
  REQUIRE(sprov_tlog_init((d.path + "/log").c_str(), "example.org/capi", key.c_str(), &log) == 0);
  const void* e[] = {envelope.data()};
  size_t l[] = {envelope.size()};
  uint64_t first = 99;
  REQUIRE(sprov_tlog_append(log, e, l, 1, &first) == 0);
  CHECK(first == 0);
  CHECK(sprov_tlog_size(log) == 1);
  char* proof = nullptr;
  CHECK(sprov_tlog_prove(log, 0, &proof, nullptr) == SPROV_ERR_LOG);  // not covered by a checkpoint yet
  REQUIRE(sprov_tlog_checkpoint(log, key.c_str(), nullptr, nullptr) == 0);
  size_t proof_len = 0;
  REQUIRE(sprov_tlog_prove(log, 0, &proof, &proof_len) == 0);
  std::string proof_text(proof, proof_len);
  sprov_free(proof);
  CHECK(sprov_tlog_verify_proof(proof_text.data(), proof_text.size(), envelope.data(), envelope.size(),
                                (d.path + "/log/log.pub").c_str(), "example.org/capi") == 0);
  uint64_t idx = 5;
  CHECK(sprov_tlog_find(log, envelope.data(), envelope.size(), &idx) == 0);
  CHECK(idx == 0);
  CHECK(sprov_tlog_find(log, "zz", 2, &idx) == SPROV_ERR_NOT_FOUND);
  CHECK(sprov_tlog_fsck(log) == 0);
  sprov_tlog_free(log);
  write(d.path + "/p.txt", proof_text);

  std::string env_path = d.path + "/a.dsse.json", root_path = d.path + "/log/trusted_root.json",
              proof_path = d.path + "/p.txt";
  SPROV_OPTS(sprov_trace_verify_opts, to, .digest = digest, .artifact_path = art.c_str(),
             .envelope_path = env_path.c_str(), .check_dsse = 1, .check_log = 1, .key_paths = keys,
             .key_count = 1, .threshold = 1, .reserved = 0,
             .trusted_root_path = root_path.c_str(), .log_dir = nullptr, .proof_path = proof_path.c_str());
  char* report = nullptr;
  CHECK(sprov_trace_verify(&to, &report, nullptr) == 0);
  sprov_free(report);
  to.digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
  CHECK(sprov_trace_verify(&to, nullptr, nullptr) == SPROV_ERR_DIGEST_MISMATCH);
  CHECK(std::string(sprov_last_error_message()).find("artifact-digest") != std::string::npos);
  // Attack 6: the log directory's own trusted_root.json is never the trust anchor; a log check
  // without the caller's root is an error naming it (it verified through log_dir before).
  to.digest = digest;
  to.proof_path = nullptr;
  const std::string log_dir = d.path + "/log";
  to.log_dir = log_dir.c_str();
  to.trusted_root_path = nullptr;
  CHECK(sprov_trace_verify(&to, nullptr, nullptr) == SPROV_ERR_INVALID_ARG);
  CHECK(std::string(sprov_last_error_message()).find("trusted_root_path") != std::string::npos);
  to.trusted_root_path = root_path.c_str();
  CHECK(sprov_trace_verify(&to, nullptr, nullptr) == 0);
}

TEST_CASE("C ABI: keys are told apart, and a key that cannot sign changes no log", "[capi]") {
  TempDir d;
  const std::string key = d.path + "/k", pub = key + ".pub", other = d.path + "/o", log_dir = d.path + "/log";
  REQUIRE(sprov_key_generate(key.c_str(), pub.c_str(), nullptr, 0) == 0);
  REQUIRE(sprov_key_generate(other.c_str(), (other + ".pub").c_str(), nullptr, 0) == 0);
  sprov_tlog* log = nullptr;
  REQUIRE(sprov_tlog_init(log_dir.c_str(), "example.org/keys", key.c_str(), &log) == 0);
  const void* e[] = {"one", "two"};
  const size_t l[] = {3, 3};
  const auto state = [&] {
    std::string all;
    for (const auto& f : fs::recursive_directory_iterator(log_dir))
      if (f.is_regular_file()) all += f.path().string() + "\n" + [&] {
        std::ifstream in(f.path(), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
      }() + "\n";
    return all;
  };
  const std::string before = state();
  uint64_t first = 9;
  // A public key where the private one signs, another private key, a directory: nothing written.
  CHECK(sprov_tlog_append_checkpoint(log, e, l, 2, pub.c_str(), &first, nullptr, nullptr) == SPROV_ERR_KEY);
  CHECK(std::string(sprov_last_error_message()).find("'" + pub + "' is a public key") != std::string::npos);
  CHECK(sprov_tlog_append_checkpoint(log, e, l, 2, other.c_str(), &first, nullptr, nullptr) == SPROV_ERR_KEY);
  CHECK(std::string(sprov_last_error_message()).find("'" + other + "'") != std::string::npos);
  CHECK(sprov_tlog_append_checkpoint(log, e, l, 2, d.path.c_str(), &first, nullptr, nullptr) == -EISDIR);
  CHECK(std::string(sprov_last_error_message()).find("is a directory") != std::string::npos);
  CHECK(state() == before);
  CHECK(sprov_tlog_size(log) == 0);
  char* note = nullptr;
  size_t note_len = 0;
  REQUIRE(sprov_tlog_append_checkpoint(log, e, l, 2, key.c_str(), &first, &note, &note_len) == 0);
  CHECK(first == 0);
  CHECK(std::string(note, note_len).find("example.org/keys\n2\n") == 0);  // the checkpoint of the new size
  sprov_free(note);
  // A private key where a verifier takes a public one is refused; sprov_key_id takes either.
  char* proof = nullptr;
  size_t proof_len = 0;
  REQUIRE(sprov_tlog_prove(log, 0, &proof, &proof_len) == 0);
  CHECK(sprov_tlog_verify_proof(proof, proof_len, "one", 3, key.c_str(), "example.org/keys") == SPROV_ERR_KEY);
  CHECK(std::string(sprov_last_error_message()).find("'" + key + "' is a private key") != std::string::npos);
  CHECK(sprov_tlog_verify_proof(proof, proof_len, "one", 3, pub.c_str(), "example.org/keys") == 0);
  sprov_free(proof);
  char id1[SPROV_KEY_ID_STRLEN], id2[SPROV_KEY_ID_STRLEN];
  CHECK(sprov_key_id(key.c_str(), id1, sizeof id1) == 0);
  CHECK(sprov_key_id(pub.c_str(), id2, sizeof id2) == 0);
  CHECK(std::string(id1) == id2);
  sprov_tlog_free(log);
  // sprov_bundle_sign_check: what signing would use, checked without writing.
  const std::string after = state();
  SPROV_OPTS(sprov_bundle_sign_opts, ok, .key_path = other.c_str(), .log_dir = log_dir.c_str(), .log_key = key.c_str());
  CHECK(sprov_bundle_sign_check(&ok) == 0);
  SPROV_OPTS(sprov_bundle_sign_opts, wrong_log_key, .key_path = other.c_str(), .log_dir = log_dir.c_str());
  CHECK(sprov_bundle_sign_check(&wrong_log_key) == SPROV_ERR_KEY);  // log_key defaults to key_path
  SPROV_OPTS(sprov_bundle_sign_opts, public_signer, .key_path = pub.c_str(), .log_dir = log_dir.c_str(),
             .log_key = key.c_str());
  CHECK(sprov_bundle_sign_check(&public_signer) == SPROV_ERR_KEY);
  SPROV_OPTS(sprov_bundle_sign_opts, no_log, .key_path = key.c_str(), .log_dir = d.path.c_str());
  CHECK(sprov_bundle_sign_check(&no_log) == SPROV_ERR_LOG);
  CHECK(state() == after);
}

TEST_CASE("C ABI: options structs from older and newer callers", "[capi]") {
  std::string dir = bundle_test::sigstore_dir();
  std::string bundle = dir + "/01-valid-dsse-rekorv1.sigstore.json";
  std::string root = dir + "/trusted_root.public-good.json";
  // An older caller that only knew `sz` + artifact_path.
  struct old_opts {
    size_t sz;
    const char* artifact_path;
  } o{sizeof(old_opts), nullptr};
  CHECK(sprov_sigstore_verify(bundle.c_str(), root.c_str(), reinterpret_cast<const sprov_sigstore_opts*>(&o), nullptr,
                              nullptr) == 0);
  // A newer caller with a non-zero field this library does not know.
  struct newer_opts {
    sprov_sigstore_opts base;
    uint64_t future;
  } n{};
  n.base.sz = sizeof(newer_opts);
  n.future = 1;
  CHECK(sprov_sigstore_verify(bundle.c_str(), root.c_str(), &n.base, nullptr, nullptr) == SPROV_ERR_OPTS_TAIL);
  n.future = 0;
  CHECK(sprov_sigstore_verify(bundle.c_str(), root.c_str(), &n.base, nullptr, nullptr) == 0);
  // Failure message names the check; NULL arguments are clean errors.
  std::string bad = dir + "/05-invalid-inclusion-proof-hash.sigstore.json";
  CHECK(sprov_sigstore_verify(bad.c_str(), root.c_str(), nullptr, nullptr, nullptr) == SPROV_ERR_PROOF);
  CHECK(std::string(sprov_last_error_message()).find("inclusion-proof") != std::string::npos);
  CHECK(sprov_sigstore_verify(nullptr, root.c_str(), nullptr, nullptr, nullptr) == SPROV_ERR_INVALID_ARG);
  CHECK(sprov_tlog_open(nullptr, nullptr) == SPROV_ERR_INVALID_ARG);
  CHECK(sprov_tlog_size(nullptr) == 0);
  sprov_tlog_free(nullptr);
  char small[4];
  CHECK(sprov_digest_file(bundle.c_str(), small, sizeof(small)) == SPROV_ERR_BUFFER_TOO_SMALL);
}
