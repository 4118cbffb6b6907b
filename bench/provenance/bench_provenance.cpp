// SPDX-License-Identifier: Apache-2.0
// Benchmark: CPU time per Sigstore bundle verification and local-log appends/s, through the C ABI.
//
// Peer: "bare mbedTLS" -- the ECDSA P-256 verifications that a Rekor v1 bundle needs at a
// minimum (SET, checkpoint, DSSE signature), done directly with mbedtls_pk_verify on the same
// bytes. stackprov's time over that floor is the cost of parsing, hashing, proofs and checks.
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "stackprov/bundle.h"
#include "stackprov/stackprov.h"

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Decodes standard base64 with mbedTLS (peer side only; inputs are known-good).
std::vector<unsigned char> b64(const std::string& s);

}  // namespace

#include <mbedtls/base64.h>
namespace {
std::vector<unsigned char> b64(const std::string& s) {
  size_t n = 0;
  mbedtls_base64_decode(nullptr, 0, &n, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  std::vector<unsigned char> out(n);
  mbedtls_base64_decode(out.data(), out.size(), &n, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  out.resize(n);
  return out;
}

// Extracts the string value of "key":"..." after `from` (bench inputs only; not a JSON parser).
std::string field(const std::string& doc, const std::string& key, size_t from = 0) {
  size_t k = doc.find("\"" + key + "\"", from);
  if (k == std::string::npos) return {};
  size_t q = doc.find('"', doc.find(':', k) + 1);
  size_t e = doc.find('"', q + 1);
  return doc.substr(q + 1, e - q - 1);
}

struct Floor {
  mbedtls_pk_context pk;
  unsigned char h1[32], h2[32], h3[32];
  std::vector<unsigned char> s1, s2, s3;
};

}  // namespace

int main(int argc, char** argv) {
  // The project's own copy of the public Sigstore vectors (tests/data/sigstore, README there):
  // a clone stands alone. STACKPROV_SIGSTORE_DIR overrides it.
  const char* vectors = getenv("STACKPROV_SIGSTORE_DIR");
  std::string dir = vectors ? vectors : STACKPROV_SIGSTORE_DIR_DEFAULT;
  std::string out_path = argc > 1 ? argv[1] : "build/bench/provenance.json";
  std::string root_json = slurp(dir + "/trusted_root.public-good.json");
  std::string root2_json = slurp(dir + "/trusted_root.staging-rekorv2.json");
  sprov_trusted_root *root = nullptr, *root2 = nullptr;
  if (sprov_trusted_root_new(root_json.data(), root_json.size(), &root) != 0 ||
      sprov_trusted_root_new(root2_json.data(), root2_json.size(), &root2) != 0) {
    fprintf(stderr, "bench_provenance: cannot load trusted roots from %s: %s\n", dir.c_str(), sprov_last_error_message());
    return 1;
  }
  struct Case {
    const char* name;
    const char* file;
    sprov_trusted_root* root;
    double cpu_us = 0, wall_us = 0;
  } cases[] = {{"rekor_v1_dsse_v0.3", "01-valid-dsse-rekorv1.sigstore.json", root},
               {"rekor_v1_intoto_v0.1", "02-valid-intoto-v0.1-rekorv1.sigstore.json", root},
               {"rekor_v2_dsse_ed25519", "06-valid-dsse-rekorv2-ed25519.sigstore.json", root2}};
  const int kIters = 2000;
  for (auto& c : cases) {
    std::string b = slurp(dir + "/" + c.file);
    for (int i = 0; i < 50; ++i) sprov_sigstore_verify_buf(c.root, b.data(), b.size(), nullptr, nullptr, nullptr);
    double c0 = cpu_now(), w0 = wall_now();
    for (int i = 0; i < kIters; ++i)
      if (sprov_sigstore_verify_buf(c.root, b.data(), b.size(), nullptr, nullptr, nullptr) != 0) {
        fprintf(stderr, "bench_provenance: %s failed: %s\n", c.file, sprov_last_error_message());
        return 1;
      }
    c.cpu_us = (cpu_now() - c0) / kIters * 1e6;
    c.wall_us = (wall_now() - w0) / kIters * 1e6;
  }

  // Peer floor for bundle 01: three P-256 verifies with mbedTLS (SET, checkpoint, DSSE),
  // here all with the Rekor key over fixed digests -- the same curve operations.
  Floor f;
  mbedtls_pk_init(&f.pk);
  auto der = b64("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE2G2Y+2tabdTV5BcGiBIx0a9fAFwrkBbmLSGtks4L3qX6yYY0zufBnhC8Ur/iy55GhWP/9A/bY2LhC30M9+RYtw==");
  mbedtls_pk_parse_public_key(&f.pk, der.data(), der.size());
  std::string b01 = slurp(dir + "/01-valid-dsse-rekorv1.sigstore.json");
  std::string env = field(b01, "envelope");
  // The checkpoint note text with JSON escapes undone ("\n", "\u003d" and "\u2014").
  std::string note;
  for (size_t i = 0; i < env.size(); ++i) {
    if (env.compare(i, 2, "\\n") == 0) { note += '\n'; ++i; }
    else if (env.compare(i, 6, "\\u2014") == 0) { note += "\xE2\x80\x94"; i += 5; }
    else if (env.compare(i, 6, "\\u003d") == 0) { note += '='; i += 5; }
    else note += env[i];
  }
  std::string text = note.substr(0, note.find("\n\n") + 1);
  auto blob = b64(note.substr(note.rfind(' ') + 1, note.size() - note.rfind(' ') - 2));
  if (blob.size() < 5) {
    fprintf(stderr, "bench_provenance: cannot extract the checkpoint signature of bundle 01\n");
    return 1;
  }
  f.s1.assign(blob.begin() + 4, blob.end());
  mbedtls_sha256_ret(reinterpret_cast<const unsigned char*>(text.data()), text.size(), f.h1, 0);
  double p0 = cpu_now();
  int ok = 0;
  for (int i = 0; i < kIters; ++i)
    for (int j = 0; j < 3; ++j) ok += mbedtls_pk_verify(&f.pk, MBEDTLS_MD_SHA256, f.h1, 32, f.s1.data(), f.s1.size()) == 0;
  double floor_us = (cpu_now() - p0) / kIters * 1e6;
  mbedtls_pk_free(&f.pk);
  if (ok != 3 * kIters) {
    fprintf(stderr, "bench_provenance: FAIL: peer floor verification failed (%d of %d)\n", ok, 3 * kIters);
    return 1;
  }

  // Log appends.
  char tmpl[] = "/tmp/sprov-bench-XXXXXX";
  std::string tmp = mkdtemp(tmpl);
  std::string key = tmp + "/k";
  int log_errors = 0;  // every log call must succeed, or its figure means nothing
  log_errors += sprov_key_generate(key.c_str(), (key + ".pub").c_str(), nullptr, 0) != 0;
  sprov_tlog* log = nullptr;
  if (log_errors != 0 || sprov_tlog_init((tmp + "/log").c_str(), "bench.example/log", key.c_str(), &log) != 0) {
    fprintf(stderr, "bench_provenance: %s\n", sprov_last_error_message());
    return 1;
  }
  std::string entry(400, 'e');
  const int kSingle = 200;
  double w0 = wall_now();
  for (int i = 0; i < kSingle; ++i) {
    memcpy(&entry[0], &i, sizeof(i));
    const void* e[] = {entry.data()};
    size_t l[] = {entry.size()};
    log_errors += sprov_tlog_append(log, e, l, 1, nullptr) != 0;
  }
  double single_per_s = kSingle / (wall_now() - w0);
  const int kBatch = 1000, kBatches = 50;
  std::vector<std::string> batch(kBatch, entry);
  std::vector<const void*> ptrs;
  std::vector<size_t> lens;
  for (int i = 0; i < kBatch; ++i) {
    memcpy(&batch[i][4], &i, sizeof(i));
    ptrs.push_back(batch[i].data());
    lens.push_back(batch[i].size());
  }
  w0 = wall_now();
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kBatch; ++i) memcpy(&batch[i][8], &b, sizeof(b));
    log_errors += sprov_tlog_append(log, ptrs.data(), lens.data(), kBatch, nullptr) != 0;
  }
  double batch_per_s = double(kBatch) * kBatches / (wall_now() - w0);
  log_errors += sprov_tlog_checkpoint(log, key.c_str(), nullptr, nullptr) != 0;
  uint64_t size = sprov_tlog_size(log);
  const int kProofs = 500;
  w0 = wall_now();
  for (int i = 0; i < kProofs; ++i) {
    char* p = nullptr;
    log_errors += sprov_tlog_prove(log, (uint64_t(i) * 7919) % size, &p, nullptr) != 0;
    sprov_free(p);
  }
  double prove_us = (wall_now() - w0) / kProofs * 1e6;
  sprov_tlog_free(log);
  if (log_errors != 0 || size != uint64_t(kSingle) + uint64_t(kBatch) * kBatches) {
    fprintf(stderr, "bench_provenance: FAIL: %d log calls failed, log size %llu: %s\n", log_errors,
            (unsigned long long)size, sprov_last_error_message());
    return 1;
  }
  std::string rm = "rm -rf '" + tmp + "'";
  if (system(rm.c_str()) != 0) fprintf(stderr, "bench_provenance: could not remove %s\n", tmp.c_str());

  printf("bench/provenance (stackprov %s)\n", sprov_version());
  for (const auto& c : cases)
    printf("  verify %-24s %8.1f us CPU/bundle  (%8.1f us wall)\n", c.name, c.cpu_us, c.wall_us);
  printf("  peer: bare mbedTLS, 3x ECDSA P-256 verify %8.1f us CPU  -> stackprov/peer ratio (rekor v1 v0.3) %.2f\n",
         floor_us, cases[0].cpu_us / floor_us);
  printf("  target: Rekor v1 verification well under 1000 us CPU: %s\n", cases[0].cpu_us < 1000 ? "met" : "NOT met");
  printf("  log append, 1 entry per call (fsync'd commit): %10.0f appends/s\n", single_per_s);
  printf("  log append, %d entries per call:             %10.0f appends/s\n", kBatch, batch_per_s);
  printf("  log prove (tiles on disk, %llu entries):      %10.1f us/proof\n", (unsigned long long)size, prove_us);

  FILE* o = fopen(out_path.c_str(), "w");
  if (!o) {
    std::string d = out_path.substr(0, out_path.rfind('/'));
    std::string mk = "mkdir -p '" + d + "'";
    if (system(mk.c_str()) == 0) o = fopen(out_path.c_str(), "w");
  }
  if (!o) {
    fprintf(stderr, "bench_provenance: cannot write %s\n", out_path.c_str());
    return 1;
  }
  fprintf(o, "{\n  \"benchmark\": \"provenance\",\n  \"verify_cpu_us\": {");
  for (size_t i = 0; i < 3; ++i)
    fprintf(o, "%s\"%s\": %.2f", i ? ", " : "", cases[i].name, cases[i].cpu_us);
  fprintf(o, "},\n  \"peer\": {\"name\": \"bare mbedTLS 3x ECDSA P-256 verify\", \"cpu_us\": %.2f},\n", floor_us);
  fprintf(o, "  \"ratio_stackprov_over_peer_rekor_v1\": %.3f,\n", cases[0].cpu_us / floor_us);
  fprintf(o, "  \"target_rekor_v1_under_1ms_cpu\": %s,\n", cases[0].cpu_us < 1000 ? "true" : "false");
  fprintf(o, "  \"log_appends_per_s_single\": %.1f,\n  \"log_appends_per_s_batch_%d\": %.1f,\n", single_per_s, kBatch,
          batch_per_s);
  fprintf(o, "  \"log_prove_us\": %.2f,\n  \"log_entries\": %llu\n}\n", prove_us, (unsigned long long)size);
  fclose(o);
  sprov_trusted_root_free(root);
  sprov_trusted_root_free(root2);
  return 0;
}
