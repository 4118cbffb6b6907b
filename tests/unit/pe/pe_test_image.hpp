// SPDX-License-Identifier: Apache-2.0
// Test helper: a PE32+ file laid out as its loaded image by a minimal section-table walk (not lib/pe's reader).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace stackprov::test {

/// Offsets from the PE/COFF specification (learn.microsoft.com/windows/win32/debug/pe-format):
/// e_lfanew at 0x3c; "PE\0\0", then the 20-byte COFF header (NumberOfSections at +2,
/// SizeOfOptionalHeader at +16); the PE32+ optional header (Magic 0x20b, ImageBase at +24,
/// SizeOfImage at +56, SizeOfHeaders at +60, NumberOfRvaAndSizes at +108, data directories at
/// +112, 8 bytes each, the exception table is number 3); 40-byte section headers (VirtualSize +8,
/// VirtualAddress +12, SizeOfRawData +16, PointerToRawData +20).
struct PeTestImage {
  uint64_t image_base = 0;
  uint32_t pdata_rva = 0, pdata_size = 0;
  std::vector<uint8_t> image;  ///< the loaded image: byte i is at RVA i

  std::span<const uint8_t> at(uint32_t rva, uint32_t len) const {
    if (uint64_t{rva} + len > image.size()) return {};
    return {image.data() + rva, len};
  }
  std::span<const uint8_t> pdata() const { return at(pdata_rva, pdata_size); }

  static PeTestImage load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto u16 = [&](size_t o) { return static_cast<uint32_t>(file.at(o) | (file.at(o + 1) << 8)); };
    auto u32 = [&](size_t o) { return u16(o) | (u16(o + 2) << 16); };
    const size_t pe = u32(0x3c);
    if (u32(pe) != 0x00004550) throw std::runtime_error(path + ": no PE signature");
    const size_t coff = pe + 4, opt = coff + 20;
    const uint32_t nsec = u16(coff + 2), opt_size = u16(coff + 16);
    if (u16(opt) != 0x20b) throw std::runtime_error(path + ": not PE32+");
    PeTestImage img;
    img.image_base = u32(opt + 24) | (uint64_t{u32(opt + 28)} << 32);
    const uint32_t size_of_image = u32(opt + 56), size_of_headers = u32(opt + 60);
    if (u32(opt + 108) > 3) {
      img.pdata_rva = u32(opt + 112 + 3 * 8);
      img.pdata_size = u32(opt + 112 + 3 * 8 + 4);
    }
    img.image.assign(size_of_image, 0);
    std::memcpy(img.image.data(), file.data(), std::min<size_t>(size_of_headers, file.size()));
    for (uint32_t i = 0; i < nsec; i++) {
      const size_t h = opt + opt_size + i * 40;
      const uint32_t vsize = u32(h + 8), va = u32(h + 12), raw_size = u32(h + 16), raw_off = u32(h + 20);
      const uint32_t n = std::min(vsize, raw_size);
      if (uint64_t{va} + n > img.image.size() || uint64_t{raw_off} + n > file.size()) {
        throw std::runtime_error(path + ": section outside the image");
      }
      std::memcpy(img.image.data() + va, file.data() + raw_off, n);
    }
    return img;
  }
};

}  // namespace stackprov::test
