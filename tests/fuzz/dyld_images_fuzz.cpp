// SPDX-License-Identifier: Apache-2.0
// Fuzz target: dyld's image list in a target's memory (memory::read_dyld_images, the live Mach
// capture's parser of dyld_all_image_infos and dyld_image_info[]): any memory gives images or a
// named error. Input: u64 infos_size, then blocks of target memory (u64 address, u32 length, bytes);
// the first block's address is the dyld_all_image_infos address. Seeds (corpus/dyld_images/): a
// version-15 list of three images and dyld, written by tests/fuzz/cut_dyld_images.py from the layout
// <mach-o/dyld_images.h> documents (there is no macOS here to dump one from).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "memory/mach_capture.hpp"

namespace {
struct Block {
  uint64_t addr;
  const uint8_t* bytes;
  uint32_t len;
};
class Blocks final : public stackprov::memory::MemoryReader {
 public:
  std::vector<Block> list;
  bool read(uint64_t addr, void* buf, size_t len) override {
    if (len == 0) return true;
    for (const Block& b : list)
      if (addr >= b.addr && addr - b.addr <= b.len && len <= b.len - (addr - b.addr)) {
        std::memcpy(buf, b.bytes + (addr - b.addr), len);
        return true;
      }
    return false;
  }
  const char* name() const override { return "fuzz"; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t infos_size;
  std::memcpy(&infos_size, data, 8);
  Blocks mem;
  size_t at = 8;
  while (at + 12 <= size && mem.list.size() < 64) {
    Block b;
    std::memcpy(&b.addr, data + at, 8);
    std::memcpy(&b.len, data + at + 8, 4);
    at += 12;
    b.len = static_cast<uint32_t>(std::min<size_t>(b.len, size - at));
    b.bytes = data + at;
    at += b.len;
    mem.list.push_back(b);
  }
  if (mem.list.empty()) return 0;
  std::string warnings;
  auto r = stackprov::memory::read_dyld_images(mem, mem.list[0].addr, infos_size, &warnings);
  if (r.ok()) {
    for (const auto& img : r.value())
      if (img.path.size() > stackprov::memory::kMaxDyldPath) __builtin_trap();
    if (r.value().size() > stackprov::memory::kMaxDyldImages + 1) __builtin_trap();
  } else if (r.error().message.empty()) {
    __builtin_trap();
  }
  return 0;
}
