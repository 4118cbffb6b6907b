// SPDX-License-Identifier: Apache-2.0
// A local append-only transparency log stored in the C2SP tlog-tiles layout, with signed checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evidence/encoding.hpp"
#include "evidence/keys.hpp"
#include "evidence/merkle.hpp"
#include "evidence/note.hpp"

namespace stackprov::evidence {

inline constexpr unsigned kTileHeight = 8;       // C2SP tlog-tiles: 2^8 hashes per tile
inline constexpr uint64_t kTileWidth = 256;
inline constexpr size_t kMaxEntryBytes = 65535;  // entry bundles use uint16 length prefixes

/// "x001/x234/067" for 1234067 (C2SP tlog-tiles tile index encoding).
std::string tile_index_path(uint64_t n);
/// "tile/<L>/<N>" or "tile/<L>/<N>.p/<W>" (W < 256); level -1 names an entry bundle "tile/entries/...".
std::string tile_path(int level, uint64_t n, uint64_t width);

/// Log metadata kept in DIR/log.json.
struct TlogInfo {
  std::string origin;  // also the checkpoint key name
  PublicKey key;
};

/// The log at DIR. Appends take an exclusive flock on DIR/lock; readers need no lock
/// (every file is replaced atomically and fsynced; DIR/state, the commit point, is written last).
/// Not thread-safe: use one Tlog object per thread.
class Tlog {
 public:
  /// Creates DIR (if needed) and an empty log signed by `key` under `origin`.
  static Result<Tlog> init(const std::string& dir, const std::string& origin, const SigningKey& key);
  static Result<Tlog> open(const std::string& dir);

  const TlogInfo& info() const { return info_; }
  const std::string& dir() const { return dir_; }
  /// Committed size and root (DIR/state), possibly ahead of the last signed checkpoint.
  uint64_t size() const { return size_; }
  const Hash& root() const { return root_; }

  /// Appends entries (each 1..65535 bytes) as one crash-safe step; returns the first new index.
  /// With `checkpoint_key`, also signs a checkpoint of the new size under the same lock (its
  /// note into *note when not null): the key is checked against the log's before anything is
  /// written, and the note is signed before the commit, so a wrong key changes nothing.
  Result<uint64_t> append(const std::vector<std::string_view>& entries, const SigningKey* checkpoint_key = nullptr,
                          std::string* note = nullptr);
  /// Signs a checkpoint for the committed size and stores it as DIR/checkpoint.
  Result<std::string> sign_checkpoint(const SigningKey& key);
  /// OK when `key` is the key that signs this log's checkpoints; SPROV_ERR_KEY naming both key ids
  /// (and `key_name`, e.g. its file, when given) otherwise.
  Status check_key(const SigningKey& key, const std::string& key_name = "") const;
  /// The stored checkpoint (verified with the log's key).
  Result<VerifiedCheckpoint> checkpoint() const;

  /// tlog-proof@v1 for `index` against the stored checkpoint.
  Result<TlogProof> prove(uint64_t index);
  /// Writes a tile fragment for `index` into out_dir: the stored checkpoint, a "fragment"
  /// file ("c2sp.org/stackprov-tile-fragment@v1\nindex <i>\n") and, per level, the tile on
  /// the entry's path and the right-edge partial tile -- everything needed to rebuild the
  /// inclusion proof (notes §7). out_dir is itself a (sparse) tlog-tiles tree.
  Status export_fragment(uint64_t index, const std::string& out_dir);
  /// Inclusion proof for `index` in a tree of `size`, computed from the tiles under `dir`.
  static Result<std::vector<Hash>> proof_from_tiles(const std::string& dir, uint64_t index, uint64_t size);
  /// Consistency proof between sizes old_size <= new_size <= size().
  Result<std::vector<Hash>> consistency(uint64_t old_size, uint64_t new_size);
  /// Root of the first `n` leaves, from tiles.
  Result<Hash> root_at(uint64_t n);
  /// Entry `index`, from its entry bundle.
  Result<Bytes> entry(uint64_t index);
  /// First index whose entry equals `data`, scanning entry bundles.
  Result<std::optional<uint64_t>> find(std::string_view data);
  /// Re-derives the committed root from the tiles and checks it and the checkpoint.
  Status fsck();

  NoteVerifier verifier() const { return make_note_verifier(info_.origin, info_.key); }

 private:
  Result<std::vector<Hash>> read_hash_tile(unsigned level, uint64_t n, uint64_t width);
  Result<std::vector<Bytes>> read_entry_bundle(uint64_t n, uint64_t width);
  SubtreeHashFn subtree_fn(uint64_t tree_size);
  Status write_state(uint64_t size, const Hash& root);
  /// sign_checkpoint for size_/root_ while the caller holds DIR/lock.
  Result<std::string> sign_checkpoint_locked(const SigningKey& key);

  std::string dir_;
  TlogInfo info_;
  uint64_t size_ = 0;
  Hash root_{};
  std::map<std::pair<unsigned, uint64_t>, std::vector<Hash>> tile_cache_;  // full tiles only
  mutable std::optional<VerifiedCheckpoint> checkpoint_cache_;  // last verified DIR/checkpoint
};

/// Verifies a tile fragment directory for `entry` against a log key and origin.
Status verify_tile_fragment(const std::string& dir, std::string_view entry, const PublicKey& key,
                            const std::string& origin);

}  // namespace stackprov::evidence
