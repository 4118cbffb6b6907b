// SPDX-License-Identifier: Apache-2.0
// RFC 6962 / RFC 9162 Merkle trees: hashing, inclusion and consistency proofs (build and verify).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "evidence/encoding.hpp"

namespace stackprov::evidence {

/// SHA256(0x00 || entry) (RFC 9162 §2.1.1).
Hash leaf_hash(const uint8_t* data, size_t len);
inline Hash leaf_hash(std::string_view s) {
  return leaf_hash(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
/// SHA256(0x01 || left || right).
Hash node_hash(const Hash& left, const Hash& right);
/// MTH of the empty tree: SHA256("").
Hash empty_root();

/// Longest proof we accept (a tree of 2^64 leaves needs 64 hashes).
inline constexpr size_t kMaxProofHashes = 64;

/// RFC 9162 §2.1.3.2: verifies that `leaf` is at `index` (0-based) of a tree of `size`
/// with root `root`. Errors are SPROV_ERR_PROOF with the recomputed and expected roots.
Status verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf,
                        const std::vector<Hash>& proof, const Hash& root);
/// Root recomputed from an inclusion proof (no comparison).
Result<Hash> root_from_inclusion(uint64_t index, uint64_t size, const Hash& leaf,
                                 const std::vector<Hash>& proof);

/// RFC 9162 §2.1.4.2: verifies that the tree (size2, root2) extends (size1, root1).
Status verify_consistency(uint64_t size1, uint64_t size2, const Hash& root1, const Hash& root2,
                          const std::vector<Hash>& proof);

/// Source of the hash of a perfect, aligned subtree: `level` h covers leaves
/// [index·2^h, (index+1)·2^h). Must only be asked for subtrees inside the tree.
using SubtreeHashFn = std::function<Result<Hash>(unsigned level, uint64_t index)>;

/// MTH(D[lo:hi]) from perfect subtrees (RFC 6962 §2.1 split at the largest power of two < n).
Result<Hash> range_hash(const SubtreeHashFn& sub, uint64_t lo, uint64_t hi);
/// PATH(index, D[0:size]) (RFC 6962 §2.1.1), leaf to root.
Result<std::vector<Hash>> inclusion_proof(const SubtreeHashFn& sub, uint64_t index, uint64_t size);
/// PROOF(size1, D[0:size2]) (RFC 6962 §2.1.2).
Result<std::vector<Hash>> consistency_proof(const SubtreeHashFn& sub, uint64_t size1, uint64_t size2);

/// An in-memory tree over leaf hashes (tests, small logs). Levels are cached.
class MemoryTree {
 public:
  void append(const Hash& leaf);
  uint64_t size() const { return levels_.empty() ? 0 : levels_[0].size(); }
  Hash root() const;
  SubtreeHashFn subtree_fn() const;

 private:
  std::vector<std::vector<Hash>> levels_;  // levels_[h][i]: perfect subtree hashes
};

}  // namespace stackprov::evidence
