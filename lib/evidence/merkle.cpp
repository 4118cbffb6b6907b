// SPDX-License-Identifier: Apache-2.0
// Merkle tree hashing and proofs, following RFC 9162 §2.1 pseudo-code step by step.
#include "evidence/merkle.hpp"

#include <mbedtls/sha256.h>

#include <bit>
#include <cstring>

namespace stackprov::evidence {

Hash leaf_hash(const uint8_t* data, size_t len) {
  mbedtls_sha256_context c;
  mbedtls_sha256_init(&c);
  mbedtls_sha256_starts_ret(&c, 0);
  const uint8_t zero = 0;
  mbedtls_sha256_update_ret(&c, &zero, 1);
  mbedtls_sha256_update_ret(&c, data, len);
  Hash h;
  mbedtls_sha256_finish_ret(&c, h.data());
  mbedtls_sha256_free(&c);
  return h;
}

Hash node_hash(const Hash& left, const Hash& right) {
  uint8_t buf[65];
  buf[0] = 1;
  memcpy(buf + 1, left.data(), 32);
  memcpy(buf + 33, right.data(), 32);
  return sha256(buf, sizeof(buf));
}

Hash empty_root() { return sha256(nullptr, 0); }

Result<Hash> root_from_inclusion(uint64_t index, uint64_t size, const Hash& leaf,
                                 const std::vector<Hash>& proof) {
  if (index >= size)
    return make_error(SPROV_ERR_PROOF, "inclusion: index %llu is not below tree size %llu",
                      (unsigned long long)index, (unsigned long long)size);
  if (proof.size() > kMaxProofHashes)
    return make_error(SPROV_ERR_PROOF, "inclusion: %zu proof hashes exceed %zu", proof.size(),
                      kMaxProofHashes);
  uint64_t fn = index, sn = size - 1;
  Hash r = leaf;
  for (const Hash& p : proof) {
    if (sn == 0)
      return make_error(SPROV_ERR_PROOF,
                        "inclusion: proof has %zu hashes, too many for index %llu of size %llu",
                        proof.size(), (unsigned long long)index, (unsigned long long)size);
    if ((fn & 1) || fn == sn) {
      r = node_hash(p, r);
      if (!(fn & 1)) {
        do {
          fn >>= 1;
          sn >>= 1;
        } while (!(fn & 1) && fn != 0);
      }
    } else {
      r = node_hash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0)
    return make_error(SPROV_ERR_PROOF,
                      "inclusion: proof has %zu hashes, too few for index %llu of size %llu",
                      proof.size(), (unsigned long long)index, (unsigned long long)size);
  return r;
}

Status verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf,
                        const std::vector<Hash>& proof, const Hash& root) {
  auto r = root_from_inclusion(index, size, leaf, proof);
  if (!r) return r.error();
  if (r.value() != root)
    return make_error(SPROV_ERR_PROOF, "inclusion: recomputed root %s != expected root %s",
                      hex_encode(r.value()).c_str(), hex_encode(root).c_str());
  return {};
}

Status verify_consistency(uint64_t size1, uint64_t size2, const Hash& root1, const Hash& root2,
                          const std::vector<Hash>& proof) {
  if (size2 < size1)
    return make_error(SPROV_ERR_PROOF, "consistency: new size %llu is smaller than old size %llu",
                      (unsigned long long)size2, (unsigned long long)size1);
  if (proof.size() > kMaxProofHashes)
    return make_error(SPROV_ERR_PROOF, "consistency: %zu proof hashes exceed %zu", proof.size(),
                      kMaxProofHashes);
  if (size1 == size2) {
    if (!proof.empty())
      return make_error(SPROV_ERR_PROOF, "consistency: equal sizes need an empty proof, got %zu hashes",
                        proof.size());
    if (root1 != root2)
      return make_error(SPROV_ERR_PROOF, "consistency: same size %llu but roots %s != %s",
                        (unsigned long long)size1, hex_encode(root1).c_str(), hex_encode(root2).c_str());
    return {};
  }
  if (size1 == 0) {
    if (!proof.empty())
      return make_error(SPROV_ERR_PROOF, "consistency: from the empty tree needs an empty proof");
    return {};
  }
  if (proof.empty()) return make_error(SPROV_ERR_PROOF, "consistency: empty proof");
  // RFC 9162 §2.1.4.2.
  std::vector<Hash> path;
  if (std::has_single_bit(size1)) path.push_back(root1);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = size1 - 1, sn = size2 - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return make_error(SPROV_ERR_PROOF, "consistency: proof has too many hashes (%zu)", proof.size());
    if ((fn & 1) || fn == sn) {
      fr = node_hash(c, fr);
      sr = node_hash(c, sr);
      if (!(fn & 1)) {
        do {
          fn >>= 1;
          sn >>= 1;
        } while (!(fn & 1) && fn != 0);
      }
    } else {
      sr = node_hash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return make_error(SPROV_ERR_PROOF, "consistency: proof has too few hashes (%zu)", proof.size());
  if (fr != root1)
    return make_error(SPROV_ERR_PROOF, "consistency: recomputed old root %s != old root %s",
                      hex_encode(fr).c_str(), hex_encode(root1).c_str());
  if (sr != root2)
    return make_error(SPROV_ERR_PROOF, "consistency: recomputed new root %s != new root %s",
                      hex_encode(sr).c_str(), hex_encode(root2).c_str());
  return {};
}

namespace {
uint64_t largest_pow2_below(uint64_t n) {  // n >= 2
  return std::bit_floor(n - 1);
}
}  // namespace

Result<Hash> range_hash(const SubtreeHashFn& sub, uint64_t lo, uint64_t hi) {
  uint64_t n = hi - lo;
  if (hi <= lo) return empty_root();
  if (std::has_single_bit(n) && (lo & (n - 1)) == 0) {
    unsigned level = static_cast<unsigned>(std::countr_zero(n));
    return sub(level, lo >> level);
  }
  uint64_t k = largest_pow2_below(n);
  auto l = range_hash(sub, lo, lo + k);
  if (!l) return l;
  auto r = range_hash(sub, lo + k, hi);
  if (!r) return r;
  return node_hash(l.value(), r.value());
}

namespace {
// PATH(m, D[lo:hi]) appended leaf-first.
Status path(const SubtreeHashFn& sub, uint64_t m, uint64_t lo, uint64_t hi, std::vector<Hash>& out) {
  uint64_t n = hi - lo;
  if (n <= 1) return {};
  uint64_t k = largest_pow2_below(n);
  if (m < k) {
    auto s = path(sub, m, lo, lo + k, out);
    if (!s) return s;
    auto r = range_hash(sub, lo + k, hi);
    if (!r) return r.error();
    out.push_back(r.value());
  } else {
    auto s = path(sub, m - k, lo + k, hi, out);
    if (!s) return s;
    auto l = range_hash(sub, lo, lo + k);
    if (!l) return l.error();
    out.push_back(l.value());
  }
  return {};
}

// SUBPROOF(m, D[lo:hi], b) (RFC 6962 §2.1.2).
Status subproof(const SubtreeHashFn& sub, uint64_t m, uint64_t lo, uint64_t hi, bool b,
                std::vector<Hash>& out) {
  uint64_t n = hi - lo;
  if (m == n) {
    if (!b) {
      auto r = range_hash(sub, lo, hi);
      if (!r) return r.error();
      out.push_back(r.value());
    }
    return {};
  }
  uint64_t k = largest_pow2_below(n);
  if (m <= k) {
    auto s = subproof(sub, m, lo, lo + k, b, out);
    if (!s) return s;
    auto r = range_hash(sub, lo + k, hi);
    if (!r) return r.error();
    out.push_back(r.value());
  } else {
    auto s = subproof(sub, m - k, lo + k, hi, false, out);
    if (!s) return s;
    auto l = range_hash(sub, lo, lo + k);
    if (!l) return l.error();
    out.push_back(l.value());
  }
  return {};
}
}  // namespace

Result<std::vector<Hash>> inclusion_proof(const SubtreeHashFn& sub, uint64_t index, uint64_t size) {
  if (index >= size)
    return make_error(SPROV_ERR_PROOF, "index %llu is not below tree size %llu",
                      (unsigned long long)index, (unsigned long long)size);
  std::vector<Hash> out;
  auto s = path(sub, index, 0, size, out);
  if (!s) return s.error();
  return out;
}

Result<std::vector<Hash>> consistency_proof(const SubtreeHashFn& sub, uint64_t size1, uint64_t size2) {
  if (size1 > size2)
    return make_error(SPROV_ERR_PROOF, "old size %llu is larger than new size %llu",
                      (unsigned long long)size1, (unsigned long long)size2);
  std::vector<Hash> out;
  if (size1 == 0 || size1 == size2) return out;
  auto s = subproof(sub, size1, 0, size2, true, out);
  if (!s) return s.error();
  return out;
}

void MemoryTree::append(const Hash& leaf) {
  if (levels_.empty()) levels_.emplace_back();
  levels_[0].push_back(leaf);
  for (size_t h = 0; h < levels_.size(); ++h) {
    if (levels_[h].size() % 2 != 0) break;
    if (h + 1 == levels_.size()) levels_.emplace_back();
    const auto& lv = levels_[h];
    levels_[h + 1].push_back(node_hash(lv[lv.size() - 2], lv[lv.size() - 1]));
  }
}

SubtreeHashFn MemoryTree::subtree_fn() const {
  return [this](unsigned level, uint64_t index) -> Result<Hash> {
    if (level >= levels_.size() || index >= levels_[level].size())
      return make_error(SPROV_ERR_LOG, "subtree (%u, %llu) is outside the tree", level,
                        (unsigned long long)index);
    return levels_[level][index];
  };
}

Hash MemoryTree::root() const {
  auto r = range_hash(subtree_fn(), 0, size());
  return r ? r.value() : empty_root();
}

}  // namespace stackprov::evidence
