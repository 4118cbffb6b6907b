// SPDX-License-Identifier: Apache-2.0
// Fuzz target: DSSE envelope JSON, in-toto statements, strict base64.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "evidence/dsse.hpp"

using namespace stackprov::evidence;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)base64_decode(in, B64Alphabet::kEither);
  auto env = parse_envelope(in);
  if (env) (void)check_statement_subject(env.value().payload, Hash{});
  return 0;
}
