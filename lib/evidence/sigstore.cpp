// SPDX-License-Identifier: Apache-2.0
// Sigstore bundle verification, in the order of sigstore-go pkg/verify/tlog.go (see doc/provenance.md).
#include "evidence/sigstore.hpp"

#include <ctime>
#include <set>

#include "evidence/dsse.hpp"
#include "evidence/json.hpp"
#include "evidence/merkle.hpp"
#include "evidence/note.hpp"

namespace stackprov::evidence {

namespace {

Error fail(int code, const char* check, const Error& inner) {
  return make_error(code, "%s: %s", check, inner.message.c_str());
}

std::string host_of(const std::string& url) {
  std::string s = url;
  auto p = s.find("://");
  if (p != std::string::npos) s = s.substr(p + 3);
  auto slash = s.find('/');
  if (slash != std::string::npos) s = s.substr(0, slash);
  return s;
}

bool is_v1_origin(const std::string& origin) {  // sigstore-go: ".* - [0-9]+$"
  auto p = origin.rfind(" - ");
  if (p == std::string::npos || p + 3 >= origin.size()) return false;
  for (size_t i = p + 3; i < origin.size(); ++i)
    if (origin[i] < '0' || origin[i] > '9') return false;
  return true;
}

const Json* find_obj(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// String at a JSON pointer, or "" when it is missing or not a string (never throws).
std::string str_at(const Json& j, const char* ptr) {
  const Json* cur = &j;
  std::string_view rest(ptr);
  while (!rest.empty()) {
    rest.remove_prefix(1);
    auto slash = rest.find('/');
    std::string key(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    cur = find_obj(*cur, key.c_str());
    if (!cur) return {};
  }
  return cur->is_string() ? cur->get<std::string>() : std::string();
}

std::string b64_field_or_empty(const Json& j, const char* key) {
  const Json* f = find_obj(j, key);
  return f && f->is_string() ? f->get<std::string>() : std::string();
}

// Leaf certificate DER of a PEM or DER blob, for comparisons.
Result<Bytes> cert_der(const Bytes& pem_or_der, const char* what) {
  auto c = parse_certificate(pem_or_der);
  if (!c) return make_error(SPROV_ERR_BUNDLE, "%s: %s", what, c.error().message.c_str());
  return c.value().first.der;
}

struct Material {
  Certificate cert;
  PublicKey key;
};

struct Content {
  bool dsse = false;
  Envelope env;
  Hash msg_digest{};
  Bytes msg_sig;
};

// §6: the log entry body must describe this bundle's signature, key and content.
Status check_body(const Json& body, const std::string& kind, const std::string& version, const Content& c,
                  const Material& m) {
  const char* kCheck = "entry-body";
  auto spec_r = get_field(body, "spec", "body", Json::value_t::object);
  if (!spec_r) return fail(SPROV_ERR_BUNDLE, kCheck, spec_r.error());
  const Json& spec = *spec_r.value();
  auto same_cert = [&](const Bytes& blob, const char* what) -> Status {
    auto der = cert_der(blob, what);
    if (!der) return fail(SPROV_ERR_BUNDLE, kCheck, der.error());
    if (der.value() != m.cert.der)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "%s: %s certificate (sha256 %s) != bundle certificate (sha256 %s)",
                        kCheck, what, hex_encode(sha256(der.value())).c_str(), hex_encode(sha256(m.cert.der)).c_str());
    return {};
  };
  auto b64 = [](const std::string& s, const char* what) { return base64_decode(s, B64Alphabet::kStandard, what); };

  if (kind == "hashedrekord" && version == "0.0.1") {
    if (c.dsse) return make_error(SPROV_ERR_BUNDLE, "%s: hashedrekord/0.0.1 entry for a DSSE bundle", kCheck);
    std::string alg = str_at(spec, "/data/hash/algorithm");
    std::string val = str_at(spec, "/data/hash/value");
    if (alg != "sha256" || val != hex_encode(c.msg_digest))
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "%s: body data.hash %s:%s != bundle messageDigest sha256:%s", kCheck,
                        alg.substr(0, 16).c_str(), val.substr(0, 64).c_str(), hex_encode(c.msg_digest).c_str());
    auto sig = b64(str_at(spec, "/signature/content"), "body signature.content");
    if (!sig) return fail(SPROV_ERR_BUNDLE, kCheck, sig.error());
    if (sig.value() != c.msg_sig)
      return make_error(SPROV_ERR_SIGNATURE, "%s: body signature.content != bundle messageSignature.signature", kCheck);
    auto pk = b64(str_at(spec, "/signature/publicKey/content"), "body publicKey.content");
    if (!pk) return fail(SPROV_ERR_BUNDLE, kCheck, pk.error());
    return same_cert(pk.value(), "body publicKey.content");
  }
  if (kind == "dsse" && version == "0.0.1") {
    if (!c.dsse) return make_error(SPROV_ERR_BUNDLE, "%s: dsse entry for a messageSignature bundle", kCheck);
    std::string want = hex_encode(sha256(c.env.payload));
    std::string alg = str_at(spec, "/payloadHash/algorithm");
    std::string got = str_at(spec, "/payloadHash/value");
    if (alg != "sha256" || got != want)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "%s: body payloadHash %s:%s != sha256(envelope payload) %s", kCheck,
                        alg.substr(0, 16).c_str(), got.substr(0, 64).c_str(), want.c_str());
    const Json* sigs = find_obj(spec, "signatures");
    if (!sigs || !sigs->is_array() || sigs->empty() || sigs->size() > kMaxDsseSignatures)
      return make_error(SPROV_ERR_BUNDLE, "%s: body spec.signatures is missing or empty", kCheck);
    for (const auto& s : *sigs) {
      auto sb = b64(b64_field_or_empty(s, "signature"), "body signature");
      if (!sb || sb.value() != c.env.signatures[0].sig) continue;
      auto v = b64(b64_field_or_empty(s, "verifier"), "body verifier");
      if (!v) return fail(SPROV_ERR_BUNDLE, kCheck, v.error());
      return same_cert(v.value(), "body verifier");
    }
    return make_error(SPROV_ERR_SIGNATURE, "%s: envelope signature is not among the %zu body signatures", kCheck,
                      sigs->size());
  }
  if (kind == "intoto" && version == "0.0.2") {
    if (!c.dsse) return make_error(SPROV_ERR_BUNDLE, "%s: intoto entry for a messageSignature bundle", kCheck);
    std::string want = hex_encode(sha256(c.env.payload));
    std::string got = str_at(spec, "/content/payloadHash/value");
    std::string alg = str_at(spec, "/content/payloadHash/algorithm");
    if (alg != "sha256" || got != want)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "%s: body payloadHash %s:%s != sha256(envelope payload) %s", kCheck,
                        alg.substr(0, 16).c_str(), got.substr(0, 64).c_str(), want.c_str());
    const Json* content = find_obj(spec, "content");
    const Json* env = content ? find_obj(*content, "envelope") : nullptr;
    const Json* sigs = env ? find_obj(*env, "signatures") : nullptr;
    if (!sigs || !sigs->is_array() || sigs->empty() || sigs->size() > kMaxDsseSignatures)
      return make_error(SPROV_ERR_BUNDLE, "%s: body content.envelope.signatures is missing or empty", kCheck);
    std::string pt = str_at(*env, "/payloadType");
    if (pt != c.env.payload_type)
      return make_error(SPROV_ERR_BUNDLE, "%s: body payloadType '%s' != envelope payloadType '%s'", kCheck,
                        pt.substr(0, 80).c_str(), c.env.payload_type.substr(0, 80).c_str());
    for (const auto& s : *sigs) {
      // The intoto/0.0.2 body stores base64(base64(DER)).
      auto outer = b64(b64_field_or_empty(s, "sig"), "body sig");
      if (!outer) continue;
      auto inner = b64(std::string(as_sv(outer.value())), "body sig (inner)");
      if (!inner || inner.value() != c.env.signatures[0].sig) continue;
      auto v = b64(b64_field_or_empty(s, "publicKey"), "body publicKey");
      if (!v) return fail(SPROV_ERR_BUNDLE, kCheck, v.error());
      return same_cert(v.value(), "body publicKey");
    }
    return make_error(SPROV_ERR_SIGNATURE, "%s: envelope signature is not among the %zu body signatures", kCheck,
                      sigs->size());
  }
  if (kind == "hashedrekord" && version == "0.0.2") {
    const Json* v2 = find_obj(spec, "hashedRekordV002");
    if (!v2) return make_error(SPROV_ERR_BUNDLE, "%s: body has no spec.hashedRekordV002", kCheck);
    Hash want = c.dsse ? sha256(pae(c.env.payload_type, as_sv(c.env.payload))) : c.msg_digest;
    std::string alg = str_at(*v2, "/data/algorithm");
    auto dg = b64(str_at(*v2, "/data/digest"), "body data.digest");
    if (!dg) return fail(SPROV_ERR_BUNDLE, kCheck, dg.error());
    if (alg != "SHA2_256" || dg.value() != Bytes(want.begin(), want.end()))
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "%s: body data.digest %s:%s != %s %s", kCheck, alg.substr(0, 16).c_str(),
                        hex_encode(dg.value()).substr(0, 64).c_str(), c.dsse ? "sha256(PAE)" : "messageDigest",
                        hex_encode(want).c_str());
    auto sig = b64(str_at(*v2, "/signature/content"), "body signature.content");
    if (!sig) return fail(SPROV_ERR_BUNDLE, kCheck, sig.error());
    if (sig.value() != (c.dsse ? c.env.signatures[0].sig : c.msg_sig))
      return make_error(SPROV_ERR_SIGNATURE, "%s: body signature.content != bundle signature", kCheck);
    auto raw = b64(str_at(*v2, "/signature/verifier/x509Certificate/rawBytes"),
                   "body verifier.x509Certificate.rawBytes");
    if (!raw) return fail(SPROV_ERR_BUNDLE, kCheck, raw.error());
    return same_cert(raw.value(), "body verifier");
  }
  return make_error(SPROV_ERR_UNSUPPORTED, "%s: entry kind %s/%s is not supported", kCheck, kind.substr(0, 32).c_str(),
                    version.substr(0, 16).c_str());
}

}  // namespace

Result<int64_t> parse_rfc3339(std::string_view s) {
  int y, mo, d, h, mi, sec;
  char tail[32] = {0};
  std::string str(s.substr(0, 40));
  if (sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%31s", &y, &mo, &d, &h, &mi, &sec, tail) < 6)
    return make_error(SPROV_ERR_BAD_FORMAT, "'%s' is not an RFC 3339 time", str.c_str());
  std::string t = tail;
  if (!t.empty() && t[0] == '.') {
    size_t i = 1;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    t = t.substr(i);
  }
  if (t != "Z") return make_error(SPROV_ERR_BAD_FORMAT, "'%s': only UTC ('Z') times are supported", str.c_str());
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm));
}

TrustedLog trusted_log_from_key(const std::string& origin, const PublicKey& key) {
  TrustedLog t;
  t.base_url = "https://" + origin;
  t.host = origin;
  t.name = origin;
  t.key = key;
  t.log_id = note_key_hash(origin, key);
  return t;
}

Result<TrustedRoot> parse_trusted_root(std::string_view text) {
  auto j = parse_json(text, "trusted root");
  if (!j) return j.error();
  auto tlogs = get_field(j.value(), "tlogs", "trustedRoot", Json::value_t::array);
  if (!tlogs) return tlogs.error();
  TrustedRoot root;
  size_t i = 0;
  for (const auto& t : *tlogs.value()) {
    std::string path = "trustedRoot.tlogs[" + std::to_string(i++) + "]";
    if (root.tlogs.size() >= 64) return make_error(SPROV_ERR_LIMIT, "trusted root has more than 64 tlogs");
    TrustedLog tl;
    auto url = get_string(t, "baseUrl", path.c_str());
    if (!url) return url.error();
    tl.base_url = url.value();
    tl.host = host_of(tl.base_url);
    tl.name = tl.base_url.substr(tl.base_url.find("://") == std::string::npos ? 0 : tl.base_url.find("://") + 3);
    while (!tl.name.empty() && tl.name.back() == '/') tl.name.pop_back();
    auto pk = get_field(t, "publicKey", path.c_str(), Json::value_t::object);
    if (!pk) return pk.error();
    auto raw = get_base64(*pk.value(), "rawBytes", (path + ".publicKey").c_str());
    if (!raw) return raw.error();
    auto key = PublicKey::from_spki_der(raw.value());
    if (!key) {
      // A key type we cannot use (e.g. RSA) makes that log unusable, not the whole root.
      continue;
    }
    tl.key = std::move(key.value());
    if (const Json* vf = find_obj(*pk.value(), "validFor")) {
      if (vf->contains("start") && (*vf)["start"].is_string()) {
        auto s = parse_rfc3339((*vf)["start"].get<std::string>());
        if (!s) return s.error();
        tl.valid_from = s.value();
      }
      if (vf->contains("end") && (*vf)["end"].is_string()) {
        auto e = parse_rfc3339((*vf)["end"].get<std::string>());
        if (!e) return e.error();
        tl.valid_to = e.value();
      }
    }
    auto lid = get_field(t, "logId", path.c_str(), Json::value_t::object);
    if (!lid) return lid.error();
    auto kid = get_base64(*lid.value(), "keyId", (path + ".logId").c_str());
    if (!kid) return kid.error();
    auto h = to_hash(kid.value(), "logId.keyId");
    if (!h) return h.error();
    tl.log_id = h.value();
    root.tlogs.push_back(std::move(tl));
  }
  if (root.tlogs.empty()) return make_error(SPROV_ERR_POLICY, "trusted root has no usable transparency log");
  return root;
}

Result<SigstoreReport> verify_sigstore_bundle(std::string_view text, const TrustedRoot& root,
                                              const SigstoreOptions& opts) {
  SigstoreReport rep;
  auto jr = parse_json(text, "bundle");
  if (!jr) return fail(jr.error().code, "bundle-parse", jr.error());
  const Json& b = jr.value();
  auto mt = get_string(b, "mediaType", "bundle");
  if (!mt) return fail(SPROV_ERR_BUNDLE, "bundle-parse", mt.error());
  rep.media_type = mt.value();
  if (rep.media_type == "application/vnd.dev.sigstore.bundle+json;version=0.1") rep.bundle_minor = 1;
  else if (rep.media_type == "application/vnd.dev.sigstore.bundle+json;version=0.2") rep.bundle_minor = 2;
  else if (rep.media_type == "application/vnd.dev.sigstore.bundle.v0.3+json" ||
           rep.media_type == "application/vnd.dev.sigstore.bundle+json;version=0.3")
    rep.bundle_minor = 3;
  else
    return make_error(SPROV_ERR_BUNDLE, "media-type: '%s' is not a Sigstore bundle v0.1-v0.3",
                      rep.media_type.substr(0, 100).c_str());
  rep.checks.push_back("media-type");

  // Verification material: the leaf certificate (chain and identity are out of scope).
  auto vm = get_field(b, "verificationMaterial", "bundle", Json::value_t::object);
  if (!vm) return fail(SPROV_ERR_BUNDLE, "bundle-parse", vm.error());
  Bytes leaf;
  if (const Json* c = find_obj(*vm.value(), "certificate")) {
    auto raw = get_base64(*c, "rawBytes", "verificationMaterial.certificate");
    if (!raw) return fail(SPROV_ERR_BUNDLE, "bundle-parse", raw.error());
    leaf = std::move(raw.value());
  } else if (const Json* ch = find_obj(*vm.value(), "x509CertificateChain")) {
    if (rep.bundle_minor == 3)
      return make_error(SPROV_ERR_BUNDLE, "bundle-parse: v0.3 bundles must carry a single certificate, not a chain");
    auto certs = get_field(*ch, "certificates", "verificationMaterial.x509CertificateChain", Json::value_t::array);
    if (!certs) return fail(SPROV_ERR_BUNDLE, "bundle-parse", certs.error());
    if (certs.value()->empty()) return make_error(SPROV_ERR_BUNDLE, "bundle-parse: empty certificate chain");
    auto raw = get_base64((*certs.value())[0], "rawBytes", "x509CertificateChain.certificates[0]");
    if (!raw) return fail(SPROV_ERR_BUNDLE, "bundle-parse", raw.error());
    leaf = std::move(raw.value());
  } else if (find_obj(*vm.value(), "publicKey")) {
    return make_error(SPROV_ERR_UNSUPPORTED,
                      "verification-material: publicKey (key hint) bundles need an out-of-band key; not supported");
  } else {
    return make_error(SPROV_ERR_BUNDLE, "bundle-parse: verificationMaterial has no certificate");
  }
  auto cert = parse_certificate(leaf);
  if (!cert) return fail(SPROV_ERR_KEY, "certificate", cert.error());
  Material m{cert.value().first, cert.value().second};

  // Content.
  Content c;
  const Json* dj = find_obj(b, "dsseEnvelope");
  const Json* mj = find_obj(b, "messageSignature");
  if ((dj != nullptr) == (mj != nullptr))
    return make_error(SPROV_ERR_BUNDLE, "bundle-parse: exactly one of dsseEnvelope and messageSignature is required");
  if (dj) {
    c.dsse = true;
    rep.content = "dsse";
    auto env = envelope_from_json(*dj, "dsseEnvelope");
    if (!env) return fail(SPROV_ERR_BUNDLE, "bundle-parse", env.error());
    c.env = std::move(env.value());
    if (c.env.signatures.size() != 1)
      return make_error(SPROV_ERR_BUNDLE, "bundle-parse: dsseEnvelope has %zu signatures; Sigstore requires exactly 1",
                        c.env.signatures.size());
  } else {
    rep.content = "message-signature";
    auto md = get_field(*mj, "messageDigest", "messageSignature", Json::value_t::object);
    if (!md) return fail(SPROV_ERR_BUNDLE, "bundle-parse", md.error());
    auto alg = get_string(*md.value(), "algorithm", "messageSignature.messageDigest");
    if (!alg) return fail(SPROV_ERR_BUNDLE, "bundle-parse", alg.error());
    if (alg.value() != "SHA2_256")
      return make_error(SPROV_ERR_UNSUPPORTED, "bundle-parse: messageDigest algorithm '%s' is not SHA2_256",
                        alg.value().substr(0, 32).c_str());
    auto dg = get_base64(*md.value(), "digest", "messageSignature.messageDigest");
    if (!dg) return fail(SPROV_ERR_BUNDLE, "bundle-parse", dg.error());
    auto h = to_hash(dg.value(), "messageDigest.digest");
    if (!h) return fail(SPROV_ERR_BUNDLE, "bundle-parse", h.error());
    c.msg_digest = h.value();
    auto sig = get_base64(*mj, "signature", "messageSignature");
    if (!sig) return fail(SPROV_ERR_BUNDLE, "bundle-parse", sig.error());
    c.msg_sig = std::move(sig.value());
  }

  // Transparency log entries.
  auto entries = get_field(*vm.value(), "tlogEntries", "verificationMaterial", Json::value_t::array);
  if (!entries) return fail(SPROV_ERR_BUNDLE, "bundle-parse", entries.error());
  if (entries.value()->empty()) return make_error(SPROV_ERR_POLICY, "tlog-entries: the bundle has no tlog entries");
  if (entries.value()->size() > kMaxTlogEntries)
    return make_error(SPROV_ERR_LIMIT, "tlog-entries: %zu entries exceed the limit of %zu", entries.value()->size(),
                      kMaxTlogEntries);
  std::set<std::pair<Hash, int64_t>> seen;
  size_t verified_logs = 0;
  std::string skipped;
  bool have_set_time = false;
  int64_t set_time = 0;
  size_t idx = 0;
  for (const Json& e : *entries.value()) {
    std::string path = "tlogEntries[" + std::to_string(idx++) + "]";
    const char* p = path.c_str();
    auto log_index = get_int64(e, "logIndex", p);
    if (!log_index) return fail(SPROV_ERR_BUNDLE, "bundle-parse", log_index.error());
    if (log_index.value() < 0)
      return make_error(SPROV_ERR_BUNDLE, "log-index: %s.logIndex %lld is negative", p, (long long)log_index.value());
    auto lid = get_field(e, "logId", p, Json::value_t::object);
    if (!lid) return fail(SPROV_ERR_BUNDLE, "bundle-parse", lid.error());
    auto kid = get_base64(*lid.value(), "keyId", (path + ".logId").c_str());
    if (!kid) return fail(SPROV_ERR_BUNDLE, "bundle-parse", kid.error());
    auto log_id = to_hash(kid.value(), "logId.keyId");
    if (!log_id) return fail(SPROV_ERR_BUNDLE, "bundle-parse", log_id.error());
    if (!seen.insert({log_id.value(), log_index.value()}).second)
      return make_error(SPROV_ERR_BUNDLE, "tlog-entries: duplicate entry (logId %s, logIndex %lld)",
                        hex_encode(log_id.value()).c_str(), (long long)log_index.value());
    auto kv = get_field(e, "kindVersion", p, Json::value_t::object);
    if (!kv) return fail(SPROV_ERR_BUNDLE, "bundle-parse", kv.error());
    auto kind = get_string(*kv.value(), "kind", (path + ".kindVersion").c_str());
    auto version = get_string(*kv.value(), "version", (path + ".kindVersion").c_str());
    if (!kind) return fail(SPROV_ERR_BUNDLE, "bundle-parse", kind.error());
    if (!version) return fail(SPROV_ERR_BUNDLE, "bundle-parse", version.error());
    auto body_raw = get_base64(e, "canonicalizedBody", p);
    if (!body_raw) return fail(SPROV_ERR_BUNDLE, "bundle-parse", body_raw.error());
    auto body = parse_json(as_sv(body_raw.value()), "canonicalizedBody");
    if (!body) return fail(SPROV_ERR_BUNDLE, "entry-body", body.error());
    std::string bkind = str_at(body.value(), "/kind");
    std::string bver = str_at(body.value(), "/apiVersion");
    if (bkind != kind.value() || bver != version.value())
      return make_error(SPROV_ERR_BUNDLE, "kind-version: %s.kindVersion %s/%s != body %s/%s", p,
                        kind.value().substr(0, 32).c_str(), version.value().substr(0, 16).c_str(),
                        bkind.substr(0, 32).c_str(), bver.substr(0, 16).c_str());

    const TrustedLog* log = nullptr;
    for (const auto& t : root.tlogs)
      if (t.log_id == log_id.value()) log = &t;
    if (!log) {
      skipped += (skipped.empty() ? "" : ", ") + hex_encode(log_id.value());
      continue;
    }
    const Json* proof = find_obj(e, "inclusionProof");
    const Json* promise = find_obj(e, "inclusionPromise");
    const Json* cpj = proof ? find_obj(*proof, "checkpoint") : nullptr;
    std::string cp_text = cpj ? str_at(*cpj, "/envelope") : std::string();
    bool v2 = proof && !cp_text.empty() && !is_v1_origin(cp_text.substr(0, cp_text.find('\n')));
    if (!proof && !promise)
      return make_error(SPROV_ERR_POLICY, "tlog-entry: %s has neither an inclusion proof nor a promise", p);
    if (rep.bundle_minor >= 2 && (!proof || cp_text.empty()))
      return make_error(SPROV_ERR_POLICY, "tlog-entry: v0.%d bundles need an inclusion proof with a checkpoint (%s)",
                        rep.bundle_minor, p);
    if (rep.bundle_minor == 1 && !promise)
      return make_error(SPROV_ERR_POLICY, "tlog-entry: v0.1 bundles need a signed entry timestamp (%s)", p);

    // Signed entry timestamp (Rekor v1).
    if (promise) {
      auto set = get_base64(*promise, "signedEntryTimestamp", (path + ".inclusionPromise").c_str());
      if (!set) return fail(SPROV_ERR_BUNDLE, "bundle-parse", set.error());
      auto it = get_int64(e, "integratedTime", p);
      if (!it) return fail(SPROV_ERR_BUNDLE, "bundle-parse", it.error());
      if (it.value() < log->valid_from || it.value() > log->valid_to)
        return make_error(SPROV_ERR_POLICY, "set: integratedTime %lld is outside the validity window of log %s",
                          (long long)it.value(), log->base_url.c_str());
      Json payload = Json::object();
      payload["body"] = base64_encode(body_raw.value());
      payload["integratedTime"] = it.value();
      payload["logID"] = hex_encode(log_id.value());
      payload["logIndex"] = log_index.value();
      std::string canon = canonical_json(payload);
      auto st = log->key.type() == KeyType::kEd25519 ? log->key.verify(canon, set.value())
                                                     : log->key.verify_prehashed_sha256(sha256(canon), set.value());
      if (!st)
        return make_error(SPROV_ERR_SIGNATURE, "set: signed entry timestamp of logIndex %lld (integratedTime %lld) "
                          "does not verify with log %s: %s", (long long)log_index.value(), (long long)it.value(),
                          log->base_url.c_str(), st.error().message.c_str());
      have_set_time = true;
      set_time = it.value();
      rep.checks.push_back("set");
    }

    if (proof) {
      std::string pp = path + ".inclusionProof";
      auto pidx = get_int64(*proof, "logIndex", pp.c_str());
      auto psize = get_int64(*proof, "treeSize", pp.c_str());
      auto proot = get_base64(*proof, "rootHash", pp.c_str());
      auto phashes = get_field(*proof, "hashes", pp.c_str(), Json::value_t::array);
      if (!pidx) return fail(SPROV_ERR_BUNDLE, "bundle-parse", pidx.error());
      if (!psize) return fail(SPROV_ERR_BUNDLE, "bundle-parse", psize.error());
      if (!proot) return fail(SPROV_ERR_BUNDLE, "bundle-parse", proot.error());
      if (!phashes) return fail(SPROV_ERR_BUNDLE, "bundle-parse", phashes.error());
      if (pidx.value() < 0 || psize.value() < 0)
        return make_error(SPROV_ERR_BUNDLE, "log-index: %s has a negative logIndex or treeSize", pp.c_str());
      auto root_hash = to_hash(proot.value(), "inclusionProof.rootHash");
      if (!root_hash) return fail(SPROV_ERR_PROOF, "inclusion-proof", root_hash.error());
      if (phashes.value()->size() > kMaxProofHashes)
        return make_error(SPROV_ERR_LIMIT, "inclusion-proof: %zu hashes exceed %zu", phashes.value()->size(),
                          kMaxProofHashes);
      std::vector<Hash> hashes;
      for (const auto& h : *phashes.value()) {
        auto hb = h.is_string() ? base64_decode(h.get<std::string>(), B64Alphabet::kStandard, "proof hash")
                                : Result<Bytes>(make_error(SPROV_ERR_JSON, "proof hash is not a string"));
        if (!hb) return fail(SPROV_ERR_PROOF, "inclusion-proof", hb.error());
        auto hh = to_hash(hb.value(), "proof hash");
        if (!hh) return fail(SPROV_ERR_PROOF, "inclusion-proof", hh.error());
        hashes.push_back(hh.value());
      }
      Hash leaf = leaf_hash(body_raw.value().data(), body_raw.value().size());
      if (cp_text.empty() && rep.bundle_minor >= 2)
        return make_error(SPROV_ERR_POLICY, "checkpoint: %s has no checkpoint", pp.c_str());
      NoteVerifier nv = make_note_verifier(log->host, log->key);
      if (v2) {
        // Rekor v2: the checkpoint first, then inclusion against its size and root.
        auto vc = verify_checkpoint(cp_text, nv, log->host);
        if (!vc) return fail(SPROV_ERR_CHECKPOINT, "checkpoint-signature", vc.error());
        rep.checks.push_back("checkpoint-signature");
        const auto& cp = vc.value().checkpoint;
        if (cp.size != static_cast<uint64_t>(psize.value()) || cp.root != root_hash.value())
          return make_error(SPROV_ERR_CHECKPOINT, "checkpoint-root: checkpoint (size %llu, root %s) != proof (size %lld, root %s)",
                            (unsigned long long)cp.size, hex_encode(cp.root).c_str(), (long long)psize.value(),
                            hex_encode(root_hash.value()).c_str());
        auto st = verify_inclusion(static_cast<uint64_t>(pidx.value()), cp.size, leaf, hashes, cp.root);
        if (!st) return make_error(SPROV_ERR_PROOF, "inclusion-proof: leaf %s at index %lld: %s", hex_encode(leaf).c_str(),
                                   (long long)pidx.value(), st.error().message.c_str());
        rep.checks.push_back("inclusion-proof");
      } else {
        auto st = verify_inclusion(static_cast<uint64_t>(pidx.value()), static_cast<uint64_t>(psize.value()), leaf,
                                   hashes, root_hash.value());
        if (!st) return make_error(SPROV_ERR_PROOF, "inclusion-proof: leaf %s at index %lld of size %lld: %s",
                                   hex_encode(leaf).c_str(), (long long)pidx.value(), (long long)psize.value(),
                                   st.error().message.c_str());
        rep.checks.push_back("inclusion-proof");
        if (!cp_text.empty()) {
          auto vc = verify_checkpoint(cp_text, nv, "");
          if (!vc) return fail(SPROV_ERR_CHECKPOINT, "checkpoint-signature", vc.error());
          const auto& cp = vc.value().checkpoint;
          if (cp.origin != log->host && cp.origin.rfind(log->host + " - ", 0) != 0)
            return make_error(SPROV_ERR_CHECKPOINT, "checkpoint-origin: '%s' is not an origin of log %s",
                              cp.origin.substr(0, 100).c_str(), log->host.c_str());
          rep.checks.push_back("checkpoint-signature");
          if (cp.size != static_cast<uint64_t>(psize.value()) || cp.root != root_hash.value())
            return make_error(SPROV_ERR_CHECKPOINT, "checkpoint-root: checkpoint (size %llu, root %s) != proof (size %lld, root %s)",
                              (unsigned long long)cp.size, hex_encode(cp.root).c_str(), (long long)psize.value(),
                              hex_encode(root_hash.value()).c_str());
          rep.checks.push_back("checkpoint-root");
        }
      }
    }
    auto st = check_body(body.value(), kind.value(), version.value(), c, m);
    if (!st) return st.error();
    rep.checks.push_back("entry-body");
    ++verified_logs;
  }
  if (verified_logs == 0)
    return make_error(SPROV_ERR_POLICY, "tlog-threshold: no entry is from a log in the trusted root (logIds: %s)",
                      skipped.c_str());
  rep.checks.push_back("tlog-threshold");

  // Certificate validity at the log's integration time (SET-backed only).
  if (have_set_time) {
    if (set_time < m.cert.not_before || set_time > m.cert.not_after)
      return make_error(SPROV_ERR_POLICY, "certificate-validity: integratedTime %lld is outside the certificate's "
                        "validity [%lld, %lld]", (long long)set_time, (long long)m.cert.not_before,
                        (long long)m.cert.not_after);
    rep.checks.push_back("certificate-validity");
  } else {
    rep.notes.push_back("no signed entry timestamp: certificate validity at signing time is not checked (RFC 3161 "
                        "timestamps are not verified)");
  }

  // The signature over the content.
  if (c.dsse) {
    auto vr = verify_envelope(c.env, {m.key}, 1, {kInTotoPayloadType});
    if (!vr) return fail(vr.error().code, "dsse-signature", vr.error());
    rep.checks.push_back("dsse-signature");
    if (opts.artifact_digest) {
      auto st = check_statement_subject(c.env.payload, *opts.artifact_digest);
      if (!st) return fail(st.error().code, "artifact-digest", st.error());
      rep.checks.push_back("artifact-digest");
    } else {
      rep.notes.push_back("no artifact given: the in-toto subject digest is not compared");
    }
  } else {
    if (opts.artifact_digest && *opts.artifact_digest != c.msg_digest)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "artifact-digest: artifact sha256:%s != bundle messageDigest sha256:%s",
                        hex_encode(*opts.artifact_digest).c_str(), hex_encode(c.msg_digest).c_str());
    auto st = m.key.verify_prehashed_sha256(c.msg_digest, c.msg_sig);
    if (!st) return fail(SPROV_ERR_SIGNATURE, "message-signature", st.error());
    rep.checks.push_back("message-signature");
    if (opts.artifact_digest) rep.checks.push_back("artifact-digest");
    else rep.notes.push_back("no artifact given: the signature was checked over the bundle's messageDigest only");
  }
  rep.notes.push_back("certificate chain, SCTs and identity policy are not verified");
  return rep;
}

}  // namespace stackprov::evidence
