// SPDX-License-Identifier: Apache-2.0
// C ABI shims for evidence (include/stackprov/bundle.h): digests, keys, DSSE, the local log, Sigstore verification.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "evidence/dsse.hpp"
#include "evidence/sigstore.hpp"
#include "evidence/tlog.hpp"
#include "evidence/trace_verify.hpp"
#include "capi/internal.hpp"

#include <mbedtls/platform_util.h>
#include "stackprov/bundle.h"

using namespace stackprov;
using namespace stackprov::evidence;
using stackprov::capi::check_opts;
using stackprov::capi::fail;
using stackprov::capi::guard;

struct sprov_tlog {
  Tlog log;
};

struct sprov_trusted_root {
  TrustedRoot root;
};

namespace {

int give_string(const std::string& s, char** out, size_t* out_len) {
  if (out == nullptr) return fail(make_error(SPROV_ERR_INVALID_ARG, "NULL output buffer pointer"));
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return fail(make_error(SPROV_ERR_NOMEM, "cannot allocate %zu bytes", s.size() + 1));
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *out = p;
  if (out_len) *out_len = s.size();
  return 0;
}

int copy_cstr(const std::string& s, char* out, size_t size, const char* what) {
  if (out == nullptr || size <= s.size())
    return fail(make_error(SPROV_ERR_BUFFER_TOO_SMALL, "%s needs %zu bytes, buffer has %zu", what, s.size() + 1,
                           out ? size : 0));
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

Error null_arg(const char* name) { return make_error(SPROV_ERR_INVALID_ARG, "%s is NULL", name); }

std::string base_name(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string report_text(const SigstoreReport& r) {
  std::string out = "ok bundle " + r.media_type + " (" + r.content + ")\n";
  for (const auto& c : r.checks) out += "ok " + c + "\n";
  for (const auto& n : r.notes) out += "note " + n + "\n";
  return out;
}

}  // namespace

extern "C" {

SPROV_API int sprov_digest_file(const char* path, char* out, size_t out_size) {
  return guard([&] {
    if (!path) return fail(null_arg("path"));
    auto h = sha256_file(path);
    if (!h) return fail(h.error());
    return copy_cstr(digest_string(h.value()), out, out_size, "digest");
  });
}

SPROV_API int sprov_key_generate(const char* private_path, const char* public_path, char* key_id, size_t key_id_size) {
  return guard([&] {
    if (!private_path) return fail(null_arg("private_path"));
    if (!public_path) return fail(null_arg("public_path"));
    if (key_id && key_id_size < SPROV_KEY_ID_STRLEN)
      return fail(make_error(SPROV_ERR_BUFFER_TOO_SMALL, "key_id needs %d bytes", SPROV_KEY_ID_STRLEN));
    auto k = SigningKey::generate();
    if (!k) return fail(k.error());
    auto pem = k.value().private_pem();
    if (!pem) return fail(pem.error());
    // Never overwrite an existing key (RENAME_NOREPLACE); 0600: the private key is for the owner only.
    auto wr = write_file_atomic(private_path, pem.value(), 0600, true, /*replace=*/false);
    mbedtls_platform_zeroize(pem.value().data(), pem.value().size());
    if (!wr) return fail(make_error(wr.error().code, "cannot create private key file '%s': %s", private_path,
                                    wr.error().message.c_str()));
    auto st = write_file_atomic(public_path, spki_to_pem(k.value().public_key().spki_der()));
    if (!st) return fail(st.error());
    if (key_id) return copy_cstr(k.value().public_key().key_id_hex(), key_id, key_id_size, "key_id");
    return 0;
  });
}

SPROV_API int sprov_key_id(const char* key_path, char* key_id, size_t key_id_size) {
  return guard([&] {
    if (!key_path) return fail(null_arg("key_path"));
    auto k = load_public_key(key_path, true);
    if (!k) return fail(k.error());
    return copy_cstr(k.value().key_id_hex(), key_id, key_id_size, "key_id");
  });
}

SPROV_API int sprov_dsse_sign_file(const char* key_path, const char* artifact_path, const struct sprov_sign_opts* opts,
                                   char** out, size_t* out_len) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_sign_opts), "sprov_sign_opts")) return rc;
    if (!key_path) return fail(null_arg("key_path"));
    if (!artifact_path) return fail(null_arg("artifact_path"));
    auto key = SigningKey::load(key_path);
    if (!key) return fail(key.error());
    auto h = sha256_file(artifact_path);
    if (!h) return fail(h.error());
    const char* name = SPROV_OPTS_GET(opts, sprov_sign_opts, subject_name, nullptr);
    const char* ptype = SPROV_OPTS_GET(opts, sprov_sign_opts, predicate_type, nullptr);
    const char* pjson = SPROV_OPTS_GET(opts, sprov_sign_opts, predicate_json, nullptr);
    Json predicate = Json::object();
    if (pjson) {
      auto p = parse_json(pjson, "predicate_json");
      if (!p) return fail(p.error());
      if (!p.value().is_object()) return fail(make_error(SPROV_ERR_INVALID_ARG, "predicate_json is not a JSON object"));
      predicate = std::move(p.value());
    }
    std::string stmt = make_statement({Subject{name ? name : base_name(artifact_path), h.value()}},
                                      ptype ? ptype : kStackprovPredicate, predicate);
    auto env = sign_envelope(kInTotoPayloadType, stmt, key.value());
    if (!env) return fail(env.error());
    return give_string(serialize_envelope(env.value()), out, out_len);
  });
}

SPROV_API int sprov_dsse_sign(const char* key_path, const char* payload_type, const void* payload, size_t payload_len,
                              char** out, size_t* out_len) {
  return guard([&] {
    if (!key_path) return fail(null_arg("key_path"));
    if (!payload_type) return fail(null_arg("payload_type"));
    if (!payload && payload_len) return fail(null_arg("payload"));
    auto key = SigningKey::load(key_path);
    if (!key) return fail(key.error());
    auto env = sign_envelope(payload_type,
                             std::string_view(static_cast<const char*>(payload), payload ? payload_len : 0), key.value());
    if (!env) return fail(env.error());
    return give_string(serialize_envelope(env.value()), out, out_len);
  });
}

SPROV_API int sprov_dsse_verify(const void* envelope, size_t len, const struct sprov_dsse_verify_opts* opts) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_dsse_verify_opts), "sprov_dsse_verify_opts")) return rc;
    if (!opts) return fail(null_arg("opts (trusted keys)"));
    if (!envelope) return fail(null_arg("envelope"));
    if (SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_dsse_verify_opts.reserved must be 0"));
    auto keys = load_public_keys(SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, key_paths, nullptr),
                          SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, key_count, size_t{0}));
    if (!keys) return fail(keys.error());
    uint32_t threshold = SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, threshold, 0u);
    const char* pt = SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, payload_type, nullptr);
    auto env = parse_envelope(std::string_view(static_cast<const char*>(envelope), len));
    if (!env) return fail(env.error());
    auto vr = verify_envelope(env.value(), keys.value(), threshold ? threshold : 1, {pt ? pt : kInTotoPayloadType});
    if (!vr) return fail(vr.error());
    const char* subject = SPROV_OPTS_GET(opts, sprov_dsse_verify_opts, subject_digest, nullptr);
    if (subject) {
      auto d = parse_digest(subject);
      if (!d) return fail(d.error());
      auto st = check_statement_subject(env.value().payload, d.value());
      if (!st) return fail(st.error());
    }
    return 0;
  });
}

SPROV_API int sprov_tlog_init(const char* dir, const char* origin, const char* key_path, sprov_tlog** out) {
  return guard([&] {
    if (!dir) return fail(null_arg("dir"));
    if (!origin) return fail(null_arg("origin"));
    if (!key_path) return fail(null_arg("key_path"));
    if (!out) return fail(null_arg("out"));
    auto key = SigningKey::load(key_path);
    if (!key) return fail(key.error());
    auto t = Tlog::init(dir, origin, key.value());
    if (!t) return fail(t.error());
    *out = new sprov_tlog{std::move(t.value())};
    return 0;
  });
}

SPROV_API int sprov_tlog_open(const char* dir, sprov_tlog** out) {
  return guard([&] {
    if (!dir) return fail(null_arg("dir"));
    if (!out) return fail(null_arg("out"));
    auto t = Tlog::open(dir);
    if (!t) return fail(t.error());
    *out = new sprov_tlog{std::move(t.value())};
    return 0;
  });
}

SPROV_API void sprov_tlog_free(sprov_tlog* log) { delete log; }

SPROV_API uint64_t sprov_tlog_size(const sprov_tlog* log) { return log ? log->log.size() : 0; }

}  // extern "C"

namespace {

/// sprov_tlog_append_checkpoint (sprov_tlog_append: no key, no note).
int append_checkpoint(sprov_tlog* log, const void* const* entries, const size_t* lens, size_t count,
                      const char* key_path, uint64_t* first_index, char** note, size_t* note_len) noexcept {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    if (count && (!entries || !lens)) return fail(null_arg("entries/lens"));
    std::vector<std::string_view> es;
    es.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (!entries[i] && lens[i]) return fail(null_arg("entries[i]"));
      es.emplace_back(static_cast<const char*>(entries[i]), lens[i]);
    }
    std::optional<SigningKey> key;
    if (key_path) {
      auto k = SigningKey::load(key_path);
      if (!k) return fail(k.error());
      if (Status st = log->log.check_key(k.value(), key_path); !st) return fail(st.error());
      key = std::move(k.value());
    }
    std::string signed_note;
    auto r = log->log.append(es, key ? &*key : nullptr, &signed_note);
    if (!r) return fail(r.error());
    if (first_index) *first_index = r.value();
    if (key && note) return give_string(signed_note, note, note_len);
    return 0;
  });
}

}  // namespace

extern "C" {

SPROV_API int sprov_tlog_append(sprov_tlog* log, const void* const* entries, const size_t* lens, size_t count,
                                uint64_t* first_index) {
  return append_checkpoint(log, entries, lens, count, nullptr, first_index, nullptr, nullptr);
}

SPROV_API int sprov_tlog_append_checkpoint(sprov_tlog* log, const void* const* entries, const size_t* lens,
                                           size_t count, const char* key_path, uint64_t* first_index, char** note,
                                           size_t* note_len) {
  return append_checkpoint(log, entries, lens, count, key_path, first_index, note, note_len);
}

SPROV_API int sprov_tlog_checkpoint(sprov_tlog* log, const char* key_path, char** out, size_t* out_len) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    if (!key_path) return fail(null_arg("key_path"));
    auto key = SigningKey::load(key_path);
    if (!key) return fail(key.error());
    if (Status st = log->log.check_key(key.value(), key_path); !st) return fail(st.error());
    auto note = log->log.sign_checkpoint(key.value());
    if (!note) return fail(note.error());
    if (!out) return 0;
    return give_string(note.value(), out, out_len);
  });
}

SPROV_API int sprov_tlog_find(sprov_tlog* log, const void* entry, size_t len, uint64_t* index) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    if (!entry && len) return fail(null_arg("entry"));
    auto r = log->log.find(std::string_view(static_cast<const char*>(entry), entry ? len : 0));
    if (!r) return fail(r.error());
    if (!r.value())
      return fail(make_error(SPROV_ERR_NOT_FOUND, "no entry of log '%s' (%llu entries) equals the %zu given bytes",
                             log->log.dir().c_str(), (unsigned long long)log->log.size(), len));
    if (index) *index = *r.value();
    return 0;
  });
}

SPROV_API int sprov_tlog_prove(sprov_tlog* log, uint64_t index, char** out, size_t* out_len) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    auto p = log->log.prove(index);
    if (!p) return fail(p.error());
    return give_string(format_tlog_proof(p.value()), out, out_len);
  });
}

SPROV_API int sprov_tlog_consistency(sprov_tlog* log, uint64_t old_size, uint64_t new_size, char** out,
                                     size_t* out_len) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    if (new_size == 0) {
      auto cp = log->log.checkpoint();
      if (!cp) return fail(cp.error());
      new_size = cp.value().checkpoint.size;
    }
    auto p = log->log.consistency(old_size, new_size);
    if (!p) return fail(p.error());
    return give_string(format_consistency_proof(old_size, new_size, p.value()), out, out_len);
  });
}

SPROV_API int sprov_tlog_export_fragment(sprov_tlog* log, uint64_t index, const char* out_dir) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    if (!out_dir) return fail(null_arg("out_dir"));
    auto st = log->log.export_fragment(index, out_dir);
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_tlog_verify_fragment(const char* dir, const void* entry, size_t entry_len,
                                         const char* log_key_path, const char* origin) {
  return guard([&] {
    if (!dir) return fail(null_arg("dir"));
    if (!entry && entry_len) return fail(null_arg("entry"));
    if (!log_key_path) return fail(null_arg("log_key_path"));
    if (!origin) return fail(null_arg("origin"));
    auto k = load_public_key(log_key_path);
    if (!k) return fail(k.error());
    auto st = verify_tile_fragment(dir, std::string_view(static_cast<const char*>(entry), entry ? entry_len : 0),
                                   k.value(), origin);
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_tlog_fsck(sprov_tlog* log) {
  return guard([&] {
    if (!log) return fail(null_arg("log"));
    auto st = log->log.fsck();
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_tlog_verify_proof(const void* proof, size_t proof_len, const void* entry, size_t entry_len,
                                      const char* log_key_path, const char* origin) {
  return guard([&] {
    if (!proof) return fail(null_arg("proof"));
    if (!entry && entry_len) return fail(null_arg("entry"));
    if (!log_key_path) return fail(null_arg("log_key_path"));
    if (!origin) return fail(null_arg("origin"));
    auto k = load_public_key(log_key_path);
    if (!k) return fail(k.error());
    auto st = verify_tlog_proof_with_key(std::string_view(static_cast<const char*>(proof), proof_len),
                                         std::string_view(static_cast<const char*>(entry), entry ? entry_len : 0),
                                         k.value(), origin);
    if (!st) return fail(st.error());
    return 0;
  });
}

SPROV_API int sprov_tlog_verify_consistency(const char* old_note, const char* new_note, const char* proof,
                                            const char* log_key_path, const char* origin) {
  return guard([&] {
    if (!old_note || !new_note || !proof) return fail(null_arg("old_note/new_note/proof"));
    if (!log_key_path) return fail(null_arg("log_key_path"));
    if (!origin) return fail(null_arg("origin"));
    auto k = load_public_key(log_key_path);
    if (!k) return fail(k.error());
    auto st = verify_consistency_notes(old_note, new_note, proof, make_note_verifier(origin, k.value()));
    if (!st) return fail(st.error());
    return 0;
  });
}

}  // extern "C"

namespace {
int sigstore_verify_common(const TrustedRoot& root, std::string_view bundle, const struct sprov_sigstore_opts* opts,
                           char** report, size_t* report_len) {
  SigstoreOptions so;
  const char* art = SPROV_OPTS_GET(opts, sprov_sigstore_opts, artifact_path, nullptr);
  const char* dig = SPROV_OPTS_GET(opts, sprov_sigstore_opts, artifact_digest, nullptr);
  if (art && dig) return fail(make_error(SPROV_ERR_INVALID_ARG, "give artifact_path or artifact_digest, not both"));
  if (art) {
    auto h = sha256_file(art);
    if (!h) return fail(h.error());
    so.artifact_digest = h.value();
  } else if (dig) {
    auto h = parse_digest(dig);
    if (!h) return fail(h.error());
    so.artifact_digest = h.value();
  }
  auto r = verify_sigstore_bundle(bundle, root, so);
  if (!r) return fail(r.error());
  if (!report) return 0;
  return give_string(report_text(r.value()), report, report_len);
}
}  // namespace

extern "C" {

SPROV_API int sprov_trusted_root_new(const void* json, size_t len, sprov_trusted_root** out) {
  return guard([&] {
    if (!json) return fail(null_arg("json"));
    if (!out) return fail(null_arg("out"));
    auto r = parse_trusted_root(std::string_view(static_cast<const char*>(json), len));
    if (!r) return fail(r.error());
    *out = new sprov_trusted_root{std::move(r.value())};
    return 0;
  });
}

SPROV_API void sprov_trusted_root_free(sprov_trusted_root* root) { delete root; }

SPROV_API int sprov_sigstore_verify_buf(const sprov_trusted_root* root, const void* bundle, size_t len,
                                        const struct sprov_sigstore_opts* opts, char** report, size_t* report_len) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_sigstore_opts), "sprov_sigstore_opts")) return rc;
    if (!root) return fail(null_arg("root"));
    if (!bundle) return fail(null_arg("bundle"));
    return sigstore_verify_common(root->root, std::string_view(static_cast<const char*>(bundle), len), opts, report,
                                  report_len);
  });
}

}  // extern "C"

extern "C" {

SPROV_API int sprov_sigstore_verify(const char* bundle_path, const char* trusted_root_path,
                                    const struct sprov_sigstore_opts* opts, char** report, size_t* report_len) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_sigstore_opts), "sprov_sigstore_opts")) return rc;
    if (!bundle_path) return fail(null_arg("bundle_path"));
    if (!trusted_root_path) return fail(null_arg("trusted_root_path"));
    auto rt = read_file(trusted_root_path);
    if (!rt) return fail(rt.error());
    auto root = parse_trusted_root(as_sv(rt.value()));
    if (!root) return fail(make_error(root.error().code, "trusted-root: '%s': %s", trusted_root_path,
                                      root.error().message.c_str()));
    auto b = read_file(bundle_path);
    if (!b) return fail(b.error());
    return sigstore_verify_common(root.value(), as_sv(b.value()), opts, report, report_len);
  });
}

SPROV_API int sprov_trace_verify(const struct sprov_trace_verify_opts* opts, char** report, size_t* report_len) {
  return guard([&] {
    if (int rc = check_opts(opts, SPROV_OPTS_KNOWN(sprov_trace_verify_opts), "sprov_trace_verify_opts")) return rc;
    if (!opts) return fail(null_arg("opts"));
    if (SPROV_OPTS_GET(opts, sprov_trace_verify_opts, reserved, 0u) != 0)
      return fail(make_error(SPROV_ERR_INVALID_ARG, "sprov_trace_verify_opts.reserved must be 0"));
    TraceVerifyInput in;
    const char* digest = SPROV_OPTS_GET(opts, sprov_trace_verify_opts, digest, nullptr);
    if (!digest) return fail(null_arg("digest"));
    auto d = parse_digest(digest);
    if (!d) return fail(d.error());
    in.digest = d.value();
    auto str = [](const char* s) { return s ? std::string(s) : std::string(); };
    in.artifact_path = str(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, artifact_path, nullptr));
    in.envelope_path = str(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, envelope_path, nullptr));
    in.check_dsse = SPROV_OPTS_GET(opts, sprov_trace_verify_opts, check_dsse, 0u) != 0;
    in.check_log = SPROV_OPTS_GET(opts, sprov_trace_verify_opts, check_log, 0u) != 0;
    auto keys = load_public_keys(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, key_paths, nullptr),
                          SPROV_OPTS_GET(opts, sprov_trace_verify_opts, key_count, size_t{0}));
    if (!keys) return fail(keys.error());
    in.keys = std::move(keys.value());
    uint32_t th = SPROV_OPTS_GET(opts, sprov_trace_verify_opts, threshold, 0u);
    in.threshold = th ? th : 1;
    in.trusted_root_path = str(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, trusted_root_path, nullptr));
    in.log_dir = str(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, log_dir, nullptr));
    in.proof_path = str(SPROV_OPTS_GET(opts, sprov_trace_verify_opts, proof_path, nullptr));
    auto r = trace_verify(in);
    if (!r) return fail(r.error());
    if (!report) return 0;
    std::string text;
    for (const auto& l : r.value()) text += l + "\n";
    return give_string(text, report, report_len);
  });
}

}  // extern "C"
