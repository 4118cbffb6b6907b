// SPDX-License-Identifier: Apache-2.0
// DSSE envelope parsing, signing and verification with distinct-key thresholds; in-toto statements.
#include "evidence/dsse.hpp"

#include <algorithm>

namespace stackprov::evidence {

std::string pae(std::string_view type, std::string_view body) {
  std::string out = "DSSEv1 ";
  out += std::to_string(type.size());
  out += ' ';
  out += type;
  out += ' ';
  out += std::to_string(body.size());
  out += ' ';
  out += body;
  return out;
}

Result<Envelope> envelope_from_json(const Json& j, const char* path) {
  if (!j.is_object()) return make_error(SPROV_ERR_JSON, "%s is not a JSON object", path);
  Envelope env;
  auto pt = get_string(j, "payloadType", path);
  if (!pt) return pt.error();
  env.payload_type = std::move(pt.value());
  auto p = get_string(j, "payload", path);
  if (!p) return p.error();
  auto pb = base64_decode(p.value(), B64Alphabet::kEither, "envelope payload");
  if (!pb) return pb.error();
  env.payload = std::move(pb.value());
  auto sigs = get_field(j, "signatures", path, Json::value_t::array);
  if (!sigs) return sigs.error();
  if (sigs.value()->empty()) return make_error(SPROV_ERR_BUNDLE, "%s.signatures is empty", path);
  if (sigs.value()->size() > kMaxDsseSignatures)
    return make_error(SPROV_ERR_LIMIT, "%s.signatures has %zu entries, more than %zu", path,
                      sigs.value()->size(), kMaxDsseSignatures);
  size_t i = 0;
  for (const auto& s : *sigs.value()) {
    std::string sp = std::string(path) + ".signatures[" + std::to_string(i++) + "]";
    DsseSignature ds;
    auto sig = get_string(s, "sig", sp.c_str());
    if (!sig) return sig.error();
    auto sb = base64_decode(sig.value(), B64Alphabet::kEither, "envelope signature");
    if (!sb) return make_error(SPROV_ERR_BASE64, "%s.sig: %s", sp.c_str(), sb.error().message.c_str());
    if (sb.value().empty()) return make_error(SPROV_ERR_SIGNATURE, "%s.sig is empty", sp.c_str());
    ds.sig = std::move(sb.value());
    if (s.contains("keyid")) {
      auto k = get_string(s, "keyid", sp.c_str());
      if (!k) return k.error();
      ds.keyid = std::move(k.value());
    }
    env.signatures.push_back(std::move(ds));
  }
  return env;
}

Result<Envelope> parse_envelope(std::string_view text) {
  auto j = parse_json(text, "DSSE envelope");
  if (!j) return j.error();
  return envelope_from_json(j.value(), "envelope");
}

std::string serialize_envelope(const Envelope& env) {
  Json j = Json::object();
  j["payload"] = base64_encode(env.payload);
  j["payloadType"] = env.payload_type;
  Json sigs = Json::array();
  for (const auto& s : env.signatures) {
    Json o = Json::object();
    if (!s.keyid.empty()) o["keyid"] = s.keyid;
    o["sig"] = base64_encode(s.sig);
    sigs.push_back(std::move(o));
  }
  j["signatures"] = std::move(sigs);
  return canonical_json(j) + "\n";
}

Result<Envelope> sign_envelope(std::string_view payload_type, std::string_view payload, const SigningKey& key) {
  if (payload_type.empty()) return make_error(SPROV_ERR_INVALID_ARG, "DSSE payloadType is empty");
  auto sig = key.sign(pae(payload_type, payload));
  if (!sig) return sig.error();
  Envelope env;
  env.payload_type = std::string(payload_type);
  env.payload = to_bytes(payload);
  env.signatures.push_back(DsseSignature{key.public_key().key_id_hex(), std::move(sig.value())});
  return env;
}

Result<DsseVerifyResult> verify_envelope(const Envelope& env, const std::vector<PublicKey>& trusted,
                                         size_t threshold, const std::vector<std::string>& supported) {
  if (threshold == 0) return make_error(SPROV_ERR_INVALID_ARG, "DSSE threshold must be at least 1");
  if (trusted.size() < threshold)
    return make_error(SPROV_ERR_POLICY, "DSSE threshold %zu exceeds the %zu trusted keys", threshold,
                      trusted.size());
  if (env.signatures.empty()) return make_error(SPROV_ERR_SIGNATURE, "DSSE envelope has no signatures");
  std::string msg = pae(env.payload_type, as_sv(env.payload));
  DsseVerifyResult res;
  std::string last_err;
  for (size_t k = 0; k < trusted.size(); ++k) {
    for (const auto& s : env.signatures) {
      auto st = trusted[k].verify(msg, s.sig);
      if (st) {
        res.verified_keys.push_back(k);
        break;
      }
      last_err = st.error().message;
    }
  }
  if (res.verified_keys.size() < threshold)
    return make_error(SPROV_ERR_SIGNATURE,
                      "DSSE: %zu distinct trusted key(s) verified, threshold is %zu (payloadType '%s'%s%s)",
                      res.verified_keys.size(), threshold, env.payload_type.substr(0, 80).c_str(),
                      last_err.empty() ? "" : "; last failure: ", last_err.c_str());
  if (env.payload_type.empty())
    return make_error(SPROV_ERR_POLICY, "DSSE payloadType is empty");
  if (!supported.empty() &&
      std::find(supported.begin(), supported.end(), env.payload_type) == supported.end())
    return make_error(SPROV_ERR_POLICY, "DSSE payloadType '%s' is not supported",
                      env.payload_type.substr(0, 80).c_str());
  return res;
}

std::string make_statement(const std::vector<Subject>& subjects, const std::string& predicate_type,
                           const Json& predicate) {
  Json j = Json::object();
  j["_type"] = kStatementType;
  Json subj = Json::array();
  for (const auto& s : subjects) {
    Json d = Json::object();
    d["sha256"] = hex_encode(s.sha256);
    subj.push_back(Json{{"name", s.name}, {"digest", d}});
  }
  j["subject"] = std::move(subj);
  j["predicateType"] = predicate_type;
  j["predicate"] = predicate;
  return canonical_json(j);
}

Status check_statement_subject(const Bytes& payload, const Hash& digest) {
  auto j = parse_json(as_sv(payload), "in-toto statement");
  if (!j) return j.error();
  auto type = get_string(j.value(), "_type", "statement");
  if (!type) return type.error();
  if (type.value() != kStatementType && type.value() != "https://in-toto.io/Statement/v0.1")
    return make_error(SPROV_ERR_BUNDLE, "statement._type '%s' is not an in-toto Statement",
                      type.value().substr(0, 80).c_str());
  auto subj = get_field(j.value(), "subject", "statement", Json::value_t::array);
  if (!subj) return subj.error();
  std::string want = hex_encode(digest);
  std::string seen;
  size_t n = 0;
  for (const auto& s : *subj.value()) {
    if (++n > 10000) return make_error(SPROV_ERR_LIMIT, "statement has more than 10000 subjects");
    if (!s.is_object() || !s.contains("digest") || !s["digest"].is_object()) continue;
    const auto& d = s["digest"];
    if (!d.contains("sha256") || !d["sha256"].is_string()) continue;
    std::string h = d["sha256"].get<std::string>();
    std::string lower = h;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == want) return {};
    if (seen.size() < 200) {
      if (!seen.empty()) seen += ',';
      seen.append(h, 0, 64);
    }
  }
  return make_error(SPROV_ERR_DIGEST_MISMATCH, "no statement subject has sha256 %s (subjects: [%s])",
                    want.c_str(), seen.c_str());
}

}  // namespace stackprov::evidence
