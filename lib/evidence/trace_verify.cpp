// SPDX-License-Identifier: Apache-2.0
// trace-verify: artifact digest -> in-toto subject -> DSSE threshold -> tlog inclusion under a trusted checkpoint.
#include "evidence/trace_verify.hpp"

#include "evidence/dsse.hpp"
#include "evidence/merkle.hpp"
#include "evidence/tlog.hpp"

namespace stackprov::evidence {

namespace {
Error fail(int code, const char* check, const Error& inner) {
  return make_error(code, "%s: %s", check, inner.message.c_str());
}
}  // namespace

Status verify_tlog_proof_with_key(std::string_view proof_text, std::string_view entry, const PublicKey& key,
                                  const std::string& origin) {
  auto p = parse_tlog_proof(proof_text);
  if (!p) return fail(p.error().code, "proof-format", p.error());
  auto cp = verify_checkpoint(p.value().checkpoint, make_note_verifier(origin, key), origin);
  if (!cp) return fail(SPROV_ERR_CHECKPOINT, "checkpoint-signature", cp.error());
  Hash leaf = leaf_hash(entry);
  auto st = verify_inclusion(p.value().index, cp.value().checkpoint.size, leaf, p.value().hashes,
                             cp.value().checkpoint.root);
  if (!st) return fail(SPROV_ERR_PROOF, "inclusion-proof", st.error());
  return {};
}

Result<std::string> verify_tlog_proof(std::string_view proof_text, std::string_view entry, const TrustedRoot& root) {
  auto p = parse_tlog_proof(proof_text);
  if (!p) return fail(p.error().code, "proof-format", p.error());
  auto note = parse_note(p.value().checkpoint);
  if (!note) return fail(SPROV_ERR_CHECKPOINT, "checkpoint-signature", note.error());
  auto text = parse_checkpoint_text(note.value().text);
  if (!text) return fail(SPROV_ERR_CHECKPOINT, "checkpoint-format", text.error());
  const std::string& origin = text.value().origin;
  std::string tried;
  for (const auto& t : root.tlogs) {
    for (const std::string& name : {t.name, t.host}) {
      if (name != origin) continue;
      auto st = verify_tlog_proof_with_key(proof_text, entry, t.key, origin);
      if (!st) return st.error();
      return t.base_url;
    }
    tried += (tried.empty() ? "" : ", ") + t.name;
  }
  return make_error(SPROV_ERR_POLICY, "trusted-log: checkpoint origin '%s' is not a log of the trusted root [%s]",
                    origin.substr(0, 100).c_str(), tried.c_str());
}

std::string format_consistency_proof(uint64_t old_size, uint64_t new_size, const std::vector<Hash>& proof) {
  std::string out = "c2sp.org/stackprov-consistency@v1\nold " + std::to_string(old_size) + "\nnew " +
                    std::to_string(new_size) + "\n";
  for (const auto& h : proof) out += base64_encode(h) + "\n";
  return out;
}

Result<ConsistencyProof> parse_consistency_proof(std::string_view text) {
  if (text.size() > 64 * 1024) return make_error(SPROV_ERR_LIMIT, "consistency proof of %zu bytes is too large", text.size());
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return make_error(SPROV_ERR_TRUNCATED, "consistency proof does not end with a newline");
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  if (lines.size() < 3 || lines[0] != "c2sp.org/stackprov-consistency@v1" || lines[1].substr(0, 4) != "old " ||
      lines[2].substr(0, 4) != "new ")
    return make_error(SPROV_ERR_PROOF, "not a stackprov consistency proof (header, 'old N', 'new N')");
  ConsistencyProof p;
  auto o = parse_u64(lines[1].substr(4), "old size");
  if (!o) return o.error();
  auto n = parse_u64(lines[2].substr(4), "new size");
  if (!n) return n.error();
  p.old_size = o.value();
  p.new_size = n.value();
  if (lines.size() - 3 > kMaxProofHashes) return make_error(SPROV_ERR_LIMIT, "consistency proof has too many hashes");
  for (size_t i = 3; i < lines.size(); ++i) {
    auto b = base64_decode(lines[i], B64Alphabet::kStandard, "consistency hash");
    if (!b) return b.error();
    auto h = to_hash(b.value(), "consistency hash");
    if (!h) return h.error();
    p.hashes.push_back(h.value());
  }
  return p;
}

Status verify_consistency_notes(std::string_view old_note, std::string_view new_note, std::string_view proof_text,
                                const NoteVerifier& v) {
  auto a = verify_checkpoint(old_note, v, v.name);
  if (!a) return fail(SPROV_ERR_CHECKPOINT, "old-checkpoint", a.error());
  auto b = verify_checkpoint(new_note, v, v.name);
  if (!b) return fail(SPROV_ERR_CHECKPOINT, "new-checkpoint", b.error());
  auto p = parse_consistency_proof(proof_text);
  if (!p) return fail(p.error().code, "proof-format", p.error());
  const auto& ca = a.value().checkpoint;
  const auto& cb = b.value().checkpoint;
  if (p.value().old_size != ca.size || p.value().new_size != cb.size)
    return make_error(SPROV_ERR_PROOF, "consistency-proof: proof is for %llu -> %llu, checkpoints are %llu -> %llu",
                      (unsigned long long)p.value().old_size, (unsigned long long)p.value().new_size,
                      (unsigned long long)ca.size, (unsigned long long)cb.size);
  auto st = verify_consistency(ca.size, cb.size, ca.root, cb.root, p.value().hashes);
  if (!st) return fail(SPROV_ERR_PROOF, "consistency-proof", st.error());
  return {};
}

Result<std::vector<std::string>> trace_verify(const TraceVerifyInput& in) {
  std::vector<std::string> rep;
  if (!in.check_dsse && !in.check_log)
    return make_error(SPROV_ERR_INVALID_ARG, "nothing to verify: ask for the DSSE check, the log check or both");
  if (!in.artifact_path.empty()) {
    auto h = sha256_file(in.artifact_path);
    if (!h) return fail(h.error().code, "artifact-digest", h.error());
    if (h.value() != in.digest)
      return make_error(SPROV_ERR_DIGEST_MISMATCH, "artifact-digest: '%s' has %s, expected %s", in.artifact_path.c_str(),
                        digest_string(h.value()).c_str(), digest_string(in.digest).c_str());
    rep.push_back("ok artifact-digest " + digest_string(in.digest));
  }
  if (in.envelope_path.empty()) return make_error(SPROV_ERR_INVALID_ARG, "envelope: no DSSE envelope file given");
  auto raw = read_file(in.envelope_path);
  if (!raw) return fail(raw.error().code, "envelope", raw.error());
  auto env = parse_envelope(as_sv(raw.value()));
  if (!env) return make_error(env.error().code, "envelope: '%s': %s", in.envelope_path.c_str(), env.error().message.c_str());
  if (in.check_dsse) {
    auto vr = verify_envelope(env.value(), in.keys, in.threshold, {kInTotoPayloadType});
    if (!vr) return fail(vr.error().code, "dsse-signature", vr.error());
    rep.push_back("ok dsse-signature " + std::to_string(vr.value().verified_keys.size()) + " distinct key(s), threshold " +
                  std::to_string(in.threshold));
  } else {
    rep.push_back("note dsse-signature not checked");
  }
  // The statement is read only after the signatures verified (DSSE protocol step 5).
  auto st = check_statement_subject(env.value().payload, in.digest);
  if (!st) return fail(st.error().code, "statement-subject", st.error());
  rep.push_back("ok statement-subject " + digest_string(in.digest));

  if (in.check_log) {
    std::string proof_text;
    TrustedRoot root;
    // The trusted root is the caller's, never the verified log's own trusted_root.json: whoever
    // writes the log directory would otherwise decide what verifies (doc/hardening.md, attack 6).
    const std::string& root_path = in.trusted_root_path;
    if (root_path.empty())
      return make_error(SPROV_ERR_INVALID_ARG,
                        "trusted-root: no trusted root given (trusted_root_path): the log check needs the "
                        "log's pinned trusted_root.json; a log directory never vouches for itself");
    auto rt = read_file(root_path);
    if (!rt) return fail(rt.error().code, "trusted-root", rt.error());
    auto r = parse_trusted_root(as_sv(rt.value()));
    if (!r) return fail(r.error().code, "trusted-root", r.error());
    root = std::move(r.value());
    if (!in.proof_path.empty()) {
      auto pf = read_file(in.proof_path);
      if (!pf) return fail(pf.error().code, "proof-format", pf.error());
      proof_text = std::string(as_sv(pf.value()));
    } else if (!in.log_dir.empty()) {
      auto log = Tlog::open(in.log_dir);
      if (!log) return fail(log.error().code, "log", log.error());
      auto idx = log.value().find(as_sv(raw.value()));
      if (!idx) return fail(idx.error().code, "log", idx.error());
      if (!idx.value())
        return make_error(SPROV_ERR_NOT_FOUND, "log-entry: envelope '%s' is not an entry of log '%s' (%llu entries)",
                          in.envelope_path.c_str(), in.log_dir.c_str(), (unsigned long long)log.value().size());
      auto p = log.value().prove(*idx.value());
      if (!p) return fail(p.error().code, "log-proof", p.error());
      proof_text = format_tlog_proof(p.value());
    } else {
      return make_error(SPROV_ERR_INVALID_ARG, "log-entry: give a log directory or a tlog-proof file");
    }
    auto which = verify_tlog_proof(proof_text, as_sv(raw.value()), root);
    if (!which) return which.error();
    auto pp = parse_tlog_proof(proof_text);
    rep.push_back("ok checkpoint-signature " + which.value());
    rep.push_back("ok inclusion-proof index " + std::to_string(pp.value().index));
  }
  return rep;
}

}  // namespace stackprov::evidence
