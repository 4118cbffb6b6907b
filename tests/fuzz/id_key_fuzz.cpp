// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the text forms of module identities (sprov_id_from_key's parsers): a PDB
// symbol-server key (pe::pdb_id_from_key), a PE code id (pe::code_id_from_key) and a Mach-O UUID
// (macho::uuid_from_string). Any bytes give
// an identity or an error naming the text; an identity printed back (pe::symbol_server_key,
// macho::uuid_string) parses to the same identity, and the printed key is the input up to case,
// leading zeros of the age and the UUID's dashes.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "macho/macho_object.hpp"
#include "pe/pe_object.hpp"

using namespace stackprov;

namespace {

std::string upper(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pdb = pe::pdb_id_from_key(text);
  if (!pdb.ok() && pdb.error().message.empty()) __builtin_trap();
  if (pdb.ok()) {
    if (pdb->kind != IdKind::kPdbGuidAge || pdb->len != 20) __builtin_trap();
    const std::string key = pe::symbol_server_key(*pdb);
    auto again = pe::pdb_id_from_key(key);
    if (!again.ok() || !(*again == *pdb)) __builtin_trap();
    // The GUID's 32 digits as given (any case); the age's digits without leading zeros.
    if (key.substr(0, 32) != upper(text.substr(0, 32))) __builtin_trap();
    std::string age = upper(text.substr(32));
    age.erase(0, std::min(age.find_first_not_of('0'), age.size() - 1));
    if (key.substr(32) != age) __builtin_trap();
  }
  auto code = pe::code_id_from_key(text);
  if (!code.ok() && code.error().message.empty()) __builtin_trap();
  if (code.ok()) {
    if (code->kind != IdKind::kPeCodeId || code->len != 8) __builtin_trap();
    const std::string key = pe::code_id_key(*code);
    auto again = pe::code_id_from_key(key);
    if (!again.ok() || !(*again == *code)) __builtin_trap();
    // TimeDateStamp's 8 digits as given (any case); SizeOfImage's without leading zeros.
    if (key.substr(0, 8) != upper(text.substr(0, 8))) __builtin_trap();
    std::string size = upper(text.substr(8));
    size.erase(0, std::min(size.find_first_not_of('0'), size.size() - 1));
    if (upper(key.substr(8)) != size) __builtin_trap();
  }
  auto uuid = macho::uuid_from_string(text);
  if (!uuid.ok() && uuid.error().message.empty()) __builtin_trap();
  if (uuid.ok()) {
    if (uuid->kind != IdKind::kMachoUuid || uuid->len != 16) __builtin_trap();
    const std::string s = macho::uuid_string(*uuid);
    auto again = macho::uuid_from_string(s);
    if (!again.ok() || !(*again == *uuid)) __builtin_trap();
    std::string digits;
    for (char c : text)
      if (c != '-') digits += c;
    std::string printed;
    for (char c : s)
      if (c != '-') printed += c;
    if (printed != upper(digits)) __builtin_trap();
  }
  return 0;
}
