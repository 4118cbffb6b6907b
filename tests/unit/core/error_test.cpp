// SPDX-License-Identifier: Apache-2.0
// Error messages are whole: a message naming a long path keeps its reason (they were cut at 511
// bytes, so `stack --core LONG-PATH` lost what was wrong); a message longer than kMaxMessage is cut
// with a marker. The expected texts are built by concatenation, not by printf.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"

using stackprov::format_message;
using stackprov::kMaxMessage;
using stackprov::make_error;

TEST_CASE("make_error keeps a message naming a 1,000-byte path whole", "[core][error]") {
  std::string path = "/";
  while (path.size() < 1000) path += "a-deliberately-long-directory-name/";
  path += "prog";
  const auto e = make_error(SPROV_ERR_ELF, "%s: an executable, not a core (e_type %d)", path.c_str(), 2);
  CHECK(e.code == SPROV_ERR_ELF);
  CHECK(e.message == path + ": an executable, not a core (e_type 2)");
  // The same through the bundle reader's and the capture's route: format_message alone.
  CHECK(format_message("'%s'", path.c_str()) == "'" + path + "'");
  // At the old buffer's edge: 511, 512 and 513 bytes.
  for (size_t n : {511, 512, 513}) {
    const std::string s(n, 'x');
    CHECK(format_message("%s", s.c_str()) == s);
  }
}

TEST_CASE("a message longer than kMaxMessage is cut to it, ending in ' [cut]'", "[core][error][hostile]") {
  const std::string huge(kMaxMessage + 1000, 'y');
  const std::string m = format_message("name '%s' refused", huge.c_str());
  REQUIRE(m.size() == kMaxMessage);
  CHECK(m.compare(0, 6, "name '") == 0);
  CHECK(m.compare(m.size() - 6, 6, " [cut]") == 0);
  CHECK(m.find_first_not_of('y', 6) == m.size() - 6);
  // Exactly kMaxMessage bytes: whole, no marker.
  const std::string fits(kMaxMessage, 'z');
  CHECK(format_message("%s", fits.c_str()) == fits);
}
