// SPDX-License-Identifier: Apache-2.0
// Encoding tests: strict base64 per RFC 4648 test vectors and pitfalls, hex, SHA-256 FIPS 180-2 vectors, digests.
#include <catch2/catch.hpp>

#include "evidence/encoding.hpp"

using namespace stackprov::evidence;

TEST_CASE("base64 RFC 4648 §10 vectors round-trip", "[encoding]") {
  const char* plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char* enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    CHECK(base64_encode(to_bytes(plain[i])) == enc[i]);
    auto d = base64_decode(enc[i], B64Alphabet::kStandard);
    REQUIRE(d.ok());
    CHECK(std::string(as_sv(d.value())) == plain[i]);
  }
}

TEST_CASE("strict base64 rejects what mbedTLS lets through", "[encoding]") {
  CHECK(base64_decode("aGVsbG8", B64Alphabet::kStandard).error().code == SPROV_ERR_BASE64);  // unpadded
  CHECK_FALSE(base64_decode("aGVs\nbG8=").ok());                                             // newline
  CHECK_FALSE(base64_decode("Zg=").ok());                                                    // bad padding
  CHECK_FALSE(base64_decode("Zg===").ok());
  CHECK_FALSE(base64_decode("Z").ok());                                                      // impossible length
  CHECK_FALSE(base64_decode("Zh==").ok());                                                   // non-zero trailing bits
  CHECK_FALSE(base64_decode("-_+/").ok());                                                   // mixed alphabets
  CHECK_FALSE(base64_decode("-_-_Pj8=", B64Alphabet::kStandard).ok());
  auto url = base64_decode("-_-_Pj8=", B64Alphabet::kEither);
  REQUIRE(url.ok());
  CHECK(hex_encode(url.value()) == "fbffbf3e3f");
  CHECK(base64_decode("-_-_Pj8", B64Alphabet::kUrl).ok());  // URL alphabet may omit padding
  CHECK(base64_encode(url.value(), true) == "-_-_Pj8=");
}

TEST_CASE("SHA-256 FIPS 180-2 vectors and sha256:<hex> digests", "[encoding]") {
  CHECK(hex_encode(sha256(std::string_view("abc"))) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto d = parse_digest("sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  REQUIRE(d.ok());
  CHECK(digest_string(d.value()) == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(parse_digest("sha512:00").error().code == SPROV_ERR_UNSUPPORTED);
  CHECK(parse_digest("sha256:abc").error().code == SPROV_ERR_INVALID_ARG);
  CHECK_FALSE(parse_digest("ba7816bf").ok());
  CHECK_FALSE(parse_digest("sha256:zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad").ok());
}

TEST_CASE("decimal parsing is strict", "[encoding]") {
  CHECK(parse_u64("0", "n").value() == 0);
  CHECK(parse_u64("18446744073709551615", "n").value() == UINT64_MAX);
  CHECK_FALSE(parse_u64("18446744073709551616", "n").ok());
  CHECK_FALSE(parse_u64("01", "n").ok());
  CHECK_FALSE(parse_u64("-1", "n").ok());
  CHECK_FALSE(parse_u64("", "n").ok());
  CHECK_FALSE(parse_u64("1 ", "n").ok());
}
