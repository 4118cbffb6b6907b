// SPDX-License-Identifier: Apache-2.0
// Signed-note and checkpoint handling per C2SP signed-note / tlog-checkpoint / tlog-proof.
#include "evidence/note.hpp"

#include "evidence/merkle.hpp"

#include <cstring>

namespace stackprov::evidence {

namespace {

constexpr std::string_view kEmDashSp = "\xE2\x80\x94 ";  // "— " (U+2014, space)

std::string clip(std::string_view s, size_t n = 40) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > n) out += "...";
  return out;
}

bool valid_line_chars(std::string_view s) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n') return false;
  }
  return true;
}

}  // namespace

Result<Note> parse_note(std::string_view data) {
  if (data.size() > kMaxNoteBytes)
    return make_error(SPROV_ERR_LIMIT, "note of %zu bytes exceeds %zu", data.size(), kMaxNoteBytes);
  if (data.empty() || data.back() != '\n')
    return make_error(SPROV_ERR_CHECKPOINT, "note does not end with a newline");
  if (!valid_line_chars(data))
    return make_error(SPROV_ERR_CHECKPOINT, "note contains control characters");
  auto split = data.rfind("\n\n");
  if (split == std::string_view::npos)
    return make_error(SPROV_ERR_CHECKPOINT, "note has no blank line before its signatures");
  Note note;
  note.text = std::string(data.substr(0, split + 1));
  std::string_view sigs = data.substr(split + 2);
  if (sigs.empty()) return make_error(SPROV_ERR_CHECKPOINT, "note has no signature lines");
  while (!sigs.empty()) {
    auto nl = sigs.find('\n');
    std::string_view line = sigs.substr(0, nl);
    sigs.remove_prefix(nl + 1);
    if (line.substr(0, kEmDashSp.size()) != kEmDashSp)
      return make_error(SPROV_ERR_CHECKPOINT, "note signature line '%s' does not start with an em dash",
                        clip(line).c_str());
    line.remove_prefix(kEmDashSp.size());
    auto sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0)
      return make_error(SPROV_ERR_CHECKPOINT, "note signature line '%s' has no key name",
                        clip(line).c_str());
    NoteSignature s;
    s.name = std::string(line.substr(0, sp));
    auto raw = base64_decode(line.substr(sp + 1), B64Alphabet::kStandard, "note signature");
    if (!raw) return raw.error();
    if (raw.value().size() < 5)
      return make_error(SPROV_ERR_CHECKPOINT, "note signature by '%s' is %zu bytes, too short",
                        clip(s.name).c_str(), raw.value().size());
    memcpy(s.key_id.data(), raw.value().data(), 4);
    s.sig.assign(raw.value().begin() + 4, raw.value().end());
    if (note.signatures.size() >= kMaxNoteSignatures)
      return make_error(SPROV_ERR_LIMIT, "note has more than %zu signatures", kMaxNoteSignatures);
    note.signatures.push_back(std::move(s));
  }
  return note;
}

Hash note_key_hash(const std::string& name, const PublicKey& key) {
  if (key.type() == KeyType::kEd25519) {
    std::string buf = name;
    buf += '\n';
    buf += '\x01';
    buf.append(reinterpret_cast<const char*>(key.raw_ed25519().data()), key.raw_ed25519().size());
    return sha256(buf);
  }
  return key.spki_sha256();
}

NoteKeyId note_key_id(const std::string& name, const PublicKey& key) {
  Hash h = note_key_hash(name, key);
  NoteKeyId id;
  memcpy(id.data(), h.data(), 4);
  return id;
}

NoteVerifier make_note_verifier(const std::string& name, const PublicKey& key) {
  return NoteVerifier{name, note_key_id(name, key), key};
}

Status verify_note(const Note& note, const NoteVerifier& v) {
  size_t ok = 0;
  for (const auto& s : note.signatures) {
    if (s.name != v.name || s.key_id != v.key_id) continue;
    auto st = v.key.verify(note.text, s.sig);
    if (!st)
      return make_error(SPROV_ERR_CHECKPOINT, "signature by '%s' (key id %s) does not verify: %s",
                        clip(v.name).c_str(), hex_encode(v.key_id.data(), 4).c_str(),
                        st.error().message.c_str());
    ++ok;
  }
  if (ok == 0) {
    std::string seen;
    for (const auto& s : note.signatures) {
      if (!seen.empty()) seen += ", ";
      seen += clip(s.name) + "/" + hex_encode(s.key_id.data(), 4);
    }
    return make_error(SPROV_ERR_CHECKPOINT, "no signature by '%s' (key id %s); note is signed by [%s]",
                      clip(v.name).c_str(), hex_encode(v.key_id.data(), 4).c_str(), seen.c_str());
  }
  return {};
}

Result<std::string> sign_note(const std::string& text, const std::string& name, const SigningKey& key) {
  if (text.empty() || text.back() != '\n' || text.find("\n\n") != std::string::npos)
    return make_error(SPROV_ERR_INVALID_ARG, "note text must be non-empty lines ending in a newline");
  if (name.empty() || name.find(' ') != std::string::npos || name.find('+') != std::string::npos ||
      name.find('\n') != std::string::npos)
    return make_error(SPROV_ERR_INVALID_ARG, "note key name '%s' is empty or has a space, '+' or newline",
                      clip(name).c_str());
  auto sig = key.sign(text);
  if (!sig) return sig.error();
  NoteKeyId id = note_key_id(name, key.public_key());
  Bytes blob(id.begin(), id.end());
  blob.insert(blob.end(), sig.value().begin(), sig.value().end());
  return text + "\n" + std::string(kEmDashSp) + name + " " + base64_encode(blob) + "\n";
}

Result<Checkpoint> parse_checkpoint_text(std::string_view text) {
  Checkpoint cp;
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos)
      return make_error(SPROV_ERR_CHECKPOINT, "checkpoint text does not end with a newline");
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
    if (lines.size() > 1000) return make_error(SPROV_ERR_LIMIT, "checkpoint has more than 1000 lines");
  }
  if (lines.size() < 3)
    return make_error(SPROV_ERR_CHECKPOINT, "checkpoint has %zu lines, needs origin, size and root",
                      lines.size());
  if (lines[0].empty()) return make_error(SPROV_ERR_CHECKPOINT, "checkpoint origin is empty");
  cp.origin = std::string(lines[0]);
  auto size = parse_u64(lines[1], "checkpoint tree size");
  if (!size) return make_error(SPROV_ERR_CHECKPOINT, "%s", size.error().message.c_str());
  cp.size = size.value();
  auto root = base64_decode(lines[2], B64Alphabet::kStandard, "checkpoint root hash");
  if (!root) return make_error(SPROV_ERR_CHECKPOINT, "%s", root.error().message.c_str());
  auto h = to_hash(root.value(), "checkpoint root hash");
  if (!h) return make_error(SPROV_ERR_CHECKPOINT, "%s", h.error().message.c_str());
  cp.root = h.value();
  for (size_t i = 3; i < lines.size(); ++i) {
    if (lines[i].empty()) return make_error(SPROV_ERR_CHECKPOINT, "checkpoint has an empty extension line");
    cp.extensions.emplace_back(lines[i]);
  }
  return cp;
}

std::string format_checkpoint_text(const Checkpoint& cp) {
  std::string out = cp.origin + "\n" + std::to_string(cp.size) + "\n" + base64_encode(cp.root) + "\n";
  for (const auto& e : cp.extensions) out += e + "\n";
  return out;
}

Result<VerifiedCheckpoint> verify_checkpoint(std::string_view note_data, const NoteVerifier& v,
                                             const std::string& origin) {
  auto note = parse_note(note_data);
  if (!note) return note.error();
  auto st = verify_note(note.value(), v);
  if (!st) return st.error();
  auto cp = parse_checkpoint_text(note.value().text);
  if (!cp) return cp.error();
  if (!origin.empty() && cp.value().origin != origin)
    return make_error(SPROV_ERR_CHECKPOINT, "checkpoint origin '%s' != expected '%s'",
                      clip(cp.value().origin, 80).c_str(), clip(origin, 80).c_str());
  return VerifiedCheckpoint{std::move(cp.value()), std::string(note_data)};
}

Result<TlogProof> parse_tlog_proof(std::string_view data) {
  if (data.size() > kMaxNoteBytes * 2)
    return make_error(SPROV_ERR_LIMIT, "proof of %zu bytes is too large", data.size());
  constexpr std::string_view kHeader = "c2sp.org/tlog-proof@v1\n";
  if (data.substr(0, kHeader.size()) != kHeader)
    return make_error(SPROV_ERR_PROOF, "proof does not start with 'c2sp.org/tlog-proof@v1'");
  data.remove_prefix(kHeader.size());
  auto next_line = [&](std::string_view& line) -> bool {
    auto nl = data.find('\n');
    if (nl == std::string_view::npos) return false;
    line = data.substr(0, nl);
    data.remove_prefix(nl + 1);
    return true;
  };
  TlogProof p;
  std::string_view line;
  if (!next_line(line)) return make_error(SPROV_ERR_TRUNCATED, "proof ends before its index line");
  if (line.substr(0, 6) == "extra ") {
    auto ex = base64_decode(line.substr(6), B64Alphabet::kStandard, "proof extra data");
    if (!ex) return ex.error();
    p.extra = std::move(ex.value());
    p.has_extra = true;
    if (!next_line(line)) return make_error(SPROV_ERR_TRUNCATED, "proof ends before its index line");
  }
  if (line.substr(0, 6) != "index ")
    return make_error(SPROV_ERR_PROOF, "expected 'index <n>' line, got '%s'", clip(line).c_str());
  auto idx = parse_u64(line.substr(6), "proof index");
  if (!idx) return make_error(SPROV_ERR_PROOF, "%s", idx.error().message.c_str());
  p.index = idx.value();
  for (;;) {
    if (!next_line(line)) return make_error(SPROV_ERR_TRUNCATED, "proof ends before its checkpoint");
    if (line.empty()) break;
    if (p.hashes.size() >= kMaxProofHashes)
      return make_error(SPROV_ERR_LIMIT, "proof has more than %zu hashes", kMaxProofHashes);
    auto h = base64_decode(line, B64Alphabet::kStandard, "proof hash");
    if (!h) return h.error();
    auto hh = to_hash(h.value(), "proof hash");
    if (!hh) return make_error(SPROV_ERR_PROOF, "proof hash %zu: %s", p.hashes.size(), hh.error().message.c_str());
    p.hashes.push_back(hh.value());
  }
  if (data.empty()) return make_error(SPROV_ERR_TRUNCATED, "proof has no checkpoint");
  p.checkpoint = std::string(data);
  return p;
}

std::string format_tlog_proof(const TlogProof& p) {
  std::string out = "c2sp.org/tlog-proof@v1\n";
  if (p.has_extra) out += "extra " + base64_encode(p.extra) + "\n";
  out += "index " + std::to_string(p.index) + "\n";
  for (const auto& h : p.hashes) out += base64_encode(h) + "\n";
  out += "\n";
  out += p.checkpoint;
  return out;
}

}  // namespace stackprov::evidence
