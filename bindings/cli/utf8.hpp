// SPDX-License-Identifier: Apache-2.0
// Well-formed UTF-8 for the clients (the CLI's JSON, the Python binding's strings): names and paths
// from the library are bytes.
#pragma once

#include <cstddef>
#include <string_view>

namespace stackprov_cli {

/// Length of the well-formed UTF-8 sequence at s[i] (1..4; Unicode table 3-7: no overlong form,
/// no surrogate, nothing past U+10FFFF), or 0.
inline size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) n = 2;
  else if (b0 >= 0xe0 && b0 <= 0xef) n = 3, lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
  else if (b0 >= 0xf0 && b0 <= 0xf4) n = 4, lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; k++) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

}  // namespace stackprov_cli
