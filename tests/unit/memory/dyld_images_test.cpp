// SPDX-License-Identifier: Apache-2.0
// dyld's image list as the live Mach capture reads it (memory/mach_capture.*, doc/macos.md "The
// live Mach reader"): struct dyld_all_image_infos and dyld_image_info[] laid out in a target's
// memory as <mach-o/dyld_images.h> documents them for a 64-bit process (offsets written here from
// the documentation: version 0, infoArrayCount 4, infoArray 8, dyldImageLoadAddress 32, dyldPath
// 192; 24-byte entries, imageFilePath at 8), and every hostile variant refused or skipped by name.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "memory/mach_capture.hpp"

using namespace stackprov;
using namespace stackprov::memory;

namespace {

/// A target's memory: pages present at their addresses, everything else unreadable.
class PageMemory final : public MemoryReader {
 public:
  void put(uint64_t addr, const void* bytes, size_t len) {
    for (size_t i = 0; i < len; i++) {
      std::vector<uint8_t>& page = pages_[(addr + i) & ~uint64_t{4095}];
      page.resize(4096);
      page[(addr + i) & 4095] = static_cast<const uint8_t*>(bytes)[i];
    }
  }
  void put64(uint64_t addr, uint64_t v) { put(addr, &v, 8); }
  void put32(uint64_t addr, uint32_t v) { put(addr, &v, 4); }
  void put_str(uint64_t addr, const std::string& s) { put(addr, s.c_str(), s.size() + 1); }
  bool read(uint64_t addr, void* buf, size_t len) override {
    for (size_t i = 0; i < len; i++) {
      auto it = pages_.find((addr + i) & ~uint64_t{4095});
      if (it == pages_.end()) return false;
      static_cast<uint8_t*>(buf)[i] = it->second[(addr + i) & 4095];
    }
    return true;
  }
  const char* name() const override { return "pages"; }

 private:
  std::map<uint64_t, std::vector<uint8_t>> pages_;
};

constexpr uint64_t kInfos = 0x7ff800010000, kArray = 0x600000004000, kStrings = 0x100003000;

/// version 15 infos of `n` images at 0x100000000 + i * 0x100000, paths "/img/<i>", dyld at 0x200000000.
PageMemory target(uint32_t version, uint32_t n) {
  PageMemory m;
  m.put(kInfos, std::vector<uint8_t>(200).data(), 200);
  m.put32(kInfos + 0, version);
  m.put32(kInfos + 4, n);
  m.put64(kInfos + 8, kArray);
  m.put64(kInfos + 32, 0x200000000);
  m.put64(kInfos + 192, kStrings + 0x800);
  m.put_str(kStrings + 0x800, "/usr/lib/dyld-from-infos");
  for (uint32_t i = 0; i < n; i++) {
    m.put64(kArray + 24 * i, 0x100000000 + uint64_t{i} * 0x100000);
    m.put64(kArray + 24 * i + 8, kStrings + 32 * i);
    m.put64(kArray + 24 * i + 16, 1700000000);
    m.put_str(kStrings + 32 * i, "/img/" + std::to_string(i));
  }
  return m;
}

}  // namespace

TEST_CASE("dyld images: infoArray in order, then dyld from dyldImageLoadAddress and dyldPath", "[mach]") {
  PageMemory m = target(15, 3);
  std::string warn;
  auto r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 4);
  for (int i = 0; i < 3; i++) {
    CHECK(r.value()[i].header == 0x100000000 + uint64_t(i) * 0x100000);
    CHECK(r.value()[i].path == "/img/" + std::to_string(i));
    CHECK_FALSE(r.value()[i].is_dyld);
  }
  CHECK(r.value()[3].header == 0x200000000);
  CHECK(r.value()[3].path == "/usr/lib/dyld-from-infos");
  CHECK(r.value()[3].is_dyld);
  CHECK(warn.empty());
  // Before version 15 there is no dyldPath: dyld's own path.
  PageMemory old = target(14, 1);
  r = read_dyld_images(old, kInfos, 184, &warn);
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 2);
  CHECK(r.value()[1].path == "/usr/lib/dyld");
  // Version 1 has no dyldImageLoadAddress field to trust.
  PageMemory v1 = target(1, 1);
  r = read_dyld_images(v1, kInfos, 200, &warn);
  REQUIRE(r.ok());
  CHECK(r.value().size() == 1);
}

TEST_CASE("dyld images: a path read up to each page end, and paths that cannot be read skipped", "[mach]") {
  PageMemory m = target(15, 3);
  // Image 1's path ends 3 bytes before a page whose successor is unmapped: read chunk by chunk.
  const uint64_t at = 0x300000000 + 4096 - 8;
  m.put_str(at, "/near/e");  // 7 characters + NUL: the page's last byte
  m.put64(kArray + 24 + 8, at);
  // Image 2's path has no NUL within 1024 bytes.
  const std::string long_path(1100, 'x');
  m.put(0x400000000, long_path.data(), long_path.size());
  m.put64(kArray + 48 + 8, 0x400000000);
  std::string warn;
  auto r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 3);
  CHECK(r.value()[1].path == "/near/e");
  CHECK(r.value()[2].is_dyld);
  CHECK(warn.find("dyld image 2 at 0x100200000: its path at 0x400000000 is unreadable or longer than 1024 bytes") !=
        std::string::npos);
  // A path pointer into nothing, and a NULL header.
  m.put64(kArray + 8, 0xdead0000);
  m.put64(kArray + 24, 0);
  warn.clear();
  r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE(r.ok());
  CHECK(r.value().size() == 1);
  CHECK(warn.find("dyld image 0 at 0x100000000: its path at 0xdead0000") != std::string::npos);
  CHECK(warn.find("dyld image 1 at 0x0") != std::string::npos);
}

TEST_CASE("dyld images: hostile lists refused naming the value", "[mach]") {
  std::string warn;
  PageMemory m = target(15, 2);
  auto r = read_dyld_images(m, kInfos, 39, &warn);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_BAD_FORMAT);
  CHECK(r.error().message.find("39 bytes") != std::string::npos);
  m.put64(kInfos + 8, 0);
  r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("infoArray is NULL") != std::string::npos);
  m.put64(kInfos + 8, kArray);
  m.put32(kInfos + 4, 0x7fffffff);
  r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("infoArrayCount 2147483647 exceeds 65536") != std::string::npos);
  m.put32(kInfos + 4, 4000);  // within the limit, but the array's pages are not all there
  r = read_dyld_images(m, kInfos, 200, &warn);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_CAPTURE);
  CHECK(r.error().message.find("infoArray at 0x600000004000 (4000 entries) is unreadable") != std::string::npos);
  PageMemory none;
  r = read_dyld_images(none, kInfos, 200, &warn);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("dyld_all_image_infos at 0x7ff800010000 is unreadable") != std::string::npos);
}

TEST_CASE("Mach capture: where there is no Mach API it says so", "[mach]") {
#if !defined(__APPLE__)
  auto r = capture_mach_task(1, {}, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == SPROV_ERR_UNSUPPORTED);
  CHECK(r.error().message == "process 1: no Mach API on this platform (the Mach capture is macOS's)");
#endif
}
