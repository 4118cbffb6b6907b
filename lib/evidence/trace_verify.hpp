// SPDX-License-Identifier: Apache-2.0
// Offline verification of an artifact's DSSE envelope and of the envelope's inclusion in a transparency log.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evidence/note.hpp"
#include "evidence/sigstore.hpp"

namespace stackprov::evidence {

/// Verifies a tlog-proof@v1 for `entry` against whichever log of `root` signed its
/// checkpoint (key name = the log's baseUrl without scheme, or its host). Returns the log's name.
Result<std::string> verify_tlog_proof(std::string_view proof_text, std::string_view entry, const TrustedRoot& root);

/// Verifies a tlog-proof@v1 with one known log key and origin (also the note key name).
Status verify_tlog_proof_with_key(std::string_view proof_text, std::string_view entry, const PublicKey& key,
                                  const std::string& origin);

/// Consistency: new_note extends old_note; proof text from format_consistency_proof.
Status verify_consistency_notes(std::string_view old_note, std::string_view new_note, std::string_view proof_text,
                                const NoteVerifier& v);
std::string format_consistency_proof(uint64_t old_size, uint64_t new_size, const std::vector<Hash>& proof);
struct ConsistencyProof {
  uint64_t old_size = 0, new_size = 0;
  std::vector<Hash> hashes;
};
Result<ConsistencyProof> parse_consistency_proof(std::string_view text);

struct TraceVerifyInput {
  Hash digest{};
  std::string artifact_path;  // optional
  std::string envelope_path;
  bool check_dsse = false;
  bool check_log = false;
  std::vector<PublicKey> keys;
  size_t threshold = 1;
  std::string trusted_root_path;  // optional when log_dir is given
  std::string log_dir;
  std::string proof_path;
};

/// Runs the requested checks in order (artifact digest, statement subject, DSSE
/// signatures, log inclusion) and returns one "ok ..." / "note ..." line per step.
/// Errors start with the failed check's name, like verify_sigstore_bundle.
Result<std::vector<std::string>> trace_verify(const TraceVerifyInput& in);

}  // namespace stackprov::evidence
