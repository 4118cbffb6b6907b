// SPDX-License-Identifier: Apache-2.0
// Merkle tree tests: the 98 transparency-dev inclusion vectors, and proofs built here checked both ways.
#include <catch2/catch.hpp>

#include <filesystem>

#include "evidence/json.hpp"
#include "evidence/merkle.hpp"
#include "test_support.hpp"

using namespace stackprov::evidence;


TEST_CASE("all 98 RFC 9162 inclusion vectors give their wantErr", "[merkle]") {
  namespace fs = std::filesystem;
  std::string dir = bundle_test::sigstore_dir() + "/merkle-inclusion";
  REQUIRE(fs::is_directory(dir));
  size_t n = 0, accepted = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    auto j = parse_json(bundle_test::slurp(e.path()), "vector");
    REQUIRE(j.ok());
    const Json& v = j.value();
    std::vector<Hash> proof;
    bool malformed = false;
    if (v["proof"].is_array()) {
      for (const auto& p : v["proof"]) {
        auto b = base64_decode(p.get<std::string>(), B64Alphabet::kStandard);
        if (!b || b.value().size() != 32) malformed = true;
        else proof.push_back(to_hash(b.value(), "p").value());
      }
    }
    auto rootb = base64_decode(v["root"].is_string() ? v["root"].get<std::string>() : "", B64Alphabet::kStandard);
    auto leafb = base64_decode(v["leafHash"].is_string() ? v["leafHash"].get<std::string>() : "", B64Alphabet::kStandard);
    if (!rootb || rootb.value().size() != 32 || !leafb || leafb.value().size() != 32) malformed = true;
    bool ok = false;
    if (!malformed) {
      ok = verify_inclusion(v["leafIdx"].get<int64_t>() < 0 ? UINT64_MAX : v["leafIdx"].get<uint64_t>(),
                            v["treeSize"].get<int64_t>() < 0 ? 0 : v["treeSize"].get<uint64_t>(),
                            to_hash(leafb.value(), "l").value(), proof, to_hash(rootb.value(), "r").value())
               .ok();
    }
    INFO(e.path().string());
    CHECK(ok == !v["wantErr"].get<bool>());
    ++n;
    accepted += ok;
  }
  CHECK(n == 98);
  CHECK(accepted > 0);
}

TEST_CASE("empty tree root is SHA-256 of the empty string (RFC 6962 §2.1)", "[merkle]") {
  CHECK(hex_encode(empty_root()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("RFC 6962 reference tree of 8 leaves has the published root", "[merkle]") {
  // Leaves and roots from the certificate-transparency reference tests (merkle_tree_test.cc):
  // leaves "", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f".
  const char* leaves[] = {"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                          "606162636465666768696a6b6c6d6e6f"};
  const char* roots[] = {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                         "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                         "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                         "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                         "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                         "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                         "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                         "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
  MemoryTree t;
  for (int i = 0; i < 8; ++i) {
    auto b = hex_decode(leaves[i]).value();
    t.append(leaf_hash(b.data(), b.size()));
    CHECK(hex_encode(t.root()) == roots[i]);
  }
}

TEST_CASE("inclusion and consistency proofs built here verify, for every index and size pair", "[merkle]") {
  MemoryTree t;
  std::vector<Hash> roots{empty_root()};
  for (int i = 0; i < 70; ++i) {
    std::string e = "entry " + std::to_string(i);
    t.append(leaf_hash(e));
    roots.push_back(t.root());
  }
  auto sub = t.subtree_fn();
  for (uint64_t size = 1; size <= 70; ++size) {
    for (uint64_t idx = 0; idx < size; ++idx) {
      auto p = inclusion_proof(sub, idx, size);
      REQUIRE(p.ok());
      // Expected length from the notes' formula: bitlen(idx ^ (size-1)) + popcount(idx >> that).
      uint64_t x = idx ^ (size - 1);
      const unsigned bl = x == 0 ? 0u : 64u - static_cast<unsigned>(__builtin_clzll(x));
      CHECK(p.value().size() == bl + static_cast<unsigned>(__builtin_popcountll(bl >= 64 ? 0 : idx >> bl)));
      std::string e = "entry " + std::to_string(idx);
      CHECK(verify_inclusion(idx, size, leaf_hash(e), p.value(), roots[size]).ok());
      if (!p.value().empty()) {
        auto bad = p.value();
        bad.back()[0] ^= 1;
        CHECK_FALSE(verify_inclusion(idx, size, leaf_hash(e), bad, roots[size]).ok());
      }
    }
    for (uint64_t old = 0; old <= size; ++old) {
      auto c = consistency_proof(sub, old, size);
      REQUIRE(c.ok());
      INFO(old << " -> " << size);
      CHECK(verify_consistency(old, size, roots[old], roots[size], c.value()).ok());
      if (!c.value().empty()) {
        auto bad = c.value();
        bad[0][5] ^= 0x80;
        CHECK_FALSE(verify_consistency(old, size, roots[old], roots[size], bad).ok());
        if (old > 0) CHECK_FALSE(verify_consistency(old, size, roots[old - 1], roots[size], c.value()).ok());
      }
    }
  }
}

TEST_CASE("consistency rejects a shrinking tree and wrong roots", "[merkle]") {
  MemoryTree t;
  for (int i = 0; i < 10; ++i) t.append(leaf_hash(std::to_string(i)));
  auto sub = t.subtree_fn();
  auto c = consistency_proof(sub, 3, 10).value();
  Hash r3 = range_hash(sub, 0, 3).value();
  CHECK(verify_consistency(3, 10, r3, t.root(), c).ok());
  CHECK_FALSE(verify_consistency(10, 3, t.root(), r3, c).ok());
  CHECK_FALSE(verify_consistency(3, 10, t.root(), t.root(), c).ok());
  CHECK_FALSE(verify_consistency(3, 10, r3, r3, c).ok());
  CHECK_FALSE(verify_consistency(4, 10, r3, t.root(), c).ok());
}
