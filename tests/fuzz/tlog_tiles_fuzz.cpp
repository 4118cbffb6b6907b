// SPDX-License-Identifier: Apache-2.0
// Fuzz target: inclusion proofs computed from hostile tlog-tiles hash tiles (Tlog::proof_from_tiles) and their check.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "evidence/merkle.hpp"
#include "evidence/tlog.hpp"
#include "fuzz_sections.hpp"

using namespace stackprov;
using namespace stackprov::evidence;

namespace {

void put(const std::string& path, dwarf::SectionBytes b) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (b.size) std::fwrite(b.data, 1, b.size, f);
    std::fclose(f);
  }
}

}  // namespace

// Input sections: meta (u64 index, u64 tree size, both taken below 2^16: two tile levels), then the
// level-0 tile of the index, the level-0 right-edge partial tile, the level-1 tile, its partial tile.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/dev/shm/stackprov-fuzz-tiles-" + std::to_string(getpid());
  dwarf::SectionBytes s[5];
  fuzz::split_sections(data, size, s, 5);
  const uint64_t tree = fuzz::word_at(s[0].data, s[0].size, 8) & 0xffff;
  const uint64_t index = tree ? (fuzz::word_at(s[0].data, s[0].size, 0) & 0xffff) % tree : 0;
  std::filesystem::remove_all(dir + "/tile");
  put(dir + "/" + tile_path(0, index / kTileWidth, kTileWidth), s[1]);
  if (tree % kTileWidth) put(dir + "/" + tile_path(0, tree / kTileWidth, tree % kTileWidth), s[2]);
  put(dir + "/" + tile_path(1, 0, kTileWidth), s[3]);
  if ((tree / kTileWidth) % kTileWidth) put(dir + "/" + tile_path(1, 0, (tree / kTileWidth) % kTileWidth), s[4]);
  auto proof = Tlog::proof_from_tiles(dir, index, tree);
  if (!proof) return 0;
  // The proof must verify against the root it implies for the leaf at `index` of level 0 (or fail cleanly).
  Hash leaf{};
  if (s[1].size >= 32 * (index % kTileWidth + 1))
    for (size_t i = 0; i < 32; i++) leaf[i] = s[1].data[32 * (index % kTileWidth) + i];
  auto root = root_from_inclusion(index, tree, leaf, proof.value());
  if (root && !verify_inclusion(index, tree, leaf, proof.value(), root.value())) __builtin_trap();
  return 0;
}
