// SPDX-License-Identifier: Apache-2.0
// C2SP signed notes and tlog checkpoints (sign, parse, verify) and the C2SP tlog-proof@v1 container.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "evidence/encoding.hpp"
#include "evidence/keys.hpp"

namespace stackprov::evidence {

inline constexpr size_t kMaxNoteBytes = 1u << 20;
inline constexpr size_t kMaxNoteSignatures = 100;

using NoteKeyId = std::array<uint8_t, 4>;

struct NoteSignature {
  std::string name;
  NoteKeyId key_id{};
  Bytes sig;
};

/// A parsed signed note: `text` is the signed part (ends with '\n').
struct Note {
  std::string text;
  std::vector<NoteSignature> signatures;
};

/// Splits a note at its last blank line and parses every "— name b64" line.
Result<Note> parse_note(std::string_view data);

/// A key that may have signed a note.
struct NoteVerifier {
  std::string name;
  NoteKeyId key_id{};
  PublicKey key;
};

/// Key id of a verifier: ECDSA = SHA256(DER SPKI)[:4] (Rekor v1);
/// Ed25519 = SHA256(name || 0x0A || 0x01 || pub32)[:4] (C2SP signed-note).
NoteKeyId note_key_id(const std::string& name, const PublicKey& key);
/// Full 32-byte hash that the key id is cut from (Rekor's logId for both key types).
Hash note_key_hash(const std::string& name, const PublicKey& key);
NoteVerifier make_note_verifier(const std::string& name, const PublicKey& key);

/// Verifies the note against `v`: signatures by other (name, key id) pairs are
/// ignored; a signature by `v` that fails rejects the note; at least one must verify.
Status verify_note(const Note& note, const NoteVerifier& v);

/// Appends a signature line for `text` (which must end in '\n') signed by `key` under `name`.
Result<std::string> sign_note(const std::string& text, const std::string& name, const SigningKey& key);

/// The body of a C2SP checkpoint.
struct Checkpoint {
  std::string origin;
  uint64_t size = 0;
  Hash root{};
  std::vector<std::string> extensions;  // extension lines, without '\n'
};
Result<Checkpoint> parse_checkpoint_text(std::string_view text);
std::string format_checkpoint_text(const Checkpoint& cp);

/// A checkpoint whose note signature has been verified.
struct VerifiedCheckpoint {
  Checkpoint checkpoint;
  std::string note;  // the whole signed note, verbatim
};
/// Parses a signed checkpoint and verifies it with `v`; the origin must equal `origin` unless empty.
Result<VerifiedCheckpoint> verify_checkpoint(std::string_view note_data, const NoteVerifier& v,
                                             const std::string& origin);

/// C2SP tlog-proof@v1: an inclusion proof with the checkpoint it is relative to.
struct TlogProof {
  uint64_t index = 0;
  std::vector<Hash> hashes;
  Bytes extra;
  bool has_extra = false;
  std::string checkpoint;  // signed note, verbatim
};
Result<TlogProof> parse_tlog_proof(std::string_view data);
std::string format_tlog_proof(const TlogProof& p);

}  // namespace stackprov::evidence
